"""The discrete-event simulator: behaviour a protocol designer relies on, not numbers typed in."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from collsim.errors import InputError
from collsim.ir.registry import list_protocols, load_protocol
from collsim.models import SimRequest, simulate
from collsim.sim.costs import GENERATIONS, load_costs, parameter_table
from collsim.sim.model import des_model, run_des
from collsim.topology import load_topology

KiB, MiB = 1024, 1024 * 1024
SHIPPED = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]


def des(protocol="ll", algorithm="one-shot", size=4096, ranks=8, topology="hgx-h100", **kw):
    return simulate(topology, ranks=ranks, algorithm=algorithm, protocol=protocol, size_bytes=size, model="des",
                    **kw)


def latency(*args, **kw) -> float:
    return des(*args, **kw).latency_us


def test_des_is_the_default_model():
    """A request that names no model gets the simulator."""
    assert simulate("hgx-h100", ranks=2, algorithm="one-shot", protocol="ll", size_bytes=64).model == "des"


@pytest.mark.parametrize("size", [8, 256, 1 * KiB, 4 * KiB])
def test_ll_one_shot_beats_barrier_one_shot_at_small_sizes(size):
    """Data-carried flags need no barrier round trips, so LL wins while time is all synchronization."""
    assert latency("ll", "one-shot", size) < latency("barrier", "one-shot", size)


@pytest.mark.parametrize("size", [16 * MiB, 64 * MiB])
def test_ll128_ring_beats_ll_ring_at_large_sizes(size):
    """LL puts 2x the bytes on the wire, LL128 16/15x: bandwidth decides large messages."""
    assert latency("ll128", "ring", size) < latency("ll", "ring", size)


@pytest.mark.parametrize("size", [8, 1 * KiB, 16 * KiB])
def test_sentinel_two_shot_beats_barrier_two_shot_at_small_sizes(size):
    """Two-shot with sentinels pays no barrier; with barriers it pays three."""
    assert latency("sentinel", "two-shot", size) < latency("barrier", "two-shot", size)


def test_ring_latency_at_8_bytes_grows_linearly_with_ranks():
    """A ring takes 2(n-1) dependent steps, so its small-message latency is a line in n."""
    topo = load_topology("hgx-h100")
    ranks = [2, 3, 4, 5, 6, 7, 8]
    times = [latency("ll", "ring", 8, ranks=n, topology=topo) for n in ranks]
    n_mean, t_mean = sum(ranks) / len(ranks), sum(times) / len(times)
    slope = sum((n - n_mean) * (t - t_mean) for n, t in zip(ranks, times)) / sum((n - n_mean) ** 2 for n in ranks)
    residual = sum((t - (t_mean + slope * (n - n_mean))) ** 2 for n, t in zip(ranks, times))
    total = sum((t - t_mean) ** 2 for t in times)
    assert slope > 0
    assert 1 - residual / total > 0.99


@pytest.mark.parametrize("name,algorithm", SHIPPED)
def test_busbw_never_exceeds_what_the_links_allow(name, algorithm):
    """No AllReduce moves less than 2(n-1)/n of the message per rank, so busbw is bounded by a GPU's effective
    link bandwidth times the share of each wire byte that is payload."""
    topo = load_topology("hgx-h100")
    protocol = load_protocol(name)
    limit = topo.gpu_egress_gbps(0, effective=True) * protocol.payload_efficiency
    for size in (8, 64 * KiB, 4 * MiB, 256 * MiB):
        assert des(protocol, algorithm, size, topology=topo).busbw_gbps <= limit * (1 + 1e-9)


@pytest.mark.parametrize("name,algorithm", [("simple", "ring"), ("ll128", "ring"), ("ll", "ring"),
                                            ("sentinel", "two-shot"), ("ll128", "two-shot")])
def test_busbw_grows_with_size_and_approaches_the_link_bandwidth(name, algorithm):
    """Bandwidth-optimal algorithms get most of the effective link rate their line format allows."""
    topo = load_topology("hgx-h100")
    protocol = load_protocol(name)
    ceiling = topo.gpu_egress_gbps(0, effective=True) * protocol.payload_efficiency
    busbws = [des(protocol, algorithm, size, topology=topo).busbw_gbps for size in (1 * MiB, 16 * MiB, 1024 * MiB)]
    assert busbws == sorted(busbws)
    assert busbws[-1] >= 0.75 * ceiling


def test_two_shot_with_a_full_payload_line_gets_most_of_the_links():
    """Sentinel lines are all payload: two-shot reaches most of the effective link rate at 1 GiB (the rest is
    local work after each whole range arrives, which the model does not overlap with the arrival: the six
    CTAs that saturate the links read the n inputs of the reduce at 128 B per clock each)."""
    topo = load_topology("hgx-h100")
    busbw = des("sentinel", "two-shot", 1024 * MiB, topology=topo).busbw_gbps
    assert 0.75 * topo.gpu_egress_gbps(0, effective=True) <= busbw <= topo.gpu_egress_gbps(0, effective=True)


def test_one_cta_cannot_saturate_nvlink():
    """With one channel the store engine, not the links, limits bandwidth."""
    one = des("simple", "ring", 256 * MiB, channels=1)
    default = des("simple", "ring", 256 * MiB)
    assert one.busbw_gbps <= load_costs("hopper").nvlink.cta_store_gbps * 1.0001
    assert default.busbw_gbps > 2 * one.busbw_gbps


def test_reset_pass_costs_latency():
    """Re-zeroing the accumulation buffer is on the critical path once it is large enough to matter."""
    topo = load_topology("hgx-h100")
    for size in (4 * KiB, 4 * MiB, 64 * MiB):
        with_reset = des(load_protocol("atomic-counter"), "one-shot", size, topology=topo).latency_us
        without = des(load_protocol("atomic-counter", reset=False), "one-shot", size, topology=topo).latency_us
        assert without <= with_reset
        if size >= 4 * MiB:
            assert without < with_reset


def test_sentinel_reset_pass_costs_latency_when_it_can_be_removed():
    """The sentinel's re-poison pass, when the protocol lets a parameter remove it."""
    if "repoison" not in load_protocol("sentinel").params:
        pytest.skip("the sentinel protocol has no parameter that removes its re-poison pass")
    with_reset = latency(load_protocol("sentinel", depth=1), "one-shot", 4 * MiB)
    without = latency(load_protocol("sentinel", depth=1, repoison=False), "one-shot", 4 * MiB)
    assert without < with_reset


