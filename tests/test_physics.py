"""The physics rules of benchmarks/physics.py on its reduced sweep: every protocol x algorithm on four presets
(switched NVLink of two generations, NVL72, PCIe), sizes 8 B .. 128 MiB, graph and eager launches.

The rules are exact (0.5 % tolerance): latency never falls as the message grows; one-shot and two-shot are
never faster with more ranks at <= 64 KiB where a GPU's peers share its links; bus bandwidth stays within the
effective link bandwidth times the line format's payload share; the 8 B ring kernel orders LL < LL128 <
Simple; an eager launch is never faster than a CUDA-graph one.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import physics  # noqa: E402


@pytest.fixture(scope="module")
def points():
    return physics.simulate(physics.reduced_sweep(), "des", workers=1)


@pytest.fixture(scope="module")
def results(points):
    return physics.check(points)


def test_the_reduced_sweep_covers_every_shipped_program(points):
    """Every protocol x algorithm is checked, the NVLink SHARP ones on the presets whose switches reduce."""
    from collsim.ir.registry import list_protocols, load_protocol

    assert {(p.protocol, p.algorithm) for p in points} == {
        (name, algorithm) for name in list_protocols() for algorithm in load_protocol(name).algorithms}
    for name in ("nvls", "nvls-poison", "ll128-atomic-nvls"):
        assert {p.topology for p in points if p.protocol == name} == {"hgx-h100", "gb200-nvl72"}
        assert {p.ranks for p in points if p.protocol == name and p.topology == "gb200-nvl72"} == {8, 9, 16, 72}


@pytest.mark.parametrize("rule", physics.RULES)
def test_physics_rule_holds_on_the_reduced_sweep(results, rule):
    checks, violations = results[rule]
    assert checks > 0, f"{rule} checked nothing"
    assert not violations, "\n".join(v.text for v in violations[:10])


def test_the_rules_catch_what_they_are_for():
    """Each rule flags a made-up violation of it (so a rule that can never fire is noticed)."""
    def point(**kw):
        base = dict(topology="t", protocol="ll", algorithm="one-shot", ranks=2, size=8, launch="graph",
                    latency_us=10.0, busbw_gbps=1.0, bound_gbps=100.0)
        base.update(kw)
        return physics.Point(**base)

    assert physics.size_monotone([point(size=8), point(size=16, latency_us=9.0)])[1]
    assert physics.rank_monotone([point(ranks=2), point(ranks=3, latency_us=9.0)])[1]
    assert physics.busbw_bound([point(busbw_gbps=101.0)])[1]
    ring = [point(algorithm="ring", protocol=p, latency_us=v) for p, v in (("ll", 5.0), ("ll128", 5.0),
                                                                            ("simple", 9.0))]
    assert physics.ring_order(ring)[1]
    assert physics.eager_ge_graph([point(launch="graph"), point(launch="eager", latency_us=9.0)])[1]
