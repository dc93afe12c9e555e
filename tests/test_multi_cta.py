"""Several CTAs per rank: the IR (CTA symbol, per-CTA buffers, GRID_LEADER, grid_barrier), the verifier's
(rank, CTA, thread) threads and scopes, the simulator's one process per CTA, the emitter's blocks per rank."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from collsim.algorithms import generate
from collsim.emit import prepare
from collsim.emit.package import write_program
from collsim.emit.ptxcheck import check_ptx
from collsim.emit.toolchain import WERROR, find_nvcc
from collsim.errors import InputError, ProtocolDefinitionError
from collsim.ir.checks import cta_scope_findings
from collsim.ir.registry import list_mutants, list_protocols, load_protocol, load_protocol_file
from collsim.ir.types import Issuer
from collsim.models import simulate
from collsim.sim.lower import lower_for_sim
from collsim.verify import verify
from collsim.verify.instance import Bounds
from collsim.verify.lower import lower_instance

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "protocols"
GRID_PUSH = str(EXAMPLES / "grid_push.py")

#: (mutant file, the property it breaks): each checked at 2 ranks, one-shot, that property alone
MUTANTS = [
    ("grid_push_cta_scope.py", "stale-read"),
    ("grid_push_no_sync_after.py", "data-race"),
    ("grid_push_relaxed_arrive.py", "stale-read"),
]


def _grid_push():
    return load_protocol_file(GRID_PUSH)


def test_each_cta_runs_its_slice_of_every_send():
    program = generate(_grid_push(), "two-shot")
    assert program.ctas == 2
    stores = {}
    for cta in (0, 1):
        env = program.cta_env({"RANK": 0, "NRANKS": 2, "ITER": 0, "MSG": 128}, cta)
        stores[cta] = [(type(f.op.src).__name__, f.op.src.offset, f.op.dst.lines) for f in program.flatten(env)
                       if f.op.label == "store_slice"]
    # a 64-byte chunk per rank, 32 bytes (2 lines) per CTA: in the reduce-scatter CTA 1 sends the second half
    # of the peer's chunk of its input; in the all-gather each CTA sends its own register (its reduced slice)
    assert stores[0] == [("Input", 64, 2), ("Reg", 0, 2)] and stores[1] == [("Input", 96, 2), ("Reg", 0, 2)]


def test_programs_of_one_cta_per_rank_keep_their_form():
    for name in list_protocols() + list_mutants():
        proto = load_protocol(name)
        for algorithm in proto.algorithms:
            program = generate(proto, algorithm)
            assert program.ctas == 1
            assert "CTA" not in repr(program) and "per_cta" not in repr(program) and "ctas" not in repr(program)


def test_ring_refuses_several_ctas():
    with pytest.raises(ProtocolDefinitionError, match="ring runs one CTA per rank"):
        generate(load_protocol("simple"), "ring", ctas=2)


def test_threads_are_rank_cta_thread_and_scopes_include_exactly():
    low = lower_instance(_grid_push(), "one-shot", Bounds(ranks=2, iterations=1, lines=1, threads=2, ctas=2))
    assert len(low.threads) == 2 * 2 * 2
    placement = low.placement
    same_cta, other_cta, other_gpu = placement[1], placement[2], placement[4]
    assert (placement[0].rank, placement[0].cta) == (0, 0) and (other_cta.rank, other_cta.cta) == (0, 1)
    assert placement[0].includes("cta", same_cta) and not placement[0].includes("cta", other_cta)
    assert placement[0].includes("gpu", other_cta) and not placement[0].includes("gpu", other_gpu)
    assert placement[0].includes("sys", other_gpu)
    # the grid leader's flag store runs in CTA 0 only; each CTA's leader arrives at the grid barrier
    posts = {low.placement[i.thread].cta for i in low.instrs if i.label.startswith("post_step")}
    arrivals = {low.placement[i.thread].cta for i in low.instrs if i.label == "grid_barrier.sent.cta_arrive"}
    assert posts == {0} and arrivals == {0, 1}
    # bar.sync is per CTA: each barrier's events are the threads of one CTA
    for instr in low.instrs:
        if instr.kind == "barrier":
            bar = instr.events[0].bar
            members = {(p.rank, p.cta) for p, t in zip(low.placement, low.threads)
                       if any(j.kind == "barrier" and j.events[0].bar == bar for j in t)}
            assert len(members) == 1


def test_grid_push_holds_and_the_bound_states_its_ctas():
    result = verify(GRID_PUSH, "one-shot", ranks=2, dependencies=False, use_cache=False)
    assert result.ok, result.describe() if hasattr(result, "describe") else result
    assert result.bound.ctas == 2
    assert "2 CTAs x 2 thread(s) per rank" in result.bound.describe()
    assert result.bound.to_json()["ctas"] == 2


def test_the_bound_may_check_fewer_ctas(collsim_cli):
    one = verify(GRID_PUSH, "one-shot", ranks=2, ctas=1, dependencies=False, use_cache=False)
    assert one.ok and one.bound.ctas == 1 and "CTAs" not in one.bound.describe()
    code, _, err = collsim_cli("verify", "ll", "--ctas", "0")
    assert code == 2 and "--ctas" in err


def test_a_bound_of_more_ctas_than_the_protocol_runs_is_refused(collsim_cli, tmp_path):
    # A one-CTA protocol's other CTAs are channels with buffers of their own: a program whose CTAs shared its
    # buffers is a kernel nobody runs, and its collisions were reported as stale reads of every shipped protocol.
    code, out, err = collsim_cli("verify", "ll", "--ctas", "2", "--no-cache")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1
    assert lines[0].startswith("collsim: error: --ctas: protocol 'll' runs one CTA per rank") and "(valid: 1)" in lines[0]
    with pytest.raises(InputError) as refused:
        verify(GRID_PUSH, "one-shot", ranks=2, ctas=3, dependencies=False, use_cache=False)
    assert refused.value.field == "--ctas" and refused.value.choices == ["1", "2"]
    hinted = tmp_path / "ll_two_ctas.py"
    hinted.write_text("from protocols.ll import LL\n\n\nclass TwoCTAs(LL):\n    name = 'll-two-ctas'\n"
                      "    verify_bounds = {'ctas': 2}\n")
    with pytest.raises(InputError) as from_hint:
        verify(str(hinted), ranks=2, dependencies=False, use_cache=False)
    assert from_hint.value.field == "verify_bounds"


def test_the_bound_of_a_one_cta_protocol_prints_as_before():
    bound = verify("ll", "one-shot", ranks=2, properties=["stale-read"], dependencies=False, use_cache=False).bound
    assert "ctas" not in bound.to_json() and "2 thread(s) per rank, ptx" in bound.describe()


@pytest.mark.parametrize("name,prop", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_grid_barrier_mutants_are_caught(name, prop):
    start = time.process_time()
    result = verify(str(EXAMPLES / name), "one-shot", ranks=2, properties=[prop], dependencies=False,
                    use_cache=False)
    assert result.properties[prop].status == "violated"
    assert result.caught
    cex = result.properties[prop].counterexample
    assert "CTA 1" in cex.reason or "CTA 0" in cex.reason  # the reader is named by its CTA
    assert time.process_time() - start < 10


def test_a_cta_scoped_sync_between_ctas_is_flagged_at_its_line():
    program = generate(load_protocol_file(str(EXAMPLES / "grid_push_cta_scope.py")), "one-shot")
    findings = cta_scope_findings(program, lambda op: f"{op.origin.file}:{op.origin.line}")
    assert findings and all("cta scope" in f for f in findings)
    assert any("grid_push.py:" in f and "grid_barrier.sent.cta_arrive" in f for f in findings)
    assert not cta_scope_findings(generate(_grid_push(), "one-shot"))
    result = verify(str(EXAMPLES / "grid_push_cta_scope.py"), "one-shot", ranks=2, properties=["stale-read"],
                    dependencies=False, use_cache=False)
    assert any(note.startswith("warning: examples/protocols/grid_push.py:") for note in result.bound.notes)


def test_sim_runs_a_process_per_cta_sharing_the_ranks_links():
    proto = _grid_push()
    lowered = lower_for_sim(generate(proto, "two-shot"))
    env = {"RANK": 0, "NRANKS": 8, "ITER": 0, "MSG": 1 << 20}
    bound = {cta: lowered.flat(lowered.program.cta_env(env, cta)) for cta in (0, 1)}
    assert sum(o.label == "post_step" for o in bound[0]) == 2 * 7 and not any(o.label == "post_step"
                                                                             for o in bound[1])
    assert {o.ref[0] for o in bound[1] if o.ref and o.ref[0].startswith("slots")} == {"slots@cta1"}

    class OneProcess(type(proto)):  # the same program run as one process standing for both CTAs
        name = "grid-push-one-process"
        ctas = 1

    for size in (1024, 1 << 20, 16 << 20):
        two = simulate("hgx-h100", ranks=8, algorithm="two-shot", protocol=proto, size_bytes=size, model="des")
        one = simulate("hgx-h100", ranks=8, algorithm="two-shot", protocol=OneProcess(), size_bytes=size,
                       model="des", channels=2)
        assert two.channels == 2
        # same engines and links: the data time agrees; the grid barriers add only local atomics and polls
        assert two.breakdown["data"] == pytest.approx(one.breakdown["data"], rel=0.05)
        assert two.latency_us == pytest.approx(one.latency_us, rel=0.05)
    small = simulate("hgx-h100", ranks=8, algorithm="two-shot", protocol=proto, size_bytes=1 << 20, model="des")
    large = simulate("hgx-h100", ranks=8, algorithm="two-shot", protocol=proto, size_bytes=16 << 20, model="des")
    assert large.latency_us > small.latency_us


NVCC = find_nvcc()


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, $NVCC or $CUDA_HOME): the CUDA compile is skipped")
@pytest.mark.parametrize("name,scope", [("grid_push.py", "gpu"), ("grid_push_cta_scope.py", "cta")])
def test_emitted_kernel_compiles_and_its_ptx_holds_the_grid_barrier(tmp_path, name, scope):
    emitted = prepare(load_protocol_file(str(EXAMPLES / name)), "one-shot", unverified=True)
    write_program(emitted, tmp_path)
    kernel = (tmp_path / "kernel.cu").read_text()
    assert "if (tid == 0 && cta == 0)" in kernel and "const long long cta = (long long)chan;" in kernel
    assert "msg_bytes *= 2;" in kernel and "if (p.ctas != 2)" in kernel
    # shared buffers (the grid counter) are one copy; the per-CTA slots are each CTA's own
    assert "p.buf[2][o_owner] + ((o_slot" in kernel and "p.buf[0][o_owner] + (long long)chan * p.buf_stride[0]" in kernel
    cmd = [NVCC, "-O3", "-std=c++17", *WERROR, "-gencode", "arch=compute_90,code=sm_90", "-c", "kernel.cu",
           "-o", "kernel.o", "-keep", "-keep-dir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ptx = next(tmp_path.glob("kernel*.ptx")).read_text()
    report = check_ptx(emitted.plan, ptx)
    assert report.ok, report.summary()
    assert f"red.release.{scope}.global.add.u32" in ptx and f"ld.acquire.{scope}.global.u32" in ptx


def test_grid_leader_is_the_leader_with_one_cta():
    assert Issuer.GRID_LEADER.leads and Issuer.LEADER.leads and not Issuer.ALL.leads


def test_rank_symmetry_is_checked_mechanically_with_several_ctas():
    from collsim.verify.reference import reference_run
    from collsim.verify.symmetry import rank_rotation

    low = lower_instance(_grid_push(), "one-shot", Bounds(ranks=3, iterations=2, lines=1, threads=2, ctas=2))
    rotation = rank_rotation(low, reference_run(low))
    assert rotation is not None and len(rotation) == len(low.events)
    # the rotation keeps each event's CTA and moves its rank
    for a, b in list(rotation.items())[:50]:
        pa, pb = low.placement[low.events[a].thread], low.placement[low.events[b].thread]
        assert pa.cta == pb.cta and pb.rank == (pa.rank + 1) % 3


def test_host_actions_with_several_ctas_are_refused_at_their_line():
    from collsim.errors import UnsupportedError
    from collsim.ir.ops import HostMemset, Ref

    class WithMemset(type(_grid_push())):
        name = "grid-push-memset"

        def prologue(self, b, launch):
            b.emit(HostMemset(Ref("steps", 0)))

    with pytest.raises(UnsupportedError, match=r"test_multi_cta.py:\d+: .*host action host_memset"):
        generate(WithMemset(), "one-shot")


def test_sim_ctas_meet_only_through_memory():
    """Each CTA's arrival is counted once in the rank's memory: a wait for NCTAS arrivals passes, one for
    NCTAS + 1 never does (the simulated launch hangs)."""
    from collsim.errors import CollsimError
    from collsim.ir.expr import NCTAS, RANK
    from collsim.ir.library import grid_counter_buffer
    from collsim.ir.ops import AtLeast, Atomic, PollUntil, Ref
    from collsim.ir.types import RmwOp, Scope, Sem

    def counted(extra):
        class Counted(type(_grid_push())):
            name = f"grid-push-counted-{extra}"

            def buffers(self, transfer_bytes):
                return super().buffers(transfer_bytes) + (grid_counter_buffer("arrivals"),)

            def epilogue(self, b, launch):
                b.emit(Atomic(RmwOp.ADD, Ref("arrivals", RANK), 1, Sem.RELEASE, Scope.GPU, issuer=Issuer.LEADER))
                b.emit(PollUntil(Ref("arrivals", RANK), AtLeast(NCTAS + extra), Sem.ACQUIRE, Scope.GPU,
                                 issuer=Issuer.LEADER))

        return Counted()

    ok = simulate("hgx-h100", ranks=2, algorithm="one-shot", protocol=counted(0), size_bytes=4096, model="des")
    assert ok.latency_us > 0
    with pytest.raises(CollsimError, match="hangs"):
        simulate("hgx-h100", ranks=2, algorithm="one-shot", protocol=counted(1), size_bytes=4096, model="des")
