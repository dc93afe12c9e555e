"""mutant-barrier-unsynced-publish: the barrier's flag is published before the whole block's data writes."""
from __future__ import annotations

from collsim.ir.ops import Op, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange
from protocols.barrier import Barrier
from protocols.mutants import RewritingBuilder


def _without_publish_sync(op: Op) -> Op | None:
    """Drop the group barrier in front of the publishing barrier's arrival."""
    return None if isinstance(op, SyncGroup) and op.label == "barrier.publish.sync_before" else op


class BarrierUnsyncedPublish(Barrier):
    """Barrier whose publishing arrival is not preceded by ``__syncthreads``: every thread stages its
    lines, but the leader stores the release flag as soon as its own lines are written.

    The leader's release orders only what the leader did (and saw) before it, so a peer that sees the
    flag may load a line another thread of the block has not stored yet: the data race of a
    ``sync_remote_blocks`` call placed before the block's copy has finished. With one thread per rank,
    or one line per chunk, the leader wrote everything itself and the bug is invisible; the default
    bound (two threads, two lines wherever the data path has several) catches it.
    """

    name = "mutant-barrier-unsynced-publish"
    algorithms = ("one-shot",)
    expected_violation = "data-race"

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        super().exchange(RewritingBuilder(b, _without_publish_sync), ex)  # type: ignore[arg-type]
