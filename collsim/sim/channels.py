"""How many channels (CTAs) a rank uses when the scenario does not say.

**Rings**, as NCCL chooses them (NCCL 2.30.7): the communicator's channel
count comes from its topology search (``src/graph/search.cc``): the first
speed of NCCL's per-architecture speed array that one GPU-to-GPU path can
carry, as many channels of it as the GPU's NVLink bandwidth holds, then
doubled (``ncclTopoDupChannels``: search channels become twice as many
execution channels at half the speed when the speed is at least 25 GB/s, not
for sm90+ below 50 GB/s with more than 4 channels), at most
``max_channels``. For one collective ``topoGetAlgoInfo``
(``src/enqueue.cc``) then drops channels while the message is smaller than
``channels x threads x threshold``: 512 threads for LL and Simple, 640 for
LL128; thresholds 8 x ranks bytes per thread for LL, 8 for LL128, 64 for
Simple (``src/include/comm.h``). The protocol's NCCL family is its
``analytic_family`` declaration. (Collsim approximates the search: it does
not build rings link by link, so topologies whose rings NCCL could not close
at the first speed get the same count.)

**Other programs** (one-shot, two-shot), like the symmetric-memory kernels:
enough CTAs to saturate the GPU's links, and no more than the message needs:
one CTA moves at most ``per_cta_gbps`` (``cta_store_gbps`` for programs that
push, the loads it keeps in flight over the round trip for programs that
pull), so ``ceil(egress / per_cta_gbps)`` CTAs fill the GPU's effective
egress bandwidth; a small message gets one CTA per ``min_bytes_per_channel``
bytes. The count is capped by ``max_channels`` and the SM count.

>>> from collsim.topology import load_topology
>>> from collsim.sim.costs import load_costs
>>> topo, costs = load_topology("hgx-h100"), load_costs("hopper")
>>> default_channels(topo, 8, costs, 1 << 30, 69.8), default_channels(topo, 8, costs, 4096, 69.8)
(6, 1)
>>> search_channels(topo, 8), ring_channels(topo, 8, costs, "simple", 1 << 28), ring_channels(topo, 8, costs, "ll", 8)
(12, 12, 1)
"""
from __future__ import annotations

import math
from typing import Any

from collsim.sim.costs import Costs
from collsim.sim.memo import PerTopology

__all__ = ["default_channels", "ring_channels", "search_channels", "NCCL_RING_THREADS", "NCCL_THREAD_THRESHOLDS"]

#: NCCL's maximum threads per channel for ring collectives by protocol family (src/include/device.h:
#: NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512).
NCCL_RING_THREADS = {"ll": 512, "ll128": 640, "simple": 512}
#: Bytes per thread before NCCL adds threads or channels (src/include/comm.h NCCL_LL_THREAD_THRESHOLD 8,
#: NCCL_LL128_THREAD_THRESHOLD 8, NCCL_SIMPLE_THREAD_THRESHOLD 64; src/graph/tuning.cc multiplies the
#: ring LL one by the rank count).
NCCL_THREAD_THRESHOLDS = {"ll": 8, "ll128": 8, "simple": 64}
#: NCCL's search speeds (GB/s per channel) inside one node, by compute capability (src/graph/search.cc
#: speedArrayIntra, sm90SpeedArrayIntra, sm100SpeedArrayIntra).
_SPEEDS = {0: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
           90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
           100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)}


#: topology -> {ranks: (least effective egress GB/s, least SM count or None if none has one)} of GPUs 0 .. ranks-1
_GPU_FACTS = PerTopology()


def _gpu_facts(topology: Any, ranks: int) -> tuple[float, int | None]:
    def compute() -> tuple[float, int | None]:
        egress = min(topology.gpu_egress_gbps(r, effective=True) for r in range(ranks))
        counts = [int(n) for n in (topology.gpu_info(r).get("sm_count") for r in range(ranks)) if n]
        return egress, min(counts) if counts else None

    return _GPU_FACTS.get(topology, ranks, compute)


def _sm_cap(topology: Any, ranks: int, costs: Costs) -> int:
    _, sm_count = _gpu_facts(topology, ranks)
    cap = int(costs.nvlink.max_channels)
    return min(sm_count, cap) if sm_count is not None else cap


def default_channels(topology: Any, ranks: int, costs: Costs, size_bytes: int, per_cta_gbps: float) -> int:
    """The channel count of a one-shot or two-shot program for ``size_bytes`` per rank on GPUs
    ``0 .. ranks-1`` (see the module docstring)."""
    c = costs.nvlink
    egress, _ = _gpu_facts(topology, ranks)
    saturate = max(1, math.ceil(egress / per_cta_gbps - 1e-9))
    by_size = max(1, math.ceil(size_bytes / c.min_bytes_per_channel))
    return max(1, min(saturate, by_size, _sm_cap(topology, ranks, costs)))


#: topology -> {ranks: the search's channel count}
_SEARCH = PerTopology()


def search_channels(topology: Any, ranks: int, max_channels: int = 32) -> int:
    """The ring channels NCCL's topology search gives a communicator of GPUs ``0 .. ranks-1`` (see the module
    docstring)."""
    def compute() -> int:
        sm = min(_sm_number(topology.gpu_info(r).get("sm")) for r in range(ranks))
        speeds = _SPEEDS[100] if sm >= 100 else _SPEEDS[90] if sm >= 90 else _SPEEDS[0]
        total, _ = _gpu_facts(topology, ranks)
        path = max(topology.route(0, p).effective_gbps for p in range(1, ranks)) if ranks > 1 else total
        speed = next((s for s in speeds if s <= path and s <= total), speeds[-1])
        channels = max(1, min(int(total // speed), max_channels))
        if speed >= 25.0 and not (sm > 80 and speed < 50.0 and channels > 4):
            channels = min(2 * channels, max_channels)
        return channels

    return _SEARCH.get(topology, (ranks, max_channels), compute)


def ring_channels(topology: Any, ranks: int, costs: Costs, family: str, size_bytes: int) -> int:
    """The channels NCCL gives one ring AllReduce of ``size_bytes`` per rank (see the module docstring)."""
    nc = min(search_channels(topology, ranks, int(costs.nvlink.max_channels)), _sm_cap(topology, ranks, costs))
    threads = NCCL_RING_THREADS.get(family, 512)
    threshold = NCCL_THREAD_THRESHOLDS.get(family, 64) * (ranks if family == "ll" else 1)
    while nc >= 2 and size_bytes < nc * threads * threshold:
        nc -= 1
    return nc


def _sm_number(sm: Any) -> int:
    if isinstance(sm, (int, float)) and not isinstance(sm, bool):
        return int(round(sm * 10)) if sm < 20 else int(sm)
    digits = "".join(ch for ch in str(sm) if ch.isdigit())
    return int(digits) if digits else 0
