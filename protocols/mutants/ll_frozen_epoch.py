"""mutant-ll-frozen-epoch: LL replayed from a CUDA graph, its epoch and slot passed as a kernel argument."""
from __future__ import annotations

from dataclasses import dataclass

from collsim.ir.expr import ARG_ITER, Expr
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange
from protocols.ll import LL


@dataclass(frozen=True)
class _ArgumentEpochs(Exchange):
    """An exchange whose sequence number comes from the host's launch index, a kernel argument."""

    @property
    def seq(self) -> Expr:
        return ARG_ITER * self.phases_per_iter + self.phase


class LLFrozenEpoch(LL):
    """LL whose step number (hence the flag epoch and the slot) is a kernel argument the host computes from
    its own launch count, and whose launches are replayed from one CUDA graph.

    Kernel arguments are frozen when the graph is captured, so every replay stores and polls the capture's
    epoch into the capture's slot: the receiver's poll passes on the line the previous replay left there
    and returns stale data. Graph-safe kernels keep the counter in device memory and read it in the kernel
    (collsim's ``ITER``; vLLM's custom all-reduce keeps its per-block flag counter in the signal buffer for
    this reason).
    """

    name = "mutant-ll-frozen-epoch"
    algorithms = ("one-shot",)
    graph_replay = True
    expected_violation = "stale-read"

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        frozen = _ArgumentEpochs(ex.phase, ex.phases_per_iter, ex.sends, ex.recvs, ex.over_peers, ex.lockstep,
                                 ex.consume)
        super().exchange(b, frozen)