@pytest.mark.parametrize("name,algorithm", [("ll", "one-shot"), ("barrier", "two-shot"), ("simple", "ring")])
@pytest.mark.parametrize("size", [8, 1 * MiB])
def test_pcie_costs_more_than_nvlink(name, algorithm, size):
    """The same A100s behind PCIe switches instead of NVSwitch: longer latency, less bandwidth."""
    assert latency(name, algorithm, size, topology="pcie-gen4") > latency(name, algorithm, size, topology="dgx-a100")


def test_same_inputs_give_the_same_result():
    """The simulator is deterministic, timeline included."""
    first = des("barrier", "two-shot", 64 * KiB, timeline=True).to_dict()
    second = des("barrier", "two-shot", 64 * KiB, timeline=True).to_dict()
    assert first == second


@pytest.mark.parametrize("name,algorithm", [("ll", "one-shot"), ("simple", "ring"), ("barrier", "two-shot")])
def test_each_harness_times_the_graph_kernel_plus_what_it_adds(name, algorithm):
    """Back-to-back eager launches overlap the running kernel: a call costs the slower of the host's launch
    and the kernel behind a stream gap. A call between CUDA events adds the gap, the event pair's floor and
    the harness's cache-flush penalty. Every harness adds only launch time, never less than CUDA graphs."""
    c = load_costs("hopper").nvlink
    for size in (8, 16 * KiB, 16 * MiB):
        graph = des(name, algorithm, size, launch="graph")
        eager = des(name, algorithm, size, launch="eager")
        host_loop = des(name, algorithm, size, launch="host-loop")
        events = des(name, algorithm, size, launch="events")
        assert eager.latency_us == pytest.approx(max(c.launch_overhead_us, graph.latency_us + c.stream_gap_us))
        assert host_loop.latency_us == pytest.approx(max(c.host_call_us, graph.latency_us + c.stream_gap_us))
        assert events.latency_us == pytest.approx(graph.latency_us + c.stream_gap_us + c.event_pair_us
                                                  + c.harness_cold_us)
        for other in (eager, host_loop, events):
            assert other.latency_us >= graph.latency_us
            for key in ("sync", "data", "reduce"):
                assert other.breakdown[key] == graph.breakdown[key]


