"""atomic-counter: ranks add their input into every rank's result with 128-bit atomics, then a release counter."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import ITER, MSG, NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import counter_layout, plain_layout
from collsim.ir.ops import AtLeast, Atomic, Fill, Load, PollUntil, Ref, Store, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Protocol, ReduceExchange
from collsim.ir.types import Issuer, RmwOp, Scope, Sem

#: 16-byte lines of four 32-bit words: one red.add.v4 per line.
LAYOUT = plain_layout(word_bytes=4, store_bytes=16)


class AtomicCounter(Protocol):
    """Every rank ``red.add``s its input (128-bit vector reductions) into every rank's result buffer, then bumps an arrival counter with release.

    A rank whose counter reaches ``NRANKS`` for this use (acquire) reads a
    finished sum: no local reduce and no data-carried flags, but the result
    buffer must be zero again before its next use, so it is double-buffered
    and each rank zeroes its own slot after reading it. The PTX-safe
    completion of the "LL128 atomic" AllReduce of "Every Microsecond
    Matters" (arXiv 2607.16100): each contributor's release covers its
    earlier reductions, at the price of one release fence and one counter
    round trip, and it relies on no hardware assumption (``ll128-atomic``
    is the line design that needs one). Scratch: ``2 × MSG`` of result
    slots plus two 8-byte counters per rank; vector ``red.global.add``
    needs sm_90.
    """

    name = "atomic-counter"
    algorithms = ("one-shot",)
    data_layout = LAYOUT
    reduces_remotely = True
    analytic_family = "ll128"
    citation = "arXiv 2607.16100 (abstract); PTX ISA red.global.add.v4.f32 (sm_90)"
    default_params = {"depth": 2, "counter_sem": Sem.RELEASE, "wait_sem": Sem.ACQUIRE, "reset": True}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        depth = self.params["depth"]
        return (
            Buffer("result", LAYOUT, depth=depth, regions=1, lines=ceil_div(MSG, LAYOUT.data_bytes)),
            Buffer("arrivals", counter_layout(8), depth=depth, regions=1, lines=1, role="flags"),
        )

    def reduce_exchange(self, b: ProgramBuilder, ex: ReduceExchange) -> None:
        depth = self.params["depth"]
        slot = ITER % depth
        lines = ceil_div(ex.nbytes, LAYOUT.data_bytes)
        with b.loop("k", NRANKS) as k:
            target = (RANK + k) % NRANKS
            b.emit(Atomic(RmwOp.ADD, Ref("result", target, slot=slot, lines=lines), ex.data, Sem.RELAXED,
                          Scope.SYS, label="red_add_data"))
        b.emit(SyncGroup(label="sync_adds_issued"))
        with b.loop("k", NRANKS) as k:
            target = (RANK + k) % NRANKS
            b.emit(Atomic(RmwOp.ADD, Ref("arrivals", target, slot=slot), 1, self.params["counter_sem"], Scope.SYS,
                          issuer=Issuer.LEADER, label="arrive"))
        # Slot `slot` is used by launches slot, slot+depth, ...: its counter only grows.
        b.emit(PollUntil(Ref("arrivals", RANK, slot=slot), AtLeast(NRANKS * (ITER // depth + 1)),
                         self.params["wait_sem"], Scope.SYS, issuer=Issuer.LEADER, label="wait_arrivals"))
        b.emit(SyncGroup(label="sync_sum_ready"))
        b.emit(Load(ex.into, Ref("result", RANK, slot=slot, lines=lines), Sem.WEAK, Scope.SYS, label="load_sum"))
        if self.params["reset"]:
            b.emit(Store(Ref("result", RANK, slot=slot, lines=lines), Fill("zero"), Sem.WEAK, Scope.SYS,
                         label="reset_result"))
