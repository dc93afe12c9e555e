"""Broken on purpose: counter-barrier that waits for one arrival too few.

The wait target is ``(NRANKS - 2) * k``: with three ranks a rank passes the
barrier when one peer has arrived and loads the other peer's staging
buffer before that peer has written it (a data race, and a stale read).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

CounterBarrier = type(load_protocol_file(str(Path(__file__).with_name("counter_barrier.py"))))


class CounterBarrierShort(CounterBarrier):
    """counter-barrier with an off-by-one arrival count."""

    name = "counter-barrier-short"
    expected_violation = "data-race"
    default_params = {**CounterBarrier.default_params, "missing_arrivals": 1}
