"""simple-ra: Simple with release/acquire step counters instead of fences.

Written from docs/WRITING_PROTOCOLS.md. Data goes into the receiver's slot
``seq % depth`` with plain (weak) stores; after a group barrier the leader
publishes the step with ``st.release.sys`` and the receiver's leader waits
with ``ld.acquire.sys`` until the counter reaches ``seq + 1``, then the
group reads the data with plain loads. The release/acquire pair does what
Simple's two ``fence.acq_rel.sys`` do, in the flag accesses themselves.
"""
from __future__ import annotations

from collsim.ir import (
    NRANKS, RANK, AtLeast, Buffer, Exchange, Issuer, Load, PollUntil, Protocol, Ref, Scope, Sem, Store, SyncGroup,
    ceil_div, counter_layout, plain_layout,
)

DATA = plain_layout(word_bytes=4, store_bytes=16)


class SimpleRA(Protocol):
    """Weak data stores, then a release store of a 64-bit step counter; acquire poll, then weak loads."""

    name = "simple-ra"
    algorithms = ("one-shot", "two-shot")
    data_layout = DATA
    analytic_family = "simple"
    default_params = {"depth": 2, "post_sem": Sem.RELEASE, "wait_sem": Sem.ACQUIRE}

    def buffers(self, transfer_bytes):
        return (Buffer("slots", DATA, depth=self.params["depth"], regions=NRANKS,
                       lines=ceil_div(transfer_bytes, DATA.data_bytes)),
                Buffer("steps", counter_layout(8), depth=1, regions=NRANKS, lines=1, role="flags"))

    def slot(self, owner, sender, seq, nbytes):
        return Ref("slots", owner, slot=seq % self.params["depth"], region=sender,
                   lines=ceil_div(nbytes, DATA.data_bytes))

    def exchange(self, b, ex):
        seq = ex.seq

        def store_data(b, s):
            b.emit(Store(self.slot(s.to, RANK, seq, s.nbytes), s.data, Sem.WEAK, Scope.SYS, label="store_data"))

        def post_step(b, s):
            b.emit(Store(Ref("steps", s.to, region=RANK), None, self.params["post_sem"], Scope.SYS, flag=seq + 1,
                         issuer=Issuer.LEADER, label="post_step"))

        def recv(b, r):
            b.emit(PollUntil(Ref("steps", RANK, region=r.frm), AtLeast(seq + 1), self.params["wait_sem"],
                             Scope.SYS, issuer=Issuer.LEADER, label="wait_step"))
            b.emit(SyncGroup(label="sync_step_seen"))
            b.emit(Load(r.into, self.slot(RANK, r.frm, seq, r.nbytes), Sem.WEAK, Scope.SYS,
                        into_offset=r.into_offset, label="load_data"))

        data = Exchange(ex.phase, ex.phases_per_iter, ex.sends, (), ex.over_peers, ex.lockstep)
        self.sends_then_recvs(b, data, store_data, lambda *_: None)
        b.emit(SyncGroup(label="sync_data_written"))
        steps = Exchange(ex.phase, ex.phases_per_iter, ex.sends, ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, steps, post_step, recv)
