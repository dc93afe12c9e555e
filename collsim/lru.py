"""A bounded, thread-safe memo: values built on first use, the least recently used dropped first.

:func:`functools.lru_cache` keys a cache on a function's arguments; the caches
here are keyed on something derived from them (a topology's content digest, a
protocol's identity) while the value is built from the arguments themselves,
which ``lru_cache`` cannot express. One small class, so every such cache in
collsim has a bound and one behaviour.

>>> built = []
>>> squares = LRUCache(maxsize=2)
>>> [squares.get(n, lambda n=n: built.append(n) or n * n) for n in (2, 3, 2, 4, 3)]
[4, 9, 4, 16, 9]
>>> built, len(squares)
([2, 3, 4, 3], 2)
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LRUCache"]

V = TypeVar("V")


class LRUCache(Generic[V]):
    """At most ``maxsize`` values, each built once by :meth:`get` and kept until it is the least recently used.

    Parameters
    ----------
    maxsize : int
        How many values to keep (at least 1).

    Notes
    -----
    A value is built while the cache's lock is held, so two threads asking for
    the same missing key build it once; a build may itself use the cache (the
    lock is re-entrant).
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"an LRUCache holds at least one value, got maxsize={maxsize}")
        self.maxsize = maxsize
        self._values: "OrderedDict[Hashable, V]" = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value kept under ``key``, built by ``build()`` (and kept) when there is none."""
        with self._lock:
            try:
                self._values.move_to_end(key)
                return self._values[key]
            except KeyError:
                pass
            value = build()
            self._values[key] = value
            while len(self._values) > self.maxsize:
                self._values.popitem(last=False)
            return value

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._values.clear()

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values
