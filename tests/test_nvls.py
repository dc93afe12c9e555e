"""NVLink SHARP end to end: multicast buffers and multimem ops in the IR, their per-copy lowering, the topologies
whose switches can run them, the switch's part in the simulator, and the line design of LL128-atomic."""
from __future__ import annotations

import pytest

from collsim import simulate
from collsim.algorithms import generate
from collsim.config import fabric_needs, unsupported_reason
from collsim.errors import InputError, ProtocolDefinitionError, UnsupportedError
from collsim.ir import multimem
from collsim.ir.buffers import Buffer
from collsim.ir.checks import check_program
from collsim.ir.expr import RANK
from collsim.ir.layout import counter_layout, plain_layout
from collsim.ir.ops import (AtLeast, Input, MulticastRef, MultimemLoadReduce, MultimemRed, MultimemStore, PollUntil,
                            Reg)
from collsim.ir.program import Program, ProgramBuilder
from collsim.ir.registry import load_protocol
from collsim.ir.types import Issuer, RmwOp, Scope, Sem
from collsim.models import SimRequest
from collsim.sim.model import run_des
from collsim.topology import build_topology, load_topology, presets_with
from collsim.verify import verify
from collsim.verify.instance import Bounds, EventKind, InstrKind
from collsim.verify.lower import lower_instance

NVLS_PRESETS = ["gb200-nvl72", "hgx-b200", "hgx-h100", "hgx-h200"]


# -- the IR ---------------------------------------------------------------------------------------------

def test_multimem_ops_take_only_the_semantics_and_operators_ptx_gives_them():
    ref = MulticastRef("buf")
    with pytest.raises(ValueError, match="cannot be release"):
        MultimemLoadReduce("r", ref, Sem.RELEASE, Scope.SYS)
    with pytest.raises(ValueError, match="cannot be acquire"):
        MultimemStore(ref, Reg("r"), Sem.ACQUIRE, Scope.SYS)
    with pytest.raises(ValueError, match="cannot be weak"):
        MultimemRed(RmwOp.ADD, ref, 1, Sem.WEAK, Scope.SYS)
    with pytest.raises(ValueError, match="add only"):
        MultimemRed(RmwOp.MAX, ref, Input(0), Sem.RELAXED, Scope.SYS)
    MultimemRed(RmwOp.MAX, ref, 1, Sem.RELAXED, Scope.SYS)  # an integer counter may take max


def test_ptx_forms_follow_the_isa_table():
    assert multimem.qualifiers("ld_reduce", "add", "f32", 16) == ".add.v4.f32"
    assert multimem.qualifiers("ld_reduce", "add", "bf16x2", 8) == ".add.acc::f32.v2.bf16x2"
    assert multimem.qualifiers("red", "add", "u64", 8) == ".add.u64"
    assert multimem.elements_per_instruction("u32", 16) == 4  # integers have no vector forms
    with pytest.raises(ValueError, match="no vector qualifier"):
        multimem.vector_qualifier("f64", 16)
    with pytest.raises(ValueError, match="32, 64 or 128 bits"):
        multimem.vector_qualifier("f32", 32)
    with pytest.raises(ValueError, match="with min, max"):
        multimem.check_operator("red", "add", "s64")


def _program(*ops, multicast=True):
    buffers = (Buffer("buf", plain_layout(), depth=1, regions=1, lines=1, multicast=multicast),
               Buffer("flags", counter_layout(4), depth=1, regions=1, lines=1, multicast=multicast))
    return Program("p", "one-shot", ops, buffers, {"r": 16})


def test_a_multimem_op_needs_a_buffer_bound_to_a_multicast_object():
    red = MultimemRed(RmwOp.ADD, MulticastRef("flags"), 1, Sem.RELEASE, Scope.SYS, issuer=Issuer.LEADER)
    poll = PollUntil(MulticastRef("flags").copy(RANK), AtLeast(1), Sem.ACQUIRE, Scope.SYS)
    check_program(_program(red, poll))
    with pytest.raises(ProtocolDefinitionError, match="not bound to a multicast object"):
        check_program(_program(red, poll, multicast=False))


def test_what_a_program_needs_of_the_switches_is_read_off_its_ops():
    assert generate(load_protocol("nvls"), "two-shot").fabric_needs == {"multicast", "reduction"}
    assert generate(load_protocol("ll128-atomic-nvls"), "one-shot").fabric_needs == {"multicast"}
    assert generate(load_protocol("ll128-atomic"), "one-shot").fabric_needs == frozenset()


# -- the verifier's lowering ------------------------------------------------------------------------------

