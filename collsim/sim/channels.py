"""How many channels (CTAs) a rank uses when the scenario does not say.

Like NCCL, enough CTAs to saturate the GPU's links, and no more than the
message needs: one CTA moves at most ``per_cta_gbps`` (``cta_store_gbps``
for programs that push, ``cta_load_gbps`` for programs that pull: the
slower of the op kinds that move the program's data), so
``ceil(egress / per_cta_gbps)`` CTAs fill the GPU's effective egress
bandwidth; a small message gets one CTA per ``min_bytes_per_channel`` bytes
it sends. The count is capped by ``max_channels`` and the SM count.

>>> from collsim.topology import load_topology
>>> from collsim.sim.costs import load_costs
>>> topo, costs = load_topology("hgx-h100"), load_costs("hopper")
>>> default_channels(topo, 8, costs, 1 << 30, 69.8), default_channels(topo, 8, costs, 4096, 69.8)
(6, 1)
"""
from __future__ import annotations

import math
from typing import Any

from collsim.sim.costs import Costs
from collsim.sim.memo import PerTopology

__all__ = ["default_channels"]


#: topology -> {ranks: (least effective egress GB/s, least SM count or None if none has one)} of GPUs 0 .. ranks-1
_GPU_FACTS = PerTopology()


def _gpu_facts(topology: Any, ranks: int) -> tuple[float, int | None]:
    def compute() -> tuple[float, int | None]:
        egress = min(topology.gpu_egress_gbps(r, effective=True) for r in range(ranks))
        counts = [int(n) for n in (topology.gpu_info(r).get("sm_count") for r in range(ranks)) if n]
        return egress, min(counts) if counts else None

    return _GPU_FACTS.get(topology, ranks, compute)


def default_channels(topology: Any, ranks: int, costs: Costs, size_bytes: int, per_cta_gbps: float) -> int:
    """The channel count for ``size_bytes`` per rank on GPUs ``0 .. ranks-1`` (see the module docstring)."""
    c = costs.nvlink
    egress, sm_count = _gpu_facts(topology, ranks)
    sms = min(sm_count, int(c.max_channels)) if sm_count is not None else int(c.max_channels)
    saturate = max(1, math.ceil(egress / per_cta_gbps - 1e-9))
    by_size = max(1, math.ceil(size_bytes / c.min_bytes_per_channel))
    return max(1, min(saturate, by_size, int(c.max_channels), sms))
