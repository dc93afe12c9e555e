"""mutant-atomic-counter-depth1: the atomic result buffer is single-buffered."""
from __future__ import annotations

from protocols.atomic_counter import AtomicCounter


class AtomicCounterDepth1(AtomicCounter):
    """atomic-counter with ``depth=1``.

    A peer that finished the current launch adds its next input into a
    rank's result slot before that rank has read (and zeroed) the current
    sum: the reader sees a sum mixed with the next launch's data, or its
    zeroing wipes out an addition.
    """

    name = "mutant-atomic-counter-depth1"
    expected_violation = "early-overwrite"
    default_params = {**AtomicCounter.default_params, "depth": 1}
