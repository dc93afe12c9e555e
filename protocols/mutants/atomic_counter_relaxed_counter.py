"""mutant-atomic-counter-relaxed-counter: arrival counter bumped and polled relaxed."""
from __future__ import annotations

from collsim.ir.types import Sem
from protocols.atomic_counter import AtomicCounter


class AtomicCounterRelaxedCounter(AtomicCounter):
    """atomic-counter whose arrival counter uses relaxed ``red.add`` and a relaxed poll.

    Without release on the increment and acquire on the poll, seeing the
    counter reach ``NRANKS`` says nothing about the data reductions issued
    before it: the reader's plain load of the sum races with them.
    """

    name = "mutant-atomic-counter-relaxed-counter"
    expected_violation = "data-race"
    default_params = {**AtomicCounter.default_params, "counter_sem": Sem.RELAXED, "wait_sem": Sem.RELAXED}
