"""Rank 0 of a one-rank simulation: the rank that also makes every other rank's writes where rank 0 polls.

:mod:`collsim.sim.symmetry` decides when every rank provably does what rank 0
does and computes the :class:`~collsim.sim.symmetry.Fold`; this module is the
rank process that uses it. Each write rank 0 makes is also recorded, at the
same times, for every other rank at the same position of its program, in the
locations rank 0 polls (:attr:`Fold.mirrors`); a multimem write's copy to rank
``k`` stands for every rank ``r``'s copy to ``k + r`` (:attr:`Fold.multicast_mirrors`).
"""
from __future__ import annotations

from typing import Any

from collsim.sim.memory import Write
from collsim.sim.rank import Rank
from collsim.sim.symmetry import Fold, check_commute

__all__ = ["FoldedRank"]


class FoldedRank(Rank):
    """Rank 0 of a one-rank simulation (see the module docstring).

    Raises :class:`~collsim.sim.symmetry.SimultaneousWrites` when a location rank 0 polls gets two writes
    that do not commute at the same time: a full simulation records them in the order its ranks run, this
    one in another.
    """

    def __init__(self, sim: Any, items: list[Any], fold: Fold) -> None:
        super().__init__(sim, 0, items)
        self.mirrors = fold.mirrors
        self.multicast_mirrors = fold.multicast_mirrors
        self.polled = fold.polled

    def _issued(self, th: Any, tr: Any, land: tuple | None) -> None:
        super()._issued(th, tr, land)
        if land is None:
            return
        location, _, lines, how, value = land
        if location.key in self.polled:
            check_commute(location, tr.visible)
        others = self.mirrors.get(tr.label)
        if others is None and self.multicast_mirrors:
            copies = self.multicast_mirrors.get(tr.label)
            others = copies[tr.peer] if copies else None
        if others:
            at = self.memory.location
            for key, line in others:
                location = at(key)
                location.add(Write(line, line + lines, tr.visible, how, value, tr))
                check_commute(location, tr.visible)
