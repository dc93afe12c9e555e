"""counter-barrier: stage, then a barrier whose arrivals are atomic adds to one counter per rank.

Written from docs/WRITING_PROTOCOLS.md. Like the shipped ``barrier``
protocol (stage data in symmetric memory, barrier, peers load it, closing
barrier), but each rank has a single arrival counter instead of one flag
per peer: arriving is ``red.release.sys.add`` of 1 on every peer's counter,
waiting is an acquire poll until the own counter reaches ``(NRANKS - 1) * k``
for the ``k``-th barrier. The counter only grows, so nothing is reset, and a
peer already arriving at barrier ``k + 1`` only makes the wait pass sooner
once everyone reached ``k`` (no rank passes ``k`` before every rank arrived
at it).
"""
from __future__ import annotations

from collsim.ir import (
    ITER, MSG, NRANKS, PEER, PEER_INDEX, RANK, AtLeast, Atomic, Buffer, Exchange, Issuer, Load, PollUntil,
    Protocol, Ref, RmwOp, Scope, Sem, Store, SyncGroup, ceil_div, counter_layout, plain_layout,
)

DATA = plain_layout(word_bytes=4, store_bytes=16)


def staging(rank, offset, nbytes):
    return Ref("staging", rank, line=offset // DATA.data_bytes, lines=ceil_div(nbytes, DATA.data_bytes))


class CounterBarrier(Protocol):
    """Staged data and a counting barrier: one atomic add per peer to a single counter, AtLeast wait."""

    name = "counter-barrier"
    # two-shot works the same way but takes the verifier minutes (three barriers of counted arrivals)
    algorithms = ("one-shot",)
    data_layout = DATA
    analytic_family = "simple"
    default_params = {"arrive_sem": Sem.RELEASE, "wait_sem": Sem.ACQUIRE, "missing_arrivals": 0}

    # one barrier per phase plus a closing one per launch
    barriers_per_exchange = 1
    barriers_per_launch = 1

    def buffers(self, transfer_bytes):
        return (Buffer("staging", DATA, depth=1, regions=1, lines=ceil_div(MSG, DATA.data_bytes)),
                Buffer("arrivals", counter_layout(8), depth=1, regions=1, lines=1, role="flags"))

    def barrier(self, b, k, label):
        """The k-th barrier since the start (k = 1, 2, ...)."""
        b.emit(SyncGroup(label=f"{label}.sync_before"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(Atomic(RmwOp.ADD, Ref("arrivals", PEER), 1, self.params["arrive_sem"], Scope.SYS,
                          issuer=Issuer.LEADER, label=f"{label}.arrive"))
        need = (NRANKS - 1 - self.params["missing_arrivals"]) * k
        b.emit(PollUntil(Ref("arrivals", RANK), AtLeast(need), self.params["wait_sem"], Scope.SYS,
                         issuer=Issuer.LEADER, label=f"{label}.wait"))
        b.emit(SyncGroup(label=f"{label}.sync_after"))

    def exchange(self, b, ex):
        # barriers per launch: phases_per_iter + 1
        for s in ex.sends:
            store = Store(staging(RANK, s.offset, s.nbytes), s.data, Sem.WEAK, Scope.SYS, label="stage")
            if ex.over_peers and PEER_INDEX.name in s.offset.free_vars():
                with b.loop(PEER_INDEX.name, NRANKS - 1):
                    b.emit(store)
            else:
                b.emit(store)
        self.barrier(b, ITER * (ex.phases_per_iter + 1) + ex.phase + 1, "publish")

        def pull(b, r):
            b.emit(Load(r.into, staging(r.frm, r.offset, r.nbytes), Sem.WEAK, Scope.SYS,
                        into_offset=r.into_offset, label="load_peer"))

        pulls = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, pulls, lambda *_: None, pull)

    def epilogue(self, b, launch):
        self.barrier(b, (ITER + 1) * (launch.phases_per_iter + 1), "close")
