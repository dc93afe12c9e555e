"""Bandwidth resources and transfers: directed links, issue engines, HBM.

Every resource that moves bytes is a :class:`Pipe` with a capacity in GB/s:
each directed link of a route (``(u, v)`` from the topology; ``(v, u)`` is a
separate pipe), each rank's store and load *engines* (its CTAs together:
``channels × per-CTA bandwidth``) and each rank's HBM.

A transfer of ``n`` bytes over pipes ``p1..pk`` starting at ``t`` is costed
as a whole, with no per-byte or per-line events, by a fluid first-fit rule:
on every pipe it takes ``n / capacity`` of the pipe's earliest idle time
from ``t`` on (filling gaps between transfers already placed there), and it
finishes when the last pipe has carried its bytes. Two transfers that share
a pipe therefore share its bandwidth (the one placed second waits for, or
fills around, the first), a transfer never runs faster than its slowest
pipe, and a pipe with spare capacity (a 370 GB/s port behind a 70 GB/s CTA)
is charged only for the bytes that really crossed it. Because placements
fill idle gaps, the result does not depend on transfers being placed in
time order. The makespan of a set of transfers equals a fair-sharing
(processor-sharing) fluid model's; their individual finish times are
first-come first-served instead of equalized.

>>> link = Pipe("gpu0->nvfabric", 100.0)   # 100 GB/s = 100 000 B/us
>>> reserve((link,), 100_000, start=0.0)
1.0
>>> reserve((link,), 100_000, start=0.5)    # queued behind the first
2.0
>>> reserve((link,), 50_000, start=3.0), reserve((link,), 100_000, start=2.5)  # the second fills the gap first
(3.5, 4.0)
"""
from __future__ import annotations

__all__ = ["Pipe", "Transfer", "reserve"]


class Pipe:
    """A bandwidth resource: ``gbps`` GB/s (10^3 bytes per µs) and the intervals it is busy."""

    __slots__ = ("name", "gbps", "rate", "busy", "bytes")

    def __init__(self, name: str, gbps: float) -> None:
        if not gbps > 0:
            raise ValueError(f"pipe {name}: capacity must be positive, got {gbps!r} GB/s")
        self.name = name
        self.gbps = float(gbps)
        self.rate = float(gbps) * 1e3  # bytes per µs
        self.busy: list[list[float]] = []  # sorted, disjoint [start, end] intervals
        self.bytes = 0

    @property
    def free_at(self) -> float:
        """When the last placed transfer ends (0 when none)."""
        return self.busy[-1][1] if self.busy else 0.0

    def take(self, start: float, duration: float) -> float:
        """Place ``duration`` µs of work in the earliest idle time from ``start``; return when it ends."""
        busy = self.busy
        if not busy or busy[-1][1] <= start:  # the common case: the pipe is idle from start on
            if busy and busy[-1][1] >= start - 1e-12:
                busy[-1][1] = start + duration
            else:
                busy.append([start, start + duration])
                if len(busy) > 64:
                    del busy[:32]  # forget the distant past
            return start + duration
        out: list[list[float]] = []
        t, left = start, duration
        for interval in busy:
            a, b = interval
            if left > 0 and b > t:
                if a > t:  # an idle gap [t, a)
                    use = min(left, a - t)
                    out.append([t, t + use])
                    left -= use
                    t += use
                if left > 0 and b > t:
                    t = b
            out.append(interval)
        if left > 0:
            out.append([t, t + left])
            t += left
        out.sort()
        merged = [out[0]]
        for a, b in out[1:]:
            if a <= merged[-1][1] + 1e-12:
                if b > merged[-1][1]:
                    merged[-1][1] = b
            else:
                merged.append([a, b])
        self.busy = merged
        return t

    def __repr__(self) -> str:
        return f"Pipe({self.name!r}, {self.gbps} GB/s, busy until {self.free_at:.3f} us)"


def reserve(pipes: tuple[Pipe, ...] | list[Pipe], nbytes: float, start: float) -> float:
    """Charge ``nbytes`` to every pipe from ``start``; return when the last byte has crossed (µs)."""
    finish = start
    for pipe in pipes:
        pipe.bytes += nbytes
        done = pipe.take(start, nbytes / pipe.rate)
        if done > finish:
            finish = done
    return finish


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
