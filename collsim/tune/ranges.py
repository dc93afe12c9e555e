"""Byte ranges from decisions taken at simulated (or measured) sizes.

A decision is known at the sizes that were run; a deployable table needs
contiguous byte ranges. Consecutive sizes with the same decision make one
range. Between the last size of one range (``lo``, where choice *a* leads)
and the first of the next (``hi``, choice *b*), each choice's latency is
taken as linear in the message size — the α + n/β form of every protocol
within one regime — and the boundary sits where the two lines cross: *a*
keeps every byte count up to the crossover, *b* takes the rest. When *b* is
no slower than *a* already at ``lo`` the boundary is ``lo`` itself (a
range never claims a size it did not win, or tie, at), and when *a* is still
no slower at ``hi`` it is ``hi - 1``. When the two leaders are the same
choice, or a latency is missing, the boundary is the geometric midpoint
``floor(sqrt(lo * hi))`` (sizes are swept in powers). Either way every run
size stays in the range that decided it.

The first range starts at 0 bytes (a message smaller than the smallest run
size costs what the smallest does: latency is flat there); the last ends at
the largest run size, and nothing is said beyond it.

>>> lat = {("a", 0): 2.0, ("a", 1): 8.0, ("b", 0): 4.0, ("b", 1): 6.0}
>>> boundary(1000, 2000, lat[("a", 0)], lat[("a", 1)], lat[("b", 0)], lat[("b", 1)])
(1500, 'crossover')
>>> boundary(1024, 4096, None, None, None, None)
(2048, 'midpoint')
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

__all__ = ["Span", "boundary", "geometric_midpoint", "spans"]


def geometric_midpoint(lo: int, hi: int) -> int:
    """``floor(sqrt(lo * hi))``, kept within ``[lo, hi - 1]``.

    >>> geometric_midpoint(8, 16), geometric_midpoint(1, 2)
    (11, 1)
    """
    mid = math.isqrt(lo * hi)
    return min(max(mid, lo), hi - 1)


def boundary(
    lo: int, hi: int, a_lo: float | None, a_hi: float | None, b_lo: float | None, b_hi: float | None
) -> tuple[int, str]:
    """The last byte count choice *a* keeps before *b* takes over, and the rule that placed it.

    ``a_lo``, ``a_hi`` are *a*'s latencies at ``lo`` and ``hi`` (``b_*``
    likewise); ``None`` where not known. Returns ``(max_bytes, rule)`` with
    ``lo <= max_bytes < hi`` and rule ``crossover`` or ``midpoint``.
    """
    if hi <= lo:
        raise ValueError(f"sizes out of order: {lo} then {hi}")
    if None in (a_lo, a_hi, b_lo, b_hi):
        return geometric_midpoint(lo, hi), "midpoint"
    d_lo, d_hi = a_lo - b_lo, a_hi - b_hi  # type: ignore[operator] - None excluded above
    if d_lo >= 0:
        return lo, "crossover"
    if d_hi <= 0:
        return hi - 1, "crossover"
    x = lo + (hi - lo) * (-d_lo) / (d_hi - d_lo)
    return min(max(math.floor(x), lo), hi - 1), "crossover"


@dataclass(frozen=True)
class Span:
    """One range: points ``first .. last`` (indices) decided ``key``, covering ``min_bytes .. max_bytes``.

    ``rule`` says how ``max_bytes`` was placed: ``crossover``, ``midpoint``,
    or ``end`` (the largest size run).
    """

    key: Hashable
    first: int
    last: int
    min_bytes: int
    max_bytes: int
    rule: str


def spans(
    sizes: Sequence[int],
    keys: Sequence[Hashable],
    leaders: Sequence[Hashable],
    latency: Callable[[Hashable, int], float | None],
) -> list[Span]:
    """Merge consecutive points with equal keys into ranges covering ``0 .. sizes[-1]``.

    Parameters
    ----------
    sizes : sequence of int
        The run sizes, increasing.
    keys : sequence
        The decision at each size (equal keys merge).
    leaders : sequence
        The choice that leads the decision at each size (for the crossover).
    latency : callable
        ``latency(choice, index)``: a choice's latency at ``sizes[index]``, or None.
    """
    if not sizes:
        return []
    if len(keys) != len(sizes) or len(leaders) != len(sizes):
        raise ValueError("one key and one leader per size")
    runs: list[tuple[Hashable, int, int]] = []
    for i, key in enumerate(keys):
        if runs and runs[-1][0] == key:
            runs[-1] = (key, runs[-1][1], i)
        else:
            runs.append((key, i, i))
    out: list[Span] = []
    start = 0
    for k, (key, first, last) in enumerate(runs):
        if k + 1 < len(runs):
            nxt = last + 1
            a, b = leaders[last], leaders[nxt]
            if a == b:
                end, rule = geometric_midpoint(sizes[last], sizes[nxt]), "midpoint"
            else:
                end, rule = boundary(sizes[last], sizes[nxt], latency(a, last), latency(a, nxt),
                                     latency(b, last), latency(b, nxt))
        else:
            end, rule = int(sizes[last]), "end"
        out.append(Span(key, first, last, start, int(end), rule))
        start = int(end) + 1
    return out
