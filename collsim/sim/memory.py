"""Symmetric memory as the simulator sees it: which writes land where, and when polls can see them.

Values are not simulated except where a poll's predicate needs them: the
word a poll inspects (a flag, a counter, or the sentinel-bearing data word).
Each :class:`Location` is one ``(buffer, owner rank, slot, region)`` and
keeps every write of this launch to its lines: the line range, the time it
becomes visible and what it does to the polled word (set a flag, add to a
counter, write data, write the sentinel).

A poll asks :meth:`Location.satisfied_at`: the earliest time at which every
polled line satisfies the predicate, judged from the writes visible by then
in the order they became visible. The predicate is the poll's own
:class:`~collsim.ir.ops.Predicate`, and :meth:`~collsim.ir.ops.Predicate.holds`
(the IR's one evaluator, which the verifier and emitter use too) decides
each polled word, user data and the sentinel included. Writes of earlier launches are complete
before this one starts (stream order), and every buffer starts from its
declared ``init`` (zero or the sentinel); a simulated launch is the first
use of its slots, which is how a steady-state launch sees them too: stale
epochs never equal the current one, credits of the previous launch are
already returned, and arrival counters of a slot start from their value
after its previous use.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable

from collsim.ir.ops import DATA_WORD, SENTINEL_WORD, Predicate

__all__ = ["DATA", "SENTINEL", "RMW_HOW", "Write", "Location", "Memory", "stored"]


#: The polled word holds user data (not the sentinel): the IR's symbolic word, which
#: :meth:`collsim.ir.ops.Predicate.holds` decides.
DATA = DATA_WORD
#: The polled word holds the sentinel pattern.
SENTINEL = SENTINEL_WORD

#: How a read-modify-write (by its operator's name) lands on the word a poll reads: ``add``, ``max`` or
#: ``set`` (exch, cas and min are taken as setting the word).
RMW_HOW = {"add": "add", "max": "max", "exch": "set", "cas": "set", "min": "set"}


def stored(op: Any) -> tuple[str | None, Any]:
    """``(how, value)`` a bound store leaves in its lines' polled words (``how`` None: it leaves them alone): the
    flag, when the layout's polled words are flags; else the fill pattern, or user data."""
    src = op.src
    if op.polls_flags:
        return ("set", op.flag) if op.flag is not None else (None, None)
    if src is None:
        return "set", op.flag
    if src[0] == "fill":
        return "set", (SENTINEL if src[1] == "sentinel" else 0)
    return "set", DATA


class Write:
    """One write to lines ``[lo, hi)`` of a location: ``how`` (``set``/``add``/``max``) ``value``, visible at ``visible``."""

    __slots__ = ("lo", "hi", "visible", "how", "value", "transfer")

    def __init__(self, lo: int, hi: int, visible: float, how: str, value: Any, transfer: Any) -> None:
        self.lo = lo
        self.hi = hi
        self.visible = visible
        self.how = how
        self.value = value
        self.transfer = transfer


def _apply(value: Any, how: str, operand: Any) -> Any:
    if how == "set":
        return operand
    if how == "cas":  # operand is (compare, swap): a failed CAS leaves the word as it is
        compare, swap = operand
        return swap if value == compare else value
    if not isinstance(value, int) or not isinstance(operand, int):
        return DATA
    if how == "add":
        return value + operand
    return max(value, operand)


