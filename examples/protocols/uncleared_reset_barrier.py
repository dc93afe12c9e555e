"""uncleared-reset-barrier: host_reset_barrier.py on buffers nobody cleared at allocation.

Written from docs/WRITING_PROTOCOLS.md ("Initial contents"). Both buffers are
declared ``init="arbitrary"`` (the memory comes from a caching allocator, as
PyTorch's does, and holds whatever its previous user left). The protocol does
not care: the host clears the arrival flags before every launch, the hosts
meet, and only then does any rank poll them; the staging words are read only
after the barrier that follows their stores. The verifier checks it with every
word of both buffers starting as any bit pattern.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("host_reset_barrier.py"))))


class UnclearedResetBarrier(_Base):
    """host-reset-barrier whose staging and arrival buffers start as arbitrary garbage."""

    name = "uncleared-reset-barrier"

    def buffers(self, transfer_bytes):
        return tuple(replace(buf, init="arbitrary") for buf in super().buffers(transfer_bytes))
