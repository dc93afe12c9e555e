"""Rank symmetry (collsim.sim.symmetry): simulating rank 0 alone must give exactly the full simulation's result,
and only when the topology, the programs and the costs make every rank do what rank 0 does."""
from __future__ import annotations

import copy

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from collsim.models import SimRequest, resolve_protocol
from collsim.sim import model as des
from collsim.sim import symmetry
from collsim.sim.links import Pipe, SharedPipeSaturated, WatchedPipe, place
from collsim.sim.lower import Block
from collsim.sim.model import program_for, run_des
from collsim.sim.simulation import _route_facts, _route_table
from collsim.topology import load_topology

MiB = 1 << 20
SHIPPED = {"barrier": ("one-shot", "two-shot"), "simple": ("one-shot", "two-shot", "ring"),
           "ll": ("one-shot", "two-shot", "ring"), "ll128": ("one-shot", "two-shot", "ring"),
           "atomic-counter": ("one-shot",), "sentinel": ("one-shot", "two-shot"),
           "signal-pad": ("one-shot", "two-shot")}
#: algorithms whose last phase pushes into the peers' buffers (signal-pad's two-shot, as PyTorch's)
PUSHED = {("signal-pad", "two-shot")}
CASES = [(protocol, algorithm) for protocol, algorithms in SHIPPED.items() for algorithm in algorithms]


def _request(topology, ranks, protocol, algorithm, size, costs=None, channels=None):
    topo = load_topology(topology) if isinstance(topology, str) else topology
    return SimRequest(topology=topo, ranks=ranks, algorithm=algorithm, protocol=resolve_protocol(protocol),
                      size_bytes=size, channels=channels, costs=dict(costs or {}))


def _both(request):
    return run_des(request), run_des(request, symmetric=True)


def _facts(topo):
    table = _route_table(topo)
    return lambda a, b: _route_facts(topo, table, a, b)


@pytest.mark.parametrize("protocol,algorithm", CASES)
@pytest.mark.parametrize("topology,ranks", [("hgx-h100", 2), ("hgx-h100", 3), ("hgx-h100", 8), ("gb200-nvl72", 16),
                                            ("dgx-a100", 4)])
def test_one_rank_gives_the_full_simulations_result(protocol, algorithm, topology, ranks):
    """Latency, breakdown and every rank's end are the full simulation's, bit for bit, at small and large sizes
    (and the launch really was simulated as one rank)."""
    for size in (8, 64 * 1024, 16 * MiB):
        full, folded = _both(_request(topology, ranks, protocol, algorithm, size))
        assert folded.breakdown == full.breakdown, (size, full.breakdown, folded.breakdown)
        assert folded.latency_us == full.latency_us
        assert folded.outcome.ends == full.outcome.ends
        if (protocol, algorithm) in PUSHED and "abandoned" in folded.symmetry:
            # a pushed all-gather's stores leave over the link that also carries the peers' pulls of this
            # rank's data, which the fold's one pipe per orbit cannot tell apart from the pushes to the other
            # peers: once a transfer waits there, the fold must say so and hand over to the full simulation
            assert "sharing a watched pipe" in folded.symmetry
        else:
            assert folded.outcome.events < full.outcome.events


MULTIMEM = [("nvls", "one-shot"), ("nvls", "two-shot"), ("nvls-poison", "two-shot"), ("ll128-atomic-nvls", "one-shot")]


@pytest.mark.parametrize("protocol,algorithm", MULTIMEM + sorted(PUSHED))
@pytest.mark.parametrize("topology,ranks,costs", [("hgx-h100", 2, None), ("hgx-h100", 8, None),
                                                  ("gb200-nvl72", 16, None), ("gb200-nvl72", 72, None),
                                                  ("hgx-h100", 8, {"nvls_reduce_gbps": 5.0, "cta_store_gbps": 5.0})])
def test_multimem_and_pushed_programs_fold_exactly_or_say_why_not(protocol, algorithm, topology, ranks, costs):
    """Programs whose one op reaches every rank's copy, and the pushed all-gather: the fold's result is the full
    simulation's bit for bit, or it hands over with the sharing that made placement order matter."""
    for size in (8, 64 * 1024, 16 * MiB):
        full, folded = _both(_request(topology, ranks, protocol, algorithm, size, costs=costs))
        assert folded.breakdown == full.breakdown, (size, full.breakdown, folded.breakdown)
        assert folded.latency_us == full.latency_us
        assert folded.outcome.ends == full.outcome.ends
        if folded.symmetry.startswith("rank 0 simulated"):
            assert folded.outcome.events < full.outcome.events
        else:
            assert "sharing a watched pipe" in folded.symmetry or "do not fit together" in folded.symmetry, \
                folded.symmetry


