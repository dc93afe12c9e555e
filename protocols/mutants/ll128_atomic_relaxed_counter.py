"""mutant-ll128-atomic-relaxed-counter: arrival counter bumped and polled relaxed."""
from __future__ import annotations

from collsim.ir.types import Sem
from protocols.ll128_atomic import LL128Atomic


class LL128AtomicRelaxedCounter(LL128Atomic):
    """ll128-atomic whose arrival counter uses relaxed ``red.add`` and a relaxed poll.

    Without release on the increment and acquire on the poll, seeing the
    counter reach ``NRANKS`` says nothing about the data reductions issued
    before it: the reader's plain load of the sum races with them.
    """

    name = "mutant-ll128-atomic-relaxed-counter"
    expected_violation = "data-race"
    default_params = {**LL128Atomic.default_params, "counter_sem": Sem.RELAXED, "wait_sem": Sem.RELAXED}
