"""barrier: plain data movement bracketed by global-memory barriers."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import ITER, MSG, NRANKS, RANK, Expr, ceil_div
from collsim.ir.layout import plain_layout
from collsim.ir.library import barrier, inbox_buffer
from collsim.ir.ops import Input, Load, Ref, Reg, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER_INDEX, Exchange, Launch, Protocol, Recv, Send
from collsim.ir.types import Scope, Sem

LAYOUT = plain_layout(word_bytes=4, store_bytes=16)


class Barrier(Protocol):
    """Stage data in symmetric memory, barrier, read peers directly, barrier again.

    Each rank copies what it sends into its own symmetric buffer; an
    all-to-all barrier (release flag stores, acquire polls) publishes it;
    peers then load it over NVLink; a closing barrier stops the next launch
    from overwriting a buffer a slow peer is still reading. This is the
    structure of PyTorch SymmetricMemory's one_shot_all_reduce and
    two_shot_all_reduce (CUDASymmetricMemoryOps.cu, sync_remote_blocks with
    acq_rel) and of vLLM's custom all-reduce.
    """

    name = "barrier"
    algorithms = ("one-shot", "two-shot")
    data_layout = LAYOUT
    analytic_family = "simple"
    citation = ("pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu; "
                "vllm-project/vllm csrc/custom_all_reduce.cuh")
    default_params = {"flag_bits": 64, "arrive_sem": Sem.RELEASE, "wait_sem": Sem.ACQUIRE}

    # one barrier per exchange plus the closing one
    barriers_per_exchange = 1
    barriers_per_launch = 1

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        # Staging holds the whole message, each piece at its message offset.
        staging = Buffer("staging", LAYOUT, depth=1, regions=1, lines=ceil_div(MSG, LAYOUT.data_bytes))
        return (staging, inbox_buffer())

    def _barrier(self, b: ProgramBuilder, number: Expr, label: str) -> None:
        barrier(b, self.epoch(number), arrive_sem=self.params["arrive_sem"],
                wait_sem=self.params["wait_sem"], label=label)

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        for send in ex.sends:
            store = Store(_region(RANK, send.offset, send.nbytes), send.data, Sem.WEAK, Scope.SYS, label="stage")
            if ex.over_peers and PEER_INDEX.name in _free_vars(send):
                with b.loop(PEER_INDEX.name, NRANKS - 1):
                    b.emit(store)
            else:  # the same data for every peer: stage it once
                b.emit(store)
        # Barrier numbers: 2*seq publishes phase seq; the odd number after a
        # launch's last publish closes it, so numbers never repeat.
        self._barrier(b, 2 * ex.seq, "barrier.publish")

        def pull(builder: ProgramBuilder, recv: Recv) -> None:
            builder.emit(Load(recv.into, _region(recv.frm, recv.offset, recv.nbytes), Sem.WEAK, Scope.SYS,
                              label="load_peer", into_offset=recv.into_offset))

        pulls_only = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, pulls_only, lambda *_: None, pull)

    def epilogue(self, b: ProgramBuilder, launch: Launch) -> None:
        self._barrier(b, 2 * (ITER + 1) * launch.phases_per_iter - 1, "barrier.release_buffers")


def _region(rank: Expr, offset: Expr, nbytes: Expr) -> Ref:
    return Ref("staging", rank, line=offset // LAYOUT.data_bytes, lines=ceil_div(nbytes, LAYOUT.data_bytes))


def _free_vars(send: Send) -> frozenset[str]:
    # The destination does not matter: staging is in this rank's own buffer.
    names = send.offset.free_vars()
    if isinstance(send.data, (Input, Reg)):
        names |= send.data.offset.free_vars()
    return names
