"""signal-pad: the barrier protocol with PyTorch SymmetricMemory's signalling: an atomic round trip per peer."""
from __future__ import annotations

from collsim.ir.expr import ITER, NRANKS, RANK, Const, Expr
from collsim.ir.ops import AtLeast, Atomic, Load, PollUntil, Ref, Store, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX, Exchange, Launch, Recv
from collsim.ir.types import Issuer, RmwOp, Scope, Sem
from protocols.barrier import Barrier, _region

#: The register a signal's old value lands in (the signalling thread waits for it, as a CAS loop does).
OLD = "signal_old"


class SignalPad(Barrier):
    """Stage, barrier, pull from peers, barrier: the barrier signalled as PyTorch SymmetricMemory does it.

    ``sync_remote_blocks`` has thread ``t`` signal peer ``t`` with ``put_signal`` (a system-scope CAS on
    the peer's signal pad, retried until it finds the slot empty) and then wait for peer ``t``'s signal
    with ``wait_signal`` (a CAS loop on its own pad). A signal is therefore a remote atomic whose old value
    the thread waits for, not a store it fires and forgets. The IR's ``Atomic`` has no compare operand, so
    the put (``<barrier>.arrive``) is an atomic exchange of the epoch (``atom.exch.release.sys``: the same
    remote round trip and release ordering); the wait is an acquire poll of the own slot (the IR polls by
    load, a CAS loop polls by atomic; each sample is one L2 access either way). Epochs instead of PyTorch's 0/1 toggle: a slot is
    never reset, so the put never finds it occupied. Source: pytorch/pytorch
    torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.h (put_signal, wait_signal,
    sync_remote_blocks), CUDASymmetricMemoryOps.cu (one_shot_all_reduce, two_shot_all_reduce).

    The last phase of a multi-phase algorithm (two-shot's all-gather) is pushed, as PyTorch's
    two_shot_all_reduce does: each rank stores its reduced piece straight into every peer's staging
    buffer, at the piece's offset, and the closing barrier publishes it; each rank then reads the
    gathered pieces from its own staging. Two barriers per launch instead of three. Overwriting a peer's
    staged piece is safe: only the rank that owns the piece read it, before its own push.
    """

    name = "signal-pad"
    citation = ("pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.h (put_signal, "
                "wait_signal, sync_remote_blocks); CUDASymmetricMemoryOps.cu")

    # two barriers per launch under every algorithm it has: one-shot publishes and closes; two-shot publishes
    # its reduce-scatter, and the barrier after its pushed all-gather both publishes the pushes and closes
    barriers_per_exchange = 0
    barriers_per_launch = 2

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        if not _last_of_several(ex):
            super().exchange(b, ex)
            return
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            for send in ex.sends:
                b.emit(Store(_region(send.to, send.offset, send.nbytes), send.data, Sem.WEAK, Scope.SYS,
                             label="push_peer"))
        # the closing barrier publishes the pushes; the epilogue then has none to add
        self._barrier(b, 2 * (ITER + 1) * ex.phases_per_iter - 1, "barrier.release_buffers")

        def read_own(builder: ProgramBuilder, recv: Recv) -> None:
            builder.emit(Load(recv.into, _region(RANK, recv.offset, recv.nbytes), Sem.WEAK, Scope.SYS,
                              label="load_pushed", into_offset=recv.into_offset))

        self.sends_then_recvs(b, Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep,
                                          ex.consume), lambda *_: None, read_own)

    def epilogue(self, b: ProgramBuilder, launch: Launch) -> None:
        if not _several(launch.phases_per_iter):  # else the barrier after the pushed last phase closed it
            super().epilogue(b, launch)

    def _barrier(self, b: ProgramBuilder, number: Expr, label: str) -> None:
        epoch = self.epoch(number)
        b.register(OLD, 8)
        b.emit(SyncGroup(label=f"{label}.sync_before"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(Atomic(RmwOp.EXCH, Ref("inbox", PEER, region=RANK), epoch, self.params["arrive_sem"], Scope.SYS,
                          into=OLD, issuer=Issuer.LEADER, label=f"{label}.arrive"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(PollUntil(Ref("inbox", RANK, region=PEER), AtLeast(epoch), self.params["wait_sem"], Scope.SYS,
                             issuer=Issuer.LEADER, label=f"{label}.wait"))
        b.emit(SyncGroup(label=f"{label}.sync_after"))


def _several(phases: Expr) -> bool:
    """True for an algorithm with several phases (every phase of signal-pad's algorithms is over peers)."""
    return isinstance(phases, Const) and phases.value > 1


def _last_of_several(ex: Exchange) -> bool:
    """True for the last phase of an algorithm with several phases, all of them over peers."""
    phase = ex.phase
    return (ex.over_peers and _several(ex.phases_per_iter) and isinstance(phase, Const)
            and phase.value == ex.phases_per_iter.value - 1)
