"""ll-half-flag: LL lines of seven bf16 elements and a 16-bit epoch in one 16-byte store.

Written from docs/WRITING_PROTOCOLS.md ("Byte-wide and mixed-size accesses").
The flag is a half-word: it shares the line's last 32-bit word with the
seventh bf16 element, so a reader that loads the line as 32-bit words
(``ld.volatile.v4.u32``) reads the flag and that element in one access, and a
writer that stored them apart would let that load take bytes from two stores.
The simulator costs it (bytes on the wire, one store per line); the verifier
and the emitter refuse it, naming the operation, until byte-wide and
mixed-size accesses are modelled.
"""
from __future__ import annotations

from collsim.ir import LineLayout, Word, WordRole

from protocols.ll import FlaggedLines

HALF_LINE = LineLayout("ll-bf16-half-flag", (Word(WordRole.DATA, 2),) * 7 + (Word(WordRole.FLAG, 2),), store_bytes=16)


class LLHalfFlag(FlaggedLines):
    """LL with 16-byte lines ``{7 x bf16, 16-bit epoch}``, one volatile vector store per line."""

    name = "ll-half-flag"
    algorithms = ("one-shot",)
    data_layout = HALF_LINE
    assumptions = ("store-16B-untorn",)
    analytic_family = "ll"
    default_params = {**FlaggedLines.default_params, "flag_bits": 16}
