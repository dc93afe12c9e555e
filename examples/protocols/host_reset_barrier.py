"""host-reset-barrier: arrival flags that count from 1 in every launch, cleared by the host between launches.

Written from docs/WRITING_PROTOCOLS.md ("Host actions"). Like the shipped
``barrier`` protocol (stage data, barrier, peers load it, closing barrier),
but the flags do not carry an epoch that grows across launches: the k-th
barrier of a launch waits for flag k, and the host clears every rank's
arrival flags with a memset on its stream before each launch. The memset is
ordered after the rank's own previous launch only; a peer may already be in
the next launch and have arrived at its first barrier, so a host barrier
(every stream drained, the hosts meet: ``torch.distributed.barrier``) must
follow the memset. ``host_barrier=False`` drops it: the memset can erase a
peer's arrival and the barrier hangs (``host_reset_barrier_racy.py``).
"""
from __future__ import annotations

from collsim.ir import (
    MSG, NRANKS, PEER, PEER_INDEX, RANK, AtLeast, Buffer, Exchange, HostBarrier, HostMemset, Issuer, Load,
    PollUntil, Protocol, Ref, Scope, Sem, Store, SyncGroup, ceil_div, counter_layout, plain_layout,
)

DATA = plain_layout(word_bytes=4, store_bytes=16)


def staging(rank, offset, nbytes):
    return Ref("staging", rank, line=offset // DATA.data_bytes, lines=ceil_div(nbytes, DATA.data_bytes))


class HostResetBarrier(Protocol):
    """Staged data and flag barriers whose flags the host clears before every launch, then a host barrier."""

    name = "host-reset-barrier"
    algorithms = ("one-shot",)
    data_layout = DATA
    analytic_family = "simple"
    default_params = {"host_barrier": True}

    barriers_per_exchange = 1
    barriers_per_launch = 1

    def buffers(self, transfer_bytes):
        # arrivals[line = sender] in the receiver's memory: one line per peer, so one memset clears them all
        return (Buffer("staging", DATA, depth=1, regions=1, lines=ceil_div(MSG, DATA.data_bytes)),
                Buffer("arrivals", counter_layout(8), depth=1, regions=1, lines=NRANKS, role="flags"))

    def prologue(self, b, launch):
        b.emit(HostMemset(Ref("arrivals", RANK, lines=NRANKS), label="clear_arrivals"))
        if self.params["host_barrier"]:
            b.emit(HostBarrier(label="hosts_meet"))

    def barrier(self, b, k, label):
        """The k-th barrier of this launch (k = 1, 2, ...): flag k into every peer's arrivals, wait for k."""
        b.emit(SyncGroup(label=f"{label}.sync_before"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(Store(Ref("arrivals", PEER, line=RANK), None, Sem.RELEASE, Scope.SYS, flag=k,
                         issuer=Issuer.LEADER, label=f"{label}.arrive"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(PollUntil(Ref("arrivals", RANK, line=PEER), AtLeast(k), Sem.ACQUIRE, Scope.SYS,
                             issuer=Issuer.LEADER, label=f"{label}.wait"))
        b.emit(SyncGroup(label=f"{label}.sync_after"))

    def exchange(self, b, ex):
        for s in ex.sends:
            store = Store(staging(RANK, s.offset, s.nbytes), s.data, Sem.WEAK, Scope.SYS, label="stage")
            if ex.over_peers and PEER_INDEX.name in s.offset.free_vars():
                with b.loop(PEER_INDEX.name, NRANKS - 1):
                    b.emit(store)
            else:
                b.emit(store)
        self.barrier(b, ex.phase + 1, "publish")

        def pull(b, r):
            b.emit(Load(r.into, staging(r.frm, r.offset, r.nbytes), Sem.WEAK, Scope.SYS,
                        into_offset=r.into_offset, label="load_peer"))

        pulls = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, pulls, lambda *_: None, pull)

    def epilogue(self, b, launch):
        self.barrier(b, launch.phases_per_iter + 1, "close")
