"""collsim run / simulate, the results files and the Python API."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import collsim
from collsim import models, resultsfile
from collsim.runner import rows as runner_rows, run as runner
from collsim.errors import InputError, UnsupportedError

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))

SMALL = """\
topology: hgx-h100
ranks: [1, 2, 8]
sizes: 8B..1MiB x4
protocols: [barrier, ll, ll128]
launch: [eager, graph]
"""


def test_run_writes_csv_and_json(write_scenario, collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_scenario(SMALL, name="small.yaml")
    code, out, err = collsim_cli("run", path, "--model", "analytic")
    assert code == 0, err
    out_dir = tmp_path / "reports" / "small"
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.html", "results.csv", "results.json"]
    frame = pd.read_csv(out_dir / "results.csv", keep_default_na=False)
    assert list(frame.columns) == list(resultsfile.COLUMNS)
    # 2 usable rank counts x (barrier: 2 algorithms, ll and ll128: 3) x 2 launches x 9 sizes (8 B x 4^k up to 512 KiB)
    assert len(frame) == 2 * 8 * 2 * 9
    assert set(frame["ranks"]) == {2, 8}
    assert (frame["model"] == "analytic").all()
    assert (frame["count"] == frame["size_bytes"] // 4).all()
    parts = frame[["launch_us", "sync_us", "data_us", "reduce_us"]].sum(axis=1)
    assert (abs(parts - frame["latency_us"]) <= 0.003).all()
    doc = json.loads((out_dir / "results.json").read_text())
    assert doc["collsim_version"] == collsim.__version__
    assert doc["model"] == "analytic"
    assert doc["scenario"]["name"] == "small"
    assert doc["topology"]["name"] == "hgx-h100" and doc["topology"]["summary"]["gpus"] == 8
    assert doc["columns"] == list(resultsfile.COLUMNS)
    assert len(doc["rows"]) == len(frame)
    assert {s["reason"] for s in doc["skipped"]} >= {"an AllReduce needs at least 2 ranks, got 1"}
    assert "generated" not in doc
    # The table: nccl-tests' column order, then the breakdown.
    header = next(line for line in out.splitlines() if "size (B)" in line)
    order = ["size (B)", "count", "type", "redop", "algorithm", "protocol", "ranks", "launch",
             "time (us)", "algbw (GB/s)", "busbw (GB/s)", "launch us", "sync us", "data us", "reduce us"]
    positions = [header.index(name) for name in order]
    assert positions == sorted(positions)
    assert "skipped" in err and "barrier" in err


def test_same_scenario_same_bytes(write_scenario, tmp_path):
    path = write_scenario(SMALL)
    runner.run_scenario(path, out=tmp_path / "a", model="analytic")
    runner.run_scenario(path, out=tmp_path / "b", model="analytic")
    assert (tmp_path / "a" / "results.csv").read_bytes() == (tmp_path / "b" / "results.csv").read_bytes()
    # results.json: the same, but for its run section (the date)
    a, b = ((tmp_path / d / "results.json").read_text() for d in "ab")
    assert resultsfile.without_run(a) == resultsfile.without_run(b)
    assert a.replace(json.loads(a)["run"]["date"], "D") == b.replace(json.loads(b)["run"]["date"], "D")


def test_results_json_records_the_run_date_and_version(write_scenario, tmp_path, monkeypatch):
    path = write_scenario(SMALL)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    runner.run_scenario(path, out=tmp_path / "a", model="analytic")
    doc = json.loads((tmp_path / "a" / "results.json").read_text())
    assert doc["run"] == {"date": "2023-11-14T22:13:20Z", "collsim_version": collsim.__version__}
    assert list(doc)[-1] == "run"  # after the results, apart from them
    assert "2023-11-14T22:13:20Z" in (tmp_path / "a" / "report.html").read_text()
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    runner.run_scenario(path, out=tmp_path / "b", model="analytic")
    date = json.loads((tmp_path / "b" / "results.json").read_text())["run"]["date"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", date) and date > "2024"


def test_run_scenario_api(write_scenario, tmp_path):
    df = collsim.run_scenario(write_scenario(SMALL), out=tmp_path / "o", model="analytic")
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(resultsfile.COLUMNS)
    assert df.attrs["model"] == "analytic" and df.attrs["out_dir"] == str(tmp_path / "o")
    small = df[(df.size_bytes == 8) & (df.ranks == 8) & (df.algorithm == "ring") & (df.protocol == "ll")]
    assert small[small.launch == "graph"].latency_us.iloc[0] == pytest.approx(15.0, abs=1e-3)
    # In-memory only.
    df2 = collsim.run_scenario(collsim.load_scenario(write_scenario(SMALL)), model="analytic", write=False)
    assert df2.attrs["out_dir"] is None and len(df2) == len(df)


def test_failed_run_leaves_nothing(write_scenario, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(runner, "format_json", boom)
    with pytest.raises(RuntimeError):
        runner.run_scenario(write_scenario(SMALL), out=tmp_path / "out", model="analytic")
    assert not (tmp_path / "out").exists()


def test_atomic_write_cleans_temporaries(tmp_path, monkeypatch):
    out = tmp_path / "r"
    out.mkdir()
    (out / "results.csv").write_text("old\n")
    real_replace = resultsfile.os.replace
    calls = []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("no")
        return real_replace(src, dst)

    monkeypatch.setattr(resultsfile.os, "replace", flaky)
    with pytest.raises(OSError):
        resultsfile.write_results(out, {"results.csv": "a\n", "results.json": "{}\n"})
    assert sorted(p.name for p in out.iterdir()) == ["results.csv"]  # no temporaries left


def test_run_rows_with_executor(write_scenario):
    from concurrent.futures import ThreadPoolExecutor

    scen = collsim.load_scenario(write_scenario(SMALL))
    rows, _ = runner_rows.expand_rows(scen, "analytic")
    serial = runner_rows.run_rows(rows)
    with ThreadPoolExecutor(2) as pool:
        threaded = runner_rows.run_rows(rows, executor=pool)
    assert serial == threaded
    seen = []
    runner_rows.run_rows(rows[:3], on_result=seen.append)
    assert len(seen) == 3


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_shipped_scenario_runs(path, tmp_path):
    df = collsim.run_scenario(path, out=tmp_path, model="analytic")
    assert len(df) > 0
    assert (df.latency_us > 0).all()
    assert (df.busbw_gbps >= 0).all()
    assert (tmp_path / "results.csv").exists()


def test_simulate_cli(collsim_cli):
    code, out, err = collsim_cli("simulate", "--topology", "hgx-h100", "--ranks", "8", "--algorithm", "ring",
                                 "--protocol", "ll", "--size", "8B", "--model", "analytic")
    assert code == 0, err
    assert "time 15.00 us" in out
    code, out, err = collsim_cli("simulate", "--algorithm", "ring", "--protocol", "ll128", "--size", "8KiB",
                                 "--launch", "eager", "--model", "analytic", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["size_bytes"] == 8192 and doc["model"] == "analytic"
    assert set(doc["breakdown"]) == {"launch", "sync", "data", "reduce"}
    assert doc["breakdown"]["launch"] > 0


def test_simulate_api_defaults_and_errors():
    r = collsim.simulate(model="analytic")
    assert r.latency_us > 0 and r.model == "analytic"
    with pytest.raises(InputError) as err:
        collsim.simulate(protocol="barrier", algorithm="ring", model="analytic")
    assert err.value.choices == ["one-shot", "two-shot"]
    r = collsim.simulate(model="analytic", timeline=True)
    assert r.timeline and {"rank", "kind", "start_us", "end_us", "peer", "bytes", "label"} <= set(r.timeline[0])


def test_model_registry(monkeypatch):
    assert "analytic" in models.list_models()
    assert models.DEFAULT_MODEL in models.list_models()
    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))
    monkeypatch.setattr(models, "_DEFAULT", models._DEFAULT)

    def fake(request):
        return models.SimResult.from_breakdown(request, {"sync": 1.0, "data": 1.0}, model="fake")

    models.register_model("fake", fake, default=True)
    assert models.default_model() == "fake" and models.list_models()[0] == "fake"
    r = models.simulate(size_bytes=2000)
    assert r.model == "fake" and r.latency_us == 2.0 and r.breakdown["launch"] == 0.0
    assert r.algbw_gbps == pytest.approx(1.0) and r.busbw_gbps == pytest.approx(1.75)
    with pytest.raises(ValueError):
        models.SimResult.from_breakdown(models.SimRequest(None, 2, "ring", None, 8), {"bogus": 1.0}, model="x")


def test_unsupported_row_from_model_is_skipped(write_scenario, monkeypatch, tmp_path):
    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))

    def picky(request):
        if request.protocol.name == "ll128":
            raise UnsupportedError("no LL128 here")
        return models.SimResult.from_breakdown(request, {"sync": 1.0}, model="picky")

    models.register_model("picky", picky)
    df = collsim.run_scenario(write_scenario(SMALL), out=tmp_path / "p", model="picky")
    assert "ll128" not in set(df.protocol)
    assert any("no LL128 here" in s["reason"] for s in df.attrs["skipped"])
