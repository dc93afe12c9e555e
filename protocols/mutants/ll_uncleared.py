"""mutant-ll-uncleared: LL whose line slots are a reused allocation nobody cleared."""
from __future__ import annotations

from dataclasses import replace

from protocols.ll import LL


class LLUncleared(LL):
    """LL with its line slots declared ``init="arbitrary"``: ``cudaMalloc`` (or a caching allocator handing
    back a previous user's block) does not zero them, and no memset runs at setup.

    LL's epochs start at 1 on the promise that fresh memory holds 0. A flag word left at 1 by whoever used
    the memory before passes the first launch's poll at once, and the receiver takes the garbage beside it
    for data. NCCL clears its buffers when it sets up a communicator; that memset is what ``init="zero"``
    (the default) states.
    """

    name = "mutant-ll-uncleared"
    expected_violation = "stale-read"

    def buffers(self, transfer_bytes):
        return tuple(replace(buf, init="arbitrary") if buf.name == "lines" else buf
                     for buf in super().buffers(transfer_bytes))
