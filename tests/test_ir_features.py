"""The IR features real kernels need, each with a protocol, example or mutant whose verdict is checked."""
from __future__ import annotations

from pathlib import Path

from collsim.ir.expr import ARG_ITER, ITER
from collsim.ir.registry import load_protocol
from collsim.verify import verify

ROOT = Path(__file__).resolve().parents[1]


# -- kernel arguments frozen at graph capture ------------------------------------------------------------------
def test_arg_iter_is_iter_unless_a_consumer_binds_the_capture_launch():
    assert (ARG_ITER + 1).evaluate({"ITER": 4}) == 5
    assert (ARG_ITER + 1).evaluate({"ITER": 4, "ARG_ITER": 0}) == 1
    assert (ITER + 1).evaluate({"ITER": 4, "ARG_ITER": 0}) == 5


def test_graph_replay_with_device_counter_epochs_holds():
    r = verify(str(ROOT / "examples/protocols/ll_graph.py"), dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


def test_epoch_passed_as_a_kernel_argument_is_stale_under_graph_replay():
    r = verify("mutant-ll-frozen-epoch", properties=["stale-read"], dependencies=False, use_cache=False)
    assert r.caught and r.properties["stale-read"].counterexample is not None
    # the same program launched from the stream (arguments recomputed per launch) is correct
    mutant = type(load_protocol("mutant-ll-frozen-epoch"))
    streamed = type("StreamedLL", (mutant,), {"graph_replay": False, "name": "ll-argument-epoch-streamed",
                                              "expected_violation": None})
    fine = verify(streamed(), properties=["stale-read"], dependencies=False, use_cache=False)
    assert fine.properties["stale-read"].holds


# -- host actions between launches ---------------------------------------------------------------------------
HOST_RESET = ROOT / "examples/protocols/host_reset_barrier.py"


def test_host_memset_then_host_barrier_holds():
    r = verify(str(HOST_RESET), dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


def test_host_memset_without_a_host_barrier_erases_a_peers_arrival():
    r = verify(str(ROOT / "examples/protocols/host_reset_barrier_racy.py"), properties=["hang"],
               dependencies=False, use_cache=False)
    assert r.caught
    cex = r.properties["hang"].counterexample
    assert cex.facts["needed"] and "host_reset_barrier.py:" in cex.facts["needed"]


def test_host_actions_come_first_and_use_host_symbols(tmp_path):
    from collsim.errors import ProtocolDefinitionError
    from collsim.ir.checks import check_protocol_program
    from collsim.algorithms import generate
    from collsim.ir import ITER, RANK, HostMemset, Ref
    from collsim.ir.registry import load_protocol_file

    base = type(load_protocol_file(str(HOST_RESET)))

    class Late(base):
        name = "late-memset"

        def epilogue(self, b, launch):
            super().epilogue(b, launch)
            b.emit(HostMemset(Ref("arrivals", RANK), label="too_late"))

    class DeviceCounter(base):
        name = "device-counter-memset"

        def prologue(self, b, launch):
            b.emit(HostMemset(Ref("arrivals", RANK, line=ITER % 2), label="reads_iter"))

    import pytest
    with pytest.raises(ProtocolDefinitionError, match="comes after the device operation"):
        check_protocol_program(generate(Late(), "one-shot"), Late())
    with pytest.raises(ProtocolDefinitionError, match="uses ITER"):
        check_protocol_program(generate(DeviceCounter(), "one-shot"), DeviceCounter())


def test_simulated_host_actions_cost_their_mechanisms():
    from collsim.models import simulate
    from collsim.ir.registry import load_protocol_file
    from collsim.sim.costs import load_costs
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    with_barrier = load_protocol_file(str(HOST_RESET))
    racy = load_protocol_file(str(ROOT / "examples/protocols/host_reset_barrier_racy.py"))
    c = load_costs("hopper").nvlink
    small = simulate(topo, 8, "one-shot", with_barrier, 1024, model="des")
    unsynced = simulate(topo, 8, "one-shot", racy, 1024, model="des")
    # the host barrier: its rendezvous plus a launch that cannot be hidden behind the previous kernel
    assert small.latency_us - unsynced.latency_us >= c.host_barrier_us + c.launch_overhead_us - 1e-6
    # the memset: a node on the stream whose bytes go through HBM, then the stream gap before the kernel
    no_host = type("NoHostActions", (type(racy),), {"name": "no-host-actions", "prologue": lambda self, b, l: None})
    bare = simulate(topo, 8, "one-shot", no_host(), 1024, model="des")
    assert unsynced.latency_us - bare.latency_us >= c.stream_gap_us - 1e-6
