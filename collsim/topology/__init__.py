"""Topologies: GPUs, NVSwitches, PCIe switches and CPUs as a networkx graph.

A :class:`Topology` comes from a packaged preset, a YAML file or an inline
mapping (:func:`load_topology`). Nodes are GPUs, NVSwitch chips, PCIe
switches and CPU sockets; each edge is one connected pair with its link type,
link ``count``, per-direction bandwidth of one link (nominal
``bandwidth_gbps`` and ``effective_gbps``) and latency (µs). Units: GB/s =
1e9 B/s per direction, µs.

**Nominal vs effective bandwidth.** ``bandwidth_gbps`` is the signalling rate
(25 GB/s per direction for an NVLink2-4 link, 50 for NVLink5).
``effective_gbps`` is NCCL's calibrated per-link figure (e.g. 20.6 GB/s on
SM90, ``src/graph/topo.h``), i.e. what data moves at with link-level overhead
but *before* protocol overhead. The simulator should move wire bytes at the
effective rate; protocols then add their own overhead on top (LL carries 8
data bytes per 16-byte line, LL128 120 per 128), as NCCL's tuner does when
it multiplies these figures by 0.5 (LL) or 0.92 (LL128). Use nominal rates
for reporting and as upper bounds.

**NVSwitch planes.** An HGX H100 GPU spreads its 18 links over 4 switch
chips, and the hardware stripes each transfer across all of them. Routing
through one chip would undercount bandwidth 4-fold, and routing through
each chip separately would make the simulator choose a plane. So, for
routing, every set of NVSwitch chips that connect the same GPUs (and only
GPUs) is replaced by one logical node, ``nvfabric`` (kind
``nvswitch-fabric``), joined to each GPU by one edge carrying the sum of that
GPU's switch links. Routes between switched GPUs are then
``gpu → nvfabric → gpu``: two hops whose directed edges are exactly each
GPU's egress and ingress, the resources that contend in all-to-all traffic.
The physical chips stay in the graph (edges flagged ``physical=True,
routed=False``) for summaries and switch counts; the fabric edges are
``physical=False, routed=True``. The switch's internal bandwidth is assumed
non-blocking.

**Routing.** NVLink-only routes win over PCIe; then fewest hops; then
widest bottleneck; then lowest latency (see :mod:`collsim.topology.routing`).
On a DGX-1, GPU pairs without a direct NVLink route through the peer GPU
with the best bottleneck (``via="peer-gpu"``, 2 NVLink hops), as NCCL's
PATH_NVB does.

**Latency.** No public per-hop NVLink latency exists; the link catalog
splits NCCL's per-step LL hardware latency (0.6 µs NVLink, 1.0 µs PCIe) over
the links and switches of one step. Every number names its source in the
data files (``collsim/data/topologies``).

Examples
--------
>>> from collsim.topology import load_topology, list_presets
>>> "hgx-h100" in list_presets()
True
>>> topo = load_topology("hgx-h100")
>>> topo.num_gpus, topo.gpu_egress_gbps(0), topo.route(0, 7).hops
(8, 450.0, 2)
>>> topo.route(0, 7).effective_gbps
370.8
"""
from __future__ import annotations

from collsim.topology.build import build_topology
from collsim.topology.load import list_presets, load_topology, presets_with
from collsim.topology.route import VIA_KINDS, Route
from collsim.topology.topology import FabricFeatures, Topology

__all__ = [
    "Topology",
    "FabricFeatures",
    "presets_with",
    "Route",
    "VIA_KINDS",
    "load_topology",
    "list_presets",
    "build_topology",
]
