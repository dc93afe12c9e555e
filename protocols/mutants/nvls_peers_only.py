"""mutant-nvls-peers-only: the multicast barrier waits for NRANKS - 1 arrivals, as a unicast barrier does."""
from __future__ import annotations

from protocols.nvls import NVLS


class NVLSPeersOnly(NVLS):
    """nvls whose barrier waits until its counter reaches ``NRANKS - 1`` per use (``arrivals="peers"``).

    Ported from a unicast barrier, which waits for its peers' flags only;
    but a ``multimem.red`` also lands in the arriving rank's own counter, so
    ``NRANKS - 1`` arrivals may include this rank's own and leave one peer
    out: the ``multimem.ld_reduce`` then reads that peer's staging buffer
    while it is still being written.
    """

    name = "mutant-nvls-peers-only"
    expected_violation = "data-race"
    default_params = {**NVLS.default_params, "arrivals": "peers"}
