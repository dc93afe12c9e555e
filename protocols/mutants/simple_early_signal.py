"""mutant-simple-early-signal: Simple's leader signals before the other threads finished writing."""
from __future__ import annotations

from collsim.ir.ops import Op, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange
from protocols.simple import Simple


class _WithoutDataSync:
    """A builder that drops the group barrier between the data stores and the leader's fence."""

    def __init__(self, inner: ProgramBuilder) -> None:
        self._inner = inner

    def emit(self, op: Op) -> Op:
        if isinstance(op, SyncGroup) and op.label == "sync_data_written":
            return op
        return self._inner.emit(op)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


class SimpleEarlySignal(Simple):
    """Simple without the ``__syncthreads`` between the data stores and the leader's fence and step store.

    Every thread stores its lines, but only the leader fences and posts the
    step counter, and nothing makes the other threads' stores precede the
    leader's fence: a receiver can see the step before those lines. Invisible
    with one thread per rank, so it is checked with two threads and two lines.
    """

    name = "mutant-simple-early-signal"
    expected_violation = "data-race"
    verify_bounds = {"threads": 2, "lines": 2, "ranks": 2}

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        super().exchange(_WithoutDataSync(b), ex)  # type: ignore[arg-type]
