"""Where tuning inputs come from: a scenario run, a results file, or measurements.

The one module of :mod:`collsim.tune` that reads files and runs scenarios;
everything else takes :class:`~collsim.tune.timings.Timings`. Results are
read with the results loader (``load_results``: the frame of results.csv or
results.json and its metadata) and the results column list, and nothing
else of the results module.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.errors import CollsimError, InputError
from collsim.tune.timings import Timings, from_measurements, from_results

__all__ = [
    "SCENARIO_SUFFIXES",
    "RESULTS_SUFFIXES",
    "Simulated",
    "read_results",
    "simulated_timings",
    "measured_timings",
    "check_nccl_runnable",
    "write_scenario_report",
]

SCENARIO_SUFFIXES = (".yaml", ".yml")
RESULTS_SUFFIXES = (".csv", ".json")


def read_results(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(frame, meta)`` of a results.csv or results.json (the report's loader: same checks, same errors)."""
    from collsim.report.data import load_results

    return load_results(path)


def _looks_like_results(path: Path) -> bool:
    """Whether a CSV's header is results.csv's."""
    from collsim.results import COLUMNS

    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            header = handle.readline().strip().split(",")
    except OSError:
        return False
    return header[: len(COLUMNS)] == list(COLUMNS)[: len(header)] and "latency_us" in header


@dataclass
class Simulated:
    """Simulated timings, with the results they came from and the scenario that was run (if one was)."""

    timings: Timings
    frame: pd.DataFrame
    meta: dict[str, Any]
    out_dir: Path
    scenario: Any = None


def check_nccl_runnable(scenario: Any) -> None:
    """Refuse, before it runs, a scenario none of whose combinations NCCL can run."""
    from collsim.tune.nccl import NCCL_EQUIVALENTS, missing_nccl_message

    pairs = [(a, p) for a in scenario.algorithms for p in scenario.protocols]
    if not set(pairs) & set(NCCL_EQUIVALENTS):
        raise InputError(missing_nccl_message(pairs, "simulated"), file=str(scenario.source or scenario.name))


def simulated_timings(
    path: str | Path,
    *,
    model: str | None = None,
    launch: str | None = None,
    nodes: int = 1,
    progress: bool = False,
    need_nccl: bool = False,
) -> Simulated:
    """Run a scenario YAML (writing its results like ``collsim run``, without the report) or read a results file.

    ``model`` runs the scenario with another model; for a results file it
    must be the file's. ``need_nccl`` refuses a scenario without
    NCCL-runnable combinations before it runs.
    """
    p = Path(path)
    if p.suffix.lower() in SCENARIO_SUFFIXES:
        from collsim import run_scenario
        from collsim.models import get_model
        from collsim.scenario import load_scenario

        if model is not None:
            get_model(model)  # an unknown --model before the file is read
        scenario = load_scenario(p, model=model)
        if scenario.sweep:
            raise InputError(
                "a scenario with a sweep writes one result set per point: tune one point's results.csv "
                f"({scenario.output}/POINT/results.csv)", file=str(p), field="sweep",
            )
        if need_nccl:
            check_nccl_runnable(scenario)
        df = run_scenario(scenario, model=model, progress=progress, report=False)
        failed = df.attrs.get("failed") or []
        out_dir = Path(df.attrs["out_dir"])
        if failed:
            raise CollsimError(
                f"{len(failed)} configurations failed (listed under 'failed' in {out_dir / 'results.json'}): "
                "a tuning decision would miss them; fix them and run again"
            )
        frame, meta = read_results(out_dir / "results.json")
        timings = from_results(frame, meta, launch=launch, nodes=nodes, source=str(p))
        return Simulated(timings, frame, meta, out_dir, scenario)
    if p.suffix.lower() not in RESULTS_SUFFIXES:
        raise InputError(
            f"not a scenario or results file ({p.suffix or 'no suffix'})", file=str(p),
            choices=SCENARIO_SUFFIXES + RESULTS_SUFFIXES,
        )
    frame, meta = read_results(p)
    if model is not None:
        from collsim.models import get_model

        name, _ = get_model(model)
        held = sorted(set(frame["model"].astype(str)) - {""})
        if held and held != [name]:
            raise InputError(
                f"{p} holds results of model {', '.join(held)}, not {name}: run the scenario with --model {name}",
                field="--model",
            )
    return Simulated(from_results(frame, meta, launch=launch, nodes=nodes), frame, meta, p.parent)


def measured_timings(
    path: str | Path, *, launch: str | None = None, nodes: int = 1, field: str = "--measured"
) -> tuple[Timings, list[str]]:
    """The timings of a measurement file (any input ``collsim ingest`` reads) and its reader's warnings."""
    from collsim.calibrate.ingest import IngestWarning, parse_log

    p = Path(path)
    if p.suffix.lower() in SCENARIO_SUFFIXES or (p.suffix.lower() == ".csv" and p.is_file() and _looks_like_results(p)):
        raise InputError("is a scenario or results file, not measurements (collsim ingest output or nccl-tests logs)",
                         file=str(p), field=field)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        log = parse_log(p)
    return from_measurements(log.rows, str(p), launch=launch, nodes=nodes), list(log.warnings)


def write_scenario_report(sim: Simulated, tolerance_pct: float) -> Path:
    """Write report.html beside a scenario's results, as ``collsim run`` does, with ``tolerance_pct`` for ties."""
    from collsim.report import write_report
    from collsim.report.timelines import timelines_for

    timelines = timelines_for(sim.frame, sim.meta) if sim.timings.model == "des" else None
    return write_report(sim.frame, sim.meta, sim.out_dir / "report.html", timeline=timelines, tolerance_pct=tolerance_pct)
