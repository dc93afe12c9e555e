"""Values from memory in the protocol: a loaded value as a poll's wait target, CAS loops, branches on results."""
from __future__ import annotations

from pathlib import Path

import pytest

from collsim.algorithms import generate
from collsim.errors import ProtocolDefinitionError
from collsim.ir import ITER, RANK, AtLeast, Equals, Ref, Scope, Sem, Store
from collsim.ir.checks import check_protocol_program
from collsim.ir.expr import Loaded, LoadedValue, loaded_registers
from collsim.ir.registry import load_protocol_file
from collsim.verify import verify

ROOT = Path(__file__).resolve().parents[1]
STEP = ROOT / "examples/protocols/step_barrier.py"
STEP_PEER = ROOT / "examples/protocols/step_barrier_peer.py"


# -- a loaded value as the wait target ---------------------------------------------------------------------------
def test_a_loaded_word_binds_to_a_value_each_consumer_resolves():
    target = AtLeast(Loaded("step") + ITER + 1).bind({"ITER": 2})
    assert target.value == LoadedValue("step", 0, 3) and target.loaded
    with pytest.raises(TypeError, match="resolve it"):
        target.holds(5)
    resolved = target.resolved(lambda register, offset: 4)
    assert resolved.value == 7 and resolved.holds(7) and not resolved.holds(6)
    assert Equals(Loaded("gen", 8) - 1).bind({}).describe() == "== gen[8] - 1"
    assert loaded_registers(Loaded("a") + Loaded("b", 8)) == ("a", "b")
    with pytest.raises(TypeError, match="only with \\+ and -"):
        (Loaded("step") * 2).evaluate({})