def test_a_multimem_program_whose_streams_fit_is_folded():
    """nvls one-shot with a slow reduction unit: every reader's ld_reduce stream fits on each rank's link to
    the switch at once, so no order decides anything and rank 0 stands for all."""
    full, folded = _both(_request("hgx-h100", 8, "nvls", "one-shot", 16 * MiB,
                                  costs={"nvls_reduce_gbps": 5.0, "cta_store_gbps": 5.0}))
    assert folded.symmetry.startswith("rank 0 simulated")
    assert folded.breakdown == full.breakdown and folded.outcome.ends == full.outcome.ends
    assert folded.outcome.events * 4 < full.outcome.events


@pytest.mark.parametrize("protocol,algorithm", [("simple", "ring"), ("ll", "one-shot"), ("barrier", "two-shot")])
def test_seventy_two_ranks_as_one(protocol, algorithm):
    full, folded = _both(_request("gb200-nvl72", 72, protocol, algorithm, 4 * MiB))
    assert folded.breakdown == full.breakdown
    assert folded.outcome.events * 20 < full.outcome.events


def test_written_protocols_fold_too():
    """A protocol outside collsim (the counter barrier of docs/WRITING_PROTOCOLS.md) is judged the same way."""
    full, folded = _both(_request("hgx-h100", 8, "examples/protocols/counter_barrier.py", "one-shot", 8192))
    assert folded.breakdown == full.breakdown and folded.outcome.events < full.outcome.events


@pytest.mark.parametrize("topology,ranks", [("pcie-gen5", 4), ("dgx1-v100", 8)])
def test_asymmetric_topologies_are_simulated_in_full(topology, ranks):
    topo = load_topology(topology)
    assert symmetry.rotation_of(topo, ranks, _facts(topo)) is None
    full, folded = _both(_request(topo, ranks, "ll", "one-shot", 4096))
    assert folded.outcome.events == full.outcome.events and folded.breakdown == full.breakdown


@pytest.mark.parametrize("costs", [{"start_skew_us": 1.0}, {"transfer_pieces": 4}])
def test_costs_that_break_symmetry_are_simulated_in_full(costs):
    """Ranks starting at different times, or fine-grained pieces (their own processes), are not folded."""
    full, folded = _both(_request("hgx-h100", 8, "simple", "ring", MiB, costs=costs))
    assert folded.outcome.events == full.outcome.events and folded.breakdown == full.breakdown


def test_the_ranks_of_a_rotation_share_the_links_of_an_orbit():
    topo = load_topology("hgx-h100")
    rotation = symmetry.rotation_of(topo, 8, _facts(topo))
    assert rotation is not None and rotation.ranks == 8
    # each GPU's port towards the fabric and back: two orbits of eight links
    assert len(set(rotation.alias.values())) == 2 and len(rotation.alias) == 16


def _bound(protocol, algorithm, ranks, size):
    _, lowered = program_for(resolve_protocol(protocol), algorithm)
    items = [lowered.bind({"RANK": r, "NRANKS": ranks, "ITER": 0, "MSG": size}) for r in range(ranks)]
    return lowered, items


def _ops(items):
    for item in items:
        if isinstance(item, Block):
            for iteration in item.iterations:
                yield from _ops(iteration)
        else:
            yield item


def _with_ref(items, index, ref):
    """A deep copy of one rank's items with its ``index``-th op referring to ``ref``."""
    items = copy.deepcopy(items)
    op = [o for o in _ops(items) if o.ref is not None][index]
    op.ref, op.key = ref, ref[:4]
    return items


def test_a_rank_that_does_something_else_is_not_folded():
    topo = load_topology("hgx-h100")
    rotation = symmetry.rotation_of(topo, 4, _facts(topo))
    lowered, items = _bound("ll", "one-shot", 4, 4096)
    assert symmetry.fold_of(items, lowered, rotation, _facts(topo)) is not None
    first = [o for o in _ops(items[2]) if o.ref is not None][0]
    buffer, owner, slot, region, line, lines = first.ref
    # rank 2 sends its first range to another peer than its rotation of rank 0 would
    wrong_peer = _with_ref(items[2], 0, (buffer, (owner + 1) % 4, slot, region, line, lines))
    assert symmetry.fold_of(items[:2] + [wrong_peer] + items[3:], lowered, rotation, _facts(topo)) is None
    # or to the right peer, but at lines that no rotation of memory maps the others' to
    wrong_lines = _with_ref(items[2], 0, (buffer, owner, slot, region, line + 1, lines))
    assert symmetry.fold_of(items[:2] + [wrong_lines] + items[3:], lowered, rotation, _facts(topo)) is None


