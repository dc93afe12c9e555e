"""collsim validate: per-family errors before/after cross-validated calibration, Markdown, default path."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from collsim.calibrate.measurements import write_measurements
from collsim.calibrate.validate import DEFAULT_MEASURED, to_markdown, validate
from collsim.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_calibrate_cli import measured_table  # noqa: E402

SHARED = Path(__file__).resolve().parents[1] / DEFAULT_MEASURED


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    good = measured_table()
    # NVLS on A100, whose NVSwitch has no SHARP: a family that cannot be mapped
    nvls = measured_table(gpu="A100", ranks=(8,), launches=("eager",)).assign(algorithm="NVLS (NCCL_ALGO=NVLS)",
                                                                              protocol="")
    host = measured_table(ranks=(8,), launches=("eager",)).assign(notes="timing: host wall clock per call",
                                                                  library="torch")
    path = tmp_path / "m.csv"
    write_measurements(pd.concat([good, nvls, host], ignore_index=True), path)
    return path


def test_validate_reports_families_before_and_after(measured):
    v = validate(measured, model="analytic", params=["launch", "base_latency_us.ll", "hw_latency_us.nvlink.ll"],
                 folds=3)
    # a family is one source, implementation, GPU count and launch mode: 3 rank counts x 2 launches
    assert [f.rows for f in v.families] == [3] * 6
    assert all(f.calibrated_pct < 0.01 for f in v.families)
    assert max(f.default_pct for f in v.families) > 3.0
    assert v.calibrated["median_abs_pct"] < 0.01 < v.default["median_abs_pct"]
    reasons = {why for _, _, why in v.unmapped}
    assert any("do not multicast" in r for r in reasons) and any("host wall-clock" in r for r in reasons)
    md = to_markdown(v)
    assert "| family | rows | modelled as | default | calibrated (CV) |" in md
    assert "What the model cannot represent yet" in md and "**all mapped rows** | **18**" in md
    doc = v.to_dict()
    assert doc["families"][0]["rows"] == 3 and doc["fits"]["hopper"]["calibrated"] is True
    json.dumps(doc)


def test_validate_cli_markdown_and_exit_codes(measured, collsim_cli, tmp_path):
    code, out, err = collsim_cli("validate", "--measured", measured, "--model", "analytic", "--params",
                                 "launch,base_latency_us.ll", "--folds", "2", "--markdown")
    assert code == 0, err
    assert out.startswith("### Model `analytic`") and "calibrating analytic on hopper" in err
    code, out, err = collsim_cli("validate", "--measured", measured, "--model", "analytic", "--params",
                                 "launch,base_latency_us.ll", "--folds", "2")
    assert code == 0 and "not representable yet" in out and "goals:" in out
    code, _, err = collsim_cli("validate", "--measured", tmp_path / "missing.csv", "--model", "analytic")
    assert code == 2 and err.count("\n") == 1
    code, _, err = collsim_cli("validate", "--measured", measured, "--folds", "1")
    assert code == 2 and "--folds: needs at least 2 folds, got" in err


def test_default_path_missing_is_a_clear_error(monkeypatch):
    import collsim.calibrate.validate as mod

    monkeypatch.setattr(mod, "DEFAULT_MEASURED", "../no/such/dir/allreduce_measured.csv")
    with pytest.raises(InputError, match="pass --measured FILE"):
        mod.default_measured_path()


def test_nothing_mapped_is_an_error(tmp_path):
    path = tmp_path / "m.csv"
    write_measurements(measured_table(gpu="H800"), path)
    with pytest.raises(InputError, match="no measured row maps"):
        validate(path, model="analytic")


@pytest.mark.skipif(not SHARED.is_file(), reason=f"shared measurements not present ({DEFAULT_MEASURED})")
def test_published_measurements_map_and_validate_with_the_analytic_model():
    v = validate(SHARED, model="analytic", params=["launch", "base_latency_us.ll"], folds=2)
    assert v.measured_rows > 400 and v.sources > 20
    assert len(v.families) >= 10 and sum(f.rows for f in v.families) >= 100
    reasons = " ".join(why for _, _, why in v.unmapped)
    for expected in ("actually ran is not reported", "host wall-clock", "multi-node", "MSCCL++"):
        assert expected in reasons
    labels = " ".join(f.label for f in v.families)
    assert "S22" in labels and "S16" in labels
