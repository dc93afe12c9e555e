"""step-barrier: the barrier protocol whose waits count from a step counter the kernel loads from memory.

NCCL's primitives keep a connection's ``step`` in device memory between launches: a kernel loads it when
it starts, waits for ``step + k`` on the peer's counter, and saves the advanced step back when it ends
(src/device/prims_simple.h, loadRecvConn and the destructor's save). Here each rank keeps the epoch of the
last barrier it passed in a ``steps`` word in its own memory: its leader loads it at the start of a launch,
and every barrier of the launch waits until each inbox reaches ``step + k`` (a
:class:`~collsim.ir.expr.Loaded` wait target), the ``k``-th epoch after the loaded one. The arrivals still
store the epoch computed from ``ITER``: every rank passes the same barriers, so the two agree exactly when
the step was saved and loaded in order, which is what the verifier proves.

With ``load_peer_step`` a rank loads its ring neighbour's step word instead of its own (the two are
equal once both are saved). Nothing orders the neighbour's save at the end of its launch before this
rank's load at the start of the next (this rank may leave the closing barrier and start first), so it can
read the previous generation and pass the next barrier on epochs its inbox already holds:
step_barrier_peer.py is that bug.
"""
from __future__ import annotations

from contextlib import contextmanager

from collsim.ir import (ITER, NRANKS, PEER, PEER_INDEX, RANK, AtLeast, Buffer, Issuer, Load, PollUntil, Ref,
                        Scope, Sem, Store, SyncGroup, counter_layout)
from collsim.ir.expr import Loaded
from protocols.barrier import Barrier

#: the register the step lands in
STEP = "step"


class StepBarrier(Barrier):
    """barrier, with every wait target counted from a step counter loaded at kernel start."""

    name = "step-barrier"
    algorithms = ("one-shot",)
    citation = "NVIDIA/nccl src/device/prims_simple.h (conn->step loaded at start, saved at the end)"
    default_params = {**Barrier.default_params, "load_peer_step": False, "step_sem": Sem.RELAXED}

    def buffers(self, transfer_bytes):
        return (*super().buffers(transfer_bytes), Buffer("steps", counter_layout(8), depth=1, regions=1, lines=1,
                                                         role="flags"))


    def prologue(self, b, launch):
        b.register(STEP, 8)
        b.emit(Load(STEP, Ref("steps", (RANK + 1) % NRANKS if self.params["load_peer_step"] else RANK),
                    self.params["step_sem"], Scope.SYS, issuer=Issuer.LEADER, label="load_step"))

    def _barrier(self, b, number, label):
        epoch = self.epoch(number)
        # the number of barriers per launch is 2 * phases: the k-th of this launch is epoch ITER*2P + k,
        # and the loaded step is the epoch of the last barrier of the previous launch, ITER*2P
        phases = self._phases
        b.emit(SyncGroup(label=f"{label}.sync_before"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(Store(Ref("inbox", PEER, region=RANK), None, self.params["arrive_sem"], Scope.SYS, flag=epoch,
                         issuer=Issuer.LEADER, label=f"{label}.arrive"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(PollUntil(Ref("inbox", RANK, region=PEER), AtLeast(Loaded(STEP) + (epoch - 2 * ITER * phases)),
                             self.params["wait_sem"], Scope.SYS, issuer=Issuer.LEADER, label=f"{label}.wait"))
        b.emit(SyncGroup(label=f"{label}.sync_after"))

    # the barrier's wait target needs the phases per launch, which the inherited hooks do not pass on: each hook
    # lends it to _barrier for its own duration only, so no state outlives a hook
    @contextmanager
    def _lend_phases(self, phases):
        self._phases = phases
        try:
            yield
        finally:
            del self._phases

    def exchange(self, b, ex):
        with self._lend_phases(ex.phases_per_iter):
            super().exchange(b, ex)

    def epilogue(self, b, launch):
        with self._lend_phases(launch.phases_per_iter):
            super().epilogue(b, launch)
        saved = self.epoch(2 * (ITER + 1) * launch.phases_per_iter - 1)
        b.emit(Store(Ref("steps", RANK), None, self.params["step_sem"], Scope.SYS, flag=saved,
                     issuer=Issuer.LEADER, label="save_step"))
