"""grid-push: two CTAs per rank push their slices, meet at a grid barrier, and one thread signals each peer.

The synchronization of the multi-block custom all-reduce kernels (vLLM's
``custom_all_reduce.cuh``, TensorRT-LLM's ``customAllReduceKernels.cu``): every
CTA moves its slice of each chunk, the rank's CTAs then meet at a grid-level
barrier (``cooperative_groups::this_grid().sync()``: a gpu-scope arrival
counter in the rank's memory), and only then does thread 0 of CTA 0 publish
one step flag per peer. On the receiving side the same thread waits for every
peer's flag and a second grid barrier lets every CTA load its own slice,
which another CTA of the sender wrote: only the grid barriers order that
write before the flag and the flag before the load.
"""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import counter_layout, plain_layout
from collsim.ir.library import grid_barrier, grid_counter_buffer
from collsim.ir.ops import AtLeast, Load, PollUntil, Ref, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Protocol, Recv, Send
from collsim.ir.types import Issuer, Scope, Sem

LAYOUT = plain_layout(word_bytes=4, store_bytes=16)


class GridPush(Protocol):
    """Two CTAs per rank: weak stores of each CTA's slice into the owner's per-CTA slot, a grid barrier
    (``red.release.gpu`` + ``ld.acquire.gpu`` on a counter the rank's CTAs share, ``bar.sync`` on both sides),
    then ``st.release.sys`` of the step by thread 0 of CTA 0; on the receiving side thread 0 of CTA 0 polls
    every peer's step with ``ld.acquire.sys``, a second grid barrier hands that on to every CTA, and each CTA
    loads its slice. Two slots: the exchanges are in lockstep, and the grid
    barrier before each step also orders the CTAs' loads of a slot before the step that lets the sender
    reuse it.
    """

    name = "grid-push"
    algorithms = ("one-shot", "two-shot")
    data_layout = LAYOUT
    analytic_family = "simple"
    ctas = 2
    citation = "vllm-project/vllm csrc/custom_all_reduce.cuh; cooperative_groups grid.sync()"
    default_params = {"flag_bits": 64, "grid_scope": Scope.GPU, "arrive_sem": Sem.RELEASE, "sync_after": True}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        return (
            Buffer("slots", LAYOUT, depth=2, regions=NRANKS, lines=ceil_div(transfer_bytes, LAYOUT.data_bytes),
                   per_cta=True),
            Buffer("steps", counter_layout(8), depth=1, regions=NRANKS, lines=1, role="flags"),
            grid_counter_buffer(),
        )

    def _slot(self, owner: Expr, sender: Expr, seq: Expr, nbytes: Expr) -> Ref:
        return Ref("slots", owner, slot=seq % 2, region=sender, lines=ceil_div(nbytes, LAYOUT.data_bytes))

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        seq = ex.seq

        def send_data(builder: ProgramBuilder, s: Send) -> None:
            builder.emit(Store(self._slot(s.to, RANK, seq, s.nbytes), s.data, Sem.WEAK, Scope.SYS,
                               label="store_slice"))

        def post_step(builder: ProgramBuilder, s: Send) -> None:
            builder.emit(Store(Ref("steps", s.to, region=RANK), None, Sem.RELEASE, Scope.SYS, flag=seq + 1,
                               issuer=Issuer.GRID_LEADER, label="post_step"))

        def poll_step(builder: ProgramBuilder, r: Recv) -> None:
            builder.emit(PollUntil(Ref("steps", RANK, region=r.frm), AtLeast(seq + 1), Sem.ACQUIRE, Scope.SYS,
                                   issuer=Issuer.GRID_LEADER, label="poll_step"))

        def load_slice(builder: ProgramBuilder, r: Recv) -> None:
            builder.emit(Load(r.into, self._slot(RANK, r.frm, seq, r.nbytes), Sem.WEAK, Scope.SYS,
                              into_offset=r.into_offset, label="load_slice"))

        def nothing(*_: object) -> None:
            return None

        def part(sends: tuple, recvs: tuple, consume=None) -> Exchange:
            return Exchange(ex.phase, ex.phases_per_iter, sends, recvs, ex.over_peers, ex.lockstep, consume)

        barrier = {"scope": self.params["grid_scope"], "arrive_sem": self.params["arrive_sem"],
                   "sync_after": self.params["sync_after"]}
        self.sends_then_recvs(b, part(ex.sends, ()), send_data, nothing)
        # every CTA's slices are written before the one thread that signals the peers goes on ...
        grid_barrier(b, 2 * seq + 1, label="grid_barrier.sent", **barrier)
        self.sends_then_recvs(b, part(ex.sends, ()), post_step, nothing)
        # ... and one thread waits for every peer's step before any CTA loads its slice
        self.sends_then_recvs(b, part((), ex.recvs), nothing, poll_step)
        grid_barrier(b, 2 * seq + 2, label="grid_barrier.arrived", **barrier)
        self.sends_then_recvs(b, part((), ex.recvs, ex.consume), nothing, load_slice)

__all__ = ["GridPush"]