def test_multimem_ops_lower_to_every_copys_elements():
    low = lower_instance(load_protocol("nvls"), "two-shot", Bounds(ranks=3, iterations=1))
    by_label = {}
    for instr in low.instrs:
        if low.placement[instr.thread].rank == 0:
            by_label.setdefault(instr.label, instr)
    ld = by_label["ld_reduce"]
    assert ld.kind is InstrKind.LOAD and len(ld.events) == 3 * 4  # 3 copies x 4 words of one line
    assert {e.loc[1] for e in ld.events} == {0, 1, 2} and all(e.kind is EventKind.READ for e in ld.events)
    st = by_label["multimem_st"]
    assert st.kind is InstrKind.STORE and {e.loc[1] for e in st.events} == {0, 1, 2}
    arrive = by_label["mc_barrier.publish.arrive"]
    assert arrive.kind is InstrKind.RMW and len(arrive.events) == 3
    assert all(e.sem == "release" and not e.returns_value for e in arrive.events)  # a red, one RMW per copy


def test_an_assumption_joins_one_copy_of_a_multicast_write_never_two():
    low = lower_instance(load_protocol("nvls-poison"), "two-shot", Bounds(ranks=2, iterations=1))
    stores = [i for i in low.instrs if i.label == "multimem_st"]
    for instr in stores:
        groups = {}
        for e in instr.events:
            groups.setdefault(e.wgroup, set()).add(e.loc[1])
        assert None not in groups and all(len(copies) == 1 for copies in groups.values())
    bare = lower_instance(load_protocol("nvls-poison"), "two-shot", Bounds(ranks=2, iterations=1), assumptions=())
    assert all(e.wgroup is None for i in bare.instrs if i.label == "multimem_st" for e in i.events)


# -- verdicts ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,algorithm,needed", [
    ("nvls", "one-shot", set()),
    ("nvls", "two-shot", set()),
    ("nvls-poison", "two-shot", {"multicast-store-16B-untorn", "data-domain"}),
    ("ll128-atomic-nvls", "one-shot", {"multicast-line-128B-reductions-ordered"}),
])
def test_nvls_protocols_hold_and_depend_on_what_they_declare(name, algorithm, needed):
    r = verify(name, algorithm, use_cache=False)
    assert r.ok, r.render(counterexamples=False)
    assert set(r.depends_on) == needed


@pytest.mark.parametrize("name", ["mutant-nvls-relaxed-arrive", "mutant-nvls-peers-only", "mutant-nvls-depth1",
                                  "mutant-nvls-poison-no-domain", "mutant-nvls-poison-repoison-current",
                                  "mutant-ll128-atomic-peers-only", "mutant-ll128-atomic-nvls-depth1"])
def test_nvls_and_line_mutants_are_caught(name):
    proto = load_protocol(name)
    r = verify(name, proto.algorithms[0], use_cache=False, dependencies=False)
    assert r.caught, r.render(counterexamples=False)


def test_the_line_design_needs_its_assumption_where_the_counter_design_needs_none():
    line = verify("ll128-atomic", "one-shot", use_cache=False)
    counter = verify("atomic-counter", "one-shot", use_cache=False)
    assert line.ok and counter.ok
    assert line.depends_on == ["line-128B-reductions-ordered"] and counter.depends_on == []
    without = line.dependencies[0]
    assert "stale-read" in without.violated and without.results["stale-read"].counterexample is not None


def test_the_line_design_also_holds_under_sc():
    # its reset is ordered after the contributors' reductions only by observing the same element through
    # the poll (observation; po-loc), which the sc encoding must count as it does under ptx
    r = verify("ll128-atomic", "one-shot", model="sc", use_cache=False, dependencies=False)
    assert r.ok, r.render(counterexamples=False)


def test_two_result_slots_suffice_while_the_poison_two_shot_keeps_its_barrier():
    two = type(load_protocol("nvls-poison"))(results_depth=2, repoison_offset=1)
    assert verify(two, "two-shot", use_cache=False, dependencies=False).ok


# -- topologies ------------------------------------------------------------------------------------------------

def test_presets_state_whether_their_switches_multicast_and_reduce():
    assert presets_with({"multicast", "reduction"}) == NVLS_PRESETS
    for name in ("dgx-a100", "dgx1-v100", "pcie-gen4", "pcie-gen5"):
        fabric = load_topology(name).fabric
        assert not fabric.multicast and not fabric.reduction and fabric.source
    assert all(load_topology(name).fabric.source for name in NVLS_PRESETS)


def test_a_custom_topology_states_its_switches_with_a_source():
    base = {"gpu": "H100", "topology": ["switch"], "npus": [4]}
    assert not build_topology(base).fabric.multicast
    topo = build_topology({**base, "nvls": {"multicast": True, "reduction": True, "source": "the vendor"}})
    assert topo.fabric.multicast and topo.fabric.reduction
    with pytest.raises(InputError, match="source"):
        build_topology({**base, "nvls": {"multicast": True}})
    with pytest.raises(InputError, match="true or false"):
        build_topology({**base, "nvls": {"multicast": "yes", "source": "x"}})


