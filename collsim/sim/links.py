"""Bandwidth resources and transfers: directed links, issue engines, HBM.

Every resource that moves bytes is a :class:`Pipe` with a capacity in GB/s:
each directed link of a route (``(u, v)`` from the topology; ``(v, u)`` is a
separate pipe), each rank's store and load *engines* (its CTAs together:
``channels × per-CTA bandwidth``) and each rank's HBM.

A transfer of ``n`` bytes over pipes ``p1..pk`` starting at ``t`` is costed
as a whole, with no per-byte or per-line events, by a fluid rule: every
pipe records the rate already allocated to transfers over time; the new
transfer runs, from ``t`` on, at the largest rate every one of its pipes
still has free (and at most ``max_rate``, its share of the engine that
issues it), segment by segment as those allocations change, until its
bytes are through, and then adds its own rate profile to each pipe. So a
transfer never runs faster than its slowest pipe; transfers that share a
pipe share its capacity (the one placed earlier keeps the rate it was
given, the later one gets what is left, never less than zero and never
more than the pipe); a pipe with spare capacity (a 370 GB/s port behind a
70 GB/s CTA) keeps the rest for others; and every pipe sees a transfer at
the same rate at the same time. Placement order does not have to be time
order. The makespan of a set of transfers equals a fair-sharing fluid
model's; individual finish times favour the transfer placed first.

>>> link = Pipe("gpu0->nvfabric", 100.0)   # 100 GB/s = 100 000 B/us
>>> place((link,), 100_000, start=0.0)
1.0
>>> place((link,), 100_000, start=0.5)    # gets the link only when the first is done
2.0
>>> slow = Pipe("cta", 50.0)
>>> place((slow, link), 100_000, start=3.0), place((link,), 100_000, start=3.0)  # the second uses what is left
(5.0, 5.0)
"""
from __future__ import annotations

from bisect import bisect_right

__all__ = ["Pipe", "WatchedPipe", "FoldAbandoned", "SharedPipeSaturated", "Transfer", "place", "reserve"]

_INF = float("inf")


class Pipe:
    """A bandwidth resource of ``gbps`` GB/s (10^3 bytes per µs) and the rate allocated on it over time.

    ``times[i]`` starts a segment on which ``used[i]`` bytes/µs are allocated;
    the last segment extends to infinity and is always idle. ``log``, when a list, gets each profile
    allocated on the pipe (so it can be allocated again: a fold's stand-in for several ranks' links).
    """

    __slots__ = ("name", "gbps", "rate", "times", "used", "log")

    def __init__(self, name: str, gbps: float) -> None:
        if not gbps > 0:
            raise ValueError(f"pipe {name}: capacity must be positive, got {gbps!r} GB/s")
        self.name = name
        self.gbps = float(gbps)
        self.rate = float(gbps) * 1e3  # bytes per µs
        self.times = [0.0]
        self.used = [0.0]
        self.log: list | None = None

    @property
    def free_at(self) -> float:
        """When the last allocation on this pipe ends."""
        return self.times[-1]

    def add_profile(self, profile: list[tuple[float, float, float]] | tuple) -> None:
        """Allocate each ``(a, b, rate)`` of ``profile`` in turn (what :func:`place` found for a transfer)."""
        times, used = self.times, self.used
        same = 1e-6 * self.rate
        if self.log is not None:
            self.log.append(profile)
        for a, b, rate in profile:
            if b <= a or rate <= 0:
                continue
            if times[-1] <= a:  # from the last breakpoint on: append what inserting would make
                idle = used[-1]
                if times[-1] != a:
                    times.append(a)
                    used.append(idle + rate)
                else:
                    used[-1] = idle + rate
                i = len(times) - 1
                times.append(b)
                used.append(idle)
                j = i + 1
            else:
                i = bisect_right(times, a) - 1  # the breakpoints at a and b, created if needed
                if i < 0 or times[i] != a:
                    i += 1
                    times.insert(i, a)
                    used.insert(i, used[i - 1] if i > 0 else 0.0)
                j = bisect_right(times, b, i) - 1
                if times[j] != b:
                    j += 1
                    times.insert(j, b)
                    used.insert(j, used[j - 1])
                for k in range(i, j):
                    used[k] += rate
            # Merge neighbours that now carry the same rate, so runs of full segments are skipped in one step.
            k = i if i > 1 else 1
            end = j + 1 if j + 1 < len(times) else len(times)
            while k < end:
                if abs(used[k] - used[k - 1]) <= same:
                    del times[k]
                    del used[k]
                    end -= 1
                else:
                    k += 1
            if len(times) > 96:  # forget the distant past
                del times[:32]
                del used[:32]

    def __repr__(self) -> str:
        return f"Pipe({self.name!r}, {self.gbps} GB/s, allocated until {self.free_at:.3f} us)"


