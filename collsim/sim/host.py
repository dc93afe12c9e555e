"""Host memory and the host proxy thread: what the kernel's accesses to pinned host memory and the proxy's own cost.

A buffer in host memory (``Buffer(location="host")``, pinned and mapped into
the GPU's address space) is owned by no GPU: the simulator gives rank ``r``'s
host buffers the owner :func:`host_owner` ``(r)``, a number no GPU has, so
every kernel access to them takes the GPU's *host link* instead of a route
between GPUs.

The host link
-------------
A GPU reaches its host's memory through the PCIe switch on its baseboard
to the CPU's root complex (the HGX/DGX layout): two PCIe links and one PCIe
switch traversal each way, the same composition the catalog's PCIe link
latency is derived from (``_links.yaml``: NCCL's PCI ``hwLat`` of 1.0 µs per
step = 2 links x 0.45 + 0.1). The link generation is the GPU's host
interface (:data:`HOST_LINK_TYPES`), its bandwidth the catalog's effective
rate of that link type, one pipe per direction per GPU. Costs on it are the
PCIe cost set's: a posted write lands ``remote_write_us`` after its last
byte, a read (non-posted) is served ``remote_read_us`` after it arrives. A
kernel polling host memory samples it once per round trip over the link.
NVLink-C2C hosts (Grace) are costed on the PCIe path too: the catalog has no
C2C latency to use.

The proxy thread
----------------
A :class:`~collsim.ir.ops.ProxyThread` starts when the kernel's walk reaches
it and runs its body on a CPU core of its own, concurrently: a poll spins on
its host lines, one sample per ``host_poll_period_us`` (a load that misses
the CPU caches, the device's write having invalidated the line), and sees a
device write once it has landed; loads and stores move their bytes at one
core's copy rate ``host_copy_gbps`` (both cost parameters of the GPU
generation's cost file, :mod:`collsim.sim.costs`, read through the rank's
:class:`~collsim.sim.costs.CostSet` as ``host_barrier_us`` is); a store is
visible to the GPU's next sample when it completes (its read snoops the
CPU's caches). A host fence costs nothing here: stores are visible as they
complete, so there is no store buffer to drain.
"""
from __future__ import annotations

from typing import Any

from collsim.sim.links import Pipe, Transfer
from collsim.sim.lower import FENCE, LOAD, POLL, STORE, Block
from collsim.sim.memory import Write, stored
from collsim.sim.trace import PathNode
from collsim.topology.catalog import link_type_info, traversal_latency_us

__all__ = ["host_owner", "is_host_owner", "HOST_LINK_TYPES", "HostLink", "host_link", "run_proxy"]

#: GPU generation -> the PCIe generation of its host interface
HOST_LINK_TYPES = {
    "volta": "pcie3",      # V100 SXM2: PCIe Gen3 x16 host interface (NVIDIA Tesla V100 datasheet)
    "ampere": "pcie4",     # A100: PCIe Gen4 x16 (NVIDIA A100 datasheet)
    "hopper": "pcie5",     # H100/H200: PCIe Gen5 x16 (NVIDIA H100 datasheet)
    "blackwell": "pcie5",  # assumed: the catalog's newest PCIe generation; HGX B200 baseboards host over PCIe
}


def host_owner(rank: int) -> int:
    """The owner number of rank ``rank``'s host buffers (no GPU has it; -1 is every multicast copy).

    >>> host_owner(0), host_owner(3), is_host_owner(host_owner(3)), is_host_owner(3)
    (-2, -5, True, False)
    """
    return -2 - rank


def is_host_owner(owner: int) -> bool:
    """Whether ``owner`` stands for a rank's host memory (:func:`host_owner`)."""
    return owner <= -2


class HostLink:
    """One GPU's link to host memory: a pipe per direction, the one-way latency, the link type."""

    __slots__ = ("up", "down", "latency", "link_type")

    def __init__(self, rank: int, link_type: str) -> None:
        info = link_type_info(link_type)
        rate = float(info["effective_gbps"])
        self.up = Pipe(f"rank{rank}.host_link.up", rate)
        self.down = Pipe(f"rank{rank}.host_link.down", rate)
        self.latency = 2 * float(info["latency_us"]) + traversal_latency_us("pcie-switch")
        self.link_type = link_type


