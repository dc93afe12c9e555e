"""collsim compare: the join, the error arithmetic, bad input and the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collsim.calibrate.compare import compare, load_simulated
from collsim.calibrate.measurements import write_measurements
from collsim.errors import InputError
from collsim.resultsfile import COLUMNS, format_csv


def _sim_record(algorithm: str, protocol: str, size: int, latency: float, ranks: int = 8,
                launch: str = "graph") -> dict:
    rec = {key: None for key in COLUMNS}
    rec.update(topology="hgx-h100", gpu="H100", ranks=ranks, algorithm=algorithm, protocol=protocol, launch=launch,
               size_bytes=size, count=size // 4, dtype="float32", op="sum", latency_us=latency,
               algbw_gbps=size / latency / 1e3, busbw_gbps=size / latency / 1e3 * 1.75, launch_us=0.0,
               sync_us=latency, data_us=0.0, reduce_us=0.0, model="analytic", events=0, note="")
    return rec


SIM = [
    _sim_record("ring", "ll", 1024, 10.0),
    _sim_record("ring", "ll", 2048, 20.0),
    _sim_record("ring", "simple", 1024, 30.0),
    _sim_record("one-shot", "barrier", 1024, 5.0),
]


def _measured(rows: list[dict]) -> pd.DataFrame:
    base = {"collective": "allreduce", "gpu": "NVIDIA H100 80GB HBM3", "ranks": 8, "launch": "graph",
            "library": "NCCL", "source": "m.txt"}
    return pd.DataFrame([{**base, **r} for r in rows])


MEASURED = [
    {"source_line": 1, "size_bytes": 1024, "algorithm": "ring", "protocol": "ll", "time_us": 8.0},  # ring/ll only
    {"source_line": 2, "size_bytes": 2048, "time_us": 25.0},  # only ring/ll has 2048
    {"source_line": 3, "size_bytes": 1024, "time_us": 12.5},  # every 1024 curve
    {"source_line": 4, "size_bytes": 1024, "ranks": 4, "time_us": 1.0},  # no 4-rank simulation
    {"source_line": 5, "size_bytes": 1024, "time_us": 1.0, "wrong": True},  # failed data check
    {"source_line": 6, "size_bytes": 1024, "gpu": "A100", "time_us": 1.0},  # other GPU
    {"source_line": 7, "size_bytes": 1024, "launch": "eager", "time_us": 1.0},  # no eager simulation
]


@pytest.fixture
def sim_frame() -> pd.DataFrame:
    from collsim.resultsfile import check_frame

    return check_frame(pd.DataFrame(SIM))


def test_join_keys_and_error_arithmetic(sim_frame):
    result = compare(sim_frame, _measured(MEASURED))
    rows = result.rows.sort_values(["line", "protocol", "algorithm"]).reset_index(drop=True)
    got = [(int(r.line), r.algorithm, r.protocol, r.simulated_us, r.measured_us) for r in rows.itertuples()]
    assert got == [
        (1, "ring", "ll", 10.0, 8.0),
        (2, "ring", "ll", 20.0, 25.0),
        (3, "one-shot", "barrier", 5.0, 12.5),
        (3, "ring", "ll", 10.0, 12.5),
        (3, "ring", "simple", 30.0, 12.5),
    ]
    assert rows["signed_pct"].tolist() == pytest.approx([25.0, -20.0, -60.0, -20.0, 140.0])
    assert rows["abs_pct"].tolist() == pytest.approx([25.0, 20.0, 60.0, 20.0, 140.0])
    assert result.measured_rows == 6  # the wrong row is left out before joining
    assert result.joined_measured == 3
    assert result.overall["pairs"] == 5
    assert result.overall["median_abs_pct"] == pytest.approx(25.0)
    assert result.overall["median_signed_pct"] == pytest.approx(-20.0)
    assert result.overall["max_abs_pct"] == pytest.approx(140.0)
    # groups: one per measured family and simulated curve
    groups = result.groups
    assert len(groups) == 4 and groups["n"].sum() == 5
    stated = groups[groups["family"].str.contains("proto ll")]
    assert stated[["algorithm", "protocol", "n"]].values.tolist() == [["ring", "ll", 1]]
    assert stated["median_signed_pct"].iloc[0] == pytest.approx(25.0)
    free = groups[~groups["family"].str.contains("proto ll")].set_index(["algorithm", "protocol"])
    assert free.loc[("ring", "ll"), "n"] == 2
    assert free.loc[("ring", "ll"), "median_signed_pct"] == pytest.approx(-20.0)
    assert free.loc[("ring", "ll"), "max_abs_pct"] == pytest.approx(20.0)
    assert free.loc[("ring", "simple"), "median_abs_pct"] == pytest.approx(140.0)
    # the overlay for the report holds each joined measured row once
    assert sorted(result.measured["time_us"]) == [8.0, 12.5, 25.0]


def test_hidden_launch_timing_joins_graph_rows(sim_frame):
    kraken = {"size_bytes": 1024, "algorithm": "one_shot_all_reduce", "library": "PyTorch symmetric memory",
              "launch": "eager", "time_us": 4.0,
              "notes": "timing: benchmark_with_event, ops queued behind a 20 ms GPU sleep (launch overhead hidden)"}
    result = compare(sim_frame, _measured([kraken]))
    assert result.rows[["algorithm", "protocol", "launch"]].values.tolist() == [["one-shot", "barrier", "graph"]]
    assert result.rows["signed_pct"].iloc[0] == pytest.approx(25.0)


def test_nothing_joins_names_the_file_and_the_keys(sim_frame):
    with pytest.raises(InputError) as err:
        compare(sim_frame, _measured([MEASURED[3]]), measured_source="m.txt")
    text = str(err.value)
    assert text.startswith("m.txt: nothing joins")
    assert "ranks 4" in text and "\n" not in text


def test_non_results_file_is_refused(tmp_path):
    bogus = tmp_path / "results.csv"
    bogus.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a collsim results file"):
        load_simulated(bogus)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    sim = tmp_path / "results.csv"
    sim.write_text(format_csv(SIM), encoding="utf-8")
    meas = tmp_path / "measured.csv"
    write_measurements(_measured(MEASURED), meas)
    return sim, meas


def test_cli_table_json_and_html(files, tmp_path, collsim_cli):
    sim, meas = files
    code, out, err = collsim_cli("compare", sim, meas)
    assert code == 0, err
    assert "per group" in out and "median |error|" in out
    assert "3 of 6 measured rows joined (5 pairs)" in out
    code, out, _ = collsim_cli("compare", sim, meas, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["pairs"] == 5 and doc["overall"]["median_abs_pct"] == pytest.approx(25.0)
    html = tmp_path / "cmp.html"
    code, _, err = collsim_cli("compare", sim, meas, "--html", html, "--no-rows")
    assert code == 0 and html.is_file()
    assert "measured:" in html.read_text(encoding="utf-8")


def test_cli_bad_inputs_exit_2_with_one_line(files, tmp_path, collsim_cli):
    sim, meas = files
    only4 = tmp_path / "only4.csv"
    write_measurements(_measured([MEASURED[3]]), only4)
    for argv in ((meas, meas), (sim, tmp_path / "missing.txt"), (sim, only4), (tmp_path / "nope.csv", meas)):
        code, out, err = collsim_cli("compare", *argv)
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("collsim: error: "), err


def test_single_gpu_rows_of_an_emitted_harness_are_not_joined(sim_frame, files, tmp_path, collsim_cli):
    # An emitted harness on a machine with fewer GPUs than ranks runs every rank on one GPU: its times are on-chip
    # cost, so joining them with an 8-GPU simulation would report the interconnect's cost as model error.
    rows = [{**MEASURED[2], "gpu_mode": "multi-gpu"}, {**MEASURED[0], "gpu_mode": "single-gpu"}]
    result = compare(sim_frame, _measured(rows))
    assert set(result.rows["line"]) == {3}
    with pytest.raises(InputError, match="every rank on one GPU"):
        compare(sim_frame, _measured([{**MEASURED[0], "gpu_mode": "single-gpu"}]))
    sim, _ = files
    single = tmp_path / "single.csv"
    pd.DataFrame([{"source": "collsim-emit", "source_format": "collsim-csv", "gpu": "NVIDIA H100 80GB HBM3",
                   "ranks": 8, "collective": "allreduce", "algorithm": "ring", "protocol": "ll", "launch": "graph",
                   "size_bytes": 1024, "time_us": 3.0, "gpu_mode": "single-gpu"}]).to_csv(single, index=False)
    code, _, err = collsim_cli("compare", sim, single)
    assert code == 2
    assert "single.csv:2: 1 row(s) measured with every rank on one GPU" in err
    assert err.strip().splitlines()[-1].startswith("collsim: error: ") and "--mode multi" in err
    code, out, err = collsim_cli("compare", sim, single, "--single-gpu", "--json")
    assert code == 0, err
    assert json.loads(out)["pairs"] == 1
