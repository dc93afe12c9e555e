"""mutant-atomic-counter-no-reset: the accumulate-in-place result buffer is never zeroed."""
from __future__ import annotations

from protocols.atomic_counter import AtomicCounter


class AtomicCounterNoReset(AtomicCounter):
    """atomic-counter with ``reset=False``.

    The sum of launch ``i`` stays in its slot; launch ``i + depth`` adds on
    top of it and reads twice the inputs. Shows up once a slot is reused,
    so it is checked with ``depth + 1 = 3`` launches.
    """

    name = "mutant-atomic-counter-no-reset"
    expected_violation = "postcondition"
    default_params = {**AtomicCounter.default_params, "reset": False}
    verify_bounds = {"iterations": 3}
