"""last-arriver-barrier: the barrier protocol with a counting barrier whose last arriver resets and releases.

Each rank's leader adds 1 to one arrival counter (rank 0's) with ``atom.add.acq_rel.sys`` and keeps the
old value. The rank that gets ``NRANKS - 1`` arrived last: it resets the counter to 0 and then stores the
barrier's epoch into every rank's ``go`` word with release; every rank waits for its own ``go`` with
acquire. The branch is a :class:`~collsim.ir.ops.When` on the returned value: its ops exist only in
executions where this rank's fetch-add returned ``NRANKS - 1``. It is the classic centralized barrier
(Mellor-Crummey and Scott, ACM TOCS 9(1), 1991) as GPU grid and multi-GPU barriers write it with one
counter in memory: the acquire-release add chains every arrival's writes to the last arriver, whose
release publishes them to everyone; resetting before the release means a rank that already passed and
arrives at the next barrier always finds the counter empty.

With ``reset_after_release`` the last arriver releases first and resets after: a rank released early
arrives at the next barrier before the reset, and the reset erases its arrival (a lost signal:
last_arriver_barrier_late_reset.py).
"""
from __future__ import annotations

from collsim.ir import (NRANKS, RANK, AtLeast, Atomic, Buffer, Equals, Issuer, PollUntil, Ref, RmwOp, Scope,
                        Sem, Store, SyncGroup, counter_layout)
from protocols.barrier import Barrier

#: the register the fetch-add's old value lands in
TICKET = "ticket"


class LastArriverBarrier(Barrier):
    """barrier, each barrier one fetch-add counter whose last arriver resets it and releases a flag."""

    name = "last-arriver-barrier"
    algorithms = ("one-shot",)
    citation = "J. Mellor-Crummey, M. Scott, ACM TOCS 9(1) 1991 (centralized barrier)"
    default_params = {**Barrier.default_params, "reset_after_release": False}

    def buffers(self, transfer_bytes):
        staging = super().buffers(transfer_bytes)[0]
        return (staging,
                Buffer("arrivals", counter_layout(8), depth=1, regions=1, lines=1, role="flags"),
                Buffer("go", counter_layout(8), depth=1, regions=1, lines=1, role="flags"))

    def _barrier(self, b, number, label):
        epoch = self.epoch(number)
        b.register(TICKET, 8)
        last = Equals(NRANKS - 1)
        b.emit(SyncGroup(label=f"{label}.sync_before"))
        b.emit(Atomic(RmwOp.ADD, Ref("arrivals", 0), 1, Sem.ACQ_REL, Scope.SYS, into=TICKET, issuer=Issuer.LEADER,
                      label=f"{label}.arrive"))

        def reset():
            with b.when(TICKET, last, label=f"{label}.if_last"):
                b.emit(Store(Ref("arrivals", 0), None, Sem.RELAXED, Scope.SYS, flag=0, issuer=Issuer.LEADER,
                             label=f"{label}.reset"))

        if not self.params["reset_after_release"]:
            reset()
        with b.loop("r", NRANKS) as r:
            with b.when(TICKET, last, label=f"{label}.if_last"):
                b.emit(Store(Ref("go", r), None, self.params["arrive_sem"], Scope.SYS, flag=epoch,
                             issuer=Issuer.LEADER, label=f"{label}.release"))
        if self.params["reset_after_release"]:
            reset()
        b.emit(PollUntil(Ref("go", RANK), AtLeast(epoch), self.params["wait_sem"], Scope.SYS, issuer=Issuer.LEADER,
                         label=f"{label}.wait"))
        b.emit(SyncGroup(label=f"{label}.sync_after"))