@pytest.mark.parametrize("name,algorithm", SHIPPED)
def test_breakdown_sums_to_latency(name, algorithm):
    """launch + sync + data + reduce is the latency: every instant of the critical path is counted once."""
    for size in (8, 1 * MiB):
        result = des(name, algorithm, size, launch="eager")
        assert sum(result.breakdown.values()) == pytest.approx(result.latency_us, rel=1e-12)
        assert all(value >= 0 for value in result.breakdown.values())


def test_small_messages_are_synchronization_large_ones_data():
    """The attribution follows the mechanism: flags and latencies at 8 B, bytes on links at 64 MiB."""
    small, large = des("simple", "ring", 8).breakdown, des("simple", "ring", 64 * MiB).breakdown
    assert small["sync"] > small["data"]
    assert large["data"] > large["sync"]


@pytest.mark.parametrize("name,algorithm", [("ll", "one-shot"), ("simple", "ring"), ("barrier", "two-shot"),
                                            ("atomic-counter", "one-shot")])
def test_event_count_does_not_grow_with_message_size(name, algorithm):
    """A range of lines is one transfer: the events of a launch are bounded by its operations, at any size."""
    small, huge = des(name, algorithm, 8), des(name, algorithm, 1024 * MiB)
    run = run_des(SimRequest(topology=load_topology("hgx-h100"), ranks=8, algorithm=algorithm,
                             protocol=load_protocol(name), size_bytes=8), symmetric=True)
    ops = sum(1 for rank in range(8) for _ in _flat_ops(name, algorithm, rank))
    for result in (small, huge):
        assert result.events <= 3 * ops + 8
    assert huge.events <= 2 * small.events
    assert run.outcome.events == small.events


def _flat_ops(name, algorithm, rank):
    from collsim.sim.model import program_for

    _, lowered = program_for(load_protocol(name), algorithm)
    return lowered.flat({"RANK": rank, "NRANKS": 8, "ITER": 0, "MSG": 8})


@pytest.mark.parametrize("name,algorithm", [("ll", "one-shot"), ("simple", "ring"), ("ll128", "two-shot"),
                                            ("sentinel", "one-shot"), ("barrier", "one-shot")])
@pytest.mark.parametrize("size", [256 * KiB, 16 * MiB])
def test_whole_range_transfers_match_a_fine_grained_simulation(name, algorithm, size):
    """Costing each range as one transfer stays within 2 % of issuing it as 64 separately timed pieces."""
    whole = des(name, algorithm, size)
    fine = des(name, algorithm, size, costs={"transfer_pieces": 64})
    assert fine.events > whole.events
    assert whole.latency_us == pytest.approx(fine.latency_us, rel=0.02)


def test_seventy_two_ranks_run():
    """The full GB200 NVL72 domain simulates; a one-shot over 72 ranks costs more than over 8."""
    topo = load_topology("gb200-nvl72")
    big = des("ll", "one-shot", 8 * KiB, ranks=72, topology=topo)
    assert math.isfinite(big.latency_us) and big.busbw_gbps > 0
    assert big.latency_us > latency("ll", "one-shot", 8 * KiB, ranks=8, topology=topo)


def test_unknown_cost_parameter_lists_the_valid_ones():
    """A typo in a cost override names the valid parameters."""
    with pytest.raises(InputError) as err:
        des(costs={"pol_period_us": 0.1})
    assert "poll_period_us" in str(err.value)
    with pytest.raises(InputError):
        des(costs={"pcie.nope": 1.0})


