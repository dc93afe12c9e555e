"""Scenario files: defaults, expansion of ranges, custom topologies."""
from __future__ import annotations

from pathlib import Path

import pytest

from collsim.errors import InputError
from collsim.algorithms import ALGORITHMS
from collsim.ir.registry import list_protocols
from collsim.runner.rows import expand_rows
from collsim.scenario import Scenario, load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))


def test_defaults(write_scenario):
    s = load_scenario(write_scenario("topology: hgx-h100\nranks: 8\nsizes: 8B..64B\n", name="tiny.yaml"))
    assert isinstance(s, Scenario)
    assert s.name == "tiny"
    assert s.ranks == (8,)
    assert s.sizes == (8, 16, 32, 64)
    assert s.algorithms == tuple(ALGORITHMS)
    assert s.protocols == tuple(list_protocols())
    assert s.launch == ("graph",)
    assert s.channels is None
    assert (s.dtype, s.elem_bytes, s.op) == ("float32", 4, "sum")
    assert s.model is None
    assert s.output == Path("reports") / "tiny"
    assert s.costs == {}
    assert s.topology.name == "hgx-h100"


def test_every_field(write_scenario):
    s = load_scenario(
        write_scenario(
            """
            name: custom-name
            description: all fields
            topology: dgx-a100
            ranks: "2..8 x2"
            sizes: ["1KiB..4KiB +1KiB", 64MiB]
            algorithms: ring
            protocols: [ll, ll128]
            launch: [eager, graph]
            channels: 4
            dtype: bfloat16
            op: max
            model: analytic
            output: out/dir
            costs: {launch_overhead_us: 2.5}
            """
        )
    )
    assert s.name == "custom-name"
    assert s.ranks == (2, 4, 8)
    assert s.sizes == (1024, 2048, 3072, 4096, 64 * 1024**2)
    assert s.algorithms == ("ring",)
    assert s.protocols == ("ll", "ll128")
    assert s.launch == ("eager", "graph")
    assert s.channels == 4
    assert (s.dtype, s.elem_bytes, s.op) == ("bfloat16", 2, "max")
    assert s.model == "analytic"
    assert s.output == Path("out/dir")
    assert s.costs == {"launch_overhead_us": 2.5}
    assert s.to_dict()["ranks"] == [2, 4, 8]


def test_mapping_and_inline_topology():
    s = load_scenario(
        {
            "topology": {"gpu": "H100", "topology": ["switch"], "npus": [4], "bandwidth": [400], "latency": [500]},
            "ranks": [4],
            "sizes": [8],
        }
    )
    assert s.topology.num_gpus == 4
    assert s.name == "scenario"


def test_mapping_errors_have_field_without_file():
    with pytest.raises(InputError) as err:
        load_scenario({"topology": "hgx-h100", "ranks": [2], "sizes": [8], "protocols": ["nope"]})
    assert err.value.field == "protocols[0]"
    assert err.value.file is None
    assert "barrier" in str(err.value)


def test_expand_rows_skips_unsupported(write_scenario):
    s = load_scenario(
        write_scenario("topology: hgx-h100\nranks: [1, 2]\nsizes: [8, 16]\nprotocols: [barrier, ll]\nalgorithms: [one-shot, ring]\n")
    )
    rows, skipped = expand_rows(s, "analytic")
    combos = {(r.ranks, r.algorithm, r.protocol.name) for r in rows}
    assert combos == {(2, "one-shot", "barrier"), (2, "one-shot", "ll"), (2, "ring", "ll")}
    assert len(rows) == 3 * 2
    reasons = {(k.ranks, k.algorithm, k.protocol): k.reason for k in skipped}
    assert "at least 2 ranks" in reasons[(1, "one-shot", "ll")]
    assert "supports: one-shot, two-shot" in reasons[(2, "ring", "barrier")]
    # Row order: ranks, algorithm, protocol, launch, size.
    assert [(r.algorithm, r.protocol.name, r.size_bytes) for r in rows][:3] == [
        ("one-shot", "barrier", 8),
        ("one-shot", "barrier", 16),
        ("one-shot", "ll", 8),
    ]


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_load(path):
    s = load_scenario(path)
    assert s.name == path.stem
    assert max(s.ranks) <= s.topology.num_gpus
    assert max(s.sizes) == 64 * 1024**2 and min(s.sizes) == 8
    assert path.read_text().startswith("#"), "each scenario says what it shows"


def test_shipped_scenario_set():
    assert {p.stem for p in SCENARIOS} >= {"8gpu", "4gpu", "dgx-a100", "dgx1", "nvl72", "pcie"}
    nvl = load_scenario(Path(SCENARIOS[0]).parent / "nvl72.yaml")
    assert nvl.ranks == (2, 4, 8, 16, 32, 64, 72)


def test_costs_checked_by_the_model_that_runs(write_scenario, monkeypatch):
    from collsim import models

    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))
    monkeypatch.setattr(models, "_DEFAULT", models._DEFAULT)

    def strict(costs):
        for key in costs:
            raise InputError(f"unknown cost parameter {key!r}", field=f"costs.{key}", choices=["poll_ns"])

    models.register_model("strict", lambda req: None, default=True, validate_costs=strict)
    path = write_scenario("topology: hgx-h100\nranks: 2\nsizes: 8\ncosts:\n  launch_overhead_us: 2\n")
    with pytest.raises(InputError) as err:
        load_scenario(path)  # checked by the default model
    assert err.value.line == 5 and err.value.field == "costs.launch_overhead_us"
    assert load_scenario(path, model="analytic").costs == {"launch_overhead_us": 2}
