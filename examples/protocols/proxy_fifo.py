"""proxy-fifo: a one-shot AllReduce whose sends a host proxy thread carries, through a head/tail FIFO in host memory.

Written from docs/WRITING_PROTOCOLS.md ("A CPU proxy thread"). The shape of
NCCL's proxy path (the kernel posts a request into pinned, device-mapped
host memory and a CPU thread progresses it: NCCL src/proxy.cc and the
host-memory FIFO of its network transport; MSCCL++'s proxy channels poll a
host-side FIFO the same way). Each launch, the kernel writes its input into
its rank's request slot (``fifo``) and publishes the request by storing the
head with a release at sys scope. The rank's proxy thread polls the head
with an acquire, reads the payload, forwards it into every peer's ``inbox``
(double buffered by launch) with an arrival flag, and acknowledges the
request by storing the tail; the kernel waits for the tail before the
launch ends, so the next launch can reuse the slot. Every flag is a count
that grows by one per launch.

The proxy's host code is plain loads and stores, so its order is the host
CPU's: the protocol declares ``host-tso`` (an x86 host orders them as
x86-TSO, each load an acquire and each store a release). Without it (an Arm
host such as Grace) the re-check finds the proxy reading a stale payload:
its relaxed poll of the head orders nothing after it. ``host_fences``
names the barriers an Arm host needs in the body (:data:`HOST_FENCES`: a
fence after the poll, before the acknowledgement and before each arrival
flag): with all three, ``proxy_fifo_fenced.py`` holds without ``host-tso``.

Parameters make the two classic mistakes: ``request_scope=Scope.GPU``
publishes the head at a scope that does not include the host thread
(``proxy_fifo_gpu_scope.py``: the proxy may read a stale payload), and
``ack_after_read=False`` acknowledges before reading the payload
(``proxy_fifo_early_ack.py``: the next launch overwrites it early).
"""
from __future__ import annotations

from collsim.ir import (
    NRANKS, PEER, PEER_INDEX, RANK, AtLeast, Buffer, Fence, FenceKind, Issuer, Load, PollUntil, Protocol, Ref,
    Reg, Scope, Sem, Store, SyncGroup, ceil_div, counter_layout, plain_layout,
)
from collsim.ir.protocol import Exchange

DATA = plain_layout(word_bytes=4, store_bytes=16)
#: the host fences a weakly ordered host needs in the proxy body (``host_fences`` picks among them)
HOST_FENCES = ("after_head", "before_ack", "before_arrival")
COUNT = counter_layout(8)


class ProxyFifo(Protocol):
    """One-shot AllReduce through a host proxy thread: the kernel posts its input as a FIFO request in host memory,
    the proxy forwards it to every peer's host inbox and acknowledges it."""

    name = "proxy-fifo"
    algorithms = ("one-shot",)
    data_layout = DATA
    analytic_family = "simple"
    citation = "NVIDIA/nccl src/proxy.cc (proxy thread), MSCCL++ proxy channels (host FIFO)"
    assumptions = ("host-tso",)
    default_params = {"request_scope": Scope.SYS, "ack_after_read": True, "host_fences": (), "flag_bits": 64}

    def buffers(self, transfer_bytes):
        lines = ceil_div(transfer_bytes, DATA.data_bytes)
        return (
            # the rank's request: payload, head (posted by the kernel), tail (posted by the proxy)
            Buffer("fifo", DATA, depth=1, regions=1, lines=lines, location="host"),
            Buffer("head", COUNT, depth=1, regions=1, lines=1, role="flags", location="host"),
            Buffer("tail", COUNT, depth=1, regions=1, lines=1, role="flags", location="host"),
            # what the peers' proxies forwarded: one region per sender, two slots by launch
            Buffer("inbox", DATA, depth=2, regions=NRANKS, lines=lines, location="host"),
            Buffer("arrived", COUNT, depth=1, regions=NRANKS, lines=1, role="flags", location="host"),
        )

    def exchange(self, b, ex: Exchange):
        seq, epoch = ex.seq, self.epoch(ex.seq)
        send = ex.sends[0]  # one-shot: the same whole input to every peer, so one request carries it
        lines = ceil_div(send.nbytes, DATA.data_bytes)
        staged = b.register("staged", send.nbytes)

        b.emit(Store(Ref("fifo", RANK, lines=lines), send.data, Sem.WEAK, Scope.SYS, label="write_request"))
        b.emit(SyncGroup(label="sync_request_written"))
        b.emit(Store(Ref("head", RANK), None, Sem.RELEASE, self.params["request_scope"], flag=epoch,
                     issuer=Issuer.LEADER, label="post_head"))

        def host_fence(name):  # what a weakly ordered host needs between its plain accesses (dmb on Arm)
            if name in self.params["host_fences"]:
                b.emit(Fence(FenceKind.ACQ_REL, Scope.SYS, label="proxy_fence_" + name))

        with b.proxy("proxy"):
            b.emit(PollUntil(Ref("head", RANK), AtLeast(epoch), Sem.ACQUIRE, Scope.SYS, label="proxy_poll_head"))
            host_fence("after_head")
            ack = Store(Ref("tail", RANK), None, Sem.RELEASE, Scope.SYS, flag=epoch, label="proxy_ack")
            if not self.params["ack_after_read"]:
                b.emit(ack)
            b.emit(Load(staged, Ref("fifo", RANK, lines=lines), Sem.WEAK, Scope.SYS, label="proxy_read_request"))
            if self.params["ack_after_read"]:
                host_fence("before_ack")
                b.emit(ack)
            with b.loop(PEER_INDEX.name, NRANKS - 1):
                b.emit(Store(Ref("inbox", PEER, slot=seq % 2, region=RANK, lines=lines), Reg(staged), Sem.WEAK,
                             Scope.SYS, label="proxy_forward"))
                host_fence("before_arrival")
                b.emit(Store(Ref("arrived", PEER, region=RANK), None, Sem.RELEASE, Scope.SYS, flag=epoch,
                             label="proxy_post_arrival"))

        def recv(builder, r):
            builder.emit(PollUntil(Ref("arrived", RANK, region=r.frm), AtLeast(epoch), Sem.ACQUIRE, Scope.SYS,
                                   issuer=Issuer.LEADER, label="wait_arrival"))
            builder.emit(SyncGroup(label="sync_arrival_seen"))
            builder.emit(Load(r.into, Ref("inbox", RANK, slot=seq % 2, region=r.frm,
                                          lines=ceil_div(r.nbytes, DATA.data_bytes)), Sem.WEAK, Scope.SYS,
                              into_offset=r.into_offset, label="load_inbox"))

        recvs = Exchange(ex.phase, ex.phases_per_iter, (), ex.recvs, ex.over_peers, ex.lockstep, ex.consume)
        self.sends_then_recvs(b, recvs, lambda *_: None, recv)
        # the request slot is reused by the next launch: wait until the proxy has read it
        b.emit(PollUntil(Ref("tail", RANK), AtLeast(epoch), Sem.ACQUIRE, Scope.SYS, issuer=Issuer.LEADER,
                         label="wait_tail"))
