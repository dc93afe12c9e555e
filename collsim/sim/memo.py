"""Facts computed once per topology: cached on the topology object's identity, forgotten with it.

A scenario costs hundreds of rows on one loaded topology; what the simulator derives from it (routes' links,
the GPUs' generations and egress, whether the ranks are rotation-symmetric) does not change, so each fact
is computed the first time a row asks for it.

>>> from collsim.topology import load_topology
>>> counted = []
>>> facts = PerTopology()
>>> topo = load_topology("hgx-h100")
>>> [facts.get(topo, 8, lambda: counted.append(1) or "eight") for _ in range(3)], len(counted)
(['eight', 'eight', 'eight'], 1)
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Hashable

__all__ = ["PerTopology"]

_MISSING = object()


class PerTopology:
    """A cache of facts per topology and key, held only as long as the topology is (weak references)."""

    def __init__(self) -> None:
        self._tables: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

    def table(self, topology: Any) -> dict:
        """The facts kept for ``topology`` (a fresh dict, kept by no one, if it cannot be weakly referenced)."""
        try:
            return self._tables[topology]
        except KeyError:
            table: dict = {}
            self._tables[topology] = table
            return table
        except TypeError:
            return {}

    def get(self, topology: Any, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The fact ``key`` of ``topology``: ``compute()`` the first time it is asked for."""
        table = self.table(topology)
        found = table.get(key, _MISSING)
        if found is _MISSING:
            found = table[key] = compute()
        return found
