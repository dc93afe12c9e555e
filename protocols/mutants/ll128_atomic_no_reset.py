"""mutant-ll128-atomic-no-reset: the LL128-atomic lines' data is never zeroed."""
from __future__ import annotations

from protocols.ll128_atomic import LL128Atomic


class LL128AtomicNoReset(LL128Atomic):
    """ll128-atomic with ``reset=False``.

    The counts may keep growing, but the data cannot: launch ``i + depth``
    adds on top of launch ``i``'s sum and reads twice the inputs. Shows once
    a slot is reused, so it is checked with ``depth + 1 = 3`` launches.
    """

    name = "mutant-ll128-atomic-no-reset"
    expected_violation = "postcondition"
    default_params = {**LL128Atomic.default_params, "reset": False}
    verify_bounds = {"iterations": 3}
