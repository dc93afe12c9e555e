"""barrier-bulk: the barrier protocol whose peers' staged data is pulled with bulk async copies (cp.async.bulk, TMA).

Written from docs/WRITING_PROTOCOLS.md ("The asynchronous proxy"). Like the
shipped ``barrier`` protocol (stage data, barrier, pull from peers, closing
barrier), but each pull is one ``cp.async.bulk`` of the peer's staging lines
into shared memory (completing on an mbarrier), as TMA-based collective
kernels copy (sm_90). The staging stores are generic-proxy writes published
by the barrier's release/acquire; the copy reads through the async proxy, so
the leader that issues it first executes ``fence.proxy.async``: without it
(``proxy_fence=False``, ``barrier_bulk_no_proxy_fence.py``) the copy may read
what the staging buffer held before.
"""
from __future__ import annotations

from collsim.ir import ITER, NRANKS, RANK, BulkLoad, Issuer, ProxyFence, Scope, Sem, Store
from collsim.ir.library import barrier
from collsim.ir.protocol import PEER_INDEX, Exchange
from protocols.barrier import Barrier, _free_vars, _region


class BarrierBulk(Barrier):
    """Stage data, barrier, pull every peer's staging with one bulk async copy each (after a proxy fence), barrier."""

    name = "barrier-bulk"
    algorithms = ("one-shot",)
    citation = "PTX ISA: cp.async.bulk, fence.proxy.async (memory consistency model, proxies)"
    default_params = {**Barrier.default_params, "proxy_fence": True}

    def exchange(self, b, ex: Exchange):
        for send in ex.sends:
            store = Store(_region(RANK, send.offset, send.nbytes), send.data, Sem.WEAK, Scope.SYS, label="stage")
            if ex.over_peers and PEER_INDEX.name in _free_vars(send):
                with b.loop(PEER_INDEX.name, NRANKS - 1):
                    b.emit(store)
            else:
                b.emit(store)
        barrier(b, self.epoch(2 * ex.seq), label="barrier.publish")
        if self.params["proxy_fence"]:
            # the leader acquired the peers' flags through the generic proxy; its bulk copies read through the
            # async proxy
            b.emit(ProxyFence(issuer=Issuer.LEADER, label="fence_proxy_async"))

        def pull(builder, recv):
            builder.emit(BulkLoad(recv.into, _region(recv.frm, recv.offset, recv.nbytes),
                                  into_offset=recv.into_offset, label="bulk_load_peer"))

        pulls = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, pulls, lambda *_: None, pull)

    def epilogue(self, b, launch):
        barrier(b, self.epoch(2 * (ITER + 1) * launch.phases_per_iter - 1), label="barrier.release_buffers")
