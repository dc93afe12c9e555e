"""nvls: NVLink SHARP: the NVSwitch reduces every rank's copy (multimem.ld_reduce) and multicasts results."""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import ITER, MSG, NRANKS, RANK, Const, Expr, ceil_div
from collsim.ir.layout import plain_layout
from collsim.ir.library import multicast_barrier, multicast_counter_buffer
from collsim.ir.ops import Input, Load, MulticastRef, MultimemLoadReduce, MultimemStore, Ref, Reg, Store
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER_INDEX, Exchange, Protocol, Recv, ReduceExchange, Send
from collsim.ir.types import Scope, Sem

#: 16-byte lines of four 32-bit words: one multimem.ld_reduce.v4 / multimem.st.v4 per line.
LAYOUT = plain_layout(word_bytes=4, store_bytes=16)


class NVLS(Protocol):
    """The NVSwitch reduces: every rank stages its input in a buffer bound to a multicast object, a multicast barrier publishes it, and ``multimem.ld_reduce`` returns the sum of every rank's copy in one load.

    One-shot: every rank ld_reduces the whole message. Two-shot: each rank
    ld_reduces its 1/``NRANKS`` chunk and ``multimem.st``s it into every
    rank's result buffer, and a second barrier publishes the results. The
    barriers are counters every rank's ``multimem.red.release.sys.add 1``
    reaches at once, waited for with an acquire spin on the local copy
    until it reaches ``NRANKS`` per barrier (NCCL's LSA multimem barrier).
    The staging buffer is double-buffered, so one-shot needs no closing
    barrier: a rank that is about to overwrite a slot passed the next
    launch's barrier, which every peer reached after its loads. Relies on
    no hardware assumption: every access is a PTX store, load or atomic on
    each copy. Needs NVSwitch multicast and reductions (sm_90, NVLink
    SHARP). Scratch per rank: ``2 × MSG`` staging (+ ``MSG`` results for
    two-shot) and a 4-byte counter per barrier of a launch, each rounded up
    to the multicast granularity. Sources: NCCL src/device/symmetric/all_reduce.cuh
    (RSxLDMC_AGxSTMC), src/include/nccl_device/impl/lsa_barrier__funcs.h;
    NVIDIA/nccl contrib/custom_algos/allreduce (oneshot_mc,
    twoshot_mc_simple); PyTorch symmetric memory multimem_all_reduce_ and
    multimem_one_shot_all_reduce.
    """

    name = "nvls"
    algorithms = ("one-shot", "two-shot")
    data_layout = LAYOUT
    reduces_remotely = True
    analytic_family = "simple"
    barriers_per_exchange = 1
    citation = ("NVIDIA/nccl src/device/symmetric/all_reduce.cuh (RSxLDMC_AGxSTMC), "
                "src/include/nccl_device/impl/lsa_barrier__funcs.h; NVIDIA/nccl contrib/custom_algos/allreduce "
                "(oneshot_mc, twoshot_mc_simple); pytorch/pytorch CUDASymmetricMemoryOps.cu (multimem_all_reduce_)")
    #: ``arrivals``: what a barrier waits for, "all" ranks or "peers" (NRANKS - 1, for a mutant)
    default_params = {"depth": 2, "arrive_sem": Sem.RELEASE, "wait_sem": Sem.ACQUIRE, "arrivals": "all"}

    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        lines = ceil_div(MSG, LAYOUT.data_bytes)
        staged = Buffer("staged", LAYOUT, depth=self.params["depth"], regions=1, lines=lines, multicast=True)
        if transfer_bytes == MSG:  # one send moves the whole message: one-shot, no all-gather, one barrier
            return (staged, multicast_counter_buffer(counters=1))
        results = Buffer("results", LAYOUT, depth=1, regions=1, lines=lines, multicast=True)
        return (staged, results, multicast_counter_buffer(counters=2))  # a counter per exchange

    def _barrier(self, b: ProgramBuilder, phase: Expr, label: str) -> None:
        # one barrier per exchange, each on its own counter (phase), used once per launch
        arrivals = NRANKS if self.params["arrivals"] == "all" else NRANKS - 1
        multicast_barrier(b, ITER + 1, which=phase, arrive_sem=self.params["arrive_sem"],
                          wait_sem=self.params["wait_sem"], arrivals=arrivals, label=label)

    @staticmethod
    def _lines(offset: Expr, nbytes: Expr) -> tuple[Expr, Expr]:
        return offset // LAYOUT.data_bytes, ceil_div(nbytes, LAYOUT.data_bytes)

    def reduce_exchange(self, b: ProgramBuilder, ex: ReduceExchange) -> None:
        slot = ITER % self.params["depth"]
        line, lines = self._lines(Const(0), MSG)
        b.emit(Store(Ref("staged", RANK, slot=slot, line=line, lines=lines), ex.data, Sem.WEAK, Scope.SYS,
                     label="stage"))
        self._barrier(b, ex.phase, "mc_barrier.publish")
        line, lines = self._lines(ex.piece_offset(RANK), ex.nbytes)
        b.emit(MultimemLoadReduce(ex.into, MulticastRef("staged", slot=slot, line=line, lines=lines), Sem.WEAK,
                                  Scope.SYS, label="ld_reduce"))

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        """The all-gather of two-shot: one multicast store of this rank's reduced chunk reaches every rank."""
        for send in ex.sends:
            if ex.over_peers and _depends_on_peer(send):
                raise ValueError("an NVLS all-gather multicasts one piece to every peer; this send differs by peer")
            line, lines = self._lines(send.offset, send.nbytes)
            b.emit(MultimemStore(MulticastRef("results", line=line, lines=lines), send.data, Sem.WEAK, Scope.SYS,
                                 label="multimem_st"))
        self._barrier(b, ex.phase, "mc_barrier.gather")

        def read(builder: ProgramBuilder, recv: Recv) -> None:
            line, lines = self._lines(recv.offset, recv.nbytes)
            builder.emit(Load(recv.into, Ref("results", RANK, line=line, lines=lines), Sem.WEAK, Scope.SYS,
                              into_offset=recv.into_offset, label="load_result"))

        reads = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, reads, lambda *_: None, read)


def _depends_on_peer(send: Send) -> bool:
    """Whether what is sent (not where: a multicast goes everywhere) differs from peer to peer."""
    names = send.offset.free_vars()
    if isinstance(send.data, (Input, Reg)):
        names |= send.data.offset.free_vars()
    return PEER_INDEX.name in names