class Location:
    """The writes to one ``(buffer, rank, slot, region)`` and the polls waiting on it.

    Writes are kept in the order they become visible, with the polled word's value after each one
    (computed lazily), so a poll on a location that keeps being written (a credit or step counter over
    a long ring) costs a bisection, not a pass over its history.
    """

    __slots__ = ("key", "init", "writes", "visibles", "values", "range", "waiters")

    def __init__(self, key: tuple, init: Any) -> None:
        self.key = key
        self.init = init
        self.writes: list[Write] = []     # in visible order
        self.visibles: list[float] = []   # their visible times
        self.values: list[Any] = [init]   # values[i]: the polled word after the first i writes (a prefix)
        self.range: tuple[int, int] | None = None  # the line range every write covers, if they all agree
        self.waiters: list[Callable[[Write], None]] = []

    def add(self, write: Write) -> None:
        """Record ``write`` and tell every waiting poll (``waiter(write)``)."""
        index = bisect_right(self.visibles, write.visible)
        self.writes.insert(index, write)
        self.visibles.insert(index, write.visible)
        del self.values[index + 1:]
        span = (write.lo, write.hi)
        if len(self.writes) == 1:
            self.range = span
        elif self.range != span:
            self.range = None
        if self.waiters:
            for written in list(self.waiters):
                written(write)

    def _value(self, count: int) -> Any:
        """The polled word after the first ``count`` writes (all covering the same lines)."""
        values = self.values
        while len(values) <= count:
            w = self.writes[len(values) - 1]
            values.append(_apply(values[-1], w.how, w.value))
        return values[count]

    def value_before(self, transfer: Any) -> Any:
        """The word just before the write that ``transfer`` made lands (in visible order), when every write
        covers the same lines (a counter), else None: what a fetch-and-op returned."""
        if self.range is None:
            return None
        for index, write in enumerate(self.writes):
            if write.transfer is transfer:
                return self._value(index)
        return None

    def value_at(self, lo: int, lines: int, time: float) -> Any:
        """The polled word of lines ``[lo, lo + lines)`` at ``time`` when every write covers them all (a counter
        or flag location), else None."""
        span = self.range
        if not self.writes:
            return self.init
        if span is None or span[0] > lo or span[1] < lo + lines:
            return None
        return self._value(bisect_right(self.visibles, time))

    def satisfied_by_last(self, lo: int, hi: int, pred: Predicate, after: float) -> tuple[float, Write] | None | bool:
        """:meth:`satisfied_at` after one write was added, when the writes before it never satisfied ``pred``
        from ``after`` on; ``False`` where this shortcut does not apply (call :meth:`satisfied_at`).

        It applies when the new write became visible after ``after`` and after every other write, and
        every write covers lines ``[lo, hi)``: the values before it are unchanged (none satisfied), so the
        poll is satisfied from the new write on or not at all. A counter that n ranks add to, polled until
        it reaches n, is then one check per write instead of a pass over the writes since ``after``.
        """
        writes, span = self.writes, self.range
        last = writes[-1] if writes else None
        if (last is None or last.visible <= after or span is None or span[0] > lo or span[1] < hi
                or (len(writes) > 1 and self.visibles[-2] > last.visible)):
            return False
        return (last.visible, last) if pred.holds(self._value(len(writes))) else None

    def satisfied_at(self, lo: int, hi: int, pred: Predicate, after: float) -> tuple[float, Write | None] | None:
        """Earliest time ``>= after`` at which lines ``[lo, hi)`` all satisfy ``pred``, with the write that made it so.

        ``None`` when the writes recorded so far never satisfy it (the poll
        must wait for more writes).
        """
        writes = self.writes
        if not writes:
            return (after, None) if pred.holds(self.init) else None
        span = self.range
        if span is not None and span[0] <= lo and span[1] >= hi:  # every write covers all polled lines
            count = bisect_right(self.visibles, after)
            if pred.holds(self._value(count)):
                # the write since which it has held (None: since the start), not merely the last one by then:
                # a later write that kept it true did not decide the poll
                while count and pred.holds(self._value(count - 1)):
                    count -= 1
                return after, (writes[count - 1] if count else None)
            for index in range(count, len(writes)):
                if pred.holds(self._value(index + 1)):
                    return writes[index].visible, writes[index]
            return None
        return self._satisfied_general(lo, hi, pred, after)

    def _satisfied_general(self, lo: int, hi: int, pred: Predicate, after: float) -> tuple[float, Write | None] | None:
        relevant = [w for w in self.writes if w.lo < hi and w.hi > lo]  # already in visible order
        if not relevant:
            return (after, None) if pred.holds(self.init) else None
        cuts = sorted({lo, hi} | {w.lo for w in relevant if lo < w.lo < hi} | {w.hi for w in relevant if lo < w.hi < hi})
        segments = list(zip(cuts, cuts[1:]))
        candidates = [after] + [w.visible for w in relevant if w.visible > after]
        for time in candidates:
            last: Write | None = None
            ok = True
            for a, b in segments:
                value = self.init
                for w in relevant:
                    if w.visible > time:
                        break
                    if w.lo <= a and w.hi >= b:
                        value = _apply(value, w.how, w.value)
                        if last is None or w.visible > last.visible:
                            last = w
                if not pred.holds(value):
                    ok = False
                    break
            if ok:
                return time, last
        return None


class Memory:
    """Every location of every rank's symmetric buffers, created on first use."""

    __slots__ = ("locations", "inits")

    def __init__(self, inits: dict[str, Any]) -> None:
        self.locations: dict[tuple, Location] = {}
        self.inits = inits

    def location(self, key: tuple) -> Location:
        loc = self.locations.get(key)
        if loc is None:
            loc = self.locations[key] = Location(key, self.inits[key[0]])
        return loc
