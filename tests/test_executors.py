"""Executors: serial, a process pool and a Dask cluster give the same bytes; failures are retried and reported.

One Dask LocalCluster (2 workers on 127.0.0.1, started by collsim's own
executor code) and one 2-process pool serve the whole module: both are slow
to start.
"""
from __future__ import annotations

import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim import models
from collsim.runner import run as runner
from collsim.errors import InputError
from collsim.executors import TaskOutcome, _weighted_chunks, map_tasks, open_executor
from collsim.resultsfile import without_run

TESTS_DIR = str(Path(__file__).resolve().parent)

SCENARIO = """\
topology: hgx-h100
ranks: [1, 2, 8]
sizes: 8B..1MiB x4
protocols: [barrier, ll, ll128]
launch: [eager, graph]
model: analytic
sweep:
  launch_overhead_us: [3, 4.5]
"""


# ---------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def dask_executor():
    """collsim's Dask executor on a LocalCluster it starts itself (2 single-threaded workers, loopback)."""
    pytest.importorskip("distributed")
    ex = open_executor("dask", workers=2)
    # Workers import this module to find the test model below, as they would an installed plugin.
    ex._client.run(sys.path.insert, 0, TESTS_DIR)
    yield ex
    ex.close()


@pytest.fixture(scope="module")
def pool_executor():
    ex = open_executor("processes", workers=2)
    yield ex
    ex.close()


@pytest.fixture(scope="module")
def serial_files(tmp_path_factory):
    """results.csv / results.json of SCENARIO run serially (the reference)."""
    base = tmp_path_factory.mktemp("serial")
    path = base / "small.yaml"
    path.write_text(SCENARIO)
    runner.execute(path, out=base / "out")
    return path, _files(base / "out")


_DATE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _files(out: Path) -> dict[str, Any]:
    """Every file under ``out`` (a sweep writes one directory per point), by relative path: its bytes, but
    the run's date (results.json's run section, the report's card), the one part that differs."""
    return {p.relative_to(out).as_posix(): without_run(p.read_text()) if p.name == "results.json"
            else _DATE.sub(b"DATE", p.read_bytes()) for p in sorted(out.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------
# identical results


def test_processes_cli_same_bytes_as_serial(serial_files, collsim_cli, tmp_path):
    path, serial = serial_files
    code, out, err = collsim_cli("run", path, "--out", tmp_path / "p", "--executor", "processes", "--workers", "2", "-q")
    assert code == 0, err
    assert _files(tmp_path / "p") == serial
    assert sorted(serial) == [
        "launch_overhead_us=3/results.csv", "launch_overhead_us=3/results.json",
        "launch_overhead_us=4.5/results.csv", "launch_overhead_us=4.5/results.json", "sweep.csv",
    ]


def test_dask_cli_same_bytes_as_serial(serial_files, dask_executor, collsim_cli, tmp_path):
    path, serial = serial_files
    code, out, err = collsim_cli(
        "run", path, "--out", tmp_path / "d", "--executor", "dask", "--scheduler", dask_executor.scheduler, "-q"
    )
    assert code == 0, err
    assert _files(tmp_path / "d") == serial


def test_custom_topology_files_travel(write_scenario, pool_executor, dask_executor, tmp_path):
    """A topology file beside the scenario, and an inline one, are shipped as documents and rebuilt on workers."""
    (tmp_path / "box.yaml").write_text(
        "name: box\ngpu: H100\ntopology: [switch]\nnpus: [4]\nbandwidth: [400]\nlatency: [500]\n"
    )
    by_file = write_scenario("topology: box.yaml\nranks: [2, 4]\nsizes: [8, 64KiB]\nmodel: analytic\n", name="f.yaml")
    inline = write_scenario(
        "topology: {gpu: H100, topology: [switch], npus: [4], bandwidth: [400], latency: [500]}\n"
        "ranks: 4\nsizes: [8, 1MiB]\nmodel: analytic\n",
        name="i.yaml",
    )
    for path in (by_file, inline):
        runner.execute(path, out=tmp_path / "serial")
        reference = _files(tmp_path / "serial")
        for name, ex in (("pool", pool_executor), ("dask", dask_executor)):
            runner.execute(path, out=tmp_path / name, executor=ex)
            assert _files(tmp_path / name) == reference, (path.name, name)


def test_default_model_same_bytes_everywhere(write_scenario, pool_executor, dask_executor, tmp_path):
    """The discrete-event model (the default) too: rows rebuilt on workers simulate the same."""
    if "des" not in models.list_models():
        pytest.skip("the des model is not installed")
    path = write_scenario("topology: hgx-h100\nranks: [2, 8]\nsizes: [8, 64KiB]\nprotocols: [ll, simple]\n")
    try:
        runner.execute(path, out=tmp_path / "serial", model="des")
    except Exception as err:  # noqa: BLE001 - the simulator is another package; its own tests cover it
        pytest.skip(f"des cannot run this scenario here: {err}")
    reference = _files(tmp_path / "serial")
    for name, ex in (("pool", pool_executor), ("dask", dask_executor)):
        out = runner.execute(path, out=tmp_path / name, model="des", executor=ex)
        assert not out.failed, out.failed
        assert _files(tmp_path / name) == reference, name


# ---------------------------------------------------------------------------
# failures: retried once, reported with the configuration, the rest kept


def flaky_model(request):
    """A model for these tests: ``ll`` at 32 B always fails; every 16 B row fails its first attempt."""
    if request.size_bytes == 32 and request.protocol.name == "ll":
        raise ValueError("injected failure")
    if request.size_bytes == 16:
        marker = Path(request.costs["marker_dir"]) / (
            f"{request.ranks}-{request.algorithm}-{request.protocol.name}-{request.launch}"
        )
        if not marker.exists():
            marker.touch()
            raise RuntimeError("transient failure")
    return models.SimResult.from_breakdown(
        request, {"sync": 1.0 + request.ranks / 8, "data": request.size_bytes / 3e3}, model="flaky"
    )


@pytest.fixture
def flaky_registered(monkeypatch):
    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))
    models.register_model("flaky", flaky_model)