def host_link(topology: Any, rank: int) -> HostLink:
    """GPU ``rank``'s link to its host's memory (see the module docstring)."""
    return HostLink(rank, HOST_LINK_TYPES.get(topology.generation(rank), "pcie5"))


def _copy_us(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e3)


def run_proxy(rank: Any, start: float, node: PathNode, items: list[Any]):
    """The SimPy process of ``rank``'s proxy thread: its bound ``items`` in order from ``start`` (a generator)."""
    sim = rank.sim
    costs = rank.c  # the host's parameters are route-independent: the rank's (NVLink) set, as host_barrier_us
    copy_gbps = costs.host_copy_gbps
    th_t, th_node = start, node
    if start > sim.env.now:
        sim.events += 1
        yield sim.env.timeout(start - sim.env.now)

    def advance(end: float, kind: str, op: Any, what: str, cause: Any = None, cause_at: float = 0.0) -> None:
        nonlocal th_t, th_node
        if end < th_t:
            end = th_t
        th_node = PathNode(rank.rank, th_node.end, end, kind, op, th_node, cause, cause_at, what)
        th_t = end
        if rank.record:
            sim.nodes.append(th_node)

    def flat(items: list[Any]):
        for item in items:
            if item.__class__ is Block:
                for iteration in item.iterations:  # one host thread: the iterations in order
                    yield from flat(iteration)
            else:
                yield item

    for op in flat(items):
        kind = op.kind
        if kind == POLL:
            period = costs.host_poll_period_us
            read = _copy_us(op.ref[5] * op.line_bytes, copy_gbps) if op.into is not None else 0.0
            plan = (rank.memory.location(op.key), th_t, th_t + period / 2, period, period / 2, th_t + read, 0.0)
            lo = op.ref[4]
            found = plan[0].satisfied_at(lo, lo + op.ref[5], op.pred, plan[2])
            if found is None or found[0] > sim.env.now:
                if th_t > sim.env.now:
                    sim.events += 1
                    yield sim.env.timeout(th_t - sim.env.now)
                found = yield from rank._wait_poll(op, plan, found)
            done = rank._completion(plan, found[0])
            write = found[1]
            tr = write.transfer if write is not None else None
            advance(done, "sync", op, "proxy thread polls host memory", tr if tr is not None else None,
                    write.visible if write is not None else 0.0)
            if op.into is not None:
                rank.regs[op.into] = (th_t, th_node, th_t)
        elif kind == LOAD:
            nbytes = op.ref[5] * op.line_bytes
            done = th_t + _copy_us(nbytes, copy_gbps)
            tr = Transfer(rank.rank, op.ref[1], nbytes, th_t, th_t, done, done, done, th_node, True, op, True,
                          "load")
            advance(done, "data", op, f"proxy thread copies {nbytes} B out of host memory")
            rank.regs[op.into] = (done, tr, th_t)
        elif kind == STORE:
            src = op.src
            if src is not None and src[0] == "reg":
                ready, producer = rank.regs.get(src[1], (0.0, None, 0.0))[:2]
                if ready > th_t:
                    advance(ready, "data", op, "waits for register " + src[1], producer, ready)
            how, value = stored(op)
            nbytes = op.ref[5] * op.line_bytes
            payload = src is not None and src[0] != "fill"
            done = th_t + _copy_us(nbytes, copy_gbps)
            tr = Transfer(rank.rank, op.ref[1], nbytes, th_t, th_t, done, done, done, th_node, payload, op, True,
                          "store")
            if rank.record:
                sim.transfers.append(tr)
            if how is not None:
                rank.memory.location(op.key).add(Write(op.ref[4], op.ref[4] + op.ref[5], done, how, value, tr))
            advance(done, "data" if payload else "sync", op, f"proxy thread stores {nbytes} B into host memory")
        elif kind != FENCE:
            raise TypeError(f"proxy thread op {op.name} of kind {kind} (the checks allow loads, stores, polls, "
                            "fences)")
