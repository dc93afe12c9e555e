"""ll-sized-toggle: ll_sized.py with a flag that toggles 1, 0, 1, ... (``flag_bits=1``).

At a fixed message size this is correct: every launch rewrites every flag of
the slot, so a flag holds the previous launch's value until this launch's
store replaces it, and the credit keeps the sender from overwriting unread
lines. When the size changes it is not: after a small launch, the lines
beyond it still hold the flag of the launch before, and a larger launch two
steps later expects that very value (the toggle has come round): its receiver
takes those lines for this launch's data (a stale read). Fresh memory is
the same trap: a first small launch leaves the tail at 0, the value a second,
larger launch waits for.
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("ll_sized.py"))))


class LLSizedToggle(_Base):
    """ll-sized whose epoch flag is one bit wide: right at one size, stale when the size changes."""

    name = "ll-sized-toggle"
    default_params = {**_Base.default_params, "flag_bits": 1}
    expected_violation = "stale-read"
