"""The :class:`Topology`: a networkx graph of GPUs, switches and CPUs, plus routes.

Graph conventions (``topo.graph``, an undirected :class:`networkx.Graph`):

Node attributes
    ``kind``: ``gpu``, ``nvswitch``, ``pcie-switch``, ``cpu`` or
    ``nvswitch-fabric`` (the logical aggregate, see :mod:`collsim.topology`);
    ``traversal_latency_us``: cost of passing through the node. GPU nodes also
    carry ``rank``, ``model``, ``generation``, ``sm``, ``hbm_gbps``,
    ``sm_count``.
Edge attributes (one edge per connected pair; parallel links are ``count``)
    ``link_type``, ``family`` (``nvlink``/``pcie``/``cpu``), ``count``,
    ``bandwidth_gbps`` and ``effective_gbps`` (ONE link, per direction),
    ``efficiency`` (= effective / nominal), ``capacity_gbps`` and
    ``effective_capacity_gbps`` (ALL ``count`` links, per direction),
    ``latency_us``, ``physical`` (a real wire, counted in summaries) and
    ``routed`` (routes may use it).

Examples
--------
>>> from collsim.topology import load_topology
>>> topo = load_topology("hgx-h100")
>>> r = topo.route(0, 5)
>>> r.path, r.via, r.bottleneck_gbps
(['gpu0', 'nvfabric', 'gpu5'], 'nvswitch', 450.0)
>>> topo.directed_link_capacity("gpu0", "nvfabric")
(450.0, 370.8)
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from collsim.errors import InputError
from collsim.topology.catalog import GPU_FIELDS, traversal_latency_us
from collsim.topology.route import Route, classify_via
from collsim.topology.routing import (
    EdgeFilter,
    State,
    candidate_paths,
    select_path,
    shortest_state_dag,
)
from collsim.yamlsource import KeyPath, Locator

__all__ = ["Topology", "FabricFeatures", "FABRIC_KIND", "SWITCH_KINDS"]

#: Kind of the logical node that stands for a set of NVSwitch planes.
FABRIC_KIND = "nvswitch-fabric"
#: Physical switch chip kinds (counted by :meth:`Topology.summary`).
SWITCH_KINDS = ("nvswitch", "pcie-switch")


@dataclass(frozen=True)
class FabricFeatures:
    """What the switches between a topology's GPUs do besides forwarding (NVLink SHARP, NVSwitch gen 3+).

    ``multicast``: one write through a multicast address reaches every GPU of the group (``multimem.st``,
    ``multimem.red``); ``reduction``: the switch reads every GPU's copy and returns the reduced value
    (``multimem.ld_reduce``). ``source`` says who states it. A topology that does not say has neither.

    >>> FabricFeatures(multicast=True).lacks({"multicast", "reduction"})
    ['reduction']
    """

    multicast: bool = False
    reduction: bool = False
    source: str = ""

    def has(self, feature: str) -> bool:
        return bool(getattr(self, feature))

    def lacks(self, needs: Any) -> list[str]:
        """The features of ``needs`` (names of :data:`collsim.ir.program.FABRIC_FEATURES`) this fabric lacks."""
        return sorted(f for f in needs if not self.has(f))


def _routed(u: Hashable, v: Hashable, data: dict[str, Any]) -> bool:
    return bool(data["routed"])


def _routed_nvlink(u: Hashable, v: Hashable, data: dict[str, Any]) -> bool:
    return bool(data["routed"]) and data["family"] == "nvlink"


def _tidy(value: float) -> float:
    """Round away float noise (18 x 20.6 = 370.79999...) so sums read as written."""
    return round(value, 9)


def _uniform(values: list[int]) -> int | list[int]:
    """One value if all equal, else ``[min, max]``."""
    low, high = min(values), max(values)
    return low if low == high else [low, high]


class Topology:
    """GPUs, switches, CPUs and the links between them, with cached routes.

    Parameters
    ----------
    name : str
        Preset or file name.
    graph : networkx.Graph
        Nodes and edges as described in the module docstring. ``capacity``
        fields, ``physical``/``routed`` flags and traversal latencies are
        filled in when absent; NVSwitch planes are aggregated (in place).
    description : str, optional
    sources : mapping, optional
        Where the numbers came from (shown by ``collsim topology show``).
    locator : Locator, optional
        Where the input was written, for errors.
    node_paths : mapping, optional
        Input path of each node, so errors about a node point at its line.
    fabric : FabricFeatures, optional
        What its switches do besides forwarding (NVLS multicast and reductions); none by default.

    Raises
    ------
    InputError
        When GPU ranks are not ``0..n-1`` or a GPU cannot reach another one.
    """

    def __init__(
        self,
        name: str,
        graph: nx.Graph,
        *,
        description: str = "",
        sources: Mapping[str, Any] | None = None,
        locator: Locator | None = None,
        node_paths: Mapping[Hashable, KeyPath] | None = None,
        fabric: FabricFeatures | None = None,
    ) -> None:
        self.name = name
        self.fabric = fabric or FabricFeatures()
        self.graph = graph
        self.description = description
        self.sources: dict[str, Any] = dict(sources or {})
        self._locator = locator or Locator()
        self._node_paths = dict(node_paths or {})
        self._fill_defaults()
        self._aggregate_nvswitch_planes()
        self._rank_nodes = self._index_ranks()
        self._dags: dict[tuple[Hashable, str], tuple[dict[State, int], dict[State, list[State]]]] = {}
        self._routes: dict[tuple[int, int], Route] = {}
        self._check_reachable()

    # ------------------------------------------------------------------ set-up

    def _fill_defaults(self) -> None:
        for _, data in self.graph.nodes(data=True):
            data.setdefault("traversal_latency_us", traversal_latency_us(data["kind"]))
        for _, _, data in self.graph.edges(data=True):
            data.setdefault("physical", True)
            data.setdefault("routed", True)
            data.setdefault("efficiency", data["effective_gbps"] / data["bandwidth_gbps"])
            data.setdefault("capacity_gbps", _tidy(data["count"] * data["bandwidth_gbps"]))
            data.setdefault("effective_capacity_gbps", _tidy(data["count"] * data["effective_gbps"]))

    def _aggregate_nvswitch_planes(self) -> None:
        """Replace, for routing, each set of parallel NVSwitch planes by one fabric node.

        Chips qualify when they connect only GPUs and share the same GPU set
        (HGX: 4 chips x 8 GPUs; NVL72: 18 chips x 72 GPUs). Their GPU edges
        stay in the graph as ``physical`` but not ``routed``.
        """
        graph = self.graph
        groups: dict[frozenset[Hashable], list[Hashable]] = {}
        for chip, data in graph.nodes(data=True):
            if data["kind"] != "nvswitch":
                continue
            neighbors = frozenset(graph.adj[chip])
            if neighbors and all(graph.nodes[n]["kind"] == "gpu" for n in neighbors):
                groups.setdefault(neighbors, []).append(chip)
        planes = [(gpus, chips) for gpus, chips in groups.items() if len(chips) > 1]
        for index, (gpus, chips) in enumerate(planes):
            fabric = "nvfabric" if len(planes) == 1 else f"nvfabric{index}"
            while fabric in graph:
                fabric += "_"
            graph.add_node(
                fabric,
                kind=FABRIC_KIND,
                chips=list(chips),
                traversal_latency_us=max(graph.nodes[c]["traversal_latency_us"] for c in chips),
            )
            for gpu in sorted(gpus, key=lambda n: graph.nodes[n].get("rank", 0)):
                wires = [graph.edges[gpu, chip] for chip in chips]
                count = sum(w["count"] for w in wires)
                capacity = _tidy(sum(w["capacity_gbps"] for w in wires))
                effective = _tidy(sum(w["effective_capacity_gbps"] for w in wires))
                link_type = Counter(w["link_type"] for w in wires).most_common(1)[0][0]
                graph.add_edge(
                    gpu,
                    fabric,
                    link_type=link_type,
                    family=wires[0]["family"],
                    count=count,
                    bandwidth_gbps=_tidy(capacity / count),
                    effective_gbps=_tidy(effective / count),
                    efficiency=effective / capacity,
                    capacity_gbps=capacity,
                    effective_capacity_gbps=effective,
                    latency_us=max(w["latency_us"] for w in wires),
                    physical=False,
                    routed=True,
                )
                for wire in wires:
                    wire["routed"] = False

    def _index_ranks(self) -> list[Hashable]:
        by_rank: dict[int, Hashable] = {}
        for node, data in self.graph.nodes(data=True):
            if data["kind"] != "gpu":
                continue
            rank = data["rank"]
            if rank in by_rank:
                raise self._locator.error(
                    f"gpu rank {rank} is used by both '{by_rank[rank]}' and '{node}'",
                    self._node_paths.get(node, ()),
                )
            by_rank[rank] = node
        if not by_rank:
            raise self._locator.error("the topology has no GPU")
        expected = set(range(len(by_rank)))
        if set(by_rank) != expected:
            missing = sorted(expected - set(by_rank))
            raise self._locator.error(
                f"gpu ranks must be 0..{len(by_rank) - 1}; missing {missing}"
            )
        return [by_rank[rank] for rank in range(len(by_rank))]

    def _dag(self, src_node: Hashable, phase: str) -> tuple[dict[State, int], dict[State, list[State]]]:
        key = (src_node, phase)
        if key not in self._dags:
            edge_ok: EdgeFilter = _routed_nvlink if phase == "nvlink" else _routed
            self._dags[key] = shortest_state_dag(self.graph, src_node, edge_ok)
        return self._dags[key]

    def _check_reachable(self) -> None:
        for src, src_node in enumerate(self._rank_nodes):
            dist, _ = self._dag(src_node, "any")
            reached = {node for node, _ in dist}
            for dst, dst_node in enumerate(self._rank_nodes):
                if dst_node not in reached:
                    raise self._locator.error(
                        f"gpu {dst} is unreachable from gpu {src}",
                        self._node_paths.get(dst_node, ()),
                    )

    # ------------------------------------------------------------------ GPUs

    @property
    def num_gpus(self) -> int:
        """Number of GPUs (ranks ``0..num_gpus-1``)."""
        return len(self._rank_nodes)

    def _check_rank(self, rank: int) -> None:
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.num_gpus:
            raise InputError(
                f"gpu rank {rank!r} is out of range 0..{self.num_gpus - 1} of topology '{self.name}'"
            )

    def gpu_node(self, rank: int) -> Hashable:
        """Node id of GPU ``rank``.

        >>> from collsim.topology import load_topology
        >>> load_topology("dgx1-v100").gpu_node(3)
        'gpu3'
        """
        self._check_rank(rank)
        return self._rank_nodes[rank]

    def gpu_info(self, rank: int) -> dict[str, Any]:
        """``model``, ``generation``, ``sm``, ``hbm_gbps`` and ``sm_count`` of GPU ``rank``.

        >>> from collsim.topology import load_topology
        >>> load_topology("hgx-h100").gpu_info(0)
        {'model': 'H100', 'generation': 'hopper', 'sm': 90, 'hbm_gbps': 3350, 'sm_count': 132}
        """
        data = self.graph.nodes[self.gpu_node(rank)]
        return {key: data[key] for key in GPU_FIELDS}

    def generation(self, rank: int) -> str:
        """Architecture generation of GPU ``rank`` (``volta`` ... ``blackwell``)."""
        return self.gpu_info(rank)["generation"]

    def gpu_egress_gbps(self, rank: int, *, family: str | None = None, effective: bool = False) -> float:
        """Per-direction bandwidth out of GPU ``rank`` over all its links, GB/s.

        Parameters
        ----------
        family : str, optional
            Count only ``nvlink``, ``pcie`` or ``cpu`` links.
        effective : bool
            Effective rather than nominal bandwidth.

        Examples
        --------
        >>> from collsim.topology import load_topology
        >>> load_topology("hgx-h100").gpu_egress_gbps(0)
        450.0
        >>> load_topology("dgx1-v100").gpu_egress_gbps(0, family="nvlink")
        150.0
        """
        node = self.gpu_node(rank)
        field = "effective_capacity_gbps" if effective else "capacity_gbps"
        return _tidy(sum(
            data[field]
            for _, _, data in self.graph.edges(node, data=True)
            if data["physical"] and (family is None or data["family"] == family)
        ))

    # ------------------------------------------------------------------ links and routes

    @property
    def routing_graph(self) -> nx.Graph:
        """Read-only view of the edges routes may use (fabric instead of chips)."""
        return nx.subgraph_view(self.graph, filter_edge=lambda u, v: self.graph.edges[u, v]["routed"])

    @property
    def physical_graph(self) -> nx.Graph:
        """Read-only view of the physical wires (chips instead of fabric)."""
        return nx.subgraph_view(
            self.graph,
            filter_node=lambda n: self.graph.nodes[n]["kind"] != FABRIC_KIND,
            filter_edge=lambda u, v: self.graph.edges[u, v]["physical"],
        )

    def directed_link_capacity(self, u: Hashable, v: Hashable) -> tuple[float, float]:
        """``(nominal_gbps, effective_gbps)`` of direction ``u`` → ``v``, all parallel links.

        Links are full duplex, so both directions have the same capacity;
        each is a separate resource for contention.

        >>> from collsim.topology import load_topology
        >>> load_topology("dgx1-v100").directed_link_capacity("gpu0", "gpu3")
        (50.0, 40.0)
        """
        if not self.graph.has_edge(u, v):
            raise InputError(f"topology '{self.name}' has no link between '{u}' and '{v}'")
        data = self.graph.edges[u, v]
        return data["capacity_gbps"], data["effective_capacity_gbps"]

    def route(self, src_rank: int, dst_rank: int) -> Route:
        """The route from GPU ``src_rank`` to GPU ``dst_rank`` (cached).

        ``src_rank == dst_rank`` gives a zero-hop ``via="local"`` route with
        infinite bandwidth and no latency.

        Raises
        ------
        InputError
            For a rank out of range or an unreachable pair.

        Examples
        --------
        >>> from collsim.topology import load_topology
        >>> r = load_topology("dgx1-v100").route(0, 5)   # no direct NVLink
        >>> r.path, r.via, r.hops
        (['gpu0', 'gpu1', 'gpu5'], 'peer-gpu', 2)
        """
        self._check_rank(src_rank)
        self._check_rank(dst_rank)
        key = (src_rank, dst_rank)
        if key not in self._routes:
            self._routes[key] = self._compute_route(src_rank, dst_rank)
        return self._routes[key]

    def _compute_route(self, src: int, dst: int) -> Route:
        src_node, dst_node = self._rank_nodes[src], self._rank_nodes[dst]
        if src == dst:
            return Route(src, dst, [src_node], 0, [], math.inf, math.inf, 0.0, [], True, "local")
        path = None
        for phase in ("nvlink", "any"):
            dist, preds = self._dag(src_node, phase)
            path = select_path(self.graph, candidate_paths(preds, dist, dst_node))
            if path is not None:
                break
        if path is None:
            raise InputError(f"gpu {dst} is unreachable from gpu {src} in topology '{self.name}'")
        links = list(zip(path, path[1:]))
        edges = [self.graph.edges[u, v] for u, v in links]
        kinds = [self.graph.nodes[n]["kind"] for n in path]
        families = [e["family"] for e in edges]
        latency = sum(e["latency_us"] for e in edges) + sum(
            self.graph.nodes[n]["traversal_latency_us"] for n in path[1:-1]
        )
        return Route(
            src=src,
            dst=dst,
            path=list(path),
            hops=len(links),
            links=links,
            bottleneck_gbps=min(e["capacity_gbps"] for e in edges),
            effective_gbps=min(e["effective_capacity_gbps"] for e in edges),
            latency_us=round(latency, 9),
            link_types=[e["link_type"] for e in edges],
            nvlink_only=all(f == "nvlink" for f in families),
            via=classify_via(path, kinds, families),
        )

    def routes(self) -> Iterator[Route]:
        """Routes of every ordered pair of distinct GPUs, by source then destination."""
        for src in range(self.num_gpus):
            for dst in range(self.num_gpus):
                if src != dst:
                    yield self.route(src, dst)

    def is_nvlink_only(self, src_rank: int, dst_rank: int) -> bool:
        """True when the route ``src`` → ``dst`` uses NVLink links only."""
        return self.route(src_rank, dst_rank).nvlink_only

    # ------------------------------------------------------------------ summary

    def summary(self, *, routes: bool = True) -> dict[str, Any]:
        """Facts about the topology, for people and reports.

        Keys: ``name``, ``description``, ``gpus``, ``gpu_model``,
        ``generation``, ``links_per_gpu`` (by link type; ``[min, max]`` when
        GPUs differ), ``per_link_gbps`` (by link type: nominal and effective,
        per direction), ``per_gpu_gbps`` (smallest GPU egress, all links),
        ``per_gpu_gbps_by_family``, ``switches`` (physical chips by kind),
        ``switch_count``, ``cpus``, ``path_types`` (ordered GPU pairs per
        route kind), ``route_hops`` (ordered pairs per hop count),
        ``routing`` and ``interconnect`` (one-line descriptions).
        ``routes=False`` leaves out ``path_types`` and ``route_hops``, which
        need every pair's route (5,112 of them on GB200 NVL72).

        >>> from collsim.topology import load_topology
        >>> s = load_topology("hgx-h100").summary()
        >>> s["links_per_gpu"], s["switch_count"], s["path_types"]
        ({'nvlink4': 18}, 4, {'nvswitch': 56})
        """
        graph = self.graph
        kinds = Counter(data["kind"] for _, data in graph.nodes(data=True))
        models = sorted({graph.nodes[n]["model"] for n in self._rank_nodes})
        generations = sorted({graph.nodes[n]["generation"] for n in self._rank_nodes})

        links_by_type: dict[str, list[int]] = {}
        per_link: dict[str, dict[str, float]] = {}
        for rank, node in enumerate(self._rank_nodes):
            counts: Counter[str] = Counter()
            for _, _, data in graph.edges(node, data=True):
                if data["physical"]:
                    counts[data["link_type"]] += data["count"]
            for link_type in counts.keys() | links_by_type.keys():
                links_by_type.setdefault(link_type, [0] * rank).append(counts.get(link_type, 0))
        for _, _, data in graph.edges(data=True):
            if data["physical"]:
                per_link.setdefault(
                    data["link_type"],
                    {"nominal": data["bandwidth_gbps"], "effective": data["effective_gbps"]},
                )
        families = sorted({data["family"] for _, _, data in graph.edges(data=True)})
        by_family = {
            family: {
                "nominal": min(self.gpu_egress_gbps(r, family=family) for r in range(self.num_gpus)),
                "effective": min(
                    self.gpu_egress_gbps(r, family=family, effective=True) for r in range(self.num_gpus)
                ),
            }
            for family in families
        }
        by_family = {f: v for f, v in by_family.items() if v["nominal"] > 0}
        switches = {kind: kinds[kind] for kind in SWITCH_KINDS if kinds[kind]}
        summary: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "gpus": self.num_gpus,
            "gpu_model": "/".join(models),
            "generation": "/".join(generations),
            "links_per_gpu": {t: _uniform(c) for t, c in sorted(links_by_type.items())},
            "per_link_gbps": dict(sorted(per_link.items())),
            "per_gpu_gbps": {
                "nominal": min(self.gpu_egress_gbps(r) for r in range(self.num_gpus)),
                "effective": min(self.gpu_egress_gbps(r, effective=True) for r in range(self.num_gpus)),
            },
            "per_gpu_gbps_by_family": by_family,
            "switches": switches,
            "switch_count": sum(switches.values()),
            "cpus": kinds["cpu"],
            "routing": self._routing_text(),
        }
        if routes:
            every = list(self.routes())
            summary["path_types"] = dict(sorted(Counter(r.via for r in every).items()))
            summary["route_hops"] = dict(sorted(Counter(r.hops for r in every).items()))
        summary["interconnect"] = self._interconnect_text(summary)
        return summary

    def _routing_text(self) -> str:
        fabrics = [data for _, data in self.graph.nodes(data=True) if data["kind"] == FABRIC_KIND]
        if not fabrics:
            return "routes follow the physical links"
        chips = ", ".join(str(len(f["chips"])) for f in fabrics)
        return (
            f"{len(fabrics)} NVSwitch fabric(s) aggregating {chips} chip(s): one logical "
            "GPU-fabric edge per GPU carries all its NVSwitch links"
        )

    @staticmethod
    def _interconnect_text(summary: Mapping[str, Any]) -> str:
        parts = []
        for link_type, count in summary["links_per_gpu"].items():
            shown = count if isinstance(count, int) else f"{count[0]}-{count[1]}"
            parts.append(f"{link_type} x{shown}")
        text = ", ".join(parts)
        if summary["switches"]:
            text += " via " + ", ".join(f"{n} {k}" for k, n in summary["switches"].items())
        if summary["cpus"]:
            text += f", {summary['cpus']} CPU socket(s)"
        return text

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, gpus={self.num_gpus})"
