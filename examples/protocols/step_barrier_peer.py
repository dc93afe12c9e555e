"""step-barrier-peer: step_barrier.py whose ranks load their ring neighbour's step counter at kernel start.

The neighbour saves its step when its launch ends; a rank that left the closing barrier first starts its
next launch and loads the previous generation, so it waits for epochs its inbox already holds: it passes
the publish barrier before its peers staged this launch's data and reads the last launch's.
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("step_barrier.py"))))


class StepBarrierPeer(_Base):
    """step-barrier that loads the wait target from a counter a peer publishes without ordering."""

    name = "step-barrier-peer"
    default_params = {**_Base.default_params, "load_peer_step": True}
    expected_violation = "stale-read"
