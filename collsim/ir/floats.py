"""Floating-point meaning of a 32-bit data word: which encodings user data can hold, and how a poll compares.

A sentinel protocol polls a data word until it differs from a sentinel pattern. Whether that is
sound depends on two facts the protocol states in the IR:

* the **comparison** (:class:`Compare`): ``bitwise`` compares the word as an unsigned integer
  (what correct sentinel kernels do); ``ieee`` compares it as a float, where ``-0.0 == +0.0`` and
  a NaN equals nothing, itself included;
* the **encoding** of the data (:class:`WordEncoding`): the element type (one ``f32``, or a pair of
  ``bf16`` viewed as one 32-bit word) and which bit patterns the producer can write: finite values
  only, or NaN payloads and infinities as well, and whether subnormals are flushed to zero.

The word's value is its bit pattern, an integer in ``[0, 2**32)``. :func:`ieee_equal` is written
with ``==`` and ``|`` only, so it evaluates a Python ``int`` and a z3 integer term alike;
:meth:`collsim.ir.ops.NotEqual.holds` is the one evaluation every consumer uses.
:meth:`WordEncoding.lane_ranges` and :meth:`WordEncoding.sum_lane_ranges` are the sets of bit patterns, per lane, that an input and a
reduction (a float sum of inputs) can hold; the verifier encodes them.

>>> enc = WordEncoding("f32", FloatInputs.FINITE)
>>> enc.admits(0x3F800000), enc.admits(0x7FC00000), enc.admits(0x00000001)
(True, False, True)
>>> WordEncoding("f32", FloatInputs.FINITE, subnormals_flushed=True).admits(0x00000001)
False
>>> ieee_equal(0x00000000, 0x80000000), ieee_equal(0x7FC00000, 0x7FC00000), ieee_equal(5, 5)
(True, False, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["Compare", "FloatInputs", "WordEncoding", "ieee_equal", "is_nan32", "F32_NEG_ZERO"]

#: the sign bit of an f32: ``-0.0``'s bit pattern
F32_NEG_ZERO = 0x80000000


class Compare(str, Enum):
    """How a poll compares a word against its sentinel: as an integer, or as an IEEE float."""

    BITWISE = "bitwise"
    IEEE = "ieee"

    def __repr__(self) -> str:
        return repr(self.value)


class FloatInputs(str, Enum):
    """Which encodings a producer can write: finite values only, or any pattern (NaN payloads, infinities)."""

    FINITE = "finite"
    NAN_PAYLOADS = "nan-payloads"

    def __repr__(self) -> str:
        return repr(self.value)


def is_nan32(bits: int) -> bool:
    """Whether the f32 pattern ``bits`` is a NaN (exponent all ones, mantissa not zero).

    >>> is_nan32(0xFFFAFFFA), is_nan32(0x7F800000)
    (True, False)
    """
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0


def ieee_equal(word: Any, sentinel: int) -> Any:
    """``word == sentinel`` as IEEE f32 equality, for a constant ``sentinel`` and a ``word`` in ``[0, 2**32)``.

    A NaN sentinel equals nothing (the result is ``False`` whatever the word); ``+0.0`` and
    ``-0.0`` equal each other; any other sentinel equals only its own pattern. Only ``==`` and
    ``|`` are used, so a z3 term gives a z3 formula.
    """
    if is_nan32(sentinel):
        return False
    if sentinel in (0, F32_NEG_ZERO):
        return (word == 0) | (word == F32_NEG_ZERO)
    return word == sentinel


@dataclass(frozen=True)
class _Lane:
    bits: int
    exp_mask: int
    man_bits: int

    @property
    def sign(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def inf(self) -> int:
        return self.exp_mask

    def ranges(self, finite: bool, flushed: bool) -> tuple[tuple[int, int], ...]:
        """Inclusive ranges of the lane's patterns: both signs; finite or every pattern; subnormals or not."""
        top = self.inf - 1 if finite else self.sign - 1
        low = 1 << self.man_bits  # the smallest normal
        half = ((0, 0), (low, top)) if flushed else ((0, top),)
        return tuple(r for sign in (0, self.sign) for r in ((lo + sign, hi + sign) for lo, hi in half))


_F32 = _Lane(32, 0x7F800000, 23)
_BF16 = _Lane(16, 0x7F80, 7)
_LANES = {"f32": (_F32, 1), "bf16x2": (_BF16, 2)}


@dataclass(frozen=True)
class WordEncoding:
    """The floating-point facts of a protocol's data word.

    Parameters
    ----------
    element : {"f32", "bf16x2"}
        One f32 per 32-bit word, or two bf16 values (low half first) viewed as one 32-bit word.
    inputs : FloatInputs
        ``finite``: the producer writes finite values only (no NaN, no infinity);
        ``nan-payloads``: any pattern, NaNs with any payload and infinities included.
    subnormals_flushed : bool
        The producer flushes subnormals to zero (``-ftz``), so inputs hold none. A reduction
        is not assumed to flush: a sum of normals may still be subnormal.
    """

    element: str = "f32"
    inputs: FloatInputs = FloatInputs.FINITE
    subnormals_flushed: bool = False

    def __post_init__(self) -> None:
        if self.element not in _LANES:
            raise ValueError(f"word encoding element is one of {', '.join(_LANES)}, not {self.element!r}")
        object.__setattr__(self, "inputs", FloatInputs(self.inputs))

    @property
    def lanes(self) -> int:
        """How many float lanes share the 32-bit word."""
        return _LANES[self.element][1]

    @property
    def lane_bits(self) -> int:
        return _LANES[self.element][0].bits

    def lane_ranges(self) -> tuple[tuple[int, int], ...]:
        """The patterns one lane of an input word can hold, as inclusive ranges."""
        lane = _LANES[self.element][0]
        return lane.ranges(self.inputs is FloatInputs.FINITE, self.subnormals_flushed)

    def sum_lane_ranges(self) -> tuple[tuple[int, int], ...]:
        """The patterns one lane of a float sum of inputs can hold.

        Any finite value, either zero (``x + -x`` is ``+0.0``; ``-0.0 + -0.0`` is ``-0.0``),
        subnormals, and the infinities (overflow). A NaN needs a NaN input or ``inf + -inf``;
        finite inputs reach that only through two partial sums that overflowed with opposite
        signs, so a sum admits every pattern: the sentinel's exclusion from sums stays the
        protocol's stated promise (:attr:`collsim.ir.protocol.DataDomain.forbidden_word`).
        """
        lane = _LANES[self.element][0]
        return lane.ranges(False, False)

    def admits(self, word: int) -> bool:
        """Whether an input word can hold the pattern ``word``."""
        bits = self.lane_bits
        lanes = [(word >> (bits * k)) & ((1 << bits) - 1) for k in range(self.lanes)]
        return all(any(lo <= v <= hi for lo, hi in self.lane_ranges()) for v in lanes)
