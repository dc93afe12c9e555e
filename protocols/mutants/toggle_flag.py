"""mutant-toggle-flag: one data slot and a 0/1 toggle flag, reused without waiting for consumption."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import counter_layout, plain_layout
from collsim.ir.ops import Equals, Load, PollUntil, Ref, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Protocol, Recv, Send
from collsim.ir.types import Issuer, Scope, Sem

LAYOUT = plain_layout(word_bytes=4, store_bytes=16)


class ToggleFlag(Protocol):
    """Data into a single slot, then a release flag that toggles 1, 0, 1, ... (``flag_bits=1``).

    The receiver acquires the flag and loads the data, but the sender never
    waits for it to do so: in the next launch it overwrites the slot (and
    flips the flag back) while a slow receiver has not read the previous
    data yet. The flag itself is correctly released and acquired; what is
    missing is the consumer-to-producer half of the handshake (a credit, or
    a second slot).
    """

    name = "mutant-toggle-flag"
    algorithms = ("one-shot",)
    data_layout = LAYOUT
    expected_violation = "early-overwrite"
    default_params = {"flag_bits": 1}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        lines = ceil_div(transfer_bytes, LAYOUT.data_bytes)
        return (Buffer("slot", LAYOUT, depth=1, regions=NRANKS, lines=lines),
                Buffer("toggle", counter_layout(8), depth=1, regions=NRANKS, lines=1, role="flags"))

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        flag = self.epoch(ex.seq)

        def send(builder: ProgramBuilder, s: Send) -> None:
            lines = ceil_div(s.nbytes, LAYOUT.data_bytes)
            builder.emit(Store(Ref("slot", s.to, region=RANK, lines=lines), s.data, Sem.WEAK, Scope.SYS,
                               label="store_data"))
            builder.emit(Store(Ref("toggle", s.to, region=RANK), None, Sem.RELEASE, Scope.SYS, flag=flag,
                               issuer=Issuer.LEADER, label="set_toggle"))

        def recv(builder: ProgramBuilder, r: Recv) -> None:
            lines = ceil_div(r.nbytes, LAYOUT.data_bytes)
            builder.emit(PollUntil(Ref("toggle", RANK, region=r.frm), Equals(flag), Sem.ACQUIRE, Scope.SYS,
                                   issuer=Issuer.LEADER, label="wait_toggle"))
            builder.emit(Load(r.into, Ref("slot", RANK, region=r.frm, lines=lines), Sem.WEAK, Scope.SYS,
                              into_offset=r.into_offset, label="load_data"))

        self.sends_then_recvs(b, ex, send, recv)