def test_a_protocol_that_needs_nvls_is_refused_where_the_switches_cannot(collsim_cli):
    nvls = load_protocol("nvls")
    assert fabric_needs(nvls, "one-shot") == {"multicast", "reduction"}
    why = unsupported_reason(nvls, "one-shot", 8, load_topology("dgx-a100"))
    assert "dgx-a100" in why and ", ".join(NVLS_PRESETS) in why
    assert unsupported_reason(nvls, "one-shot", 8, load_topology("hgx-h100")) is None
    code, out, err = collsim_cli("simulate", "-t", "dgx-a100", "-p", "nvls", "-n", "8")
    assert code == 2 and err.count("\n") == 1 and err.startswith("collsim: error: --topology: ") and out == ""
    assert "hgx-h100" in err


def test_a_scenario_skips_nvls_where_the_switches_cannot(collsim_cli, tmp_path):
    scenario = tmp_path / "a100.yaml"
    scenario.write_text("topology: dgx-a100\nranks: [2]\nsizes: [1024]\nprotocols: [ll, nvls]\n"
                        "algorithms: [one-shot]\n")
    code, out, err = collsim_cli("run", scenario, "--out", tmp_path / "out", "--executor", "local")
    assert code == 0, err
    assert "skipped nvls/one-shot/2" in err and "do not multicast or reduce" in err


# -- the simulator ----------------------------------------------------------------------------------------------

def _run(name, algorithm, ranks, size, topology="hgx-h100", timeline=True):
    return run_des(SimRequest(topology=load_topology(topology), ranks=ranks, algorithm=algorithm,
                              protocol=load_protocol(name), size_bytes=size, timeline=timeline))


def test_a_multicast_store_crosses_the_issuers_uplink_once_and_reaches_every_copy():
    run = _run("nvls", "two-shot", 8, 1 << 20)
    stores = [t for t in run.outcome.transfers if t.what == "multimem.st" and t.rank == 0 and t.payload]
    assert sorted(t.peer for t in stores) == list(range(8))  # one landing per copy, its own included
    assert len({t.nbytes for t in stores}) == 1
    # the upstream link carried it once: every copy finishes no earlier than the one upstream transfer
    chunk_wire = (1 << 20) / 8 / 0.85
    assert stores[0].nbytes == pytest.approx(chunk_wire)


def test_ld_reduce_reads_every_copy_through_its_uplink():
    """One-shot NVLS: every rank ld_reduces the whole message, so each GPU's uplink carries NRANKS x MSG and
    the time grows with ranks at large sizes; two-shot moves MSG (1 + 1/n) per link and direction."""
    size = 64 << 20
    one = [simulate("hgx-h100", n, "one-shot", "nvls", size).latency_us for n in (2, 8)]
    two = [simulate("hgx-h100", n, "two-shot", "nvls", size).latency_us for n in (2, 8)]
    assert one[1] > 3 * one[0]
    assert two[1] < 1.5 * two[0]
    link = 370.8 * 0.85 * 1e3  # bytes per us: the effective link rate NVLS traffic gets
    assert one[1] >= 8 * size / link  # the uplink bound


def test_the_simulator_refuses_multimem_on_a_fabric_without_a_common_switch():
    with pytest.raises(UnsupportedError, match="multicasts and reduces"):
        run_des(SimRequest(topology=load_topology("dgx-a100"), ranks=8, algorithm="one-shot",
                           protocol=load_protocol("nvls"), size_bytes=4096))


def test_nvls_large_message_bandwidth_respects_the_link_limit():
    r = simulate("hgx-h100", 8, "two-shot", "nvls", 1 << 30)
    # per direction each GPU link carries MSG (1 + 1/n); busbw cannot beat 2(n-1)/(n+1) x the NVLS link rate
    assert r.busbw_gbps <= 2 * 7 / 9 * 370.8 * 0.85 * 1.001


def test_scratch_of_the_line_design_is_one_result_per_slot():
    from collsim.report.protocol_facts import scratch_bytes

    line = generate(load_protocol("ll128-atomic"), "one-shot")
    ll = generate(load_protocol("ll"), "one-shot")
    assert scratch_bytes(line, 8, 65536) == 2 * -(-65536 // 120) * 128
    assert scratch_bytes(ll, 8, 65536) > 10 * scratch_bytes(line, 8, 65536)


def test_the_multicast_barrier_waits_for_every_rank_its_own_arrival_included():
    b = ProgramBuilder()
    from collsim.ir.library import multicast_barrier

    multicast_barrier(b, 3)
    ops = b.ops
    arrive = next(op for op in ops if isinstance(op, MultimemRed))
    wait = next(op for op in ops if isinstance(op, PollUntil))
    assert arrive.sem is Sem.RELEASE and arrive.issuer is Issuer.LEADER
    assert wait.sem is Sem.ACQUIRE and wait.until.value.evaluate({"NRANKS": 8}) == 24
