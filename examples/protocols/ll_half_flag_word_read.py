"""ll-half-flag-word-read: ll_half_flag.py whose reader loads the line as 32-bit words.

The writer stores the line as 16-bit elements (seven bf16 values and the
16-bit epoch, one ``st.volatile.v8.b16``); the reader polls it with
``ld.volatile.v4.u32``, so its last 32-bit element covers the seventh value
and the flag. The PTX ISA makes two accesses morally strong only when they
overlap completely: a 32-bit load over two 16-bit stores is morally strong
with neither, so it races with them, and the 16-byte atomicity the protocol
assumes is an atomicity of stores and loads of the same elements. The
verifier reports the data race; the fix is to load the line with the
writer's element width (``ll_half_flag.py``).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("ll_half_flag.py"))))


class LLHalfFlagWordRead(_Base):
    """ll-half-flag read as 32-bit words: each load element spans a bf16 value and the 16-bit flag."""

    name = "ll-half-flag-word-read"
    data_layout = replace(_Base.data_layout, name="ll-bf16-half-flag-u32-loads", load_bytes=4)
    expected_violation = "data-race"