def place(pipes: tuple[Pipe, ...] | list[Pipe], nbytes: float, start: float, max_rate: float = _INF) -> float:
    """Run ``nbytes`` through all ``pipes`` from ``start`` at the rate they have left (see the module
    docstring); allocate it and return when the last byte is through (µs)."""
    if nbytes <= 0 or not pipes:
        return start
    rate = max_rate
    for pipe in pipes:  # the common case: every pipe is idle from start on
        if pipe.times[-1] > start:
            break
        if pipe.rate < rate:
            rate = pipe.rate
    else:
        end = start + nbytes / rate
        for pipe in pipes:
            times, used = pipe.times, pipe.used
            if pipe.log is not None:
                pipe.log.append(((start, end, rate),))
            if times[-1] == start:
                used[-1] = rate
            else:
                times.append(start)
                used.append(rate)
            times.append(end)
            used.append(0.0)
            if len(times) > 96:
                del times[:32]
                del used[:32]
        return end
    t, left = start, float(nbytes)
    profile: list[tuple[float, float, float]] = []
    # A pipe with nothing allocated after start offers the same rate throughout: a cap. The others are
    # walked segment by segment, each with a cursor:
    # [times, used, capacity, index of the segment holding t, index of its last segment].
    cap = max_rate
    cursors = []
    watching: list[bool] | None = None  # per cursor, whether its pipe is a WatchedPipe (None: none is)
    for pipe in pipes:
        times = pipe.times
        if times[-1] <= start:
            free = pipe.rate - pipe.used[-1]
            if free < cap:
                cap = free
        else:
            watched = pipe.__class__ is WatchedPipe
            if watched and watching is None:
                watching = [False] * len(cursors)
            cursors.append([times, pipe.used, pipe.rate, bisect_right(times, start) - 1, len(times) - 1])
            if watching is not None:
                watching.append(watched)
    while left > 1e-9:
        rate, nxt = cap, _INF
        for cursor in cursors:
            times, used, capacity, i, last = cursor
            while i < last and times[i + 1] <= t:
                i += 1
            cursor[3] = i
            free = capacity - (used[i] if i >= 0 else 0.0)
            if free < rate:
                rate = free
            if i < last and times[i + 1] < nxt:
                nxt = times[i + 1]
        if watching and _slowed_by_sharing(cursors, watching, cap, rate):
            raise SharedPipeSaturated(f"a transfer over {', '.join(p.name for p in pipes)} waited for others "
                                      "sharing a watched pipe")
        if rate <= 1e-9:
            t = nxt
            continue
        end = t + left / rate
        if end <= nxt:
            profile.append((t, end, rate))
            t, left = end, 0.0
        else:
            profile.append((t, nxt, rate))
            left -= rate * (nxt - t)
            t = nxt
    for pipe in pipes:
        pipe.add_profile(profile)
    return t


class FoldAbandoned(Exception):
    """Control flow inside collsim.sim, never raised out of it: the one-rank simulation of a fold cannot stand in
    for the full one (what happens first would depend on the order the simulation records events in), so the
    model runs every rank instead. Its subclasses say why."""


class SharedPipeSaturated(FoldAbandoned):
    """A transfer was held back by what was already allocated on a :class:`WatchedPipe`: which transfer waits
    depends on placement order.

    (Its one argument is the message: SimPy re-raises a process's exception as ``type(e)(*e.args)``.)"""


class WatchedPipe(Pipe):
    """A pipe whose allocations must never hold a new transfer back: :func:`place` raises
    :class:`SharedPipeSaturated` when the transfer would run faster without them.

    A rank-symmetric simulation (:mod:`collsim.sim.symmetry`) places the transfers of several ranks on one
    such pipe in another order than a full simulation would. As long as none of them is held back by what
    the others have there, each gets the rate its other pipes allow, in any order (and together they fit);
    once one is, the order decides who waits. (Its capacity alone may limit a transfer: no order changes
    that.)
    """

    __slots__ = ()


def _slowed_by_sharing(cursors: list, watching: list[bool], cap: float, rate: float) -> bool:
    """Whether ``rate``, a transfer's rate at the cursors' current segments, is below what it would be if the
    watched pipes carried nothing else."""
    alone = cap
    for cursor, watched in zip(cursors, watching):
        _, used, capacity, i, _ = cursor
        free = capacity if watched else capacity - (used[i] if i >= 0 else 0.0)
        if free < alone:
            alone = free
    return rate < alone * (1.0 - 1e-9)


def reserve(pipes: tuple[Pipe, ...] | list[Pipe], nbytes: float, start: float) -> float:
    """:func:`place` at whatever rate the pipes allow."""
    return place(pipes, nbytes, start)


class Transfer:
    """One costed movement of bytes and its times (µs), kept for the critical path and the timeline.

    ``issue``: when the issuing thread issued it; ``start``: when bytes could
    first flow (after a load's request reached the owner); ``finish``: last
    byte crossed the last pipe; ``visible``: the data can be observed at its
    destination (a store's lines in the owner's memory, a load's register);
    ``ack``: the issuer may consider it complete (fences wait for this).
    ``payload``: it carries user data (its serialization is *data* time) as
    opposed to a flag, counter or reset pattern (*sync* time).
    """

    __slots__ = ("rank", "peer", "nbytes", "issue", "start", "finish", "visible", "ack", "node", "payload",
                 "label", "local", "what")

    def __init__(self, rank: int, peer: int, nbytes: int, issue: float, start: float, finish: float,
                 visible: float, ack: float, node: object, payload: bool, label: str, local: bool,
                 what: str) -> None:
        self.rank = rank
        self.peer = peer
        self.nbytes = nbytes
        self.issue = issue
        self.start = start
        self.finish = finish
        self.visible = visible
        self.ack = ack
        self.node = node
        self.payload = payload
        self.label = label
        self.local = local
        self.what = what

    @property
    def name(self) -> str:
        """The issuing operation's name (``store_lines[k=2]``)."""
        label = self.label
        return label if isinstance(label, str) else label.name

    def __repr__(self) -> str:
        return (f"<Transfer {self.name} {self.rank}->{self.peer} {self.nbytes} B issue {self.issue:.3f} "
                f"finish {self.finish:.3f} visible {self.visible:.3f}>")
