"""ll: NCCL's low-latency protocol: the flag travels in the same store as the data."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import LineLayout, Word, WordRole
from collsim.ir.library import credit_buffer, return_credit, wait_credit
from collsim.ir.ops import Equals, PollUntil, Ref, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Protocol, Recv, Send
from collsim.ir.types import Scope, Sem

DATA4, FLAG4 = Word(WordRole.DATA, 4), Word(WordRole.FLAG, 4)
#: {data1, flag1, data2, flag2}: each 8-byte half carries its own flag copy.
LL_LINE = LineLayout("ll-16B", (DATA4, FLAG4, DATA4, FLAG4), store_bytes=16)


class FlaggedLines(Protocol):
    """Shared lowering of protocols whose lines carry their own epoch flag (LL, LL128).

    A send is one volatile store per line of data plus flag into the
    receiver's slot ``seq % depth``, region = sender; the receiver polls the
    lines until every flag equals the epoch of ``seq`` and keeps the data of
    the load that ended the poll. Epochs differ between uses of a slot, so
    slots are reused without being cleared. Exchanges that are not lockstep
    (ring) add credits.
    """

    default_params = {"depth": 2, "flag_bits": 32, "credit_slack": 0}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        lines = ceil_div(transfer_bytes, self.data_layout.data_bytes)
        slots = Buffer("lines", self.data_layout, depth=self.params["depth"], regions=NRANKS, lines=lines)
        return (slots, credit_buffer())

    def _slot(self, owner: Expr, sender: Expr, seq: Expr, nbytes: Expr) -> Ref:
        return Ref("lines", owner, slot=seq % self.params["depth"], region=sender,
                   lines=ceil_div(nbytes, self.data_layout.data_bytes))

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        if ex.forward and not ex.over_peers and not ex.lockstep:
            self._forward(b, ex)
            return
        seq, depth = ex.seq, self.params["depth"]

        def send(builder: ProgramBuilder, s: Send) -> None:
            if not ex.lockstep:
                wait_credit(builder, s.to, seq, depth, slack=self.params["credit_slack"], sem=Sem.VOLATILE)
            builder.emit(Store(self._slot(s.to, RANK, seq, s.nbytes), s.data, Sem.VOLATILE, Scope.SYS,
                               flag=self.epoch(seq), label="store_lines"))

        def recv(builder: ProgramBuilder, r: Recv) -> None:
            builder.emit(PollUntil(self._slot(RANK, r.frm, seq, r.nbytes), Equals(self.epoch(seq)),
                                   Sem.VOLATILE, Scope.SYS, into=r.into, into_offset=r.into_offset,
                                   label="poll_lines"))
            if not ex.lockstep:
                return_credit(builder, r.frm, seq, sem=Sem.VOLATILE)

        self.sends_then_recvs(b, ex, send, recv)

    def _forward(self, b: ProgramBuilder, ex: Exchange) -> None:
        """A ring step that receives, reduces (``ex.consume``) and sends on, in NCCL's order
        (recvReduceSend, src/device/prims_ll.h): poll the lines, wait for the next rank's credit, reduce,
        store the result, and only then return the credit of the slot read (the data is in registers)."""
        seq, rseq, depth = ex.seq, ex.recv_seq, self.params["depth"]
        for r in ex.recvs:
            b.emit(PollUntil(self._slot(RANK, r.frm, rseq, r.nbytes), Equals(self.epoch(rseq)), Sem.VOLATILE,
                             Scope.SYS, into=r.into, into_offset=r.into_offset, label="poll_lines"))
        for s in ex.sends:
            wait_credit(b, s.to, seq, depth, slack=self.params["credit_slack"], sem=Sem.VOLATILE)
        for r in ex.recvs:
            if ex.consume is not None:
                ex.consume(b, r)
        for s in ex.sends:
            b.emit(Store(self._slot(s.to, RANK, seq, s.nbytes), s.data, Sem.VOLATILE, Scope.SYS,
                         flag=self.epoch(seq), label="store_lines"))
        for r in ex.recvs:
            return_credit(b, r.frm, rseq, sem=Sem.VOLATILE)


class LL(FlaggedLines):
    """NCCL LL: 16-byte lines ``{data, flag, data, flag}`` written by one volatile vector store.

    The receiver spins on the data line itself until both flag copies equal
    the step's epoch; no fence, no separate ready flag, 50 % payload. The
    flag needs no fence because each 8-byte (data, flag) half is assumed to
    arrive whole. Source: NCCL src/include/device.h (ncclLLFifoLine),
    src/device/prims_ll.h (storeLL/readLL); NCCL 2.28 ncclLLA2A uses the
    same line with epoch-parity double buffering.
    """

    name = "ll"
    algorithms = ("one-shot", "two-shot", "ring")
    data_layout = LL_LINE
    assumptions = ("vector-8B-pairs-untorn",)
    analytic_family = "ll"
    citation = "NVIDIA/nccl src/include/device.h, src/device/prims_ll.h; src/include/nccl_device/ll_a2a.h"
