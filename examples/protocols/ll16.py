"""ll16: an LL variant with 16-byte lines: three data words and a 32-bit epoch in the ``.w`` word.

Written from docs/WRITING_PROTOCOLS.md. One ``st.volatile.v4.u32`` per line
carries 12 bytes of data and the flag (75 % payload, against LL's 50 %).
The reader polls ``.w`` until it equals the step's epoch and keeps the data
of the load that ended the poll, so the line must arrive whole: it needs
``store-16B-untorn`` (LL's 8-byte pairs are not enough, the first half has
no flag).
"""
from __future__ import annotations

from collsim.ir import (
    NRANKS, RANK, Buffer, Equals, LineLayout, PollUntil, Protocol, Ref, Scope, Sem, Store, Word, WordRole,
    ceil_div,
)

LINE = LineLayout("ll16", (Word(WordRole.DATA, 4),) * 3 + (Word(WordRole.FLAG, 4),), store_bytes=16)


class LL16(Protocol):
    """LL with 16-byte lines ``{data, data, data, epoch}``, one volatile vector store per line."""

    name = "ll16"
    algorithms = ("one-shot", "two-shot")
    data_layout = LINE
    assumptions = ("store-16B-untorn",)
    analytic_family = "ll"
    default_params = {"depth": 2, "flag_bits": 32}

    def buffers(self, transfer_bytes):
        lines = ceil_div(transfer_bytes, LINE.data_bytes)
        return (Buffer("lines", LINE, depth=self.params["depth"], regions=NRANKS, lines=lines),)

    def slot(self, owner, sender, seq, nbytes):
        return Ref("lines", owner, slot=seq % self.params["depth"], region=sender,
                   lines=ceil_div(nbytes, LINE.data_bytes))

    def exchange(self, b, ex):
        seq = ex.seq

        def send(b, s):
            b.emit(Store(self.slot(s.to, RANK, seq, s.nbytes), s.data, Sem.VOLATILE, Scope.SYS,
                         flag=self.epoch(seq), label="store_lines"))

        def recv(b, r):
            b.emit(PollUntil(self.slot(RANK, r.frm, seq, r.nbytes), Equals(self.epoch(seq)), Sem.VOLATILE,
                             Scope.SYS, into=r.into, into_offset=r.into_offset, label="poll_lines"))

        self.sends_then_recvs(b, ex, send, recv)
