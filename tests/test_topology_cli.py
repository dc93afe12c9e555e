"""``collsim topologies`` and ``collsim topology show``."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from collsim.cli import app, main
from collsim.topology import list_presets

runner = CliRunner()


def test_topologies_lists_every_preset_with_model_and_interconnect():
    result = runner.invoke(app, ["topologies"])
    assert result.exit_code == 0, result.output
    for name in list_presets():
        assert name in result.output
    line = next(l for l in result.output.splitlines() if l.strip().startswith("hgx-h100"))
    assert "H100" in line and "nvlink4 x18 via 4 nvswitch" in line and "450 / 370.8" in line
    assert runner.invoke(app, ["topology", "list"]).output == result.output


def test_show_preset_prints_summary():
    result = runner.invoke(app, ["topology", "show", "dgx1-v100"])
    assert result.exit_code == 0, result.output
    assert "V100" in result.output
    assert "direct: 32, peer-gpu: 24" in result.output
    assert "nvlink2: 6, pcie3: 1" in result.output


def test_show_json_routes_and_sources():
    result = runner.invoke(app, ["topology", "show", "hgx-h100", "--json", "--routes", "--sources"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["path_types"] == {"nvswitch": 56}
    assert payload["per_gpu_gbps"] == {"nominal": 450.0, "effective": 370.8}
    assert len(payload["routes"]) == 56 and payload["routes"][0]["path"] == ["gpu0", "nvfabric", "gpu1"]
    assert "links_per_chip" in payload["sources"]


def test_show_custom_file(tmp_path):
    path = tmp_path / "ring.yaml"
    path.write_text("gpu: H100\ntopology: [ring]\nnpus: [4]\nbandwidth: [100]\nlatency_us: [0.5]\n")
    result = runner.invoke(app, ["topology", "show", str(path), "--routes"])
    assert result.exit_code == 0, result.output
    assert "peer-gpu" in result.output and "direct" in result.output


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["topology", "show", "hgx-h1000"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("collsim: error: unknown topology preset 'hgx-h1000' (valid: dgx-a100,")
    assert len(err.splitlines()) == 1

    bad = tmp_path / "bad.yaml"
    bad.write_text("gpu: H100\ntopology: [switch]\nnpus: [8]\nbandwidth: [0]\n")
    with pytest.raises(SystemExit) as info:
        main(["topology", "show", str(bad)])
    assert info.value.code == 2
    assert f"{bad}:4: bandwidth[0]: must be positive" in capsys.readouterr().err