def test_cost_override_changes_the_mechanism_it_names():
    """A slower poll loop makes every poll-bound protocol slower."""
    base = latency("ll", "ring", 8)
    slower = latency("ll", "ring", 8, costs={"poll_period_us": 1.0})
    assert slower > base


def test_cost_files_declare_the_same_parameters_each_with_a_source():
    """Every generation's file has every parameter, each with a source."""
    tables = {gen: parameter_table(gen) for gen in GENERATIONS}
    names = set(tables["hopper"])
    for gen, table in tables.items():
        assert set(table) == names, gen
        assert all(entry["source"] for entry in table.values())


def test_timeline_lists_each_ranks_events():
    """With timeline=True every event names its rank, kind, interval, bytes and label."""
    result = des("ll", "ring", 64 * KiB, ranks=4, timeline=True)
    assert result.timeline
    kinds = {"launch", "sync", "data", "reduce"}
    for event in result.timeline:
        assert set(event) == {"rank", "kind", "start_us", "end_us", "peer", "bytes", "label"}
        assert 0 <= event["rank"] < 4 and event["kind"] in kinds
        assert 0 <= event["start_us"] <= event["end_us"] <= result.latency_us + 1e-9
    assert {e["rank"] for e in result.timeline} == {0, 1, 2, 3}
    assert any(e["kind"] == "data" and e["bytes"] > 0 and e["peer"] is not None for e in result.timeline)


def test_a_poll_sees_a_write_within_one_poll_period_of_it_becoming_visible():
    """Poll completion = the satisfying write's visibility plus at most one poll period."""
    costs = load_costs("hopper")
    run = run_des(SimRequest(topology=load_topology("hgx-h100"), ranks=4, algorithm="ring",
                             protocol=load_protocol("ll"), size_bytes=64))
    polls = [s for s in run.steps if "poll saw" in s.text]
    assert len(polls) >= 2 * (4 - 1) - 1  # the ring's dependent steps are on the critical path
    for step in polls:
        assert 0 <= step.duration_us <= costs.nvlink.poll_period_us + 1e-9


def test_a_remote_load_costs_a_round_trip():
    """Pulling a peer's data (barrier protocol) waits for the request to reach the owner and come back."""
    run = run_des(SimRequest(topology=load_topology("hgx-h100"), ranks=2, algorithm="one-shot",
                             protocol=load_protocol("barrier"), size_bytes=64))
    route = load_topology("hgx-h100").route(0, 1)
    legs = [s for s in run.steps if "load_peer" in s.text and s.kind == "sync"]
    assert sum(s.duration_us for s in legs) >= 2 * route.latency_us


def test_critical_path_covers_the_latency_without_gaps():
    """Steps of the critical path tile [0, latency]."""
    run = run_des(SimRequest(topology=load_topology("hgx-h100"), ranks=8, algorithm="two-shot",
                             protocol=load_protocol("barrier"), size_bytes=1 * KiB))
    steps = [s for s in run.steps if s.duration_us > 0]
    assert steps[0].start_us == pytest.approx(0.0)
    assert steps[-1].end_us == pytest.approx(run.latency_us)
    for before, after in zip(steps, steps[1:]):
        assert after.start_us == pytest.approx(before.end_us, abs=1e-9)


