"""What each rank spent its time on, and the critical path through all ranks.

Every interval a rank's threads spend in an operation is a :class:`PathNode`
``[start, end]`` of one kind (``launch``, ``sync``, ``data``, ``reduce``),
linked to the node before it on the same thread. A node whose end was set
by something else (a poll by the write it saw, a fence by the store it
waited for, a reduce by the load that filled its register, a loop by its
slowest lane) names that *cause* and the time ``cause_at`` it delivered.

Attribution rule (the breakdown of a result)
--------------------------------------------
Start at the end of the rank that finishes last and walk backwards in
time, so every instant of ``[0, latency]`` is counted exactly once:

* a node that waited for a cause which delivered after the node began is
  charged ``[cause_at, end]`` to its own kind (a poll's detection delay is
  ``sync``), then the walk enters the cause;
* a cause that is a transfer charges its request latency (a load's trip to
  the owner) to ``sync``, its bytes crossing the pipes (including queueing
  behind other transfers) to ``data`` when it carries user data and to
  ``sync`` when it carries a flag, counter or reset pattern, and its
  latency to visibility or acknowledgement to ``sync``; the walk then
  continues on the issuing rank, at the moment it issued the transfer;
* a cause that is a node (a lane of a loop) is entered directly;
* any other node is charged whole to its kind and the walk moves to the
  node before it.

So ``sync`` is everything latency-bound (barriers, polls, fences, credit
waits, link and visibility latencies, flag traffic), ``data`` the
serialization of user bytes on links, engines and HBM, ``reduce`` local
reduction and output copies, ``launch`` launch overhead and kernel
start/end. The steps of the walk, in forward order, are the critical path
that ``collsim explain`` prints.
"""
from __future__ import annotations

from typing import Any

from collsim.sim.links import Transfer
from collsim.units import format_size

__all__ = ["PathNode", "PathStep", "critical_path", "breakdown_of"]

KINDS = ("launch", "sync", "data", "reduce")


class PathNode:
    """One interval of one thread of one rank (see the module docstring)."""

    __slots__ = ("rank", "start", "end", "kind", "label", "prev", "cause", "cause_at", "what")

    def __init__(self, rank: int, start: float, end: float, kind: str, label: Any, prev: "PathNode | None",
                 cause: Any = None, cause_at: float = 0.0, what: str = "") -> None:
        self.rank = rank
        self.start = start
        self.end = end
        self.kind = kind
        self.label = label
        self.prev = prev
        self.cause = cause
        self.cause_at = cause_at
        self.what = what

    @property
    def name(self) -> str:
        label = self.label
        return label if isinstance(label, str) else label.name

    def __repr__(self) -> str:
        return f"<PathNode rank {self.rank} {self.kind} {self.name} {self.start:.3f}-{self.end:.3f}>"


class PathStep:
    """One interval of the critical path: ``kind`` time on ``rank`` from ``start_us`` to ``end_us``.

    ``text`` says what happened, in words; it is only written when asked for. ``op_label`` is the label
    of the operation the interval belongs to (``barrier.publish.arrive``, ``kernel_start``), without loop
    indices.
    """

    __slots__ = ("rank", "kind", "start_us", "end_us", "_text", "_source")

    def __init__(self, rank: int, kind: str, start_us: float, end_us: float, text: tuple) -> None:
        self.rank = rank
        self.kind = kind
        self.start_us = start_us
        self.end_us = end_us
        self._text: Any = text  # (function, node or transfer, *arguments) that writes it; the string once written
        self._source = text[1]

    @property
    def op_label(self) -> str:
        label = self._source.label
        return label if isinstance(label, str) else label.label

    @property
    def text(self) -> str:
        text = self._text
        if isinstance(text, tuple):
            fn, *args = text
            text = self._text = fn(*args)
        return text

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    def __repr__(self) -> str:
        return f"PathStep(rank={self.rank}, kind={self.kind!r}, {self.start_us:.3f}-{self.end_us:.3f}: {self.text})"


def _size(nbytes: float) -> str:
    return format_size(int(nbytes))


def _transfer_steps(tr: Transfer, until: float, waiter: str) -> list[PathStep]:
    """The legs of ``tr`` from its issue to ``until`` (latest first)."""
    steps: list[PathStep] = []
    finish = min(tr.finish, until)
    if until > finish:
        steps.append(PathStep(tr.rank, "sync", finish, until, (_leg_text, tr, "flight", waiter)))
    start = min(tr.start, finish)
    if finish > start:
        steps.append(PathStep(tr.rank, "data" if tr.payload else "sync", start, finish, (_leg_text, tr, "bytes", waiter)))
    if start > tr.issue:
        steps.append(PathStep(tr.rank, "sync", tr.issue, start, (_leg_text, tr, "request", waiter)))
    return steps


def _leg_text(tr: Transfer, leg: str, waiter: str) -> str:
    direction = f"rank {tr.rank} -> own memory" if tr.local else f"rank {tr.rank} -> rank {tr.peer}"
    if tr.what == "load":
        direction = f"rank {tr.peer} -> rank {tr.rank} (load)" if not tr.local else f"rank {tr.rank} local load"
    if leg == "flight":
        what = "acknowledged back to the issuer" if waiter == "ack" else "visible at the destination"
        if tr.what == "load":
            what = "back in the reader's registers"
        return f"{tr.name}: {direction} in flight until {what}"
    if leg == "bytes":
        return f"{tr.name}: {_size(tr.nbytes)} {direction} crossing links/engines"
    return f"{tr.name}: request travels to rank {tr.peer} and is served"


def critical_path(final: PathNode) -> list[PathStep]:
    """The steps of the walk described in the module docstring, in forward time order."""
    steps: list[PathStep] = []
    node: PathNode | None = final
    while node is not None:
        cause = node.cause
        if cause is not None and node.cause_at > node.start:
            if node.end > node.cause_at:
                steps.append(PathStep(node.rank, node.kind, node.cause_at, node.end, (_describe, node)))
            if isinstance(cause, Transfer):
                acked = cause.ack > cause.visible and abs(node.cause_at - cause.ack) <= 1e-9
                steps.extend(_transfer_steps(cause, node.cause_at, "ack" if acked else "visible"))
                node = cause.node
            else:
                node = cause
            continue
        if node.end > node.start:
            steps.append(PathStep(node.rank, node.kind, node.start, node.end, (_describe, node)))
        node = node.prev
    steps.reverse()
    return steps


def _describe(node: PathNode) -> str:
    cause = node.cause
    who = f"rank {node.rank} {node.name}"
    if cause is None or node.cause_at <= node.start:
        if node.what == "poll":
            return f"{who}: poll found it already satisfied (one sample)"
        return f"{who}: {node.what}" if node.what else who
    if isinstance(cause, Transfer):
        source = "its own" if cause.rank == node.rank else f"rank {cause.rank}'s"
        if node.what == "poll":
            return (f"{who}: poll saw {source} {cause.name} ({_size(cause.nbytes)}), visible at "
                    f"{node.cause_at:.3f} us, on its next sample")
        return f"{who}: {node.what} waited for {source} {cause.name} ({_size(cause.nbytes)}) until {node.cause_at:.3f} us"
    return f"{who}: {node.what} waited for its slowest lane (rank {cause.rank} {cause.name})"


def breakdown_of(steps: list[PathStep]) -> dict[str, float]:
    """Sum of the steps' durations per kind; the values add up to the critical path's length."""
    out = {kind: 0.0 for kind in KINDS}
    for step in steps:
        out[step.kind] += step.end_us - step.start_us
    return out
