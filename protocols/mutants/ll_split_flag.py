"""mutant-ll-split-flag: LL with the flag in a separate store and no fence."""
from __future__ import annotations

from collsim.ir.expr import RANK
from collsim.ir.ops import Equals, PollUntil, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Recv, Send
from collsim.ir.types import Scope, Sem
from protocols.ll import LL


class LLSplitFlag(LL):
    """LL line, but the data and the flag are written by two separate volatile stores with no fence.

    The 8-byte atomicity LL relies on only covers one store instruction; with
    the flag in its own store nothing orders it after the data, so a reader
    can see the new flag next to old data.
    """

    name = "mutant-ll-split-flag"
    algorithms = ("one-shot",)
    expected_violation = "stale-read"

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        seq = ex.seq

        def send(builder: ProgramBuilder, s: Send) -> None:
            ref = self._slot(s.to, RANK, seq, s.nbytes)
            builder.emit(Store(ref, s.data, Sem.VOLATILE, Scope.SYS, label="store_data"))
            builder.emit(Store(ref, None, Sem.VOLATILE, Scope.SYS, flag=self.epoch(seq), label="store_flag"))

        def recv(builder: ProgramBuilder, r: Recv) -> None:
            builder.emit(PollUntil(self._slot(RANK, r.frm, seq, r.nbytes), Equals(self.epoch(seq)), Sem.VOLATILE,
                                   Scope.SYS, into=r.into, into_offset=r.into_offset, label="poll_lines"))

        self.sends_then_recvs(b, ex, send, recv)
