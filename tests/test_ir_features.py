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
