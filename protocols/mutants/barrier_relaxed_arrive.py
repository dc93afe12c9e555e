"""mutant-barrier-relaxed-arrive: the barrier's arrival flag is stored relaxed instead of release."""
from __future__ import annotations

from collsim.ir.types import Sem
from protocols.barrier import Barrier


class BarrierRelaxedArrive(Barrier):
    """Barrier whose arrive store is ``st.relaxed`` instead of ``st.release``.

    Nothing orders a rank's weak staging stores before its arrival flag, so
    a peer that sees the flag (even with an acquire load) may still load
    stale staging data: the staging store and the peer's load race.
    """

    name = "mutant-barrier-relaxed-arrive"
    expected_violation = "data-race"
    default_params = {**Barrier.default_params, "arrive_sem": Sem.RELAXED}
