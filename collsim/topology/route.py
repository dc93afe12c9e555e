"""The :class:`Route` between two GPUs and how a route is classified.

A route is a list of nodes; each consecutive pair is a *directed* link
``(u, v)``. Directed pairs are the unit of contention: two flows that share
``(u, v)`` share that direction's bandwidth, while ``(v, u)`` is a separate,
full-duplex resource.

Examples
--------
>>> r = Route(src=0, dst=1, path=["gpu0", "nvfabric", "gpu1"], hops=2,
...           links=[("gpu0", "nvfabric"), ("nvfabric", "gpu1")],
...           bottleneck_gbps=450.0, effective_gbps=370.8, latency_us=0.6,
...           link_types=["nvlink4", "nvlink4"], nvlink_only=True, via="nvswitch")
>>> round(r.transfer_time_us(1e6), 3)   # 0.6 us + 1 MB at 370.8 GB/s
3.297
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Route", "VIA_KINDS", "classify_via"]

#: Every value :attr:`Route.via` takes.
VIA_KINDS = (
    "local",         # src == dst: no link
    "direct",        # one link between the two GPUs
    "nvswitch",      # through NVSwitch chips / the aggregated NVSwitch fabric only
    "peer-gpu",      # NVLink only, forwarded by one or more intermediate GPUs (NCCL PATH_NVB)
    "pcie",          # through PCIe switches only (NCCL PIX/PXB)
    "pcie-host",     # turns at one CPU root complex (NCCL PHB)
    "cross-socket",  # crosses the CPU socket interconnect (NCCL SYS)
    "mixed",         # anything else in a custom topology
)


@dataclass(frozen=True)
class Route:
    """The path the model sends ``src`` → ``dst`` traffic on.

    Attributes
    ----------
    src, dst : int
        GPU ranks.
    path : list of str
        Node ids from the source GPU to the destination GPU.
    hops : int
        Number of links (``len(path) - 1``).
    links : list of (str, str)
        The directed links, in order: the resources this route contends for.
    bottleneck_gbps : float
        Smallest nominal per-direction capacity along the path (all parallel
        links of an edge together), GB/s.
    effective_gbps : float
        Smallest effective per-direction capacity (nominal × efficiency).
    latency_us : float
        Link latencies plus traversal latencies of the intermediate nodes.
    link_types : list of str
        Link type of every link, in order.
    nvlink_only : bool
        True when every link is NVLink (vacuously true for ``via="local"``).
    via : str
        One of :data:`VIA_KINDS`.

    Notes
    -----
    The lists are shared by the topology's route cache: read them, do not
    modify them.
    """

    src: int
    dst: int
    path: list[str]
    hops: int
    links: list[tuple[str, str]]
    bottleneck_gbps: float
    effective_gbps: float
    latency_us: float
    link_types: list[str]
    nvlink_only: bool
    via: str

    def transfer_time_us(self, nbytes: float, *, effective: bool = True) -> float:
        """Latency plus ``nbytes`` at the bottleneck rate, uncontended, in µs.

        A first-order estimate (no pipelining, no protocol overhead); the
        simulator does the real accounting.
        """
        rate = self.effective_gbps if effective else self.bottleneck_gbps
        if math.isinf(rate):
            return self.latency_us
        return self.latency_us + nbytes / (rate * 1e3)  # GB/s = 1e3 bytes per µs


def classify_via(path: Sequence[str], kinds: Sequence[str], families: Sequence[str]) -> str:
    """Name the kind of a route from its node kinds and link families.

    Parameters
    ----------
    path : sequence of str
        Node ids, source first.
    kinds : sequence of str
        Kind of every node of ``path``.
    families : sequence of str
        Family (``nvlink``, ``pcie``, ``cpu``) of every link.

    Examples
    --------
    >>> classify_via(["g0", "g1", "g5"], ["gpu"] * 3, ["nvlink"] * 2)
    'peer-gpu'
    >>> classify_via(["g0", "s0", "c0", "c1", "s2", "g4"],
    ...              ["gpu", "pcie-switch", "cpu", "cpu", "pcie-switch", "gpu"],
    ...              ["pcie", "pcie", "cpu", "pcie", "pcie"])
    'cross-socket'
    """
    hops = len(path) - 1
    if hops == 0:
        return "local"
    if hops == 1:
        return "direct"
    middle = set(kinds[1:-1])
    if middle <= {"nvswitch", "nvswitch-fabric"}:
        return "nvswitch"
    if "gpu" in middle and set(families) == {"nvlink"}:
        return "peer-gpu"
    if middle <= {"pcie-switch"}:
        return "pcie"
    cpus = sum(1 for kind in kinds[1:-1] if kind == "cpu")
    if middle <= {"pcie-switch", "cpu"}:
        return "cross-socket" if cpus > 1 else "pcie-host"
    return "mixed"
