"""--reuse: rows whose inputs are unchanged come from the row cache, with the same records as a fresh run."""
from __future__ import annotations

import sqlite3

import pytest

from collsim import models, resultsfile, rowcache
from collsim.runner import rows as runner_rows, run as runner
from collsim.scenario import load_scenario

SCENARIO = """\
topology: hgx-h100
ranks: [2, 4]
sizes: [8, 64KiB]
protocols: [ll, simple]
algorithms: [one-shot, ring]
launch: [graph]
model: des
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("COLLSIM_CACHE_DIR", str(where))
    return where


def _files(out):
    """results.csv as bytes, results.json without its run section (the date)."""
    return (out / "results.csv").read_bytes(), resultsfile.without_run((out / "results.json").read_text())


def test_second_run_reuses_every_row_and_writes_the_same_files(write_scenario, tmp_path, cache_dir):
    path = write_scenario(SCENARIO)
    fresh = runner.execute(path, out=tmp_path / "fresh", report=False)
    first = runner.execute(path, out=tmp_path / "first", report=False, reuse=True)
    second = runner.execute(path, out=tmp_path / "second", report=False, reuse=True)
    assert (fresh.reused, first.reused, second.reused) == (0, 0, len(fresh.records)) and len(fresh.records) == 16
    assert _files(tmp_path / "fresh") == _files(tmp_path / "first") == _files(tmp_path / "second")
    assert (cache_dir / "results.sqlite").is_file()
    # Without --reuse nothing is read: a run is a run.
    assert runner.execute(path, out=tmp_path / "plain", report=False).reused == 0


def test_only_changed_rows_run_again(write_scenario, tmp_path, cache_dir, monkeypatch):
    path = write_scenario(SCENARIO)
    runner.execute(path, out=tmp_path / "a", report=False, reuse=True)
    # One more size: only its rows are new.
    grown = write_scenario(SCENARIO.replace("sizes: [8, 64KiB]", "sizes: [8, 64KiB, 1MiB]"), name="grown.yaml")
    run = runner.execute(grown, out=tmp_path / "b", report=False, reuse=True)
    assert (run.reused, run.ran) == (16, 8)
    # A cost change reaches every row of the model, so nothing is reused ...
    costly = write_scenario(SCENARIO + "costs:\n  op_overhead_us: 0.05\n", name="costly.yaml")
    run = runner.execute(costly, out=tmp_path / "c", report=False, reuse=True)
    assert run.reused == 0
    fresh = runner.execute(costly, out=tmp_path / "d", report=False)
    assert [r["latency_us"] for r in run.records] == [r["latency_us"] for r in fresh.records]
    # ... and a new version of collsim (its code digest) invalidates everything.
    monkeypatch.setattr(rowcache, "code_digest", lambda: "another version")
    assert runner.execute(path, out=tmp_path / "e", report=False, reuse=True).reused == 0


def test_keys_cover_the_program_and_the_configuration(write_scenario):
    import dataclasses

    from collsim.ir.registry import load_protocol

    scen = load_scenario(write_scenario(SCENARIO))
    rows, _ = runner_rows.expand_rows(scen)
    keys = [rowcache.row_key(r) for r in rows]
    assert None not in keys and len(set(keys)) == len(rows)
    # The same protocol with another parameter generates another program: another key.
    ll = rows[0]
    assert ll.protocol.name == "ll" and ll.protocol.params["depth"] != 3
    assert rowcache.row_key(dataclasses.replace(ll, protocol=load_protocol("ll", depth=3))) != keys[0]
    assert rowcache.row_key(dataclasses.replace(ll, protocol=load_protocol("ll"))) == keys[0]
    # A row without a describable topology cannot be reused.
    assert rowcache.row_key(dataclasses.replace(ll, topology_ref=None)) is None


def counting_model(request):
    """A model defined outside collsim: its code is not in the digest, so its rows are never reused."""
    COUNTED.append(request.size_bytes)
    return models.get_model("analytic")[1](request)


COUNTED: list[int] = []


def test_rows_of_a_model_collsim_cannot_see_are_never_reused(write_scenario, tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))
    models.register_model("counting", counting_model)
    COUNTED.clear()
    path = write_scenario(SCENARIO.replace("model: des", "model: counting"))
    first = runner.execute(path, out=tmp_path / "a", report=False, reuse=True)
    second = runner.execute(path, out=tmp_path / "b", report=False, reuse=True)
    assert (first.reused, second.reused, len(COUNTED)) == (0, 0, 32)


def test_failed_rows_are_not_stored(write_scenario, tmp_path, cache_dir, monkeypatch):
    path = write_scenario(SCENARIO)
    real = runner_rows.run_row

    def flaky(row):
        if row.ranks == 4 and row.algorithm == "ring":
            raise RuntimeError("injected")
        return real(row)

    monkeypatch.setattr(runner_rows, "run_row", flaky)
    run = runner.execute(path, out=tmp_path / "a", report=False, reuse=True)
    assert len(run.failed) == 4
    monkeypatch.setattr(runner_rows, "run_row", real)
    again = runner.execute(path, out=tmp_path / "b", report=False, reuse=True)
    assert again.reused == 12 and not again.failed and len(again.records) == 16


def test_an_unreadable_cache_is_an_empty_one(write_scenario, tmp_path, cache_dir):
    cache_dir.mkdir()
    (cache_dir / "results.sqlite").write_bytes(b"not a database at all" * 100)
    path = write_scenario(SCENARIO)
    run = runner.execute(path, out=tmp_path / "a", report=False, reuse=True)
    assert run.reused == 0 and len(run.records) == 16
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(str(cache_dir / "results.sqlite")).execute("SELECT * FROM rows").fetchall()


def test_cli_says_how_many_rows_were_reused(collsim_cli, write_scenario, tmp_path, cache_dir):
    path = write_scenario(SCENARIO)
    code, _, err = collsim_cli("run", path, "-q", "--no-report", "--reuse", "-o", tmp_path / "a")
    assert code == 0 and "0 rows reused from an earlier run, 16 simulated" in err
    code, _, err = collsim_cli("run", path, "-q", "--no-report", "--reuse", "-o", tmp_path / "b")
    assert code == 0 and "16 rows reused from an earlier run, 0 simulated" in err
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
