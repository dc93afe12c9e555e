"""collsim's analytic baseline: NCCL's tuning model, extended to one-shot and two-shot.

NCCL estimates a collective's time as (``ncclTopoGetAlgoTime``, NCCL 2.30.7
``src/graph/tuning.cc``)::

    time_us = baseLat + nsteps × hwLat + bytes / (1000 × bw)

with a ring AllReduce taking ``nsteps = 2(n−1)`` and ``bw`` the algorithm
bandwidth ``busBw × n / nsteps``. ``busBw = nChannels × per-channel bw``,
then capped per protocol: LL ``min(llMaxBw, 0.5 × busBw)``, LL128
``min(0.92 × busBw, nChannels × perChMaxRingLL128Bw)``, Simple unchanged.

This module computes exactly that for ``ring`` and extends it:

``one-shot``
    Every rank sends its whole buffer to the ``n−1`` peers (or reads theirs)
    in one step: bus traffic ``(n−1) × size`` per rank, ``nsteps = 1``.
``two-shot``
    Reduce-scatter then all-gather, each one step moving ``(n−1)/n × size``:
    bus traffic ``2(n−1)/n × size``, ``nsteps = 2``.
synchronization
    ``collsim.algorithms.sync_rounds(protocol, algorithm, n)`` extra global rounds, each costing
    ``sync_round_latency_us`` (assumed: one LL step).
reduction
    The bytes a rank reads and writes to reduce, over its HBM bandwidth
    (NCCL's model has no such term; it is reported separately).
launch
    ``launch_overhead_us`` in eager mode only (assumed).

The breakdown is ``launch``; ``sync`` = base latency + step latencies +
sync rounds; ``data`` = bytes over bandwidth; ``reduce``. All constants live
in ``collsim/data/costs/nccl_tuning.yaml`` with their sources.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from collsim.algorithms import sync_rounds as protocol_sync_rounds
from collsim.analytic.constants import base_constants, merged_constants
from collsim.errors import InputError, UnsupportedError
from collsim.models import SimRequest, SimResult

__all__ = ["analytic_model", "Plan", "plan", "GENERATIONS"]

#: GPU generations in age order (NCCL indexes its tables by the oldest GPU).
GENERATIONS: tuple[str, ...] = ("volta", "ampere", "hopper", "blackwell")
FAMILIES: tuple[str, ...] = ("ll", "ll128", "simple")


@dataclass(frozen=True)
class Plan:
    """Everything the closed form needs, with the numbers it used (for notes and tests)."""

    family: str
    hw: str  # "nvlink" or "pci"
    generation: str
    channels: int
    link_bw_gbps: float  # effective per-GPU bandwidth of the links the algorithm uses
    bus_bw_gbps: float  # after channels × per-channel bw, before protocol caps
    proto_bw_gbps: float  # after protocol caps: the bandwidth data moves at
    steps: int
    bus_bytes: float  # bytes each rank puts on its links
    reduce_bytes: float  # bytes each rank moves through HBM to reduce
    hbm_gbps: float


def _sm_number(info: dict[str, Any]) -> int:
    sm = info.get("sm")
    if isinstance(sm, (int, float)) and not isinstance(sm, bool):
        value = float(sm)
        return int(round(value * 10)) if value < 20 else int(value)  # 9.0 -> 90
    digits = "".join(ch for ch in str(sm) if ch.isdigit())
    if not digits:
        raise UnsupportedError(f"GPU {info.get('model', '?')} has no SM version the analytic model can read: {sm!r}")
    return int(digits)


def _nvlink_per_link(table: dict[Any, float], sm: int) -> float:
    """Per-link effective NVLink bandwidth by compute capability, as ``ncclTopoNVLinkBw`` picks it."""
    keys = {int(k): v for k, v in table.items()}
    if sm in keys:
        return keys[sm]
    lower = [k for k in keys if k <= sm and k != 86]
    return keys[max(lower)] if lower else keys[min(keys)]


def _generation(topo: Any, ranks: tuple[int, ...], notes: list[str]) -> str:
    gens = [str(topo.generation(r)).lower() for r in ranks]
    known = [g for g in gens if g in GENERATIONS]
    if len(known) < len(gens):
        unknown = sorted(set(gens) - set(GENERATIONS))
        notes.append(f"no NCCL table column for GPU generation {', '.join(unknown)}; used ampere's")
        known.append("ampere")
    return min(known, key=GENERATIONS.index)


def _pairs(algorithm: str, n: int) -> list[tuple[int, int]]:
    if algorithm == "ring":
        return [(i, (i + 1) % n) for i in range(n)]
    return [(i, j) for i in range(n) for j in range(n) if i != j]


class _Links:
    """Effective bandwidths the closed form reads from the topology, with cost overrides applied.

    The topology's effective NVLink figures are NCCL's per-link constants
    times the link count; an override of ``nvlink_bw_per_link_gbps`` scales
    them by new/old for the GPU's SM.
    """

    def __init__(self, topo: Any, hw: str, consts: dict[str, Any], base: dict[str, Any]) -> None:
        self.topo = topo
        self.hw = hw
        self.consts = consts
        self.base = base

    def scale(self, rank: int) -> float:
        if self.hw != "nvlink":
            return 1.0
        sm = _sm_number(self.topo.gpu_info(rank))
        new = _nvlink_per_link(self.consts["nvlink_bw_per_link_gbps"], sm)
        old = _nvlink_per_link(self.base["nvlink_bw_per_link_gbps"], sm)
        return new / old if old > 0 else 1.0

    def route(self, a: int, b: int) -> float:
        return float(self.topo.route(a, b).effective_gbps) * self.scale(a)

    def egress(self, rank: int) -> float:
        family = "nvlink" if self.hw == "nvlink" else None
        return float(self.topo.gpu_egress_gbps(rank, family=family, effective=True)) * self.scale(rank)


def _ring_bw(links: _Links, ranks: tuple[int, ...]) -> float:
    """Per-GPU bandwidth of NCCL-style rings over ``ranks``.

    NCCL builds one ring per channel and spreads channels over every link, so
    a GPU's ring bandwidth is its egress toward the participants: the sum of
    its direct links to them when it has any (a switchless mesh such as the
    DGX-1), else its slowest route to a participant (a switch or PCIe tree).
    """
    per_rank = []
    for r in ranks:
        routes = {p: links.topo.route(r, p) for p in ranks if p != r}
        direct = [p for p, route in routes.items() if route.hops == 1]
        if direct:
            reach = sum(links.route(r, p) for p in direct)
        else:
            reach = min(links.route(r, p) for p in routes)
        per_rank.append(min(links.egress(r), reach))
    return min(per_rank)


def _all_to_all_bw(links: _Links, ranks: tuple[int, ...]) -> float:
    """Per-GPU bandwidth when every rank sends to every other (one-shot, two-shot).

    A rank's egress is shared by its n-1 peers, and no peer's route carries
    more than its own bandwidth: ``min(egress, (n-1) x slowest route)``.
    Contention inside the fabric (forwarding GPUs, shared uplinks) is left to
    the discrete-event model.
    """
    n = len(ranks)
    per_rank = []
    for r in ranks:
        slowest = min(links.route(r, p) for p in ranks if p != r)
        per_rank.append(min(links.egress(r), slowest * (n - 1)))
    return min(per_rank)


@lru_cache(maxsize=512)
def _link_bandwidth(topo: Any, n: int, algorithm: str, nvlink_table: tuple[tuple[int, float], ...]) -> tuple[str, float]:
    """``(hw, per-GPU link bandwidth)`` for ``algorithm`` on GPUs ``0..n-1`` (cached: O(n²) routes)."""
    ranks = tuple(range(n))
    pairs = _pairs(algorithm, n)
    hw = "nvlink" if all(topo.is_nvlink_only(a, b) for a, b in pairs) else "pci"
    consts = {"nvlink_bw_per_link_gbps": dict(nvlink_table)}
    links = _Links(topo, hw, consts, base_constants())
    return hw, (_ring_bw(links, ranks) if algorithm == "ring" else _all_to_all_bw(links, ranks))


def plan(request: SimRequest, consts: dict[str, Any] | None = None, notes: list[str] | None = None) -> Plan:
    """Work out channels, bandwidths, steps and byte counts for ``request``."""
    consts = consts if consts is not None else merged_constants(request.costs)
    notes = notes if notes is not None else []
    topo, n, size = request.topology, request.ranks, float(request.size_bytes)
    ranks = request.gpus
    family = str(getattr(request.protocol, "analytic_family", "simple")).lower()
    if family not in FAMILIES:
        raise UnsupportedError(
            f"protocol {request.protocol.name!r} names analytic family {family!r}",
            field="protocol",
            choices=FAMILIES,
        )
    gen = _generation(topo, ranks, notes)
    nvl = consts["nvlink_bw_per_link_gbps"]
    hw, link_bw = _link_bandwidth(topo, n, request.algorithm, tuple(sorted((int(k), v) for k, v in nvl.items())))

    if hw == "nvlink":
        per_channel = _nvlink_per_link(consts["nvlink_bw_per_link_gbps"], _sm_number(topo.gpu_info(ranks[0])))
    else:
        per_channel = consts["pci_bw_gbps"]
    natural = max(1, min(int(consts["max_channels"]), int(round(link_bw / per_channel))))
    channels = request.channels if request.channels is not None else natural
    bus_bw = min(channels * per_channel, link_bw)

    proto_eff = float(getattr(request.protocol, "payload_efficiency", consts["family_payload_efficiency"][family]))
    factor = consts["bw_factor"][family] * proto_eff / consts["family_payload_efficiency"][family]
    proto_bw = factor * bus_bw
    if family == "ll":
        proto_bw = min(consts["ll_max_bw_gbps"][gen], proto_bw)
    elif family == "ll128":
        proto_bw = min(proto_bw, channels * consts["per_channel_max_ring_ll128_bw_gbps"][gen])
        if hw != "nvlink":
            notes.append("NCCL enables LL128 only over NVLink paths; costed anyway")

    if request.algorithm == "ring":
        steps = 2 * (n - 1)
        bus_bytes = 2.0 * (n - 1) / n * size
        reduce_bytes = 3.0 * (n - 1) / n * size  # n−1 reduce steps: read 2 chunks, write 1
    elif request.algorithm == "one-shot":
        steps = int(consts["one_shot_steps"])
        bus_bytes = (n - 1) * size
        reduce_bytes = (n + 1) * size  # read n buffers, write 1
    elif request.algorithm == "two-shot":
        steps = int(consts["two_shot_steps"])
        bus_bytes = 2.0 * (n - 1) / n * size
        reduce_bytes = (n + 1) * size / n  # reduce one shard of n buffers
    else:
        raise UnsupportedError(
            f"the analytic model has no formula for algorithm {request.algorithm!r}",
            field="algorithm",
            choices=["one-shot", "two-shot", "ring"],
        )
    hbm = max(float(topo.gpu_info(r).get("hbm_gbps") or 0.0) for r in ranks)
    if hbm <= 0:
        raise InputError(f"topology {topo.name!r} gives no HBM bandwidth for its GPUs", field="topology")
    return Plan(family, hw, gen, channels, link_bw, bus_bw, proto_bw, steps, bus_bytes, reduce_bytes, hbm)


def analytic_model(request: SimRequest) -> SimResult:
    """The ``analytic`` model: closed-form time of one AllReduce (see the module docstring)."""
    consts = merged_constants(request.costs)
    notes: list[str] = []
    p = plan(request, consts, notes)
    base = consts["base_latency_us"][p.family]
    hw_lat = consts["hw_latency_us"][p.hw][p.family]
    sync_rounds = int(protocol_sync_rounds(request.protocol, request.algorithm, request.ranks))
    sync = base + p.steps * hw_lat + sync_rounds * consts["sync_round_latency_us"][p.hw]
    data = p.bus_bytes / (1000.0 * p.proto_bw_gbps) if p.proto_bw_gbps > 0 else math.inf
    reduce = p.reduce_bytes / (1000.0 * p.hbm_gbps)
    # launch overhead where the host launches every call in stream order (eager) or the launch is timed
    # (single-call); graphs, event-timed calls with the launch hidden and host loops whose launches overlap the
    # kernels do not pay it
    launch = consts["launch_overhead_us"] if request.launch in ("eager", "single-call") else 0.0
    breakdown = {"launch": launch, "sync": sync, "data": data, "reduce": reduce}
    timeline = _timeline(request, breakdown) if request.timeline else None
    return SimResult.from_breakdown(
        request, breakdown, model="analytic", timeline=timeline, notes=notes, channels=p.channels
    )


def _timeline(request: SimRequest, breakdown: dict[str, float]) -> list[dict[str, Any]]:
    """The phases back to back on every rank (a closed form has no finer detail)."""
    events = []
    for rank in request.gpus:
        t = 0.0
        for kind in ("launch", "sync", "data", "reduce"):
            dt = breakdown[kind]
            if dt <= 0:
                continue
            events.append(
                {
                    "rank": rank,
                    "kind": kind,
                    "start_us": t,
                    "end_us": t + dt,
                    "peer": None,
                    "bytes": request.size_bytes if kind in ("data", "reduce") else 0,
                    "label": f"{kind} ({request.algorithm}, {request.protocol.name})",
                }
            )
            t += dt
    return events