FLAKY = """\
topology: hgx-h100
ranks: [2, 4]
sizes: [8, 16, 32, 64]
protocols: [ll, simple]
algorithms: [one-shot, ring]
model: flaky
costs: {{marker_dir: "{marker}"}}
"""


_FLAKY_FILES: dict[str, dict[str, str]] = {}


@pytest.mark.parametrize("where", ["local", "processes", "dask"])
def test_failed_rows_retried_reported_others_kept(where, flaky_registered, pool_executor, dask_executor, collsim_cli,
                                                  tmp_path):
    marker = tmp_path / "markers"
    marker.mkdir()
    path = tmp_path / "flaky.yaml"
    path.write_text(FLAKY.format(marker=marker.as_posix()))
    out_dir = tmp_path / "out"
    if where == "processes":  # the shared pool, through the Python API
        df = runner.run_scenario(path, out=out_dir, executor=pool_executor)
        assert len(df) == 28 and len(df.attrs["failed"]) == 4
        assert df.attrs["failed"][0] == {
            "topology": "hgx-h100", "ranks": 2, "algorithm": "one-shot", "protocol": "ll", "launch": "graph",
            "size_bytes": 32, "error": "ValueError: injected failure", "attempts": 2,
        }
    else:
        args = ["run", path, "--out", out_dir, "-q", "--executor", where]
        if where == "dask":
            args += ["--scheduler", dask_executor.scheduler]
        code, out, err = collsim_cli(*args)
        assert code == 1, err
        assert "Traceback" not in err
        # 2 ranks x 2 algorithms x 2 protocols x 4 sizes = 32 rows; ll at 32 B fails for good (4 rows).
        assert err.strip().splitlines()[-1].startswith("collsim: error: 4 of 32 configurations failed")
        assert "failed after 2 attempts: ll/one-shot/2 ranks/graph/32 B" in err
        assert "ValueError: injected failure" in err
    doc = json.loads((out_dir / "results.json").read_text())
    assert [(f["protocol"], f["algorithm"], f["ranks"], f["size_bytes"]) for f in doc["failed"]] == [
        ("ll", "one-shot", 2, 32), ("ll", "ring", 2, 32), ("ll", "one-shot", 4, 32), ("ll", "ring", 4, 32)
    ]
    assert {(f["error"], f["attempts"]) for f in doc["failed"]} == {("ValueError: injected failure", 2)}
    assert len(doc["rows"]) == 28
    # Every 16 B row failed once and succeeded on its retry.
    assert len(list(marker.iterdir())) == 8
    assert sum(1 for r in doc["rows"] if r["size_bytes"] == 16) == 8
    csv_text = (out_dir / "results.csv").read_text()
    assert len(csv_text.splitlines()) == 1 + 28 and "failed" not in csv_text
    # The same bytes from every executor (the paths aside).
    files = {n: (out_dir / n).read_text().replace(tmp_path.as_posix(), "T") for n in ("results.csv", "results.json")}
    files["results.json"] = without_run(files["results.json"])
    assert files == _FLAKY_FILES.setdefault("first executor", files)


