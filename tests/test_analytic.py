"""The analytic baseline against hand-computed values (NCCL 2.30.7 tuning constants).

Constants used below (collsim/data/costs/nccl_tuning.yaml):
baseLat LL 6.6, LL128 14.0, Simple 8.4 us; NVLink hwLat LL 0.6, LL128 1.9,
Simple 3.4 us; Hopper llMaxBw 141 GB/s, perChMaxRingLL128Bw 36.7 GB/s;
SM90 NVLink 20.6 GB/s per link; H100 has 18 NVLink4 links (370.8 GB/s
effective) and 3350 GB/s HBM.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from collsim.analytic import base_constants, constant_sources, plan
from collsim.analytic.model import analytic_model
from collsim.errors import InputError
from collsim.models import SimRequest, simulate
from collsim.topology import load_topology

H100 = load_topology("hgx-h100")


@dataclass
class FakeProtocol:
    """Just the attributes the analytic model reads."""

    name: str = "fake"
    analytic_family: str = "ll"
    payload_efficiency: float = 0.5
    barriers_per_exchange: int = 0
    barriers_per_launch: int = 0
    algorithms: tuple[str, ...] = ("one-shot", "two-shot", "ring")


def run(proto, algorithm, size, ranks=8, topo=H100, launch="graph", costs=None, channels=None):
    req = SimRequest(
        topology=topo,
        ranks=ranks,
        algorithm=algorithm,
        protocol=proto,
        size_bytes=size,
        launch=launch,
        channels=channels,
        costs=costs or {},
    )
    return analytic_model(req)


def test_ring_ll_8_ranks_small():
    r = run(FakeProtocol(), "ring", 8)
    # sync: baseLat 6.6 + 2(8-1)=14 steps x 0.6 = 15.0 us
    assert r.breakdown["sync"] == pytest.approx(6.6 + 14 * 0.6)
    # data: 2(n-1)/n x 8 B = 14 B over min(llMaxBw 141, 0.5 x 370.8) = 141 GB/s
    assert r.breakdown["data"] == pytest.approx(14 / (1000 * 141))
    # reduce: 3(n-1)/n x 8 B = 21 B over 3350 GB/s of HBM
    assert r.breakdown["reduce"] == pytest.approx(21 / (1000 * 3350))
    assert r.breakdown["launch"] == 0.0
    assert r.latency_us == pytest.approx(15.0 + 14 / 141000 + 21 / 3350000)
    assert r.channels == 18  # one channel per NVLink: 370.8 / 20.6


def test_ring_ll128_base_is_40_6():
    r = run(FakeProtocol(analytic_family="ll128", payload_efficiency=120 / 128), "ring", 8)
    assert r.breakdown["sync"] == pytest.approx(14.0 + 14 * 1.9)  # 40.6 us
    # bw = min(0.92 x 370.8, 18 channels x 36.7) = 341.136 GB/s
    assert r.breakdown["data"] == pytest.approx(14 / (1000 * 0.92 * 370.8))


def test_ring_simple_large():
    size = 64 * 1024**2
    r = run(FakeProtocol(analytic_family="simple", payload_efficiency=1.0), "ring", size)
    assert r.breakdown["sync"] == pytest.approx(8.4 + 14 * 3.4)  # 56.0 us
    assert r.breakdown["data"] == pytest.approx(2 * 7 / 8 * size / (1000 * 370.8))
    assert r.busbw_gbps == pytest.approx(size / (r.latency_us * 1e3) * 2 * 7 / 8)


def test_one_shot_ll_8kib():
    r = run(FakeProtocol(), "one-shot", 8192)
    # 1 step: 6.6 + 0.6; data: (n-1) x size = 7 x 8192 B at 141 GB/s; reduce: (n+1) x size through HBM
    assert r.breakdown["sync"] == pytest.approx(7.2)
    assert r.breakdown["data"] == pytest.approx(7 * 8192 / 141_000)
    assert r.breakdown["reduce"] == pytest.approx(9 * 8192 / 3_350_000)
    assert r.latency_us == pytest.approx(7.2 + 0.40670 + 0.02201, abs=1e-4)


def test_two_shot_and_sync_rounds():
    # one barrier per exchange (two-shot has 2) and a closing one: 3 rounds
    proto = FakeProtocol(analytic_family="simple", payload_efficiency=1.0, barriers_per_exchange=1,
                         barriers_per_launch=1)
    r = run(proto, "two-shot", 1024**2, ranks=4)
    # 8.4 + 2 steps x 3.4 + 3 sync rounds x 0.6
    assert r.breakdown["sync"] == pytest.approx(8.4 + 2 * 3.4 + 3 * 0.6)
    # 2(n-1)/n x size at the full 370.8 GB/s egress
    assert r.breakdown["data"] == pytest.approx(1.5 * 1024**2 / 370_800)
    assert r.breakdown["reduce"] == pytest.approx(5 / 4 * 1024**2 / 3_350_000)


def test_payload_efficiency_scales_family_factor():
    # A protocol in the LL family that carries data at full efficiency moves at
    # bw_factor 0.5 x (1.0 / 0.5) = 1.0 x busBw, still capped by llMaxBw.
    full = run(FakeProtocol(payload_efficiency=1.0), "one-shot", 8192, ranks=2)
    half = run(FakeProtocol(payload_efficiency=0.5), "one-shot", 8192, ranks=2)
    assert half.breakdown["data"] == pytest.approx(8192 / 141_000)
    assert full.breakdown["data"] == pytest.approx(8192 / 141_000)  # cap binds: min(141, 370.8)
    cap_off = {"ll_max_bw_gbps": {"hopper": 1e9}}
    full = run(FakeProtocol(payload_efficiency=1.0), "one-shot", 8192, ranks=2, costs=cap_off)
    half = run(FakeProtocol(payload_efficiency=0.5), "one-shot", 8192, ranks=2, costs=cap_off)
    assert half.breakdown["data"] == pytest.approx(2 * full.breakdown["data"])


def test_eager_adds_launch_overhead():
    graph = run(FakeProtocol(), "ring", 8)
    eager = run(FakeProtocol(), "ring", 8, launch="eager")
    assert eager.breakdown["launch"] == base_constants()["launch_overhead_us"]
    assert eager.latency_us == pytest.approx(graph.latency_us + eager.breakdown["launch"])
    eager2 = run(FakeProtocol(), "ring", 8, launch="eager", costs={"launch_overhead_us": 2.0})
    assert eager2.breakdown["launch"] == 2.0


def test_cost_overrides():
    r = run(FakeProtocol(), "ring", 8, costs={"base_latency_us": {"ll": 1.0}, "hw_latency_us": {"nvlink": {"ll": 0.5}}})
    assert r.breakdown["sync"] == pytest.approx(1.0 + 14 * 0.5)
    # Per-link NVLink bandwidth override scales the topology's effective bandwidth.
    slow = run(FakeProtocol(analytic_family="simple", payload_efficiency=1.0), "ring", 2**20,
               costs={"nvlink_bw_per_link_gbps": {90: 10.3}})
    assert slow.breakdown["data"] == pytest.approx(2 * 7 / 8 * 2**20 / (1000 * 185.4))
    with pytest.raises(InputError, match="valid: ll, ll128, simple"):
        run(FakeProtocol(), "ring", 8, costs={"base_latency_us": {"lll": 1.0}})
    with pytest.raises(InputError, match="costs.max_channels"):
        run(FakeProtocol(), "ring", 8, costs={"max_channels": 1.5})


def test_explicit_channels_cap_bandwidth():
    r = run(FakeProtocol(analytic_family="simple", payload_efficiency=1.0), "ring", 2**20, channels=4)
    assert r.channels == 4
    assert r.breakdown["data"] == pytest.approx(1.75 * 2**20 / (1000 * 4 * 20.6))


def test_breakdown_sums_and_bus_factor():
    r = simulate("hgx-h100", ranks=4, algorithm="two-shot", protocol="ll128", size_bytes="1MiB", model="analytic")
    assert set(r.breakdown) == {"launch", "sync", "data", "reduce"}
    assert sum(r.breakdown.values()) == pytest.approx(r.latency_us)
    assert r.algbw_gbps == pytest.approx(2**20 / (r.latency_us * 1e3))
    assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 2 * 3 / 4)
    assert r.model == "analytic" and r.events == 0 and r.timeline is None


def test_other_generations():
    # A100: 12 links x 20 GB/s = 240; LL bw = min(87.7, 120) = 87.7
    a100 = load_topology("dgx-a100")
    r = run(FakeProtocol(), "ring", 2**20, topo=a100)
    assert r.breakdown["data"] == pytest.approx(1.75 * 2**20 / 87_700)
    # B200 NVL72: 18 x 40.1 = 721.8; LL128 = min(0.92 x 721.8, 18 x 40) = 664.056
    nvl = load_topology("gb200-nvl72")
    r = run(FakeProtocol(analytic_family="ll128", payload_efficiency=0.9375), "ring", 2**20, ranks=72, topo=nvl)
    assert r.breakdown["sync"] == pytest.approx(14.0 + 2 * 71 * 1.9)
    assert r.breakdown["data"] == pytest.approx(2 * 71 / 72 * 2**20 / (1000 * 0.92 * 721.8))


def test_dgx1_ring_uses_direct_links_and_pcie_uses_pci_latency():
    dgx1 = load_topology("dgx1-v100")
    p = plan(SimRequest(dgx1, 8, "ring", FakeProtocol(analytic_family="simple", payload_efficiency=1.0), 2**20))
    assert p.hw == "nvlink"
    assert p.link_bw_gbps == pytest.approx(6 * 20.0)  # all 6 NVLink2 links of every GPU
    pcie = load_topology("pcie-gen4")
    r = run(FakeProtocol(), "ring", 8, ranks=8, topo=pcie)
    assert r.breakdown["sync"] == pytest.approx(6.6 + 14 * 1.0)  # PCI hwLat
    ll128 = run(FakeProtocol(analytic_family="ll128", payload_efficiency=0.9375), "ring", 8, topo=pcie)
    assert any("LL128" in n for n in ll128.notes)


def test_every_constant_names_a_source():
    sources = constant_sources()
    assert set(sources) == set(base_constants())
    for name, text in sources.items():
        assert text.strip(), name
        assert "NCCL" in text or "assumed" in text or "collsim extension" in text, name


def test_timeline_on_request():
    req = SimRequest(H100, 2, "one-shot", FakeProtocol(), 4096, launch="eager", timeline=True)
    r = analytic_model(req)
    kinds = [e["kind"] for e in r.timeline if e["rank"] == 0]
    assert kinds == ["launch", "sync", "data", "reduce"]
    assert r.timeline[-1]["end_us"] == pytest.approx(r.latency_us)
    assert set(r.timeline[0]) == {"rank", "kind", "start_us", "end_us", "peer", "bytes", "label"}
