"""Line layouts: what one unit of a buffer is made of, and how it is stored.

Atomicity is the whole story of LL, LL128 and sentinel protocols, so a layout
states exactly how wide each store instruction is, how it splits into the
scalar elements the PTX model sees, and which words are data and which are
flags. Hardware assumptions (see :mod:`collsim.ir.assumptions`) may join
elements back into larger single-copy-atomic units; without them the verifier
treats every element as a separate access, as PTX ISA §8.2.4 says for vector
accesses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["WordRole", "Word", "LineLayout", "plain_layout", "counter_layout", "NARROW_WORD_BYTES"]


class WordRole(str, Enum):
    DATA = "data"
    FLAG = "flag"


#: Widths of a *narrow* word: a byte-wide or half-word element (a 1-byte flag in the last byte of a 32-bit
#: word, a bf16 element beside a 16-bit flag). The simulator costs them like any bytes, the verifier models
#: them and the wider loads over them (:attr:`LineLayout.load_bytes`: mixed-size accesses), the emitter
#: prints stores, loads and polls over them (docs/WRITING_PROTOCOLS.md section 20).
NARROW_WORD_BYTES = (1, 2)


@dataclass(frozen=True)
class Word:
    """One scalar word of a line: its role and width in bytes (4 or 8; 1 or 2 for a narrow word, see
    :data:`NARROW_WORD_BYTES`)."""

    role: WordRole
    nbytes: int

    def __post_init__(self) -> None:
        if self.nbytes not in (4, 8) + NARROW_WORD_BYTES:
            raise ValueError(f"a word is 4 or 8 bytes (1 or 2 for a narrow word), not {self.nbytes}")

    @property
    def narrow(self) -> bool:
        """Narrower than 32 bits: a byte-wide or half-word access."""
        return self.nbytes in NARROW_WORD_BYTES


@dataclass(frozen=True)
class LineLayout:
    """The layout of one line.

    Parameters
    ----------
    name : str
        e.g. ``"ll-16B"``.
    words : tuple of Word
        The line's words in address order.
    store_bytes : int
        Width of one store/load instruction (4, 8 or 16 bytes). A line wider
        than one instruction is written by ``lanes`` threads, one instruction
        each, lane ``i`` covering bytes ``[i*store_bytes, (i+1)*store_bytes)``.
    polled_words : tuple of int, optional
        Word indices a reader checks to decide the line has arrived: the
        flag words by default; a sentinel layout names the one data word it
        compares against the sentinel.
    load_bytes : int, optional
        The element width of the line's loads and polls when it differs from
        its words': 4 or 8 for a line of narrower words read as 32- or 64-bit
        elements (``ld.v4.u32`` over bf16 data and a 16-bit flag). A load
        element covers whole words; stores write each word as its own element.
        Where the two widths differ, a load element and a store element overlap
        without being the same access: not morally strong (PTX ISA, memory
        consistency model), so they race unless ordered, and the load may take
        its words from different stores. ``None``: every access is word by word.

    Examples
    --------
    >>> ll = LineLayout("ll", (Word(WordRole.DATA, 4), Word(WordRole.FLAG, 4)) * 2, 16)
    >>> ll.line_bytes, ll.data_bytes, ll.payload_efficiency, ll.lanes
    (16, 8, 0.5, 1)
    >>> ll.flag_words
    (1, 3)
    """

    name: str
    words: tuple[Word, ...]
    store_bytes: int
    polled_words: tuple[int, ...] | None = None
    # not printed: a program's text (and the simulator's cache key) stays as it was; only the verifier reads it
    load_bytes: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.store_bytes not in (4, 8, 16):
            raise ValueError(f"one store is 4, 8 or 16 bytes, not {self.store_bytes}")
        if self.line_bytes % self.store_bytes:
            raise ValueError(f"line of {self.line_bytes} B is not a whole number of {self.store_bytes}-B stores")
        offset = 0
        for word in self.words:
            if offset % word.nbytes:
                raise ValueError(f"word at byte {offset} of layout {self.name} is misaligned")
            offset += word.nbytes
        for index in self.polled_words or ():
            if not 0 <= index < len(self.words):
                raise ValueError(f"polled word {index} is outside layout {self.name}")
        if self.load_bytes is not None:
            starts = {self.word_offset(i) for i in range(len(self.words))}
            if (self.load_bytes not in (4, 8) or self.line_bytes % self.load_bytes
                    or any(offset not in starts for offset in range(0, self.line_bytes, self.load_bytes))
                    or any(word.nbytes > self.load_bytes for word in self.words)):
                raise ValueError(f"layout {self.name}: a load element of {self.load_bytes} B must be 4 or 8 bytes "
                                 "and cover whole words")

    def load_element(self, index: int) -> tuple[int, int]:
        """``(byte offset, bytes)`` of the load element that reads word ``index``: the word itself unless
        :attr:`load_bytes` makes loads wider than it."""
        offset = self.word_offset(index)
        if self.load_bytes is None:
            return offset, self.words[index].nbytes
        return offset - offset % self.load_bytes, self.load_bytes

    @property
    def narrow_words(self) -> tuple[int, ...]:
        """Indices of the words narrower than 32 bits (:attr:`Word.narrow`)."""
        return tuple(i for i, word in enumerate(self.words) if word.narrow)

    @property
    def line_bytes(self) -> int:
        return sum(word.nbytes for word in self.words)

    @property
    def data_bytes(self) -> int:
        return sum(word.nbytes for word in self.words if word.role is WordRole.DATA)

    @property
    def data_words(self) -> tuple[int, ...]:
        return tuple(i for i, word in enumerate(self.words) if word.role is WordRole.DATA)

    @property
    def flag_words(self) -> tuple[int, ...]:
        return tuple(i for i, word in enumerate(self.words) if word.role is WordRole.FLAG)

    @property
    def poll_words(self) -> tuple[int, ...]:
        """The words a poll on this layout inspects."""
        return self.polled_words if self.polled_words is not None else self.flag_words

    @property
    def payload_efficiency(self) -> float:
        return self.data_bytes / self.line_bytes

    @property
    def lanes(self) -> int:
        """Threads (one store instruction each) that write one line."""
        return self.line_bytes // self.store_bytes

    @property
    def data_word_bytes(self) -> int:
        """The width of the data words (a layout uses one width for data)."""
        widths = {self.words[i].nbytes for i in self.data_words}
        if len(widths) != 1:
            raise ValueError(f"layout {self.name} mixes data word widths {sorted(widths)}")
        return widths.pop()

    def word_offset(self, index: int) -> int:
        """Byte offset of word ``index`` within the line."""
        return sum(word.nbytes for word in self.words[:index])

    def lane_of(self, index: int) -> int:
        """The lane whose store instruction carries word ``index``."""
        return self.word_offset(index) // self.store_bytes


def plain_layout(word_bytes: int = 4, store_bytes: int = 16) -> LineLayout:
    """A line of data words only, one vector store wide (user buffers, staging)."""
    words = (Word(WordRole.DATA, word_bytes),) * (store_bytes // word_bytes)
    return LineLayout(f"plain-{store_bytes}B", words, store_bytes)


def counter_layout(nbytes: int = 8) -> LineLayout:
    """A single flag/counter word (barrier inboxes, step counters, credits)."""
    return LineLayout(f"counter-{nbytes}B", (Word(WordRole.FLAG, nbytes),), nbytes)
