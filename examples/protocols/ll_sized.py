"""ll-sized: LL for a message size that changes from launch to launch, one slot per sender and credits.

Written from docs/WRITING_PROTOCOLS.md ("Per-launch message sizes"). A
decoder's all-reduce moves a different number of tokens at every step, and
the kernel takes the size as an argument (``MSG`` is each launch's own size);
the buffers are allocated once, for the largest message (``varying_sizes``).
The lines are LL's (``{data, flag, data, flag}``), in one slot per sender; a
credit from the receiver lets the sender reuse the slot. A launch smaller than
the one before leaves the tail of the slot as the larger launch wrote it, so
the flags must not repeat: the full 32-bit epoch of the launch never does.
``ll_sized_toggle.py`` keeps a 1-bit flag instead, correct at a fixed size.
"""
from __future__ import annotations

from dataclasses import replace

from protocols.ll import LL


class LLSized(LL):
    """LL with one slot per sender and credits, for launches of different message sizes."""

    name = "ll-sized"
    algorithms = ("one-shot",)
    varying_sizes = True
    default_params = {**LL.default_params, "depth": 1}

    def exchange(self, b, ex):
        # one slot: the sender waits for the receiver's credit before every reuse, lockstep or not
        super().exchange(b, replace(ex, lockstep=False))
