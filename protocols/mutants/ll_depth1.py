"""mutant-ll-depth1: LL with a single buffer where two are needed."""
from __future__ import annotations

from protocols.ll import LL


class LLDepth1(LL):
    """LL with ``depth=1``: every launch writes the same slot.

    A rank that has received everything may start the next launch and
    overwrite a peer's slot with the next epoch before that peer polled the
    current one; the peer then waits for an epoch that is gone. Two slots
    suffice because a rank is at most one launch ahead of any peer.
    """

    name = "mutant-ll-depth1"
    expected_violation = "early-overwrite"
    default_params = {**LL.default_params, "depth": 1}
