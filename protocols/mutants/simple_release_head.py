"""mutant-simple-release-head: a FIFO head published by one thread's release before the block's payload."""
from __future__ import annotations

from collsim.ir.ops import Fence, Op, Store, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange
from collsim.ir.types import Sem
from protocols.mutants import RewritingBuilder
from protocols.simple import Simple


def _release_head(op: Op) -> Op | None:
    """Post the step (the FIFO's head) with ``st.release`` instead of syncing the group and fencing."""
    if isinstance(op, SyncGroup) and op.label == "sync_data_written":
        return None
    if isinstance(op, Fence) and op.label == "fence_release":
        return None
    if isinstance(op, Store) and op.label == "post_step":
        return Store(op.dst, op.src, Sem.RELEASE, op.scope, flag=op.flag, issuer=op.issuer, label=op.label)
    return op


class SimpleReleaseHead(Simple):
    """Simple whose step counter, the head of each receiver's slot FIFO, is published with a release
    store by the leader right after its own data stores, with no ``__syncthreads`` and no fence.

    A release is cumulative over what the releasing thread wrote or observed, not over the block: the
    payload lines the other threads store are not ordered before the head, so the receiver can see the
    head and load a line that is not there yet (a FIFO head published before its payload). With one
    thread per rank, or one line per chunk, the leader wrote the whole payload and the release is
    right; the default bound (two threads, two lines where the data path has several) catches it.
    """

    name = "mutant-simple-release-head"
    algorithms = ("one-shot", "ring")
    expected_violation = "data-race"

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        super().exchange(RewritingBuilder(b, _release_head), ex)  # type: ignore[arg-type]
