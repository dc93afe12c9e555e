"""sweep: one result set per combination of cost parameters, one directory each, and sweep.csv."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import collsim
from collsim import models, resultsfile
from collsim.runner import rows as runner_rows, run as runner
from collsim.errors import InputError
from collsim.scenario import load_scenario
from collsim.scenario.loader import parse_sweep_range

BASE = """\
topology: hgx-h100
ranks: [2, 8]
sizes: [8, 1KiB]
protocols: [ll, ll128]
algorithms: [ring]
launch: [eager]
model: analytic
"""


def test_expansion_order_and_outputs(write_scenario, tmp_path):
    path = write_scenario(
        BASE + "sweep:\n  launch_overhead_us: [2, 5.5]\n  base_latency_us.ll: '6..8 +1'\n", name="sw.yaml"
    )
    scen = load_scenario(path)
    assert scen.sweep == (("launch_overhead_us", (2, 5.5)), ("base_latency_us.ll", (6, 7, 8)))
    points = scen.sweep_points()
    assert len(points) == 6 and points[1] == (("launch_overhead_us", 2), ("base_latency_us.ll", 7))
    assert scen.costs_for(points[1]) == {"launch_overhead_us": 2, "base_latency_us": {"ll": 7}}
    rows, skipped = runner_rows.expand_rows(scen)
    assert len(rows) == 6 * 2 * 2 * 2  # points x ranks x protocols x sizes
    assert [r.sweep for r in rows[:8]] == [points[0]] * 8  # combinations outermost
    out = tmp_path / "o"
    df = collsim.run_scenario(path, out=out)
    # In Python: every point in one frame, a column per swept parameter after op.
    columns = list(resultsfile.COLUMNS)
    at = columns.index("op") + 1
    assert list(df.columns) == columns[:at] + ["launch_overhead_us", "base_latency_us.ll"] + columns[at:]
    assert len(df) == 48
    # Each point's costs reached the model: eager launch pays launch_overhead_us ...
    assert (df["launch_us"] == df["launch_overhead_us"]).all()
    # ... and LL's base latency moves sync time one for one, LL128's does not.
    ll = df[(df.protocol == "ll") & (df.launch_overhead_us == 2)].set_index(["ranks", "size_bytes", "base_latency_us.ll"])
    assert ll.loc[(8, 8, 8), "sync_us"] - ll.loc[(8, 8, 6), "sync_us"] == pytest.approx(2.0)
    ll128 = df[df.protocol == "ll128"].groupby(["ranks", "size_bytes", "launch_overhead_us"])["sync_us"].nunique()
    assert (ll128 == 1).all()
    # On disk: sweep.csv, then one ordinary result set per point.
    index = pd.read_csv(out / "sweep.csv", keep_default_na=False)
    assert list(index.columns) == ["point", "launch_overhead_us", "base_latency_us.ll", "directory", "rows",
                                   "skipped", "failed"]
    assert index["directory"].tolist() == [f"launch_overhead_us={a},base_latency_us.ll={b}"
                                           for a in (2, 5.5) for b in (6, 7, 8)]
    assert index["point"].tolist() == [1, 2, 3, 4, 5, 6] and (index["rows"] == 8).all()
    assert df.attrs["sweep_points"][1] == {"point": {"launch_overhead_us": 2, "base_latency_us.ll": 7},
                                          "directory": "launch_overhead_us=2,base_latency_us.ll=7"}
    assert not (out / "results.csv").exists()
    for (a, b), directory in zip([(a, b) for a in (2, 5.5) for b in (6, 7, 8)], index["directory"]):
        csv = pd.read_csv(out / directory / "results.csv", keep_default_na=False)
        assert list(csv.columns) == columns and len(csv) == 8
        assert (csv["launch_us"] == a).all()
        doc = json.loads((out / directory / "results.json").read_text())
        assert doc["sweep_point"] == {"launch_overhead_us": a, "base_latency_us.ll": b}
        assert doc["costs"] == {"launch_overhead_us": a, "base_latency_us": {"ll": b}}
        assert doc["columns"] == columns and len(doc["rows"]) == 8 and doc["failed"] == []
        assert "sweep" not in doc["scenario"]


def test_a_point_is_what_a_run_with_those_costs_writes(write_scenario, tmp_path):
    swept = write_scenario(BASE + "sweep: {launch_overhead_us: [2, 3]}\n", name="a.yaml")
    single = write_scenario(BASE.replace("model: analytic", "name: a\nmodel: analytic") + "costs: {launch_overhead_us: 3}\n",
                            name="b.yaml")
    collsim.run_scenario(swept, out=tmp_path / "swept")
    collsim.run_scenario(single, out=tmp_path / "single")
    assert (tmp_path / "swept/launch_overhead_us=3/results.csv").read_bytes() == \
        (tmp_path / "single/results.csv").read_bytes()
    doc = json.loads((tmp_path / "swept/launch_overhead_us=3/results.json").read_text())
    ref = json.loads((tmp_path / "single/results.json").read_text())
    assert doc.pop("sweep_point") == {"launch_overhead_us": 3}
    for d in (doc, ref):
        d["scenario"].pop("source")
    assert doc == ref


def test_same_sweep_same_bytes(write_scenario, tmp_path):
    path = write_scenario(BASE + "sweep: {launch_overhead_us: '0.05..0.2 +0.05'}\n")
    for name in ("a", "b"):
        collsim.run_scenario(path, out=tmp_path / name)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 9
    for name in files:
        if name.name == "results.json":  # the same but for the run section (the date)
            a, b = ((tmp_path / d / name).read_text() for d in "ab")
            assert resultsfile.without_run(a) == resultsfile.without_run(b)
        else:
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    index = pd.read_csv(tmp_path / "a" / "sweep.csv")
    assert index["launch_overhead_us"].tolist() == [0.05, 0.1, 0.15, 0.2]
    assert "launch_overhead_us=0.15" in index["directory"].tolist()  # exact decimals, not 0.15000000000000002


def test_directory_names():
    assert resultsfile.sweep_directories([(("a", 1),), (("a", "x/y"),), (("a", "x:y"),)]) == ["a=1", "a=x_y", "point-3"]
    assert resultsfile.sweep_directories([(("k" * 130, 1),)]) == ["point-1"]


def test_cli_table_shows_sweep_columns(write_scenario, collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_scenario(BASE + "sweep: {launch_overhead_us: [1, 3]}\n", name="t.yaml")
    code, out, err = collsim_cli("run", path)
    assert code == 0, err
    assert "2 sweep points" in out
    header = next(line for line in out.splitlines() if "size (B)" in line)
    assert header.index("ranks") < header.index("launch_overhead_us") < header.index("time (us)")


def test_without_sweep_nothing_changes(write_scenario, tmp_path):
    df = collsim.run_scenario(write_scenario(BASE), out=tmp_path / "o")
    assert list(df.columns) == list(resultsfile.COLUMNS) and "sweep_points" not in df.attrs
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["report.html", "results.csv", "results.json"]
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert "sweep" not in doc["scenario"] and "sweep_point" not in doc and doc["columns"] == list(resultsfile.COLUMNS)


def test_costs_and_sweep_merge(write_scenario):
    scen = load_scenario(write_scenario(
        BASE + "costs:\n  base_latency_us: {ll128: 12}\n  launch_overhead_us: 9\n"
        "sweep:\n  base_latency_us.ll: [5]\n  launch_overhead_us: [1]\n"
    ))
    assert scen.costs_for(scen.sweep_points()[0]) == {"base_latency_us": {"ll128": 12, "ll": 5}, "launch_overhead_us": 1}
    assert scen.costs == {"base_latency_us": {"ll128": 12}, "launch_overhead_us": 9}  # untouched


def test_values_checked_by_the_model_that_runs(write_scenario, monkeypatch, tmp_path):
    # poll_period_us is a parameter of the discrete-event model, not of the analytic one.
    text = BASE.replace("model: analytic\n", "") + "sweep:\n  poll_period_us: [0.1, 0.2]\n"
    path = write_scenario(text)
    with pytest.raises(InputError) as err:
        load_scenario(path, model="analytic")
    assert err.value.field == "sweep.poll_period_us" and err.value.line == 8
    assert "unknown cost parameter 'poll_period_us'" in err.value.message
    # A model that accepts it loads it; a Scenario object re-run with --model is checked again.
    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))

    def lenient(costs):
        for key, value in costs.items():
            if value > 0.15:
                raise InputError(f"too slow, got {value}", field=f"costs.{key}")

    models.register_model("lenient", lambda req: models.SimResult.from_breakdown(req, {"sync": 1.0}, model="lenient"),
                          validate_costs=lenient)
    with pytest.raises(InputError) as err:
        load_scenario(path, model="lenient")
    assert err.value.field == "sweep.poll_period_us[1]" and "too slow, got 0.2" in err.value.message
    ok = load_scenario(write_scenario(text.replace("0.2]", "0.15]"), name="ok.yaml"), model="lenient")
    with pytest.raises(InputError) as err:
        runner.execute(ok, model="analytic", write=False)
    assert err.value.field == "sweep" and "poll_period_us" in err.value.message


BAD = [
    ("not-a-mapping", "sweep: [1, 2]\n", 8, "sweep", "expected a mapping of cost parameters"),
    ("empty-mapping", "sweep: {}\n", 8, "sweep", "expected a mapping"),
    ("empty-list", "sweep:\n  launch_overhead_us: []\n", 9, "sweep.launch_overhead_us", "empty list"),
    ("unknown-parameter", "sweep:\n  warp_speed: [1]\n", 9, "sweep.warp_speed", "unknown cost parameter 'warp_speed'"),
    ("negative", "sweep:\n  launch_overhead_us:\n    - 1\n    - -2\n", 11, "sweep.launch_overhead_us[1]", "negative"),
    ("not-a-number", "sweep:\n  launch_overhead_us: [1, fast]\n", 9, "sweep.launch_overhead_us[1]", "expected a number"),
    ("nested-item", "sweep:\n  launch_overhead_us: [1, [2, 3]]\n", 9, "sweep.launch_overhead_us[1]", "expected a value or a range"),
    ("no-step", "sweep:\n  launch_overhead_us: '0.1..0.5'\n", 9, "sweep.launch_overhead_us", "needs a step"),
    ("backwards", "sweep:\n  launch_overhead_us: '3..1'\n", 9, "sweep.launch_overhead_us", "ends before it starts"),
    ("bad-range", "sweep:\n  launch_overhead_us: '1..x +1'\n", 9, "sweep.launch_overhead_us", "cannot read range"),
    ("column-name", "sweep:\n  latency_us: [1]\n", 9, "sweep.latency_us", "is a results column"),
    ("bad-key", "sweep:\n  'a b': [1]\n", 9, "sweep.a b", "cost parameter name"),
    ("too-many", "sweep:\n  launch_overhead_us: '1..200 +1'\n  pci_bw_gbps: '1..100 +1'\n", 8, "sweep",
     "more than 10000 combinations"),
    ("bad-table-entry", "sweep:\n  base_latency_us.lll: [1]\n", 9, "sweep.base_latency_us.lll", "unknown entry"),
]


@pytest.mark.parametrize("case_id, text, line, field, needle", BAD, ids=[c[0] for c in BAD])
def test_bad_sweep_is_one_line(case_id, text, line, field, needle, write_scenario, collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_scenario(BASE + text)
    code, out, err = collsim_cli("run", path)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"collsim: error: {path}:{line}: {field}: "), lines[0]
    assert needle in lines[0]
    assert not (tmp_path / "reports").exists()


def test_parse_sweep_range():
    assert parse_sweep_range("0.05..0.2 +0.05") == [0.05, 0.1, 0.15, 0.2]
    assert parse_sweep_range("1..16 x2") == [1, 2, 4, 8, 16]
    assert parse_sweep_range("0.5..4 x2") == [0.5, 1.0, 2.0, 4.0]
    assert parse_sweep_range("2..4") == [2, 3, 4]
    assert parse_sweep_range("1e-3..3e-3 +1e-3") == [0.001, 0.002, 0.003]
    assert all(type(v) is int for v in parse_sweep_range("8..32 +8"))
    for bad in ("1..", "a..b", "1..2 x1", "0..8 x2", "1..2 +0", "2..1"):
        with pytest.raises(InputError):
            parse_sweep_range(bad)


def test_interrupted_sweep_write_leaves_nothing(write_scenario, tmp_path, monkeypatch):
    path = write_scenario(BASE + "sweep: {launch_overhead_us: [1, 2, 3]}\n")
    import collsim.atomicfile as atomicfile

    real_mkstemp = atomicfile.tempfile.mkstemp
    calls = []

    def flaky(*args, **kwargs):
        calls.append(kwargs.get("dir"))
        if len(calls) == 4:  # the second point's results.json
            raise OSError("disk full")
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(atomicfile.tempfile, "mkstemp", flaky)
    with pytest.raises(OSError):
        collsim.run_scenario(path, out=tmp_path / "out" / "deeper")
    assert not (tmp_path / "out").exists()  # temporaries and the directories made for them are gone
