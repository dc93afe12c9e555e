"""Route selection between GPUs.

Rules, in priority order (they mirror how NCCL ranks path types: NVLink
paths, including through one peer GPU, beat any PCIe path):

1. Only *routed* edges are used. Physical NVSwitch chip edges are replaced by
   the aggregated fabric edge (see :mod:`collsim.topology`).
2. A GPU may forward traffic (be an intermediate node) only from an NVLink
   link onto another NVLink link (direct or through an NVSwitch), as NCCL
   does through a peer GPU (PATH_NVB); a GPU does not route PCIe traffic.
3. If an NVLink-only route exists, the route is NVLink-only.
4. Fewest hops.
5. Widest bottleneck (nominal, then effective).
6. Lowest latency, then the lexicographically smallest node list, so the
   choice is deterministic.

Examples
--------
>>> import networkx as nx
>>> g = nx.Graph()
>>> for n in ("a", "b", "c"):
...     g.add_node(n, kind="gpu")
>>> g.add_edge("a", "b", routed=True, family="nvlink", capacity_gbps=50.0,
...            effective_capacity_gbps=40.0, latency_us=0.6)
>>> g.add_edge("b", "c", routed=True, family="nvlink", capacity_gbps=25.0,
...            effective_capacity_gbps=20.0, latency_us=0.6)
>>> dist, preds = shortest_state_dag(g, "a", lambda u, v, d: True)
>>> select_path(g, candidate_paths(preds, dist, "c"))
['a', 'b', 'c']
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import networkx as nx

__all__ = [
    "MAX_CANDIDATES",
    "EdgeFilter",
    "State",
    "shortest_state_dag",
    "candidate_paths",
    "path_key",
    "select_path",
]

#: Upper bound on equal-length paths compared per pair; dense custom graphs
#: (tori) can have combinatorially many, and the first few hundred found in
#: deterministic order are enough to pick a widest one.
MAX_CANDIDATES = 256

#: ``edge_ok(u, v, data)`` says whether a route may use edge ``u``-``v``.
EdgeFilter = Callable[[Hashable, Hashable, dict[str, Any]], bool]
#: A BFS state: the node, and for GPUs whether it was entered over NVLink
#: (``None`` for other nodes, whose forwarding does not depend on it).
State = tuple[Hashable, "bool | None"]


def _kind(graph: nx.Graph, node: Hashable) -> str:
    return graph.nodes[node]["kind"]


def shortest_state_dag(
    graph: nx.Graph, src: Hashable, edge_ok: EdgeFilter
) -> tuple[dict[State, int], dict[State, list[State]]]:
    """Breadth-first search from ``src`` under the GPU-forwarding rule.

    Returns the hop distance of every reached state and its predecessors on
    shortest paths, from which :func:`candidate_paths` lists the paths.
    """
    start: State = (src, None)
    dist: dict[State, int] = {start: 0}
    preds: dict[State, list[State]] = {start: []}
    frontier = [start]
    while frontier:
        following: list[State] = []
        for state in frontier:
            node, entered_over_nvlink = state
            forwarding_gpu = node != src and _kind(graph, node) == "gpu"
            if forwarding_gpu and not entered_over_nvlink:
                continue  # reached over PCIe: may only be a destination
            for neighbor in sorted(graph.adj[node], key=str):
                data = graph.adj[node][neighbor]
                if neighbor == src or not edge_ok(node, neighbor, data):
                    continue
                over_nvlink = data["family"] == "nvlink"
                if forwarding_gpu and not over_nvlink:
                    continue  # a GPU forwards only onto NVLink
                nxt: State = (neighbor, over_nvlink if _kind(graph, neighbor) == "gpu" else None)
                depth = dist[state] + 1
                if nxt not in dist:
                    dist[nxt] = depth
                    preds[nxt] = [state]
                    following.append(nxt)
                elif dist[nxt] == depth:
                    preds[nxt].append(state)
        frontier = following
    return dist, preds


def candidate_paths(
    preds: dict[State, list[State]],
    dist: dict[State, int],
    dst: Hashable,
    limit: int = MAX_CANDIDATES,
) -> list[list[Hashable]]:
    """All shortest paths to ``dst`` (up to ``limit``), each a node list.

    Empty when ``dst`` was not reached.
    """
    ends = [state for state in ((dst, True), (dst, False), (dst, None)) if state in dist]
    if not ends:
        return []
    best = min(dist[state] for state in ends)
    paths: list[list[Hashable]] = []

    def walk(state: State, suffix: list[Hashable]) -> None:
        if len(paths) >= limit:
            return
        if not preds[state]:
            paths.append([state[0], *suffix])
            return
        for previous in preds[state]:
            walk(previous, [state[0], *suffix])

    for state in ends:
        if dist[state] == best:
            walk(state, [])
    return paths


def path_key(graph: nx.Graph, path: list[Hashable]) -> tuple[float, float, float, tuple[str, ...]]:
    """Sort key of a candidate path: widest, then fastest, then by name."""
    edges = [graph.edges[u, v] for u, v in zip(path, path[1:])]
    bottleneck = min((e["capacity_gbps"] for e in edges), default=float("inf"))
    effective = min((e["effective_capacity_gbps"] for e in edges), default=float("inf"))
    latency = sum(e["latency_us"] for e in edges) + sum(
        graph.nodes[n].get("traversal_latency_us", 0.0) for n in path[1:-1]
    )
    return (-bottleneck, -effective, round(latency, 9), tuple(str(n) for n in path))


def select_path(graph: nx.Graph, candidates: list[list[Hashable]]) -> list[Hashable] | None:
    """The best of ``candidates`` by :func:`path_key`, or ``None`` if empty."""
    if not candidates:
        return None
    return min(candidates, key=lambda path: path_key(graph, path))