def test_a_step_counter_loaded_at_kernel_start_as_the_wait_target_holds():
    r = verify(str(STEP), dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


def test_a_step_loaded_from_a_peer_before_it_is_saved_is_a_stale_read():
    r = verify(str(STEP_PEER), properties=["stale-read"], dependencies=False, use_cache=False)
    assert r.caught
    cex = r.properties["stale-read"].counterexample
    assert cex is not None and any(step.op == "load_step" for step in cex.steps)


def _variant(name, **methods):
    base = type(load_protocol_file(str(STEP)))
    return type(name.title().replace("-", ""), (base,), {"name": name, **methods})()


def test_a_wait_for_a_register_nothing_loaded_is_ill_formed_with_its_line(tmp_path):
    source = tmp_path / "never_loaded.py"
    source.write_text(
        "from collsim.ir.registry import load_protocol_file\n"
        f"_Base = type(load_protocol_file({str(STEP)!r}))\n"
        "\n"
        "class NeverLoaded(_Base):\n"
        "    name = 'never-loaded'\n"
        "\n"
        "    def prologue(self, b, launch):\n"
        "        b.register('step', 8)  # the load_step is gone\n")
    protocol = load_protocol_file(str(source))
    with pytest.raises(ProtocolDefinitionError, match="waits for a value loaded into register 'step' before") as err:
        check_protocol_program(generate(protocol, "one-shot"), protocol)
    assert err.value.line == 4 and "never_loaded.py" in str(err.value)


def test_a_loaded_value_is_a_wait_target_only():
    def epilogue(self, b, launch):
        b.emit(Store(Ref("steps", RANK), None, Sem.RELAXED, Scope.SYS, flag=Loaded("step") + 1, label="bump"))

    stored = _variant("stored-loaded", epilogue=epilogue)
    with pytest.raises(ProtocolDefinitionError, match="outside a poll's predicate"):
        check_protocol_program(generate(stored, "one-shot"), stored)


def test_the_simulator_waits_for_the_value_the_counter_held():
    from collsim.models import simulate
    from collsim.ir.registry import load_protocol
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    step = simulate(topo, 8, "one-shot", load_protocol_file(str(STEP)), 1024, model="des")
    plain = simulate(topo, 8, "one-shot", load_protocol("barrier"), 1024, model="des")
    # the same barriers plus a local step load and save: no faster, and not a wait for a value never written
    assert plain.latency_us <= step.latency_us < plain.latency_us + 2.0


# -- CAS loops ------------------------------------------------------------------------------------------------------
SIGNAL_CAS = ROOT / "examples/protocols/signal_pad_cas.py"


def test_a_cas_loop_is_a_poll_for_equality_that_writes_its_swap():
    from collsim.ir import Atomic, PollUntil, RmwOp
    from collsim.ir.effects import effects

    slot = Ref("pad", 1)
    put = PollUntil(slot, Equals(0), Sem.RELEASE, Scope.SYS, swap=1, label="put")
    assert put.cas and effects(put).writes_memory and effects(put).polls
    with pytest.raises(ValueError, match="Equals"):
        PollUntil(slot, AtLeast(0), Sem.RELEASE, Scope.SYS, swap=1)
    with pytest.raises(ValueError, match="not weak"):
        PollUntil(slot, Equals(0), Sem.WEAK, Scope.SYS, swap=1)
    with pytest.raises(ValueError, match="compare value goes with RmwOp.CAS"):
        Atomic(RmwOp.CAS, slot, 1, Sem.RELAXED, Scope.SYS)
    assert Atomic(RmwOp.CAS, slot, 1, Sem.RELAXED, Scope.SYS, compare=0).compare.evaluate({}) == 0


def test_pytorchs_cas_signal_barrier_holds():
    r = verify(str(SIGNAL_CAS), dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


def test_a_put_signal_expecting_a_full_slot_hangs_in_the_first_barrier():
    r = verify(str(ROOT / "examples/protocols/signal_pad_cas_wrong_expected.py"), properties=["hang"],
               dependencies=False, use_cache=False)
    assert r.caught
    assert "put_signal" in r.properties["hang"].counterexample.reason


def test_a_put_signal_that_stores_without_waiting_for_the_empty_slot_loses_a_signal():
    r = verify(str(ROOT / "examples/protocols/signal_pad_cas_store_put.py"), properties=["hang"],
               dependencies=False, use_cache=False)
    assert r.caught
    cex = r.properties["hang"].counterexample
    assert "wait_signal" in cex.reason and "overwrote it" in cex.reason


def test_a_cas_loop_lowers_to_one_exiting_cas_per_word():
    from collsim.verify.instance import Bounds, EventKind, InstrKind
    from collsim.verify.lower import lower_instance

    low = lower_instance(load_protocol_file(str(SIGNAL_CAS)), "one-shot", Bounds(ranks=2, iterations=1))
    puts = [i for i in low.instrs if i.label.startswith("barrier.publish.put_signal")]
    waits = [i for i in low.instrs if i.label.startswith("barrier.publish.wait_signal")]
    assert puts and waits
    for instr, compare, swap, sem in [(puts[0], 0, 1, "release"), (waits[0], 1, 0, "acquire")]:
        (ev,) = instr.events
        assert instr.kind is InstrKind.POLL and ev.kind is EventKind.RMW and ev.polled
        assert (ev.rmw_op, ev.compare.c, ev.operand.c, ev.sem, ev.value) == ("cas", compare, swap, sem, None)


# -- what the emitter prints -----------------------------------------------------------------------------------------
def _compiled_ptx(path: Path, tmp_path: Path) -> tuple[str, object, str]:
    """Emit ``path`` (one-shot, sm_90), compile kernel.cu to PTX with warnings as errors, and check the PTX."""
    import subprocess

    from collsim.emit import prepare
    from collsim.emit.package import write_program
    from collsim.emit.ptxcheck import check_ptx
    from collsim.emit.toolchain import WERROR, find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (PATH, $NVCC or $CUDA_HOME): the CUDA compile needs the toolkit, not a GPU")
    emitted = prepare(str(path), "one-shot", unverified=True, arch="sm_90")
    directory = tmp_path / path.stem
    write_program(emitted, directory)
    cmd = [nvcc, "-O3", "-std=c++17", *WERROR, "-arch=sm_90", "-ptx", "kernel.cu", "-o", "kernel.ptx"]
    proc = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ptx = (directory / "kernel.ptx").read_text()
    report = check_ptx(emitted.plan, ptx)
    assert report.ok, report.summary()
    return ptx, emitted, (directory / "kernel.cu").read_text()


@pytest.mark.cuda
def test_emitted_cas_loops_and_loaded_targets_compile_and_keep_their_semantics(tmp_path):
    from collsim.emit.ptxcheck import check_ptx

    ptx, emitted, kernel = _compiled_ptx(SIGNAL_CAS, tmp_path)
    assert "atom.release.sys.global.cas.b32" in ptx and "atom.acquire.sys.global.cas.b32" in ptx
    relaxed = ptx.replace("atom.release.sys.global.cas.b32", "atom.relaxed.sys.global.cas.b32")
    weakened = check_ptx(emitted.plan, relaxed)
    assert not weakened.ok
    _, _, kernel = _compiled_ptx(STEP, tmp_path)
    # the wait target is the register the step load filled, not an ITER epoch
    assert "collsim_st_u64(o_into + ln * 8 + 0" in kernel and "collsim_ld_u64(reg_0 + 0) /* step */" in kernel


# -- branching on a returned value -----------------------------------------------------------------------------------
LAST = ROOT / "examples/protocols/last_arriver_barrier.py"
#: 2 ranks x 2 launches, one thread and line: the branch makes the encoding general (no static pruning), and
#: the counter's races are between ranks, not threads
SMALL = {"ranks": 2, "threads": 1, "lines": 1}


def test_a_branch_holds_stores_atomics_and_fences_and_needs_its_register():
    from collsim.ir import Fence, FenceKind, PollUntil, When

    store = Store(Ref("go", 0), None, Sem.RELEASE, Scope.SYS, flag=1)
    assert When("ticket", Equals(1), (store, Fence(FenceKind.SC, Scope.SYS))).children()[0] is store
    with pytest.raises(ValueError, match="stores, atomics and fences"):
        When("ticket", Equals(1), (PollUntil(Ref("go", 0), AtLeast(1), Sem.ACQUIRE, Scope.SYS),))

    base = type(load_protocol_file(str(LAST)))

    class Unfilled(base):
        name = "unfilled-ticket"

        def _barrier(self, b, number, label):
            with b.when("nothing", Equals(0), label="if_never"):
                b.emit(store)

    protocol = Unfilled()
    refused = "if_never waits for a value loaded into register 'nothing' before"
    with pytest.raises(ProtocolDefinitionError, match=refused):
        check_protocol_program(generate(protocol, "one-shot"), protocol)


def test_the_last_arriver_of_a_fetch_add_counter_resets_it_and_releases_everyone():
    r = verify(str(LAST), dependencies=False, use_cache=False, **SMALL)
    assert r.ok, r.render(counterexamples=False)


def test_a_last_arriver_that_resets_after_the_release_erases_an_arrival():
    r = verify(str(ROOT / "examples/protocols/last_arriver_barrier_late_reset.py"), properties=["hang"],
               dependencies=False, use_cache=False, **SMALL)
    assert r.caught
    assert "never produced" in r.properties["hang"].counterexample.reason


def test_the_branch_is_taken_only_where_the_condition_holds():
    """If nobody were last the barrier would hang; if everybody were, ranks would pass before all arrived."""
    from collsim.ir import NRANKS

    base = type(load_protocol_file(str(LAST)))

    def with_condition(name, cond):
        def _barrier(self, b, number, label):
            real = b.when
            b.when = lambda register, _cond, **kw: real(register, cond, **kw)
            try:
                base._barrier(self, b, number, label)
            finally:
                del b.when
        return type(name.title().replace("-", ""), (base,), {"name": name, "_barrier": _barrier})()

    nobody = verify(with_condition("nobody-last", Equals(NRANKS)), properties=["hang"], dependencies=False,
                    use_cache=False, **SMALL)
    assert nobody.properties["hang"].status == "violated"
    everybody = verify(with_condition("everybody-last", AtLeast(0)), properties=["stale-read", "hang"],
                       dependencies=False, use_cache=False, **SMALL)
    assert not everybody.properties["stale-read"].holds and everybody.properties["hang"].holds


def test_the_simulated_last_arriver_is_the_one_the_counter_says():
    from collsim.models import simulate
    from collsim.ir.registry import load_protocol
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    last = simulate(topo, 8, "one-shot", load_protocol_file(str(LAST)), 1024, model="des")
    plain = simulate(topo, 8, "one-shot", load_protocol("barrier"), 1024, model="des")
    # per barrier: a remote acq_rel fetch-add round trip, then the last arriver's reset and release stores:
    # slower than the all-to-all flag barrier, and it finishes (exactly one rank released the others)
    assert plain.latency_us < last.latency_us < plain.latency_us + 10.0


@pytest.mark.cuda
def test_emitted_branch_compiles_and_tests_the_returned_value(tmp_path):
    _, _, kernel = _compiled_ptx(LAST, tmp_path)
    assert "if (o_cond == (unsigned long long)((nranks - 1))) {" in kernel


def test_the_simulated_cas_loop_waits_for_its_compare_value_and_writes_its_swap():
    from collsim.errors import CollsimError
    from collsim.models import simulate
    from collsim.ir.registry import load_protocol
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    cas = simulate(topo, 4, "one-shot", load_protocol_file(str(SIGNAL_CAS)), 1024, model="des")
    exch = simulate(topo, 4, "one-shot", load_protocol("signal-pad"), 1024, model="des")
    # the same barrier structure; the put's CAS is a round trip that must come back before the wait, so no
    # faster than the exchange-and-poll picture, and the slots' 0 -> 1 -> 0 toggles let every CAS succeed
    assert exch.latency_us <= cas.latency_us < exch.latency_us + 2.0
    wrong = load_protocol_file(str(ROOT / "examples/protocols/signal_pad_cas_wrong_expected.py"))
    with pytest.raises(CollsimError, match="hangs"):
        simulate(topo, 4, "one-shot", wrong, 1024, model="des")


def test_a_branch_on_user_data_is_refused_naming_the_op_and_its_line():
    from collsim.errors import UnsupportedError
    from collsim.ir import Input, Reduce

    base = type(load_protocol_file(str(LAST)))

    class OnData(base):
        name = "branch-on-data"

        def _barrier(self, b, number, label):
            b.register("d", 4)
            b.emit(Reduce("d", (Input(0),), 4, label="own_input"))
            with b.when("d", Equals(0), label="if_zero"):
                b.emit(Store(Ref("go", RANK), None, Sem.RELAXED, Scope.SYS, flag=1, label="mark"))
            super()._barrier(b, number, label)

    with pytest.raises(UnsupportedError, match=r"if_zero \(tests/test_value_flow.py:\d+ .*\) branches on user data"):
        verify(OnData(), properties=["hang"], dependencies=False, use_cache=False, **SMALL)
