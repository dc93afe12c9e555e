"""Which elements of a line the verifier models, and which of them are single-copy atomic together.

Without an assumption every element of a vector access is its own access
(PTX ISA §8.2.4). A declared hardware assumption (:mod:`collsim.ir.assumptions`)
joins elements into atomic groups: aligned ``granule_bytes`` runs of one store
instruction, or of the whole line for ``across_lanes``.

A line wider than ``max_lanes`` store lanes keeps its first ``max_lanes - 1``
lanes and its last lane (where LL128 puts the flag); the dropped lanes carry
data only and are symmetric copies of the kept data lanes.
"""
from __future__ import annotations

from typing import Any, Iterable

from networkx.utils import UnionFind

from collsim.ir.assumptions import Assumption
from collsim.ir.layout import LineLayout

__all__ = ["kept_words", "atomic_groups"]


def kept_words(layout: LineLayout, max_lanes: int) -> tuple[tuple[int, ...], str | None]:
    """Word indices modelled for ``layout`` and a note when lanes were dropped.

    >>> from collsim.ir.layout import plain_layout
    >>> kept_words(plain_layout(), 2)
    ((0, 1, 2, 3), None)
    """
    lanes = layout.lanes
    if lanes <= max_lanes:
        return tuple(range(len(layout.words))), None
    kept_lanes = set(range(max_lanes - 1)) | {lanes - 1}
    words = tuple(i for i in range(len(layout.words)) if layout.lane_of(i) in kept_lanes)
    note = (f"layout {layout.name}: {max_lanes} of {lanes} lanes modelled (lanes "
            f"{', '.join(str(l) for l in sorted(kept_lanes))}); the dropped lanes carry data only and are "
            f"symmetric to the kept data lanes, and the flag stays in the last lane")
    return words, note


def atomic_groups(layout: LineLayout, words: Iterable[int], assumptions: list[Assumption]) -> list[list[int]]:
    """Partition ``words`` (of one line access) into the atomic granules the assumptions declare.

    Only groups of two or more words are returned, each in word order, ordered by their first word.

    >>> from collsim.ir.assumptions import get_assumption
    >>> from collsim.ir.layout import plain_layout
    >>> atomic_groups(plain_layout(), range(4), [get_assumption("vector-8B-pairs-untorn")])
    [[0, 1], [2, 3]]
    """
    words = list(words)
    granules = UnionFind(words)
    for a in assumptions:
        if not a.is_granule:  # an ordering assumption (host-tso) joins nothing
            continue
        by_key: dict[Any, int] = {}
        for w in words:
            offset = layout.word_offset(w)
            if a.across_lanes:
                key = offset // a.granule_bytes
            else:
                # one store instruction: granules never cross a lane's store
                key = (layout.lane_of(w), (offset % layout.store_bytes) // a.granule_bytes)
            if key in by_key:
                granules.union(w, by_key[key])
            else:
                by_key[key] = w
    groups: dict[Any, list[int]] = {}
    for w in words:
        groups.setdefault(granules[w], []).append(w)
    return [g for g in groups.values() if len(g) > 1]