def test_explain_prints_the_breakdown_and_who_waited_for_what():
    """`collsim explain` names the slowest rank, each wait on the critical path and its cause."""
    from typer.testing import CliRunner

    import collsim.cli.explain_cmd  # noqa: F401  (registers the command)
    from collsim.cli.app import app

    result = CliRunner().invoke(app, ["explain", "--topology", "hgx-h100", "--ranks", "8", "--algorithm",
                                      "one-shot", "--protocol", "barrier", "--size", "1KiB"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "latency" in text and "launch" in text and "sync" in text and "data" in text and "reduce" in text
    assert "finishes last" in text
    assert "poll saw rank" in text and "barrier.publish.wait" in text
    assert "release fence" in text and "load_peer" in text
    graph = CliRunner().invoke(app, ["explain", "-p", "ll", "-a", "ring", "-n", "4", "--json"])
    assert graph.exit_code == 0 and '"critical_path"' in graph.output


def test_a_poll_no_write_satisfies_is_reported_as_a_hang():
    """A program whose poll can never succeed stops with an error naming the stuck ranks and location."""
    from collsim.errors import CollsimError
    from collsim.ir import Buffer, Equals, KernelBoundary, PollUntil, ProgramBuilder, Ref, Scope, Sem, counter_layout
    from collsim.ir.expr import RANK
    from collsim.ir.program import Program
    from collsim.sim.lower import lower_for_sim
    from collsim.sim.simulation import Simulation, buffer_inits

    b = ProgramBuilder()
    b.emit(PollUntil(Ref("flags", RANK), Equals(1), Sem.ACQUIRE, Scope.SYS))
    b.emit(KernelBoundary())
    program = Program("stuck", "one-shot", b.ops, (Buffer("flags", counter_layout(), 1, 1, 1),))
    lowered = lower_for_sim(program)
    items = [lowered.bind({"RANK": r, "NRANKS": 2, "ITER": 0, "MSG": 8}) for r in range(2)]
    sim = Simulation(load_topology("hgx-h100"), 2, items, buffer_inits(program), load_costs("hopper"), 1, 1.0, 0.0)
    with pytest.raises(CollsimError, match="hangs"):
        sim.run()


@pytest.mark.parametrize("name,algorithm,size", [("ll", "one-shot", 64), ("simple", "ring", 1 << 20),
                                                  ("sentinel", "two-shot", 4096)])
def test_a_harness_is_the_graph_kernel_started_later(name, algorithm, size):
    """des_model reuses the graph launch's kernel for every harness; that must equal simulating the launch
    itself with the harness's cost before the kernel (every rank starting that much later), and a timeline,
    which is simulated that way, gets the same result."""
    topo = load_topology("hgx-h100")
    for launch in ("events", "eager"):
        request = SimRequest(topology=topo, ranks=8, algorithm=algorithm, protocol=load_protocol(name),
                             size_bytes=size, launch=launch)
        direct = run_des(request, symmetric=True)
        graph = simulate(topo, ranks=8, algorithm=algorithm, protocol=name, size_bytes=size, launch="graph",
                         model="des")
        result = simulate(topo, ranks=8, algorithm=algorithm, protocol=name, size_bytes=size, launch=launch,
                          model="des")
        timeline = des_model(replace(request, timeline=True))
        before = direct.before_kernel_us
        assert direct.latency_us == pytest.approx(graph.latency_us + before, abs=1e-9)
        for key in ("sync", "data", "reduce"):
            assert result.breakdown[key] == pytest.approx(direct.breakdown[key], abs=1e-9)
            assert timeline.breakdown[key] == pytest.approx(direct.breakdown[key], abs=1e-9)
        assert timeline.latency_us == pytest.approx(result.latency_us, abs=1e-9)
        assert result.events == graph.events == direct.outcome.events


def test_a_poll_satisfied_at_its_first_sample_names_the_write_since_which_it_held():
    """Not merely the last write visible by then: a credit that held from the start decided nothing, and a
    flag set twice to the same value was decided by the first setting."""
    from collsim.ir.ops import AtLeast, Equals
    from collsim.sim.memory import Location, Write

    credit = Location(("credits", 0, 0, 0), 0)
    credit.add(Write(0, 1, 1.0, "set", 1, "return"))
    assert credit.satisfied_at(0, 1, AtLeast(0).bind({}), 2.0) == (2.0, None)
    flag = Location(("flags", 0, 0, 0), 0)
    first, again = Write(0, 1, 1.0, "set", 7, "first"), Write(0, 1, 1.5, "set", 7, "again")
    flag.add(first)
    flag.add(again)
    assert flag.satisfied_at(0, 1, Equals(7).bind({}), 2.0) == (2.0, first)
    flag.add(Write(0, 1, 1.7, "set", 0, "reset"))
    flag.add(Write(0, 1, 1.8, "set", 7, "last"))
    assert flag.satisfied_at(0, 1, Equals(7).bind({}), 2.0)[1].transfer == "last"
