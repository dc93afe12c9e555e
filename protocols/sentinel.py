"""sentinel: Lamport-style poison: arriving data overwrites a NaN sentinel."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import NRANKS, RANK, Const, Expr, ceil_div
from collsim.ir.layout import LineLayout, Word, WordRole
from collsim.ir.ops import Compare, Fence, Fill, NotEqual, PollUntil, Ref, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import DataDomain, Exchange, Protocol, Recv, Send
from collsim.ir.types import FenceKind, Scope, Sem

#: NCCL contrib's LSA_POISON, a NaN bit pattern that no finite float has.
POISON = 0xFFFAFFFA
#: A float4 line; readers poll its .w word.
SENTINEL_LINE = LineLayout("float4-16B", (Word(WordRole.DATA, 4),) * 4, store_bytes=16, polled_words=(3,))


class Sentinel(Protocol):
    """Receive buffers hold a NaN sentinel that arriving 16-byte stores overwrite; readers spin until ``.w`` is not the sentinel.

    No flags and no barrier: full payload, one store per line. Three
    buffers rotate with ``seq``; after consuming ``seq`` a reader re-poisons
    its slot of ``seq - 1``, which no peer can be writing because a peer is
    at most one phase ahead; a fence before each later phase of a launch
    orders that re-poison before the stores that let a peer move on. Relies on a 16-byte store arriving whole, and
    on user data never containing the sentinel pattern. Source: NVIDIA/nccl
    contrib/custom_algos/allreduce (twoshot_mc_poison, LSA_POISON) and
    contrib/custom_algos/alltoall README (why three buffers).
    """

    name = "sentinel"
    algorithms = ("one-shot", "two-shot")
    data_layout = SENTINEL_LINE
    assumptions = ("store-16B-untorn",)
    data_domain = DataDomain(POISON, "no 32-bit word of user data (inputs and partial sums) equals the poison 0xFFFAFFFA")
    analytic_family = "ll"
    citation = "NVIDIA/nccl contrib/custom_algos/allreduce README and twoshot_mc_poison kernel"
    default_params = {"depth": 3, "repoison_offset": 2, "repoison": True}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        lines = ceil_div(transfer_bytes, SENTINEL_LINE.data_bytes)
        return (Buffer("poisoned", SENTINEL_LINE, depth=self.params["depth"], regions=NRANKS, lines=lines,
                       init="sentinel"),)

    def _slot(self, owner: Expr, sender: Expr, seq: Expr, nbytes: Expr) -> Ref:
        return Ref("poisoned", owner, slot=seq % self.params["depth"], region=sender,
                   lines=ceil_div(nbytes, SENTINEL_LINE.data_bytes))

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        seq = ex.seq
        if not (isinstance(ex.phase, Const) and ex.phase.value == 0):
            # A later phase of the same launch: the previous phase's polls and
            # re-poison stores must be ordered before this phase's stores, or a
            # peer that sees them could write a slot before this rank's
            # re-poison of it lands. Between launches the kernel boundary does it.
            b.emit(Fence(FenceKind.ACQ_REL, Scope.SYS, label="fence_between_phases"))

        def send(builder: ProgramBuilder, s: Send) -> None:
            builder.emit(Store(self._slot(s.to, RANK, seq, s.nbytes), s.data, Sem.RELAXED, Scope.SYS,
                               label="store_lines"))

        def recv(builder: ProgramBuilder, r: Recv) -> None:
            builder.emit(PollUntil(self._slot(RANK, r.frm, seq, r.nbytes), NotEqual(*self.sentinel), Sem.RELAXED,
                                   Scope.SYS, into=r.into, into_offset=r.into_offset, label="poll_not_poison"))
            if not self.params["repoison"]:  # a variant that leaves the reset to someone else
                return
            # Re-poison the slot of seq-1 (= seq + 2 mod 3), which no peer is writing.
            builder.emit(Store(self._slot(RANK, r.frm, seq + self.params["repoison_offset"], r.nbytes),
                               Fill("sentinel"), Sem.RELAXED, Scope.SYS, label="repoison"))

        self.sends_then_recvs(b, ex, send, recv)

    #: the pattern readers poll against, and how they compare it: as the integer word, so that
    #: no float rule (-0.0 == +0.0, NaN != NaN) enters
    sentinel: tuple[int, Compare] = (POISON, Compare.BITWISE)
