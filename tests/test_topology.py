"""Presets, routing and the Topology API."""
from __future__ import annotations

import itertools
import math

import pytest

from collsim.errors import InputError
from collsim.topology import VIA_KINDS, Route, Topology, list_presets, load_topology

PRESETS = [
    "dgx-a100", "dgx1-v100", "gb200-nvl72", "hgx-b200", "hgx-h100", "hgx-h200", "pcie-gen4", "pcie-gen5",
]


@pytest.fixture(scope="module")
def topos() -> dict[str, Topology]:
    return {name: load_topology(name) for name in PRESETS}


def test_list_presets_is_sorted_and_complete():
    assert list_presets() == PRESETS


def test_a_preset_is_built_once_per_process_and_files_are_not_shared(tmp_path):
    """A preset name resolves to one topology, so what the simulator derives from it is computed once; a
    file of the same content is its own topology (its text could change between loads)."""
    from collsim.topology.catalog import data_dir

    assert load_topology("gb200-nvl72") is load_topology("gb200-nvl72")
    assert load_topology("hgx-h100") is not load_topology("hgx-h200")
    copy = tmp_path / "mine.yaml"
    copy.write_text((data_dir() / "hgx-h100.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert load_topology(str(copy)) is not load_topology(str(copy))
    names = list_presets()
    names.append("not-a-preset")
    assert list_presets() == PRESETS


@pytest.mark.parametrize(
    "name, gpus, model, generation, sm",
    [
        ("dgx1-v100", 8, "V100", "volta", 70),
        ("dgx-a100", 8, "A100", "ampere", 80),
        ("hgx-h100", 8, "H100", "hopper", 90),
        ("hgx-h200", 8, "H200", "hopper", 90),
        ("hgx-b200", 8, "B200", "blackwell", 100),
        ("gb200-nvl72", 72, "GB200", "blackwell", 100),
        ("pcie-gen4", 8, "A100-PCIe", "ampere", 80),
        ("pcie-gen5", 8, "H100-PCIe", "hopper", 90),
    ],
)
def test_preset_gpus(topos, name, gpus, model, generation, sm):
    topo = topos[name]
    assert topo.name == name
    assert topo.num_gpus == gpus
    for rank in (0, gpus - 1):
        info = topo.gpu_info(rank)
        assert set(info) == {"model", "generation", "sm", "hbm_gbps", "sm_count"}
        assert (info["model"], info["generation"], info["sm"]) == (model, generation, sm)
        assert info["hbm_gbps"] > 0 and info["sm_count"] > 0
        assert topo.generation(rank) == generation
        assert topo.graph.nodes[topo.gpu_node(rank)]["rank"] == rank


def test_hbm_and_sm_counts_match_datasheets(topos):
    assert topos["hgx-h100"].gpu_info(0)["hbm_gbps"] == 3350
    assert topos["hgx-h200"].gpu_info(0)["hbm_gbps"] == 4800
    assert topos["hgx-h100"].gpu_info(0)["sm_count"] == 132
    assert topos["dgx1-v100"].gpu_info(0)["sm_count"] == 80


# ------------------------------------------------------------------ NVSwitch systems

@pytest.mark.parametrize(
    "name, link_type, links, chips, per_link, per_link_effective",
    [
        ("hgx-h100", "nvlink4", 18, 4, 25.0, 20.6),
        ("hgx-h200", "nvlink4", 18, 4, 25.0, 20.6),
        ("dgx-a100", "nvlink3", 12, 6, 25.0, 20.0),
        ("hgx-b200", "nvlink5", 18, 2, 50.0, 40.1),
        ("gb200-nvl72", "nvlink5", 18, 18, 50.0, 40.1),
    ],
)
def test_switched_presets_egress_and_summary(topos, name, link_type, links, chips, per_link, per_link_effective):
    topo = topos[name]
    assert topo.gpu_egress_gbps(0) == pytest.approx(links * per_link)
    assert topo.gpu_egress_gbps(0, effective=True) == pytest.approx(links * per_link_effective)
    summary = topo.summary()
    assert summary["links_per_gpu"] == {link_type: links}
    assert summary["switches"] == {"nvswitch": chips}
    assert summary["switch_count"] == chips
    assert summary["per_link_gbps"][link_type] == {"nominal": per_link, "effective": per_link_effective}
    pairs = topo.num_gpus * (topo.num_gpus - 1)
    assert summary["path_types"] == {"nvswitch": pairs}
    assert summary["route_hops"] == {2: pairs}


def test_hgx_h100_egress_is_18_links_of_25():
    topo = load_topology("hgx-h100")
    assert topo.gpu_egress_gbps(3) == 18 * 25.0


def test_hgx_h100_physical_wiring_is_5_5_4_4():
    topo = load_topology("hgx-h100")
    chips = [n for n, d in topo.graph.nodes(data=True) if d["kind"] == "nvswitch"]
    counts = sorted((topo.graph.edges["gpu0", chip]["count"] for chip in chips), reverse=True)
    assert counts == [5, 5, 4, 4]
    # The chips are physical but routes do not use them.
    assert all(not topo.graph.edges["gpu0", chip]["routed"] for chip in chips)


def test_switched_route_goes_through_aggregate_fabric():
    topo = load_topology("hgx-h100")
    route = topo.route(2, 6)
    assert route.path == ["gpu2", "nvfabric", "gpu6"]
    assert route.links == [("gpu2", "nvfabric"), ("nvfabric", "gpu6")]
    assert route.via == "nvswitch" and route.nvlink_only and route.hops == 2
    assert route.bottleneck_gbps == 450.0
    assert route.effective_gbps == pytest.approx(18 * 20.6)
    assert route.link_types == ["nvlink4", "nvlink4"]
    # 0.11 us per link x 2 + 0.1 us NVSwitch traversal: half of the measured 0.83 us remote-load round trip
    # once the remote L2 hit (370 cycles at 1.98 GHz) is taken out.
    assert route.latency_us == pytest.approx(0.32)
    assert 0.822 <= 2 * route.latency_us + 370 / 1980 <= 0.830
    fabric = topo.graph.nodes["nvfabric"]
    assert fabric["kind"] == "nvswitch-fabric" and len(fabric["chips"]) == 4


def test_all_traffic_out_of_a_switched_gpu_shares_its_egress_link():
    topo = load_topology("hgx-h100")
    first_links = {topo.route(0, dst).links[0] for dst in range(1, 8)}
    assert first_links == {("gpu0", "nvfabric")}
    last_links = {topo.route(src, 0).links[-1] for src in range(1, 8)}
    assert last_links == {("nvfabric", "gpu0")}


def test_nvl72_every_pair_is_two_hops_through_the_fabric(topos):
    topo = topos["gb200-nvl72"]
    for src, dst in itertools.permutations(range(72), 2):
        route = topo.route(src, dst)
        assert route.hops == 2
        assert route.path[1] == "nvfabric"
        assert route.bottleneck_gbps == 900.0
    assert len(topo.graph.nodes["nvfabric"]["chips"]) == 18
    # one link from each GPU to each of the 18 chips
    assert topo.graph.edges["gpu71", "nvswitch17"]["count"] == 1


# ------------------------------------------------------------------ DGX-1 hybrid cube-mesh

DGX1_NVLINKS = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
    (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2,
}


def test_dgx1_wiring_matches_the_hybrid_cube_mesh(topos):
    topo = topos["dgx1-v100"]
    for (a, b), count in DGX1_NVLINKS.items():
        edge = topo.graph.edges[f"gpu{a}", f"gpu{b}"]
        assert (edge["link_type"], edge["count"]) == ("nvlink2", count)
    for rank in range(8):
        assert topo.gpu_egress_gbps(rank, family="nvlink") == 6 * 25.0
    assert topo.summary()["switches"] == {"pcie-switch": 4}
    assert not any(d["kind"] == "nvswitch" for _, d in topo.graph.nodes(data=True))


def test_dgx1_pair_without_direct_link_routes_through_peer_gpu(topos):
    topo = topos["dgx1-v100"]
    assert not topo.graph.has_edge("gpu0", "gpu5")
    route = topo.route(0, 5)
    assert route.via == "peer-gpu"
    assert route.hops == 2 and route.nvlink_only
    assert topo.graph.nodes[route.path[1]]["kind"] == "gpu"
    assert route.link_types == ["nvlink2", "nvlink2"]
    assert route.latency_us == pytest.approx(2 * 0.32)  # two direct links, the peer GPU forwarding at no cost


def test_dgx1_peer_is_the_one_with_the_best_bottleneck(topos):
    # 0 -> 7: via gpu3 gives min(2, 1) links, via gpu4 gives min(2, 2).
    route = topos["dgx1-v100"].route(0, 7)
    assert route.path == ["gpu0", "gpu4", "gpu7"]
    assert route.bottleneck_gbps == 50.0


def test_dgx1_direct_pairs_are_one_hop_and_nothing_uses_pcie(topos):
    topo = topos["dgx1-v100"]
    for (a, b), count in DGX1_NVLINKS.items():
        route = topo.route(b, a)
        assert (route.hops, route.via, route.bottleneck_gbps) == (1, "direct", 25.0 * count)
    assert all(route.nvlink_only for route in topo.routes())
    assert topo.summary()["path_types"] == {"direct": 32, "peer-gpu": 24}


# ------------------------------------------------------------------ PCIe systems

@pytest.mark.parametrize("name, link_type, cpu_effective", [("pcie-gen4", "pcie4", 10.0), ("pcie-gen5", "pcie5", 22.0)])
def test_pcie_routes_by_distance(topos, name, link_type, cpu_effective):
    topo = topos[name]
    same_switch = topo.route(0, 1)
    assert same_switch.via == "pcie" and same_switch.hops == 2
    same_socket = topo.route(0, 2)
    assert same_socket.via == "pcie-host" and "cpu0" in same_socket.path and same_socket.hops == 4
    cross = topo.route(1, 6)
    assert cross.via == "cross-socket"
    assert ("cpu0", "cpu1") in cross.links
    assert "cpu-interconnect" in cross.link_types
    assert not cross.nvlink_only and not topo.is_nvlink_only(1, 6)
    # The socket link is the effective bottleneck (NCCL's measured inter-socket rate).
    assert cross.effective_gbps == pytest.approx(cpu_effective, rel=1e-4)
    assert set(same_switch.link_types) == {link_type}
    assert topo.summary()["path_types"] == {"cross-socket": 32, "pcie": 8, "pcie-host": 16}


def test_pcie_reverse_direction_uses_reverse_links(topos):
    topo = topos["pcie-gen4"]
    forward, backward = topo.route(0, 4), topo.route(4, 0)
    assert backward.links == [(v, u) for u, v in reversed(forward.links)]


# ------------------------------------------------------------------ API details

def test_directed_link_capacity(topos):
    topo = topos["dgx1-v100"]
    assert topo.directed_link_capacity("gpu0", "gpu3") == (50.0, 40.0)
    assert topo.directed_link_capacity("gpu3", "gpu0") == (50.0, 40.0)
    assert topo.directed_link_capacity("cpu0", "cpu1") == pytest.approx((38.4, 6.0))
    with pytest.raises(InputError, match="no link between 'gpu0' and 'gpu5'"):
        topo.directed_link_capacity("gpu0", "gpu5")


def test_route_links_follow_path_and_capacities(topos):
    for name in ("dgx1-v100", "pcie-gen5", "hgx-b200"):
        topo = topos[name]
        for route in topo.routes():
            assert isinstance(route, Route) and route.via in VIA_KINDS
            assert route.links == list(zip(route.path, route.path[1:]))
            assert route.hops == len(route.links)
            capacities = [topo.directed_link_capacity(u, v) for u, v in route.links]
            assert route.bottleneck_gbps == min(c[0] for c in capacities)
            assert route.effective_gbps == min(c[1] for c in capacities)


def test_routes_are_cached(topos):
    topo = topos["hgx-h100"]
    assert topo.route(1, 2) is topo.route(1, 2)


def test_local_route_and_bad_ranks(topos):
    topo = topos["hgx-h100"]
    local = topo.route(3, 3)
    assert (local.hops, local.via, local.latency_us, local.links) == (0, "local", 0.0, [])
    assert math.isinf(local.bottleneck_gbps)
    for bad in (8, -1):
        with pytest.raises(InputError, match="out of range 0..7"):
            topo.route(0, bad)
    with pytest.raises(InputError):
        topo.gpu_info(8)


def test_is_nvlink_only(topos):
    assert topos["hgx-h100"].is_nvlink_only(0, 7)
    assert topos["dgx1-v100"].is_nvlink_only(0, 5)
    assert not topos["pcie-gen4"].is_nvlink_only(0, 1)


def test_summary_keys(topos):
    summary = topos["dgx1-v100"].summary()
    for key in ("gpus", "gpu_model", "links_per_gpu", "per_link_gbps", "per_gpu_gbps", "switch_count",
                "path_types", "interconnect", "routing"):
        assert key in summary
    assert summary["links_per_gpu"] == {"nvlink2": 6, "pcie3": 1}
    assert summary["per_gpu_gbps_by_family"]["nvlink"] == {"nominal": 150.0, "effective": 120.0}
    assert summary["cpus"] == 2


def test_load_topology_passes_a_topology_through(topos):
    assert load_topology(topos["hgx-h100"]) is topos["hgx-h100"]
