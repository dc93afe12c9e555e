"""ll128-atomic: 128-byte lines of 120 B data and a count word, reduced in place by every contributor."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import ITER, MSG, NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import LineLayout, Word, WordRole
from collsim.ir.ops import AtLeast, Atomic, Fill, PollUntil, Ref, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Protocol, ReduceExchange
from collsim.ir.types import RmwOp, Scope, Sem

#: 16 8-byte words: 15 words (120 B) of data, then the count word. Eight lanes reduce 16 B each; the last
#: lane's second word is the count, as LL128 puts its flag.
LINE = LineLayout("ll128-atomic-128B", (Word(WordRole.DATA, 8),) * 15 + (Word(WordRole.FLAG, 8),), store_bytes=16)


class LL128Atomic(Protocol):
    """Every rank ``red.add``s its input into every rank's result lines, each 128-byte line carrying 120 B of data and a count word, then polls its own lines until every count reaches ``NRANKS`` × use.

    One warp's vector reductions cover a line: the data words get the
    input, the count word 1. The destination spins on its own lines (local
    volatile loads) and reads the finished sum from the load that ends the
    spin: no local reduce of ``NRANKS`` inputs, no epoch flags, no release
    fence and no separate counter round trip. That is correct only if a
    warp's reductions into one 128-byte line become visible together or in
    order (``line-128B-reductions-ordered``, the LL128 assumption carried
    over to reductions); PTX guarantees atomicity per element only, which
    is what ``atomic-counter`` (release counter, PTX-safe) pays a round
    trip for. Result lines are double-buffered and zeroed by their reader
    after use; counts only grow. Scratch per rank: ``2 × ⌈MSG / 120⌉ × 128``
    bytes, against LL one-shot's ``2 × (NRANKS − 1) × 2 × MSG``. Design
    inferred from the "LL128 atomic" AllReduce of "Every Microsecond
    Matters" (arXiv 2607.16100); vector ``red.global.add`` needs sm_90.
    """

    name = "ll128-atomic"
    algorithms = ("one-shot",)
    data_layout = LINE
    assumptions = ("line-128B-reductions-ordered",)
    reduces_remotely = True
    analytic_family = "ll128"
    citation = ("arXiv 2607.16100 (abstract: LL128 atomic AllReduce); NVIDIA/nccl#786 (LL128 line ordering); "
                "PTX ISA red.global.add.v4.f32 (sm_90)")
    #: ``waits_for``: "all" contributions or "peers" (a count that forgets the rank's own, for mutants)
    default_params = {"depth": 2, "reset": True, "waits_for": "all"}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        return (Buffer("lines", LINE, depth=self.params["depth"], regions=1,
                       lines=ceil_div(MSG, LINE.data_bytes), multicast=self.multicast),)

    #: whether the result lines are bound to a multicast object (the NVLS form)
    multicast = False

    def lines_of(self, ex: ReduceExchange) -> Expr:
        return ceil_div(ex.nbytes, LINE.data_bytes)

    def reduce_into_every_rank(self, b: ProgramBuilder, ex: ReduceExchange, slot: Expr) -> None:
        """One line-wide reduction (data + 1 on the count) into every rank's lines, its own included."""
        with b.loop("k", NRANKS) as k:
            target = (RANK + k) % NRANKS
            b.emit(Atomic(RmwOp.ADD, Ref("lines", target, slot=slot, lines=self.lines_of(ex)), ex.data,
                          Sem.RELAXED, Scope.SYS, flag=1, label="red_line"))

    def reduce_exchange(self, b: ProgramBuilder, ex: ReduceExchange) -> None:
        depth = self.params["depth"]
        slot = ITER % depth
        self.reduce_into_every_rank(b, ex, slot)
        # Slot `slot` is used by launches slot, slot + depth, ...: its counts only grow.
        use = ITER // depth + 1
        target = NRANKS * use if self.params["waits_for"] == "all" else (NRANKS - 1) * use
        b.emit(PollUntil(Ref("lines", RANK, slot=slot, lines=self.lines_of(ex)), AtLeast(target), Sem.VOLATILE,
                         Scope.SYS, into=ex.into, label="poll_count"))
        if self.params["reset"]:
            b.emit(Store(Ref("lines", RANK, slot=slot, lines=self.lines_of(ex)), Fill("zero"), Sem.WEAK, Scope.SYS,
                         label="reset_data"))
