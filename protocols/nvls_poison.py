"""nvls-poison: NVLS two-shot whose results overwrite a NaN poison in place of the second barrier."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import ITER, MSG, RANK, Expr, ceil_div
from collsim.ir.library import multicast_counter_buffer
from collsim.ir.ops import Fill, MulticastRef, MultimemStore, NotEqual, PollUntil, Ref
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import DataDomain, Exchange, Recv
from collsim.ir.types import Scope, Sem
from protocols.nvls import NVLS
from protocols.sentinel import POISON, SENTINEL_LINE


class NVLSPoison(NVLS):
    """NVLS two-shot without the second barrier: each rank's ``multimem.st`` of its reduced chunk overwrites a NaN poison in every rank's result buffer, and readers spin on their own copy until each float4's ``.w`` is not the poison.

    The first barrier (every input staged) stays; the all-gather is
    carried by the data itself. Result buffers rotate over three slots:
    after reading launch ``i``'s results a rank multicasts the poison into
    its own chunk of slot ``i + 2`` (the slot of ``i - 1``), which every
    rank finished reading before the barrier of launch ``i`` let this rank
    go on, and which no rank writes before launch ``i + 2``. Correct only
    if a 16-byte ``multimem.st`` lands whole in each copy
    (``multicast-store-16B-untorn``: seeing ``.w`` means seeing the float4)
    and user data never holds the poison word. Source: NVIDIA/nccl
    contrib/custom_algos/allreduce twoshot_mc_poison (LSA_POISON
    0xFFFAFFFA, triple buffering, inline re-poison). Scratch per rank:
    ``2 × MSG`` staging, ``3 × MSG`` results, one counter, rounded up to
    the multicast granularity.
    """

    name = "nvls-poison"
    algorithms = ("two-shot",)
    data_layout = SENTINEL_LINE
    assumptions = ("multicast-store-16B-untorn",)
    data_domain = DataDomain(POISON, "no 32-bit word of user data (inputs and partial sums) equals the poison "
                                     "0xFFFAFFFA")
    analytic_family = "ll"
    barriers_per_exchange = 0
    barriers_per_launch = 1
    citation = "NVIDIA/nccl contrib/custom_algos/allreduce README and twoshot_mc_poison kernel"
    default_params = {**NVLS.default_params, "results_depth": 3, "repoison_offset": 2, "repoison": True}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        staged = super().buffers(transfer_bytes)[0]
        results = Buffer("results", SENTINEL_LINE, depth=self.params["results_depth"], regions=1,
                         lines=ceil_div(MSG, SENTINEL_LINE.data_bytes), init="sentinel", multicast=True)
        return (staged, results, multicast_counter_buffer(counters=1))  # the one barrier of a launch

    def _results(self, slot: Expr, offset: Expr, nbytes: Expr) -> tuple[Expr, Expr, Expr]:
        return slot % self.params["results_depth"], *self._lines(offset, nbytes)

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        for send in ex.sends:
            slot, line, lines = self._results(ITER, send.offset, send.nbytes)
            b.emit(MultimemStore(MulticastRef("results", slot=slot, line=line, lines=lines), send.data, Sem.RELAXED,
                                 Scope.SYS, label="multimem_st"))

        def read(builder: ProgramBuilder, recv: Recv) -> None:
            slot, line, lines = self._results(ITER, recv.offset, recv.nbytes)
            builder.emit(PollUntil(Ref("results", RANK, slot=slot, line=line, lines=lines), NotEqual(POISON),
                                   Sem.RELAXED, Scope.SYS, into=recv.into, into_offset=recv.into_offset,
                                   label="poll_not_poison"))

        reads = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, reads, lambda *_: None, read)
        if self.params["repoison"]:
            # This rank's own chunk of the slot used one launch ago, in every copy.
            for send in ex.sends:
                slot, line, lines = self._results(ITER + self.params["repoison_offset"], send.offset, send.nbytes)
                b.emit(MultimemStore(MulticastRef("results", slot=slot, line=line, lines=lines), Fill("sentinel"),
                                     Sem.RELAXED, Scope.SYS, label="repoison"))