# ---------------------------------------------------------------------------
# map_tasks, the generic entry point


_ITEMS = [4.0, -1.0, 9.0, 16.0, -4.0, 25.0] * 5


def _check_sqrt(outcomes: list[TaskOutcome]) -> None:
    assert [o.index for o in outcomes] == list(range(len(_ITEMS)))
    for o, x in zip(outcomes, _ITEMS):
        if x >= 0:
            assert o.ok and o.value == math.sqrt(x) and o.attempts == 1
        else:
            assert not o.ok and o.value is None
            assert o.error == "ValueError: math domain error" and o.attempts == 2
            assert "Traceback" in o.detail


@pytest.mark.parametrize("where", ["local", "processes", "dask"])
def test_map_tasks_order_retries_progress(where, pool_executor, dask_executor):
    executor = {"local": "local", "processes": pool_executor, "dask": dask_executor}[where]
    seen = []
    outcomes = map_tasks(math.sqrt, _ITEMS, executor=executor, progress=seen.append, chunksize=4)
    _check_sqrt(outcomes)
    assert sorted(o.index for o in seen) == list(range(len(_ITEMS)))  # each item reported once, when done


def slow_sqrt(x: float) -> float:
    time.sleep(0.02)
    return math.sqrt(x)


def test_auto_moves_a_long_batch_to_a_pool_with_the_same_outcomes(monkeypatch):
    from collsim import executors

    monkeypatch.setattr(executors, "AUTO_PROBE_S", 0.1)
    monkeypatch.setattr(executors, "AUTO_POOL_S", 0.2)  # 30 items of 20 ms: the rest is estimated at ~0.5 s
    seen = []
    with open_executor("auto", workers=2) as ex:
        outcomes = ex.map(slow_sqrt, _ITEMS, progress=seen.append, weights=[1.0] * len(_ITEMS))
        moved, label = ex.moved, ex.describe()
    _check_sqrt(outcomes)
    assert 0 < moved < len(_ITEMS) and label == f"auto: local, then {moved} on processes (2 workers)"
    assert sorted(o.index for o in seen) == list(range(len(_ITEMS)))


def test_auto_keeps_short_batches_and_one_cpu_here(monkeypatch):
    from collsim import executors

    with open_executor("auto", workers=2) as ex:  # microseconds in all: never worth a pool
        _check_sqrt(ex.map(math.sqrt, _ITEMS))
        assert ex.moved == 0 and ex.describe() == "auto: local"
    monkeypatch.setattr(executors, "AUTO_PROBE_S", 0.0)
    monkeypatch.setattr(executors, "AUTO_POOL_S", 0.0)
    with open_executor("auto", workers=1) as ex:  # one CPU: a pool could only be slower
        _check_sqrt(ex.map(slow_sqrt, _ITEMS))
        assert ex.moved == 0


def transient(path_text: str) -> str:
    """Fails the first time it is called for a path, then succeeds (state kept in the file system)."""
    path = Path(path_text)
    if not path.exists():
        path.touch()
        raise OSError(f"first call for {path.name}")
    return path.name