def test_mirrored_writes_are_the_other_ranks_writes_where_rank_0_polls():
    topo = load_topology("hgx-h100")
    lowered, items = _bound("simple", "ring", 4, 4096)
    fold = symmetry.fold_of(items, lowered, symmetry.rotation_of(topo, 4, _facts(topo)), _facts(topo))
    polled = {op.key for op in _ops(items[0]) if op.kind == 2}
    assert fold.mirrors
    for op, writes in fold.mirrors.items():
        assert all(key in polled and key[1] == 0 for key, _ in writes)  # a ring's flags live with the poller


def test_watched_pipe_refuses_a_transfer_slowed_by_another():
    shared = WatchedPipe("switch->gpu0", 100.0)
    place((shared,), 100_000, 0.0)                # alone at full rate until 1.0: order cannot matter yet
    place((shared,), 100_000, 1.0)                # back to back: nothing waited
    with pytest.raises(SharedPipeSaturated):
        place((shared,), 100_000, 1.5)            # would wait for the second: placement order decides
    plain = Pipe("switch->gpu1", 100.0)
    place((plain,), 100_000, 0.0)
    assert place((plain,), 100_000, 0.5) == pytest.approx(2.0)


def test_a_fold_that_meets_sharing_falls_back_to_the_full_simulation(monkeypatch):
    """When every link counts as shared, the one-shot's transfers slow each other down on rank 0's own port:
    the fold is abandoned and the full simulation's result returned."""
    request = _request("hgx-h100", 8, "simple", "one-shot", 16 * MiB)
    full = run_des(request)
    monkeypatch.setattr(symmetry, "_watched", lambda ops, rotation, facts: frozenset(rotation.alias.values()))
    attempts = []
    real = des.Simulation

    def counting(*args, **kwargs):
        attempts.append(kwargs.get("fold") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(des, "Simulation", counting)
    folded = run_des(request, symmetric=True)
    assert attempts == [True, False]
    assert folded.breakdown == full.breakdown and folded.outcome.events == full.outcome.events


def test_simultaneous_writes_that_do_not_commute_abandon_the_fold():
    """Two writes visible at the same time on one polled line: adds commute, a set and an add do not (a full
    simulation would keep whichever order its ranks ran in)."""
    from collsim.sim.memory import Location, Write

    counter = Location(("arrivals", 0, 0, 0), 0)
    counter.add(Write(0, 1, 2.0, "add", 1, None))
    counter.add(Write(0, 1, 2.0, "add", 1, None))
    symmetry.check_commute(counter, 2.0)
    counter.add(Write(1, 2, 2.0, "set", 0, None))  # other lines: no conflict
    symmetry.check_commute(counter, 2.0)
    counter.add(Write(0, 1, 2.0, "set", 0, None))
    with pytest.raises(symmetry.SimultaneousWrites):
        symmetry.check_commute(counter, 2.0)


COST_RANGES = {"cta_store_gbps": (5.0, 500.0), "cta_bytes_in_flight": (4096.0, 262144.0), "poll_period_us": (0.01, 1.0),
               "remote_write_us": (0.1, 2.0), "op_overhead_us": (0.0, 0.2), "hbm_efficiency": (0.3, 1.0),
               "fence_sys_us": (0.1, 3.0), "sync_group_us": (0.0, 0.5)}


@st.composite
def _launches(draw):
    topology = draw(st.sampled_from(["hgx-h100", "gb200-nvl72", "dgx-a100", "pcie-gen5"]))
    protocol, algorithm = draw(st.sampled_from(CASES + [("examples/protocols/counter_barrier.py", "one-shot"),
                                                        ("examples/protocols/simple_ra.py", "one-shot")]))
    ranks = draw(st.integers(2, 8))
    size = 4 * draw(st.integers(1, 1 << 23))
    costs = {name: draw(st.floats(lo, hi)) for name, (lo, hi) in COST_RANGES.items() if draw(st.booleans())}
    channels = draw(st.sampled_from([None, 1, 2, 4, 16]))
    return _request(topology, ranks, protocol, algorithm, size, costs=costs, channels=channels)


@settings(max_examples=60, deadline=None)
@given(_launches())
@example(_request("gb200-nvl72", 6, "barrier", "two-shot", 543748, channels=1))
def test_any_launch_gets_the_full_simulations_result(request):
    """Whatever the topology, costs, channels and size: folded or not, the result is the full simulation's.

    The breakdown is compared exactly; each rank's end to within float rounding: in the full simulation a
    rank's placements on its pipes can sum in another order than rank 0's, so its end may differ by an ulp
    (gb200-nvl72, barrier two-shot, 6 ranks, 543 748 B, one channel: 38.623690247860225 for rank 0 and the
    folded ranks, 38.62369024786022 for ranks 1-5 of the full simulation)."""
    full, folded = _both(request)
    assert folded.breakdown == full.breakdown
    assert folded.outcome.ends == pytest.approx(full.outcome.ends, rel=1e-12, abs=1e-9)


def test_explain_says_how_scenario_rows_simulate_the_launch():
    """`collsim explain` simulates every rank (its steps name ranks) and says whether rows run one rank, and
    if not, why: here a route that the rotation does not map onto another with the same bandwidth."""
    import json

    from typer.testing import CliRunner

    import collsim.cli.explain_cmd  # noqa: F401  (registers the command)
    from collsim.cli.app import app

    folded = CliRunner().invoke(app, ["explain", "-t", "hgx-h100", "-n", "8", "-a", "ring", "-p", "ll"])
    assert folded.exit_code == 0, folded.output
    assert "Scenario rows: rank 0 simulated for all 8 ranks" in folded.output
    full = CliRunner().invoke(app, ["explain", "-t", "dgx1-v100", "-n", "8", "-a", "one-shot", "-p", "ll", "--json"])
    assert full.exit_code == 0, full.output
    rows = json.loads(full.output)["rows"]
    assert rows.startswith("every rank simulated: the route 0->1 (gpu0->gpu1 20 GB/s")
    skewed = CliRunner().invoke(app, ["explain", "-n", "4", "--cost", "start_skew_us=1"])
    assert "every rank simulated: ranks start at different times" in skewed.output


def test_the_reason_names_the_operation_that_breaks_symmetry():
    topo = load_topology("hgx-h100")
    rotation = symmetry.rotation_of(topo, 4, _facts(topo))
    lowered, items = _bound("ll", "one-shot", 4, 4096)
    first = [o for o in _ops(items[2]) if o.ref is not None][0]
    buffer, owner, slot, region, line, lines = first.ref
    wrong_peer = _with_ref(items[2], 0, (buffer, (owner + 1) % 4, slot, region, line, lines))
    reason = symmetry.fold_or_reason(items[:2] + [wrong_peer] + items[3:], lowered, rotation, _facts(topo))
    assert reason == (f"rank 2's {first.name} is on rank {(owner + 1) % 4}'s memory, rank 0's on rank "
                      f"{(owner - 2) % 4}'s: not the same peer shifted by 2")
    wrong_lines = _with_ref(items[2], 0, (buffer, owner, slot, region, line + 1, lines))
    reason = symmetry.fold_or_reason(items[:2] + [wrong_lines] + items[3:], lowered, rotation, _facts(topo))
    assert reason.startswith("memory does not rotate with the ranks")


def test_a_loop_whose_length_depends_on_the_rank_is_not_folded():
    """Rank 1 runs its loop twice, rank 0 once: the shapes differ, so no rank stands for the others."""
    from collsim.ir import Buffer, KernelBoundary, ProgramBuilder, Ref, Scope, Sem, Store, counter_layout
    from collsim.ir.expr import RANK
    from collsim.ir.program import Program
    from collsim.sim.lower import lower_for_sim

    b = ProgramBuilder()
    with b.loop("k", RANK + 1):
        b.emit(Store(Ref("flags", RANK), None, Sem.RELEASE, Scope.SYS, flag=1, label="mark"))
    b.emit(KernelBoundary())
    lowered = lower_for_sim(Program("uneven", "one-shot", b.ops, (Buffer("flags", counter_layout(), 1, 1, 1),)))
    assert lowered.rank_shaped
    items = [lowered.bind({"RANK": r, "NRANKS": 2, "ITER": 0, "MSG": 8}) for r in range(2)]
    topo = load_topology("hgx-h100")
    reason = symmetry.fold_or_reason(items, lowered, symmetry.rotation_of(topo, 2, _facts(topo)), _facts(topo))
    assert reason == "rank 1 runs 4 operations and loops, rank 0 3"
    # as many operations in all, split differently between two loops
    b = ProgramBuilder()
    with b.loop("k", RANK + 1):
        b.emit(Store(Ref("flags", RANK), None, Sem.RELEASE, Scope.SYS, flag=1, label="mark"))
    with b.loop("j", 2 - RANK):
        b.emit(Store(Ref("flags", RANK), None, Sem.RELEASE, Scope.SYS, flag=2, label="again"))
    b.emit(KernelBoundary())
    lowered = lower_for_sim(Program("split", "one-shot", b.ops, (Buffer("flags", counter_layout(), 1, 1, 1),)))
    items = [lowered.bind({"RANK": r, "NRANKS": 2, "ITER": 0, "MSG": 8}) for r in range(2)]
    reason = symmetry.fold_or_reason(items, lowered, symmetry.rotation_of(topo, 2, _facts(topo)), _facts(topo))
    assert reason == "rank 1's loops differ in shape from rank 0's"
