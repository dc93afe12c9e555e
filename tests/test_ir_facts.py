"""Facts consumers need are in the IR, declared once and checked against the programs they describe."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import z3

from collsim.algorithms import ALGORITHMS, generate, sync_rounds
from collsim.errors import ProtocolDefinitionError
from collsim.ir.ops import DATA_WORD, SENTINEL_WORD, AtLeast, Atomic, Equals, MultimemRed, NotEqual, PollUntil, Reduce, Ref
from collsim.ir.program import Program, walk
from collsim.ir.registry import list_mutants, list_protocols, load_protocol
from collsim.ir.types import Scope, Sem

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples" / "protocols").glob("*.py"))
PROGRAMS = [(name, alg) for name in list_protocols() + EXAMPLES for alg in load_protocol(name).algorithms]


#: how a barrier's arrival is labelled: collsim.ir.library.barrier's "<barrier>.arrive", and PyTorch's name for a
#: signal-pad arrival, "<barrier>.put_signal" (examples/protocols/signal_pad_cas.py)
ARRIVAL_LABELS = (".arrive", ".put_signal")


@pytest.mark.parametrize("name,algorithm", PROGRAMS)
def test_declared_sync_rounds_are_the_barriers_the_program_runs(name, algorithm):
    # a rank's arrivals at one barrier reach its n-1 peers: one op per peer, or a multicast barrier's one
    # multimem.red that arrives at every peer at once, or one fetch-add on a counter every rank arrives at (the
    # same rank's word whichever rank arrives; its last arriver releases the others). The analytic model's
    # sync rounds must be that many barriers
    protocol = load_protocol(name)
    nranks = 4
    program = generate(protocol, algorithm)

    def arrivals(rank):
        env = program.cta_env({"RANK": rank, "NRANKS": nranks, "ITER": 0, "MSG": 4096}, 0)
        return [f.op for f in program.flatten(env) if f.op.label.endswith(ARRIVAL_LABELS)]

    mine, other = arrivals(0), arrivals(1)
    assert len(mine) == len(other)
    count = sum(nranks - 1 if isinstance(op, MultimemRed)
                or (isinstance(op, Atomic) and op.dst.rank == theirs.dst.rank) else 1
                for op, theirs in zip(mine, other))
    assert count == sync_rounds(protocol, algorithm, nranks) * (nranks - 1)


def test_the_barrier_protocol_runs_one_barrier_per_exchange_and_a_closing_one():
    barrier = load_protocol("barrier")
    assert [sync_rounds(barrier, alg, 8) for alg in ("one-shot", "two-shot")] == [2, 3]
    assert all(sync_rounds(load_protocol(name), alg, 8) == 0 for name in ("ll", "simple") for alg in ALGORITHMS)


@pytest.mark.parametrize("name", list_protocols() + list_mutants() + EXAMPLES)
def test_a_protocol_keeps_no_state_between_hooks(name):
    protocol = load_protocol(name)
    before = dict(vars(protocol))
    forward = [repr(generate(protocol, alg)) for alg in protocol.algorithms]
    backward = [repr(generate(protocol, alg)) for alg in reversed(protocol.algorithms)][::-1]
    assert forward == backward  # the programs do not depend on what the instance generated before
    assert vars(protocol) == before


def test_the_protocol_key_names_class_and_parameters_and_is_the_same_in_every_process(tmp_path):
    assert load_protocol("ll").key == load_protocol("ll").key
    assert load_protocol("ll").key != load_protocol("ll", depth=3).key
    assert load_protocol("ll").key != load_protocol("mutant-ll-depth1").key
    path = tmp_path / "mine.py"
    path.write_text((ROOT / "examples" / "protocols" / "ll16.py").read_text())
    code = f"from collsim.ir.registry import load_protocol; print(load_protocol({str(path)!r}).key)"
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}).stdout
            for seed in ("1", "2")}
    assert len(keys) == 1, keys


def test_caches_know_a_protocol_by_its_key(tmp_path):
    """The emitter's plans and the row cache's digests follow Protocol.key: equal keys share, other parameters
    do not, and a protocol file changed and loaded again in the same process is not taken for the old one."""
    from collsim import rowcache
    from collsim.emit import plan as emit_plan

    ll, again, deeper = load_protocol("ll"), load_protocol("ll"), load_protocol("ll", depth=3)
    assert emit_plan.plan_for(ll, "one-shot") is emit_plan.plan_for(again, "one-shot")
    assert emit_plan.plan_for(deeper, "one-shot") is not emit_plan.plan_for(ll, "one-shot")
    assert rowcache._program_text(ll, "one-shot") == rowcache._program_text(again, "one-shot")
    path = tmp_path / "mine.py"
    source = (ROOT / "examples" / "protocols" / "ll16.py").read_text()
    path.write_text(source)
    first = load_protocol(str(path))
    plan = emit_plan.plan_for(first, first.algorithms[0])
    path.write_text(source + "\n# changed\n")
    second = load_protocol(str(path))
    assert second.key == first.key and type(second) is not type(first)
    assert emit_plan.plan_for(second, first.algorithms[0]) is not plan
    assert emit_plan._PLANS.maxsize >= sum(len(load_protocol(n).algorithms) for n in list_protocols() + list_mutants())


def test_predicates_are_evaluated_once_for_every_kind_of_word():
    epoch, count, sentinel = Equals(5).bind({}), AtLeast(3).bind({}), NotEqual(0xFFFAFFFA)
    assert (epoch.holds(5), epoch.holds(4), count.holds(3), count.holds(2)) == (True, False, True, False)
    assert (sentinel.holds(0xFFFAFFFA), sentinel.holds(7)) == (False, True)
    # the simulator's untracked words: data never equals an epoch or a count, and is not the sentinel
    assert [p.holds(DATA_WORD) for p in (epoch, count, sentinel)] == [False, False, True]
    assert [p.holds(SENTINEL_WORD) for p in (epoch, count, sentinel)] == [False, False, False]
    x = z3.Int("x")  # the verifier's encoding
    assert z3.eq(epoch.holds(x), x == 5) and z3.eq(count.holds(x), x >= 3) and z3.eq(sentinel.holds(x), x != 0xFFFAFFFA)
    with pytest.raises(TypeError, match="bind"):
        Equals(5).holds(5)  # a symbolic predicate is bound first


def test_a_program_has_one_sentinel():
    poll = PollUntil(Ref("lines", 0), NotEqual(0xFFFAFFFA), Sem.RELAXED, Scope.SYS)
    other = PollUntil(Ref("lines", 0), NotEqual(0x7FC00000), Sem.RELAXED, Scope.SYS)
    assert Program("p", "one-shot", (), (), forbidden_word=0x7FC00000).sentinel_word == 0x7FC00000
    assert Program("p", "one-shot", (poll,), (), forbidden_word=None).sentinel_word == 0xFFFAFFFA
    with pytest.raises(ProtocolDefinitionError, match="several sentinels"):
        _ = Program("p", "one-shot", (poll, other), ()).sentinel_word
    assert generate(load_protocol("sentinel"), "two-shot").sentinel_word == 0xFFFAFFFA


def test_operations_carry_the_line_of_protocol_code_that_emitted_them():
    program = generate(load_protocol("barrier"), "two-shot")
    barrier_file = ROOT / "protocols" / "barrier.py"
    for op in walk(program.ops):
        if isinstance(op, Reduce):  # the algorithm's own work
            assert op.origin is None
        elif op.label in ("stage", "load_peer") or op.label.startswith("barrier."):
            assert op.origin is not None and op.origin.line_in(barrier_file), op
    mutant = generate(load_protocol("mutant-simple-early-signal"), "one-shot")
    stores = [op for op in walk(mutant.ops) if op.label == "store_data"]
    # a mutant that wraps a shipped protocol: both files are on record
    assert stores[0].origin.line_in(ROOT / "protocols" / "mutants" / "simple_early_signal.py")
    assert stores[0].origin.line_in(ROOT / "protocols" / "simple.py")


BROKEN = textwrap.dedent('''\
    from protocols.simple import Simple


    class Broken(Simple):
        name = "broken"

        def exchange(self, b, ex):
            raise RuntimeError("no program here")
    ''')


@pytest.mark.parametrize("command", [
    ("verify", "{path}", "-a", "one-shot", "--no-cache"),
    ("simulate", "--protocol", "{path}", "--algorithm", "one-shot", "--ranks", "4", "--size", "1KiB"),
    ("explain", "--protocol", "{path}", "--algorithm", "one-shot"),
    ("emit", "{path}", "--algorithm", "one-shot", "--unverified", "--out", "{out}"),
], ids=lambda c: c[0])
def test_an_error_while_building_names_the_protocol_file_and_line_in_every_command(collsim_cli, tmp_path,
                                                                                   monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text(BROKEN)
    argv = [a.format(path=tmp_path / "broken.py", out=tmp_path / "emitted") for a in command]
    code, out, err = collsim_cli(*argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, out + err
    assert len(lines) == 1 and "broken.py:8: one-shot: RuntimeError: no program here" in lines[0], err
    assert not (tmp_path / "emitted").exists()
