"""Wall time of whole scenarios, serially and on a process pool (optionally a Dask cluster).

For each scenario and executor: the time to start the workers (and have
each import collsim and build the topology, by costing one row), the time
to cost every row, and simulations per second.
The records of every executor are checked against the serial ones (they
must be identical).

    python benchmarks/scale.py                                 # 8gpu and nvl72, serial and 2 processes
    python benchmarks/scale.py --model analytic                # the closed-form model
    python benchmarks/scale.py --max-rows 128                  # an evenly spaced subset of each scenario's rows
    python benchmarks/scale.py --executors local,processes,dask --workers 2
    python benchmarks/scale.py --scheduler tcp://HOST:8786     # dask on a running cluster
    python benchmarks/scale.py --verify                        # verify --all, serial and 2 processes
    python benchmarks/scale.py --reuse ll128                   # run --reuse: cold, warm, ll128 edited

The figures go to docs/PERFORMANCE.md ("Sweeps and executors").
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

from reference import reference_loop_s  # benchmarks/, the script's own directory

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SCENARIOS = ("scenarios/8gpu.yaml", "scenarios/nvl72.yaml")


def _warm(row) -> int:
    """Cost one row: a worker imports what rows need and builds the topology (counted in 'start')."""
    from collsim.results import run_row

    run_row(row)
    return os.getpid()


def _subset(rows: list, limit: int | None) -> list:
    if not limit or limit >= len(rows):
        return rows
    step = len(rows) / limit
    return [rows[math.floor(i * step)] for i in range(limit)]


def _rows(scenario_path: str, model: str | None, limit: int | None) -> tuple:
    """``(scenario, model name, rows)`` of a scenario file (an evenly spaced ``limit`` of its rows)."""
    from collsim.models import get_model
    from collsim.results import expand_rows
    from collsim.scenario import load_scenario

    scenario = load_scenario(ROOT / scenario_path if not Path(scenario_path).exists() else scenario_path, model=model)
    model_name, _ = get_model(model if model is not None else scenario.model)
    rows, _ = expand_rows(scenario, model_name)
    return scenario, model_name, _subset(rows, limit)


def measure(scenario_path: str, model: str | None, executor: str, workers: int, scheduler: str | None,
            limit: int | None) -> dict:
    from collsim.executors import map_tasks, open_executor
    from collsim.results import run_rows

    scenario, model_name, rows = _rows(scenario_path, model, limit)
    t0 = time.perf_counter()
    if executor == "local":
        ex = open_executor("local")
    elif executor == "processes":
        ex = open_executor("processes", workers=workers)
    else:
        ex = open_executor("dask", scheduler=scheduler, workers=None if scheduler else workers)
    try:
        map_tasks(_warm, [rows[0]] * (ex.workers * 2), executor=ex, chunksize=1)
        t1 = time.perf_counter()
        records = run_rows(rows, executor=ex)
        t2 = time.perf_counter()
        label = ex.describe()
    finally:
        ex.close()
    failed = sum(1 for r in records if "error" in r)
    return {
        "scenario": scenario.name,
        "model": model_name,
        "executor": label,
        "rows": len(rows),
        "failed": failed,
        "start_s": t1 - t0,
        "run_s": t2 - t1,
        "sims_per_s": len(rows) / (t2 - t1) if t2 > t1 else float("inf"),
        "records": records,
    }


def measure_reuse(scenario_path: str, model: str | None, executor: str, workers: int, scheduler: str | None,
                  limit: int | None, edited: str) -> list[tuple[str, float, dict, bool]]:
    """``run --reuse`` in a fresh row cache: the cold run that fills it, a warm run, and a run after
    ``edited``'s rows are forgotten (what editing that protocol's source does to their keys).

    Returns ``(label, wall s, counts, records same as the cold run)`` per run.
    """
    import sqlite3
    import tempfile

    from collsim import rowcache
    from collsim.executors import open_executor
    from collsim.results import run_rows

    _, _, rows = _rows(scenario_path, model, limit)
    saved = os.environ.get("COLLSIM_CACHE_DIR")
    out = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["COLLSIM_CACHE_DIR"] = cache
        ex = open_executor(executor, workers=None if executor == "local" else workers, scheduler=scheduler)
        try:
            cold = None
            for label in ("cold (fills the cache)", "warm (every row reused)", f"{edited} edited"):
                if label.endswith("edited"):
                    keys = [(rowcache.row_key(r),) for r in rows if r.protocol.name == edited]
                    with sqlite3.connect(str(rowcache.cache_path())) as db:
                        db.executemany("DELETE FROM rows WHERE key = ?", keys)
                counts: dict = {}
                t0 = time.perf_counter()
                records = run_rows(rows, executor=ex, reuse=True, counts=counts)
                wall = time.perf_counter() - t0
                cold = cold or records
                out.append((label, wall, counts, records == cold))
        finally:
            ex.close()
            if saved is None:
                os.environ.pop("COLLSIM_CACHE_DIR", None)
            else:
                os.environ["COLLSIM_CACHE_DIR"] = saved
    return out


def measure_verify(executor: str, workers: int, scheduler: str | None) -> dict:
    """``verify --all`` without the verdict cache on one executor: wall time and the verdicts' summary."""
    from collsim.verify.verifier import verify_all

    t0 = time.perf_counter()
    summary = verify_all(use_cache=False, executor=executor, workers=None if executor == "local" else workers,
                         scheduler=scheduler)
    wall = time.perf_counter() - t0
    verdicts = [(r.protocol, r.algorithm, {p: v.status for p, v in r.properties.items()})
                for r in summary.protocols + summary.mutants]
    return {"wall_s": wall, "ok": summary.ok, "runs": len(verdicts), "verdicts": verdicts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", default=list(DEFAULT_SCENARIOS))
    parser.add_argument("--model", default=None, help="model to run (default: the default model)")
    parser.add_argument("--executors", default="local,processes", help="comma-separated: local, processes, dask")
    parser.add_argument("--workers", type=int, default=2, help="processes / local Dask workers (default 2)")
    parser.add_argument("--scheduler", default=None, help="a running Dask scheduler for the dask executor")
    parser.add_argument("--max-rows", type=int, default=None, help="cost an evenly spaced subset of this many rows")
    parser.add_argument("--verify", action="store_true",
                        help="time `verify --all` (no verdict cache) on each executor instead of scenarios")
    parser.add_argument("--reuse", metavar="PROTOCOL", default=None,
                        help="time `run --reuse` on each executor: cold, warm, and with PROTOCOL's rows forgotten")
    args = parser.parse_args(argv)

    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    print(f"# {os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}, "
          f"reference loop {reference_loop_s():.2f} s", flush=True)
    if args.verify:
        serial = None
        for executor in executors:
            m = measure_verify(executor, args.workers, args.scheduler)
            serial = serial or m
            same = m["verdicts"] == serial["verdicts"]
            print(f"verify --all  {executor:<10} {m['runs']:>3} runs  {m['wall_s']:>7.1f} s wall  "
                  f"{serial['wall_s'] / m['wall_s']:>5.2f}x  all as expected: {'yes' if m['ok'] else 'NO'}  "
                  f"same verdicts: {'yes' if same else 'NO'}", flush=True)
            if not (same and m["ok"]):
                return 1
        print(f"# reference loop again: {reference_loop_s():.2f} s")
        return 0
    if args.reuse:
        status = 0
        for path in args.scenarios:
            for executor in executors:
                for label, wall, counts, same in measure_reuse(path, args.model, executor, args.workers,
                                                               args.scheduler, args.max_rows, args.reuse):
                    status |= 0 if same else 1
                    print(f"{Path(path).stem:<10} {executor:<10} {label:<26} {wall:>8.2f} s  reused "
                          f"{counts['reused']:>5}  run {counts['run']:>5}  same: {'yes' if same else 'NO'}",
                          flush=True)
        print(f"# reference loop again: {reference_loop_s():.2f} s")
        return status
    header = f"{'scenario':<10} {'model':<9} {'executor':<30} {'rows':>6} {'failed':>6} {'start s':>8} " \
             f"{'run s':>8} {'sims/s':>9} {'speedup':>8} {'same':>5}"
    print(header)
    print("-" * len(header))
    status = 0
    for path in args.scenarios:
        serial = None
        for executor in executors:
            m = measure(path, args.model, executor, args.workers, args.scheduler, args.max_rows)
            if serial is None:
                serial = m
            same = m["records"] == serial["records"]
            status |= 0 if same else 1
            speedup = serial["run_s"] / m["run_s"] if m["run_s"] else float("inf")
            print(f"{m['scenario']:<10} {m['model']:<9} {m['executor']:<30} {m['rows']:>6} {m['failed']:>6} "
                  f"{m['start_s']:>8.2f} {m['run_s']:>8.2f} {m['sims_per_s']:>9.1f} {speedup:>7.2f}x "
                  f"{'yes' if same else 'NO':>5}", flush=True)
    print(f"# reference loop again: {reference_loop_s():.2f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
