"""simple: NCCL's Simple protocol: data stores, a system fence, then a step counter."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import counter_layout, plain_layout
from collsim.ir.library import credit_buffer, return_credit, wait_credit
from collsim.ir.ops import AtLeast, Fence, Load, PollUntil, Ref, Store, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Protocol, Recv, Send
from collsim.ir.types import FenceKind, Issuer, Scope, Sem

LAYOUT = plain_layout(word_bytes=4, store_bytes=16)


class Simple(Protocol):
    """NCCL Simple: plain data stores, ``fence.acq_rel.sys``, then a 64-bit step counter.

    The receiver polls the counter until it reaches the step, fences, and
    reads the data with ordinary loads; full payload, but a fence and a
    separate flag round trip per step. Ring exchanges reuse slots under
    credits (consumed-step counters stored back to the sender). Source:
    NCCL src/device/prims_simple.h (postPeer/waitPeer), reference notes §3.
    """

    name = "simple"
    algorithms = ("one-shot", "two-shot", "ring")
    data_layout = LAYOUT
    analytic_family = "simple"
    citation = "NVIDIA/nccl src/device/prims_simple.h"
    default_params = {"depth": 2, "flag_bits": 64, "credit_slack": 0, "fence": True, "credit_sem": Sem.ACQUIRE}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        lines = ceil_div(transfer_bytes, LAYOUT.data_bytes)
        return (
            Buffer("slots", LAYOUT, depth=self.params["depth"], regions=NRANKS, lines=lines),
            Buffer("steps", counter_layout(8), depth=1, regions=NRANKS, lines=1, role="flags"),
            credit_buffer(),
        )

    def _slot(self, owner: Expr, sender: Expr, seq: Expr, nbytes: Expr) -> Ref:
        return Ref("slots", owner, slot=seq % self.params["depth"], region=sender,
                   lines=ceil_div(nbytes, LAYOUT.data_bytes))

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        if ex.forward and not ex.over_peers and not ex.lockstep:
            self._forward(b, ex)
            return
        seq, depth = ex.seq, self.params["depth"]

        def send_data(builder: ProgramBuilder, s: Send) -> None:
            if not ex.lockstep:
                # acquire: the weak data store below must not overtake the
                # receiver's loads of the slot's previous contents
                wait_credit(builder, s.to, seq, depth, slack=self.params["credit_slack"],
                            sem=self.params["credit_sem"])
            builder.emit(Store(self._slot(s.to, RANK, seq, s.nbytes), s.data, Sem.WEAK, Scope.SYS,
                               label="store_data"))

        def recv(builder: ProgramBuilder, r: Recv) -> None:
            builder.emit(PollUntil(Ref("steps", RANK, region=r.frm), AtLeast(seq + 1), Sem.VOLATILE, Scope.SYS,
                                   issuer=Issuer.LEADER, label="poll_step"))
            builder.emit(Fence(FenceKind.ACQ_REL, Scope.SYS, issuer=Issuer.LEADER, label="fence_acquire"))
            builder.emit(SyncGroup(label="sync_step_seen"))
            builder.emit(Load(r.into, self._slot(RANK, r.frm, seq, r.nbytes), Sem.WEAK, Scope.SYS,
                              into_offset=r.into_offset, label="load_data"))
            if not ex.lockstep:
                return_credit(builder, r.frm, seq)

        # All data first, one fence, then every step counter: the fence covers every peer's data.
        data_only = Exchange(ex.phase, ex.phases_per_iter, ex.sends, (), ex.over_peers, ex.lockstep)
        self.sends_then_recvs(b, data_only, send_data, lambda *_: None)
        b.emit(SyncGroup(label="sync_data_written"))
        if self.params["fence"] and ex.sends:  # an exchange that only receives has no data to publish
            b.emit(Fence(FenceKind.ACQ_REL, Scope.SYS, issuer=Issuer.LEADER, label="fence_release"))

        def post_step(builder: ProgramBuilder, s: Send) -> None:
            builder.emit(Store(Ref("steps", s.to, region=RANK), None, Sem.RELAXED, Scope.SYS, flag=seq + 1,
                               issuer=Issuer.LEADER, label="post_step"))

        steps = Exchange(ex.phase, ex.phases_per_iter, ex.sends, ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, steps, post_step, recv)

    def _forward(self, b: ProgramBuilder, ex: Exchange) -> None:
        """A ring step that receives, reduces (``ex.consume``) and sends on, in NCCL's order
        (directRecvReduceDirectSend, src/device/prims_simple.h genericOp: wait for the step, wait for the
        credit, reduce-copy, barrier, fence, post): the data is loaded, reduced and stored to the next
        rank in one pass, then one fence covers it, then the step counter goes to the next rank and the
        consumed slot's credit back to the previous one."""
        seq, rseq, depth = ex.seq, ex.recv_seq, self.params["depth"]
        for r in ex.recvs:
            b.emit(PollUntil(Ref("steps", RANK, region=r.frm), AtLeast(rseq + 1), Sem.VOLATILE, Scope.SYS,
                             issuer=Issuer.LEADER, label="poll_step"))
            b.emit(Fence(FenceKind.ACQ_REL, Scope.SYS, issuer=Issuer.LEADER, label="fence_acquire"))
            b.emit(SyncGroup(label="sync_step_seen"))
        for s in ex.sends:
            wait_credit(b, s.to, seq, depth, slack=self.params["credit_slack"], sem=self.params["credit_sem"])
        for r in ex.recvs:
            b.emit(Load(r.into, self._slot(RANK, r.frm, rseq, r.nbytes), Sem.WEAK, Scope.SYS,
                        into_offset=r.into_offset, label="load_data"))
            if ex.consume is not None:
                ex.consume(b, r)
        for s in ex.sends:
            b.emit(Store(self._slot(s.to, RANK, seq, s.nbytes), s.data, Sem.WEAK, Scope.SYS, label="store_data"))
        b.emit(SyncGroup(label="sync_data_written"))
        if self.params["fence"]:
            b.emit(Fence(FenceKind.ACQ_REL, Scope.SYS, issuer=Issuer.LEADER, label="fence_release"))
        for s in ex.sends:
            b.emit(Store(Ref("steps", s.to, region=RANK), None, Sem.RELAXED, Scope.SYS, flag=seq + 1,
                         issuer=Issuer.LEADER, label="post_step"))
        for r in ex.recvs:
            return_credit(b, r.frm, rseq)


__all__ = ["Simple"]
