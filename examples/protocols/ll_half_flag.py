"""ll-half-flag: LL lines of seven bf16 elements and a 16-bit epoch in one 16-byte store.

Written from docs/WRITING_PROTOCOLS.md ("Byte-wide and mixed-size accesses").
The flag is a half-word: it shares the line's last 32-bit word with the
seventh bf16 element. Writer and reader access the line with the same
elements (16-bit words, one 16-byte volatile store and load), so every load
element is exactly a store element and the 16-byte store assumption makes the
line arrive whole: it verifies. Reading it as 32-bit words instead is
``ll_half_flag_word_read.py`` (a mixed-size race). The simulator costs it
(bytes on the wire, one store per line); the emitter prints each line as one
packed ``st.volatile.global.b128`` and polls it with ``ld.volatile.global.b128``
(PTX has no 16-byte vector of 16-bit elements; the assumption makes the
instruction one access either way).
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
