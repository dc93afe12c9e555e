"""mutant-ll128-atomic-no-reset: the accumulate-in-place result buffer is never zeroed."""
from __future__ import annotations

from protocols.ll128_atomic import LL128Atomic


class LL128AtomicNoReset(LL128Atomic):
    """ll128-atomic with ``reset=False``.

    The sum of launch ``i`` stays in its slot; launch ``i + depth`` adds on
    top of it and reads twice the inputs. Shows up once a slot is reused,
    so it is checked with ``depth + 1 = 3`` launches.
    """

    name = "mutant-ll128-atomic-no-reset"
    expected_violation = "postcondition"
    default_params = {**LL128Atomic.default_params, "reset": False}
    verify_bounds = {"iterations": 3}
