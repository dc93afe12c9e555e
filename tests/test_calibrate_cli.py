"""`collsim calibrate` through collsim.cli.main: profiles written, exit codes, one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collsim.calibrate.evaluate import Evaluator, configs_of
from collsim.calibrate.parameters import costs_from_values
from collsim.calibrate.measurements import write_measurements
from collsim.calibrate.profile import load_profile, read_profile

TRUTH = {"launch_overhead_us": 6.0, "base_latency_us.ll": 4.0, "hw_latency_us.nvlink.ll": 0.9}


def measured_table(ranks=(2, 4, 8), launches=("eager", "graph"), sizes=(1024, 65536, 1 << 20), gpu="H100",
                   protocol="ll") -> pd.DataFrame:
    """nccl-tests-like rows (NCCL ring, stated protocol) timed as the analytic model with TRUTH predicts."""
    rows = []
    for n in ranks:
        for launch in launches:
            for size in sizes:
                rows.append({"source": "synthetic.txt", "collective": "allreduce", "gpu": gpu, "ranks": n,
                             "library": "NCCL", "algorithm": "ring", "protocol": protocol, "launch": launch,
                             "size_bytes": size, "dtype": "float32"})
    table = pd.DataFrame(rows)
    mapped = table.rename(columns={"ranks": "m_ranks", "algorithm": "m_algorithm", "protocol": "m_protocol",
                                   "launch": "m_launch"}).assign(m_topology="hgx-h100")
    table["time_us"] = Evaluator("analytic").latencies(configs_of(mapped), costs_from_values("analytic", TRUTH))
    return table


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    path = tmp_path / "measured.csv"
    write_measurements(measured_table(), path)
    return path


def test_calibrate_writes_a_profile_that_loads(measured, tmp_path, collsim_cli):
    out = tmp_path / "prof.yaml"
    code, stdout, stderr = collsim_cli("calibrate", measured, "--topology", "hgx-h100", "--model", "analytic",
                                       "--params", "launch,base_latency_us.ll,hw_latency_us.nvlink.ll",
                                       "--folds", "3", "-o", out)
    assert code == 0, stderr
    assert "held-out fold" in stdout and "training folds" in stdout
    assert "wrote" in stdout and "calibrated from measured.csv, 18 rows" in stdout
    costs = load_profile(out, model="analytic")
    assert costs["launch_overhead_us"] == pytest.approx(6.0, rel=1e-4)
    assert costs["hw_latency_us"]["nvlink"]["ll"] == pytest.approx(0.9, rel=1e-4)
    doc = read_profile(out).document
    assert doc["fit"]["cross_validation"]["heldout_median_abs_pct_error"]["fitted_values"] < 0.01
    assert doc["topology"] == "hgx-h100" and doc["sources"] == ["measured.csv"]


def test_calibrate_json_and_rows_of_other_systems(tmp_path, collsim_cli):
    table = pd.concat([measured_table(), measured_table(gpu="A100", ranks=(8,))], ignore_index=True)
    path = tmp_path / "m.csv"
    write_measurements(table, path)
    out = tmp_path / "p.yaml"
    code, stdout, stderr = collsim_cli("calibrate", path, "-t", "hgx-h100", "-m", "analytic", "-p",
                                       "launch,base_latency_us.ll", "-k", "0", "-o", out, "--json")
    assert code == 0, stderr
    assert "left out 6 row(s) measured on other systems (dgx-a100)" in stderr
    doc = json.loads(stdout)
    assert doc["rows"] == 18 and set(doc["costs"]) == {"launch_overhead_us", "base_latency_us"}


@pytest.mark.parametrize("argv, message", [
    (["-p", "launch,warp_speed"], "unknown parameter 'warp_speed'"),
    (["-p", "launch,hw_latency_us.nvlink.ll128"], "cannot identify hw_latency_us.nvlink.ll128"),
    (["-p", "max_channels"], "whole number"),
    (["-t", "no-such-topology"], "no-such-topology"),
    (["-m", "no-such-model"], "unknown model"),
    (["--folds", "-1"], "--folds"),
])
def test_calibrate_bad_input_exits_2_with_one_line(measured, tmp_path, collsim_cli, argv, message):
    out = tmp_path / "p.yaml"
    base = ["calibrate", measured, "-t", "hgx-h100", "-m", "analytic", "-p", "launch", "-o", out]
    code, _, stderr = collsim_cli(*(base + argv))
    assert code == 2, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("collsim: error: ") and message in last, stderr
    assert not out.exists()


def test_calibrate_too_few_rows(tmp_path, collsim_cli):
    path = tmp_path / "few.csv"
    write_measurements(measured_table(ranks=(8,), launches=("graph",), sizes=(1024, 2048)), path)
    code, _, stderr = collsim_cli("calibrate", path, "-t", "hgx-h100", "-m", "analytic", "-p",
                                  "base_latency_us.ll,bw_factor.ll,ll_max_bw_gbps.hopper", "-o", tmp_path / "p.yaml")
    assert code == 2 and "too few rows to fit 3 parameter(s): 2 mapped row(s)" in stderr


def test_calibrate_nothing_maps(tmp_path, collsim_cli):
    path = tmp_path / "a100.csv"
    write_measurements(measured_table(gpu="A100"), path)
    code, _, stderr = collsim_cli("calibrate", path, "-t", "hgx-h100", "-m", "analytic", "-o", tmp_path / "p.yaml")
    assert code == 2 and "no measured row maps to a configuration on hgx-h100" in stderr
    code, _, stderr = collsim_cli("calibrate", tmp_path / "missing.csv", "-t", "hgx-h100", "-o", tmp_path / "p.yaml")
    assert code == 2 and "missing.csv" in stderr


def test_default_parameter_set_leaves_out_what_the_data_cannot_identify(measured, tmp_path, collsim_cli):
    out = tmp_path / "p.yaml"
    code, stdout, stderr = collsim_cli("calibrate", measured, "-t", "hgx-h100", "-m", "analytic", "-k", "2", "-o", out)
    assert code == 0, stderr
    assert "not fitted: base_latency_us.ll128: the data has no LL128-family rows" in stdout
    doc = read_profile(out).document
    assert "base_latency_us.ll128" in doc["fit"]["not_fitted"]
    assert "base_latency_us.ll128" not in doc["fit"]["parameters"]