@pytest.mark.parametrize("where", ["local", "processes", "dask"])
def test_map_tasks_transient_failure_recovers(where, pool_executor, dask_executor, tmp_path):
    executor = {"local": "local", "processes": pool_executor, "dask": dask_executor}[where]
    items = [str(tmp_path / f"t{i}") for i in range(6)]
    outcomes = map_tasks(transient, items, executor=executor)
    assert [o.value for o in outcomes] == [f"t{i}" for i in range(6)]
    assert {o.attempts for o in outcomes} == {2}
    outcomes = map_tasks(transient, items, executor=executor, retries=0)
    assert all(o.ok and o.attempts == 1 for o in outcomes)


def test_a_chunk_that_will_not_pickle_loses_only_its_bad_item(pool_executor):
    items = [4.0, lambda: None, 9.0]
    outcomes = map_tasks(math.sqrt, items, executor=pool_executor, chunksize=3)
    assert [o.value for o in outcomes[::2]] == [2.0, 3.0]
    assert not outcomes[1].ok and outcomes[1].attempts == 2
    assert "pickle" in outcomes[1].error.lower()


def test_map_tasks_other_executor_objects_and_progress_bar():
    from concurrent.futures import ThreadPoolExecutor

    class MapOnly:  # any object with map(fn, iterable)
        def map(self, fn, iterable):
            return map(fn, iterable)

    with ThreadPoolExecutor(2) as threads:
        for target in (threads, MapOnly()):
            _check_sqrt(map_tasks(math.sqrt, _ITEMS, executor=target, progress="rows"))  # bar off: not a terminal
        assert threads.submit(abs, -1).result() == 1  # a caller's executor is left open


def test_open_executor_refuses_bad_combinations():
    cases = [
        (dict(executor="threads"), "--executor", "valid: auto, local, processes, dask"),
        (dict(executor="processes", scheduler="tcp://127.0.0.1:8786"), "--scheduler", "needs --executor dask"),
        (dict(executor="local", workers=4), "--workers", "one task at a time"),
        (dict(executor="dask", workers=2, scheduler="tcp://127.0.0.1:8786"), "--workers", "brings its own"),
        (dict(executor="processes", workers=0), "--workers", "positive"),
    ]
    for kwargs, fld, needle in cases:
        with pytest.raises(InputError) as err:
            open_executor(**kwargs)
        assert err.value.field == fld and needle in str(err.value), kwargs


def test_unreachable_scheduler_is_one_line(collsim_cli, write_scenario, monkeypatch):
    from collsim import executors

    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1.0)
    path = write_scenario("topology: hgx-h100\nranks: 2\nsizes: 8\nmodel: analytic\n")
    code, out, err = collsim_cli("run", path, "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collsim: error: --scheduler: cannot connect to the Dask scheduler")


def test_dask_executor_reports_where(dask_executor):
    assert dask_executor.workers == 2
    assert dask_executor.scheduler.startswith("tcp://127.0.0.1:")
    assert dask_executor.describe() == "dask local cluster (2 workers)"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=300),
       st.integers(min_value=1, max_value=8), st.integers(min_value=1, max_value=64))
def test_weighted_chunks_cover_every_item_once_heaviest_first(weights, workers, size):
    chunks = _weighted_chunks(weights, workers, size)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(weights)))
    assert all(1 <= len(chunk) <= size and chunk == list(range(chunk[0], chunk[-1] + 1)) for chunk in chunks)
    loads = [sum(weights[i] for i in chunk) for chunk in chunks]
    assert loads == sorted(loads, reverse=True)
    budget = sum(weights) / (8 * workers)
    assert all(len(chunk) == 1 or load <= budget * (1 + 1e-9) for chunk, load in zip(chunks, loads))


def test_weights_change_the_schedule_not_the_results(pool_executor):
    items = [float(i) for i in range(40)]
    serial = [o.value for o in map_tasks(math.sqrt, items)]
    weighted = map_tasks(math.sqrt, items, pool_executor, weights=[1.0] * 30 + [50.0] * 10)
    assert [o.value for o in weighted] == serial and [o.index for o in weighted] == list(range(40))
    with pytest.raises(ValueError, match="one non-negative number per item"):
        map_tasks(math.sqrt, items, pool_executor, weights=[1.0])
