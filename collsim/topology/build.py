"""Build a :class:`~collsim.topology.topology.Topology` from a YAML-shaped mapping.

Two formats, told apart by their keys.

**Explicit** (``nodes:`` and ``edges:``)::

    name: two-h100
    gpu: H100                    # default model of gpu nodes
    nodes:
      - {id: gpu0, kind: gpu}    # rank: order of appearance unless given
      - {id: gpu1, kind: gpu}
      - {id: sw, kind: nvswitch}
    edges:                       # one entry per connected pair
      - {between: [gpu0, sw], link_type: nvlink4, count: 18}
      - {between: [gpu1, sw], link_type: nvlink4, count: 18}

Both formats take ``nvls: {multicast: true, reduction: true, source: "..."}``:
what the switches do besides forwarding (NVLink SHARP: NVSwitch gen 3 and
later), which protocols with multimem operations need. Without it a topology
has neither.

Node kinds: ``gpu``, ``nvswitch``, ``pcie-switch``, ``cpu``; any node may set
``traversal_latency_us``. GPU nodes take ``model`` (or the top-level
``gpu``) and may override ``generation``, ``sm``, ``hbm_gbps``,
``sm_count`` (all four are required for a model not in the catalog). Edge
fields: ``between`` and ``link_type`` (required); ``count`` (links, default
1); ``bandwidth_gbps`` (ONE link, per direction; default from the link
type); ``effective_gbps`` or ``efficiency``; ``latency_us``; ``source``.

**Shorthand**, per dimension like ASTRA-sim's network config (one list entry
per dimension, rank ``r`` has coordinate ``(r // prod(npus[:d])) % npus[d]``
in dimension ``d``)::

    name: my-switch
    gpu: H100
    topology: [switch]           # switch | ring | fully_connected (ASTRA-sim: Switch, Ring, FullyConnected)
    npus: [8]                    # or npus_count
    bandwidth: [450]             # GB/s per direction of each GPU connection in that dimension
    latency: [500]               # NANOSECONDS per link, as in ASTRA-sim; or latency_us: [0.5]

Optional per-dimension keys: ``link_type`` (default: the GPU's NVLink
generation), ``links`` (physical links per connection; default 1),
``efficiency``, ``switch_chips`` (physical chips of a switch dimension),
``links_per_chip`` (a list per dimension), ``switch_latency_us``. Without
``bandwidth`` a connection has ``links`` × the link type's bandwidth; with it,
each of the ``links`` links gets ``bandwidth / links``. A ``switch``
dimension connects each group of GPUs to its own switch; ``ring`` links
neighbours; ``fully_connected`` links every pair of the group.

Examples
--------
>>> topo = build_topology({"gpu": "H100", "topology": ["switch"], "npus": [4],
...                        "bandwidth": [400], "latency": [500]})
>>> topo.num_gpus, topo.route(0, 3).bottleneck_gbps, topo.route(0, 3).latency_us
(4, 400.0, 1.1)
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

import networkx as nx

from collsim.topology.catalog import (
    GPU_FIELDS,
    NODE_KINDS,
    gpu_model_names,
    gpu_properties,
    link_type_info,
    link_type_names,
    traversal_latency_us,
)
from collsim.topology.topology import FabricFeatures, Topology
from collsim.yamlsource import KeyPath, Locator

__all__ = ["build_topology", "DIMENSION_KINDS", "COMMON_KEYS", "EXPLICIT_KEYS", "SHORTHAND_KEYS"]

COMMON_KEYS = ("name", "description", "gpu", "sources", "notes", "nvls")
NVLS_KEYS = ("multicast", "reduction", "source")
EXPLICIT_KEYS = ("nodes", "edges")
SHORTHAND_KEYS = (
    "topology", "npus", "npus_count", "bandwidth", "latency", "latency_us", "link_type",
    "links", "efficiency", "switch_chips", "links_per_chip", "switch_latency_us",
)
NODE_KEYS = ("id", "kind", "rank", "model", "generation", "sm", "hbm_gbps", "sm_count",
             "traversal_latency_us", "source")
EDGE_KEYS = ("between", "link_type", "count", "bandwidth_gbps", "effective_gbps", "efficiency",
             "latency_us", "source")
#: Shorthand dimension kinds, with the spellings accepted for each.
DIMENSION_KINDS = {
    "switch": "switch",
    "ring": "ring",
    "fully_connected": "fully_connected",
    "fullyconnected": "fully_connected",
    "fully-connected": "fully_connected",
}
_SWITCH_KIND_OF_FAMILY = {"nvlink": "nvswitch", "pcie": "pcie-switch"}


# ---------------------------------------------------------------- value checks

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(loc: Locator, value: Any, path: KeyPath, *, positive: bool = True) -> float:
    """A finite number; > 0 when ``positive``, else >= 0."""
    if not _is_number(value):
        raise loc.error(f"must be a number, not {value!r}", path)
    if positive and value <= 0:
        raise loc.error(f"must be positive, not {value!r}", path)
    if not positive and value < 0:
        raise loc.error(f"must not be negative, not {value!r}", path)
    return float(value)


def _count(loc: Locator, value: Any, path: KeyPath, *, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise loc.error(f"must be a whole number >= {minimum}, not {value!r}", path)
    return value


def _efficiency(loc: Locator, value: Any, path: KeyPath) -> float:
    value = _number(loc, value, path)
    if value > 1:
        raise loc.error(f"must be in (0, 1], not {value!r}", path)
    return value


def _mapping(loc: Locator, value: Any, path: KeyPath, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise loc.error(f"{what} must be a mapping, not {type(value).__name__}", path)
    return value


def _check_keys(loc: Locator, data: Mapping[str, Any], path: KeyPath, allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise loc.error(f"unknown key '{key}'", (*path, key), choices=allowed)


def _require(loc: Locator, data: Mapping[str, Any], path: KeyPath, key: str, **extra: Any) -> Any:
    if key not in data or data[key] is None:
        # Located at where the field should be: the line of its parent.
        raise loc.error(f"missing field '{key}'", (*path, key), **extra)
    return data[key]


def _link_type(loc: Locator, value: Any, path: KeyPath) -> dict[str, Any]:
    try:
        return {"name": value, **link_type_info(value)}
    except (KeyError, TypeError):
        raise loc.error(f"unknown link type {value!r}", path, choices=link_type_names()) from None


def _gpu_model(loc: Locator, value: Any, path: KeyPath) -> dict[str, Any]:
    try:
        return gpu_properties(value)
    except (KeyError, TypeError):
        raise loc.error(f"unknown GPU model {value!r}", path, choices=gpu_model_names()) from None


def _edge_attrs(
    loc: Locator,
    link: dict[str, Any],
    path: KeyPath,
    *,
    count: int,
    bandwidth: float | None,
    effective: float | None,
    efficiency: float | None,
    latency: float | None,
    fields: Mapping[str, KeyPath],
) -> dict[str, Any]:
    """Edge attributes with link-type defaults applied; ``fields`` locates each override."""
    nominal = bandwidth if bandwidth is not None else link["bandwidth_gbps"]
    if nominal is None:
        raise loc.error(
            f"missing field 'bandwidth_gbps': link type '{link['name']}' has no default bandwidth",
            fields.get("bandwidth", path),
        )
    if effective is not None and efficiency is not None:
        raise loc.error("give effective_gbps or efficiency, not both", fields.get("effective", path))
    if effective is not None:
        if effective > nominal:
            raise loc.error(
                f"effective_gbps {effective} exceeds bandwidth_gbps {nominal}", fields.get("effective", path)
            )
        efficiency = effective / nominal
    elif efficiency is None:
        # Keep the link type's calibrated ratio when only the nominal rate is overridden.
        if link["effective_gbps"] is not None and link["bandwidth_gbps"]:
            efficiency = link["effective_gbps"] / link["bandwidth_gbps"]
        else:
            efficiency = 1.0  # no source gives an effective figure: effective = nominal
    return {
        "link_type": link["name"],
        "family": link["family"],
        "count": count,
        "bandwidth_gbps": float(nominal),
        "effective_gbps": round(nominal * efficiency, 9),
        "efficiency": efficiency,
        "latency_us": float(latency if latency is not None else link["latency_us"]),
    }


# ---------------------------------------------------------------- explicit format

def _gpu_node_attrs(
    loc: Locator, node: Mapping[str, Any], path: KeyPath, default_model: Any
) -> dict[str, Any]:
    model = node.get("model", default_model)
    if model is None:
        raise loc.error("missing field 'model' (or a top-level 'gpu')", path, choices=gpu_model_names())
    overrides = {key: node[key] for key in GPU_FIELDS[1:] if key in node}
    if model in gpu_model_names():
        props = gpu_properties(model)
    elif len(overrides) == len(GPU_FIELDS) - 1:
        props = {"model": str(model)}  # a model the catalog lacks, fully described
    else:
        where = (*path, "model") if "model" in node else ("gpu",)
        raise loc.error(
            f"unknown GPU model {model!r} (a new model needs generation, sm, hbm_gbps and sm_count)",
            where,
            choices=gpu_model_names(),
        )
    for key, value in overrides.items():
        if key == "generation":
            if not isinstance(value, str):
                raise loc.error(f"must be a string, not {value!r}", (*path, key))
            props[key] = value
        elif key in ("sm", "sm_count"):
            props[key] = _count(loc, value, (*path, key))
        else:
            props[key] = _number(loc, value, (*path, key))
    props.pop("nvlink", None)
    return props


def _build_explicit(loc: Locator, data: Mapping[str, Any]) -> tuple[nx.Graph, dict[Hashable, KeyPath]]:
    nodes = _require(loc, data, (), "nodes")
    if not isinstance(nodes, list) or not nodes:
        raise loc.error("must be a non-empty list of nodes", ("nodes",))
    edges = data.get("edges") or []
    if not isinstance(edges, list):
        raise loc.error("must be a list of edges", ("edges",))

    graph = nx.Graph()
    node_paths: dict[Hashable, KeyPath] = {}
    next_rank = 0
    for index, node in enumerate(nodes):
        path: KeyPath = ("nodes", index)
        node = _mapping(loc, node, path, "a node")
        _check_keys(loc, node, path, NODE_KEYS)
        node_id = _require(loc, node, path, "id")
        if not isinstance(node_id, (str, int)) or isinstance(node_id, bool):
            raise loc.error(f"must be a string, not {node_id!r}", (*path, "id"))
        node_id = str(node_id)
        if node_id in graph:
            raise loc.error(f"duplicate node id '{node_id}'", (*path, "id"))
        kind = _require(loc, node, path, "kind", choices=NODE_KINDS)
        if kind not in NODE_KINDS:
            raise loc.error(f"unknown node kind {kind!r}", (*path, "kind"), choices=NODE_KINDS)
        attrs: dict[str, Any] = {"kind": kind}
        if kind == "gpu":
            rank = node.get("rank", next_rank)
            attrs["rank"] = _count(loc, rank, (*path, "rank"), minimum=0)
            next_rank = attrs["rank"] + 1
            attrs.update(_gpu_node_attrs(loc, node, path, data.get("gpu")))
        else:
            for key in GPU_FIELDS + ("rank",):
                if key in node:
                    raise loc.error(f"only gpu nodes take '{key}'", (*path, key))
        if "traversal_latency_us" in node:
            attrs["traversal_latency_us"] = _number(
                loc, node["traversal_latency_us"], (*path, "traversal_latency_us"), positive=False
            )
        else:
            attrs["traversal_latency_us"] = traversal_latency_us(kind)
        if "source" in node:
            attrs["source"] = str(node["source"])
        graph.add_node(node_id, **attrs)
        node_paths[node_id] = path

    known = sorted(graph.nodes)
    for index, edge in enumerate(edges):
        path = ("edges", index)
        edge = _mapping(loc, edge, path, "an edge")
        _check_keys(loc, edge, path, EDGE_KEYS)
        ends = _require(loc, edge, path, "between")
        if not isinstance(ends, list) or len(ends) != 2:
            raise loc.error("must list the two node ids it connects", (*path, "between"))
        ends = [str(end) for end in ends]
        for position, end in enumerate(ends):
            if end not in graph:
                shown = known if len(known) <= 20 else None
                raise loc.error(f"unknown node '{end}'", (*path, "between", position), choices=shown)
        if ends[0] == ends[1]:
            raise loc.error(f"connects node '{ends[0]}' to itself", (*path, "between"))
        if graph.has_edge(*ends):
            raise loc.error(
                f"second edge between '{ends[0]}' and '{ends[1]}': give one edge with count", (*path, "between")
            )
        link = _link_type(loc, _require(loc, edge, path, "link_type", choices=link_type_names()),
                          (*path, "link_type"))

        def opt(key: str, positive: bool = True) -> float | None:
            return _number(loc, edge[key], (*path, key), positive=positive) if key in edge else None

        attrs = _edge_attrs(
            loc, link, path,
            count=_count(loc, edge.get("count", 1), (*path, "count")),
            bandwidth=opt("bandwidth_gbps"),
            effective=opt("effective_gbps"),
            efficiency=_efficiency(loc, edge["efficiency"], (*path, "efficiency")) if "efficiency" in edge else None,
            latency=opt("latency_us", positive=False),
            fields={"bandwidth": (*path, "bandwidth_gbps"), "effective": (*path, "effective_gbps")},
        )
        if "source" in edge:
            attrs["source"] = str(edge["source"])
        graph.add_edge(*ends, **attrs)
    return graph, node_paths


# ---------------------------------------------------------------- shorthand format

def _per_dimension(loc: Locator, data: Mapping[str, Any], key: str, dims: int) -> list[Any]:
    """The list under ``key`` with one entry per dimension (``None`` where absent)."""
    if key not in data or data[key] is None:
        return [None] * dims
    value = data[key]
    if not isinstance(value, list):
        if dims != 1:
            raise loc.error(f"must be a list with one entry per dimension ({dims})", (key,))
        return [value]
    if len(value) != dims:
        raise loc.error(f"has {len(value)} entries but topology has {dims} dimension(s)", (key,))
    return value


def _build_shorthand(loc: Locator, data: Mapping[str, Any]) -> tuple[nx.Graph, dict[Hashable, KeyPath]]:
    kinds_raw = data["topology"]
    kinds_raw = kinds_raw if isinstance(kinds_raw, list) else [kinds_raw]
    if not kinds_raw:
        raise loc.error("must list at least one dimension", ("topology",))
    kinds = []
    for index, kind in enumerate(kinds_raw):
        normal = DIMENSION_KINDS.get(str(kind).lower()) if isinstance(kind, str) else None
        if normal is None:
            raise loc.error(
                f"unknown dimension kind {kind!r}", ("topology", index), choices=sorted(set(DIMENSION_KINDS.values()))
            )
        kinds.append(normal)
    dims = len(kinds)

    if "npus" in data and "npus_count" in data:
        raise loc.error("give npus or npus_count, not both", ("npus_count",))
    npus_key = "npus" if "npus" in data else "npus_count"
    if npus_key not in data:
        raise loc.error("missing field 'npus' (GPUs per dimension)", ("npus",))
    npus = [_count(loc, n, (npus_key, i)) for i, n in enumerate(_per_dimension(loc, data, npus_key, dims))]

    model = _require(loc, data, (), "gpu", choices=gpu_model_names())
    gpu = _gpu_model(loc, model, ("gpu",))

    if "latency" in data and "latency_us" in data:
        raise loc.error("give latency (ns) or latency_us, not both", ("latency_us",))
    latency_key, latency_scale = ("latency", 1e-3) if "latency" in data else ("latency_us", 1.0)
    latencies = _per_dimension(loc, data, latency_key, dims)
    link_types = _per_dimension(loc, data, "link_type", dims)
    links = _per_dimension(loc, data, "links", dims)
    bandwidths = _per_dimension(loc, data, "bandwidth", dims)
    efficiencies = _per_dimension(loc, data, "efficiency", dims)
    chips_list = _per_dimension(loc, data, "switch_chips", dims)
    per_chip_list = _per_dimension(loc, data, "links_per_chip", dims)
    switch_latencies = _per_dimension(loc, data, "switch_latency_us", dims)

    graph = nx.Graph()
    node_paths: dict[Hashable, KeyPath] = {}
    total = math.prod(npus)
    for rank in range(total):
        props = {key: gpu[key] for key in GPU_FIELDS}
        graph.add_node(f"gpu{rank}", kind="gpu", rank=rank, **props)
        node_paths[f"gpu{rank}"] = (npus_key,)

    stride = 1
    for d, kind in enumerate(kinds):
        link = _link_type(loc, link_types[d] if link_types[d] is not None else gpu["nvlink"],
                          ("link_type", d) if link_types[d] is not None else ("gpu",))
        chips = 1 if chips_list[d] is None else _count(loc, chips_list[d], ("switch_chips", d))
        per_chip = per_chip_list[d]
        if per_chip is not None:
            if kind != "switch":
                raise loc.error("only switch dimensions take links_per_chip", ("links_per_chip", d))
            if not isinstance(per_chip, list) or len(per_chip) != chips:
                raise loc.error(f"must list the links to each of the {chips} chip(s)", ("links_per_chip", d))
            per_chip = [_count(loc, n, ("links_per_chip", d, i)) for i, n in enumerate(per_chip)]
        if chips > 1 and kind != "switch":
            raise loc.error("only switch dimensions take switch_chips", ("switch_chips", d))
        default_links = sum(per_chip) if per_chip else chips
        count = default_links if links[d] is None else _count(loc, links[d], ("links", d))
        if per_chip and sum(per_chip) != count:
            raise loc.error(f"adds up to {sum(per_chip)} links, but links is {count}", ("links_per_chip", d))
        if per_chip is None:
            if count % chips:
                raise loc.error(
                    f"{count} links do not split evenly over {chips} chips: give links_per_chip", ("links", d)
                )
            per_chip = [count // chips] * chips
        bandwidth = None if bandwidths[d] is None else _number(loc, bandwidths[d], ("bandwidth", d))
        attrs = _edge_attrs(
            loc, link, (),
            count=count,
            bandwidth=None if bandwidth is None else bandwidth / count,
            effective=None,
            efficiency=None if efficiencies[d] is None else _efficiency(loc, efficiencies[d], ("efficiency", d)),
            latency=None if latencies[d] is None
            else _number(loc, latencies[d], (latency_key, d), positive=False) * latency_scale,
            fields={"bandwidth": ("bandwidth", d)},
        )

        groups: dict[int, list[int]] = {}
        for rank in range(total):
            coordinate = (rank // stride) % npus[d]
            groups.setdefault(rank - coordinate * stride, []).append(rank)
        for group_index, base in enumerate(sorted(groups)):
            members = [f"gpu{r}" for r in groups[base]]
            if len(members) < 2:
                continue
            if kind == "switch":
                switch_kind = _SWITCH_KIND_OF_FAMILY.get(attrs["family"])
                if switch_kind is None:
                    raise loc.error(
                        f"a switch dimension needs an nvlink or pcie link type, not '{attrs['link_type']}'",
                        ("link_type", d),
                    )
                latency = switch_latencies[d]
                traversal = (traversal_latency_us(switch_kind) if latency is None
                             else _number(loc, latency, ("switch_latency_us", d), positive=False))
                prefix = "" if dims == 1 else f"d{d}.g{group_index}."
                for chip in range(chips):
                    chip_id = f"{prefix}{switch_kind}{chip}"
                    graph.add_node(chip_id, kind=switch_kind, traversal_latency_us=traversal)
                    for member in members:
                        graph.add_edge(member, chip_id, **{**attrs, "count": per_chip[chip]})
            elif kind == "ring":
                pairs = {tuple(sorted((i, (i + 1) % len(members)))) for i in range(len(members))}
                for i, j in sorted(pairs):
                    graph.add_edge(members[i], members[j], **attrs)
            else:  # fully_connected
                for i in range(len(members)):
                    for j in range(i + 1, len(members)):
                        graph.add_edge(members[i], members[j], **attrs)
        stride *= npus[d]
    return graph, node_paths


def _fabric(loc: Locator, data: Mapping[str, Any]) -> FabricFeatures:
    value = data.get("nvls")
    if value is None:
        return FabricFeatures()
    value = _mapping(loc, value, ("nvls",), "nvls")
    _check_keys(loc, value, ("nvls",), NVLS_KEYS)
    flags = {}
    for key in ("multicast", "reduction"):
        flag = value.get(key, False)
        if not isinstance(flag, bool):
            raise loc.error(f"must be true or false, not {flag!r}", ("nvls", key))
        flags[key] = flag
    source = value.get("source", "")
    if (flags["multicast"] or flags["reduction"]) and not source:
        raise loc.error("missing field 'source': say who states the switches do it", ("nvls", "source"))
    return FabricFeatures(source=str(source), **flags)


# ---------------------------------------------------------------- entry point

def build_topology(
    data: Mapping[str, Any], locator: Locator | None = None, *, default_name: str = "custom"
) -> Topology:
    """Validate ``data`` (explicit or shorthand format) and build its :class:`Topology`.

    Parameters
    ----------
    data : mapping
        The parsed topology document.
    locator : Locator, optional
        Where ``data`` came from; errors carry its file, line and field.
    default_name : str
        Name when ``data`` has no ``name``.

    Raises
    ------
    InputError
        For any invalid field, with file, line and field where known.
    """
    loc = locator or Locator()
    data = _mapping(loc, data, (), "a topology")
    explicit = any(key in data for key in EXPLICIT_KEYS)
    shorthand = "topology" in data
    if explicit and shorthand:
        raise loc.error("give either nodes/edges or the topology shorthand, not both", ("topology",))
    if not explicit and not shorthand:
        raise loc.error("missing field 'nodes' (explicit format) or 'topology' (shorthand format)")
    _check_keys(loc, data, (), COMMON_KEYS + (EXPLICIT_KEYS if explicit else SHORTHAND_KEYS))

    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise loc.error(f"must be a non-empty string, not {name!r}", ("name",))
    description = data.get("description", "")
    sources = data.get("sources") or {}
    if not isinstance(sources, Mapping):
        raise loc.error("must map field names to where their numbers come from", ("sources",))
    if data.get("gpu") is not None:
        _gpu_model(loc, data["gpu"], ("gpu",))

    fabric = _fabric(loc, data)
    graph, node_paths = (_build_explicit if explicit else _build_shorthand)(loc, data)
    return Topology(name, graph, description=str(description), sources=sources, locator=loc, node_paths=node_paths,
                    fabric=fabric)
