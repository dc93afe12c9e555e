"""The simulator's caches, all bounded: facts per topology, and a least-recently-used table for the rest.

A scenario costs hundreds of rows on one loaded topology; what the simulator derives from it (routes' links,
the GPUs' generations and egress, whether the ranks are rotation-symmetric) does not change, so each fact
is computed the first time a row asks for it (:class:`PerTopology`, held only as long as the topology is).
Programs per protocol and algorithm, resolved cost sets and simulated kernels are kept in
:class:`LruCache` tables of a fixed size; :func:`clear_caches` empties every one (for benchmarks that time
cold runs).

>>> from collsim.topology import load_topology
>>> counted = []
>>> facts = PerTopology()
>>> topo = load_topology("hgx-h100")
>>> [facts.get(topo, 8, lambda: counted.append(1) or "eight") for _ in range(3)], len(counted)
(['eight', 'eight', 'eight'], 1)
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable

__all__ = ["PerTopology", "LruCache", "clear_caches"]

_MISSING = object()


#: Every cache made here, so :func:`clear_caches` can empty them.
_ALL: "weakref.WeakSet[Any]" = weakref.WeakSet()


class PerTopology:
    """A cache of facts per topology and key, held only as long as the topology is (weak references)."""

    def __init__(self) -> None:
        self._tables: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
        _ALL.add(self)

    def clear(self) -> None:
        self._tables.clear()

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


class LruCache:
    """At most ``maxsize`` values by key; the least recently used goes first.

    >>> cache = LruCache(2)
    >>> [cache.get(k, lambda k=k: k * 10) for k in (1, 2, 1, 3)], sorted(cache.keys())
    ([10, 20, 10, 30], [1, 3])
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"a cache holds at least one value, not {maxsize}")
        self.maxsize = maxsize
        self._table: "OrderedDict[Hashable, Any]" = OrderedDict()
        _ALL.add(self)

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of ``key``: ``compute()`` when it is not kept (then kept, the oldest value dropped)."""
        table = self._table
        found = table.get(key, _MISSING)
        if found is _MISSING:
            found = table[key] = compute()
            if len(table) > self.maxsize:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        return found

    def keys(self) -> list[Hashable]:
        return list(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        self._table.clear()


def clear_caches() -> None:
    """Empty every cache of the simulator (programs, cost sets, kernels, per-topology facts)."""
    for cache in list(_ALL):
        cache.clear()
