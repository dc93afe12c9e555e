"""mutant-signal-pad-relaxed-put: the signal-pad barrier's put is a relaxed atomic instead of a release one."""
from __future__ import annotations

from collsim.ir.types import Sem
from protocols.signal_pad import SignalPad


class SignalPadRelaxedPut(SignalPad):
    """Signal-pad whose put is ``atom.exch.relaxed`` instead of ``atom.exch.release``.

    An atomic is no release by itself: nothing orders the rank's weak staging stores before the signal, so
    a peer that sees it (even with an acquire poll) may load stale staging data. PyTorch's
    ``sync_remote_blocks<relaxed>`` is only safe where no data is published (its "pattern 0/2").
    """

    name = "mutant-signal-pad-relaxed-put"
    expected_violation = "data-race"
    default_params = {**SignalPad.default_params, "arrive_sem": Sem.RELAXED}
