"""Where tuning inputs come from: a results file, or measurements.

The one module of :mod:`collsim.tune` that reads files; everything else
takes :class:`~collsim.tune.timings.Timings`. Results are read with the
results loader (:func:`collsim.resultsfile.load_results`: the frame of
results.csv or results.json and its metadata, :func:`read_results`) and the
results column list; measurements with
:func:`collsim.calibrate.ingest.parse_log`. Running a scenario is the
caller's (``collsim tune`` runs it, then reads its results.json here).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.errors import InputError
from collsim.resultsfile import COLUMNS, load_results
from collsim.tune.timings import Timings, from_measurements, from_results

__all__ = [
    "SCENARIO_SUFFIXES",
    "RESULTS_SUFFIXES",
    "Simulated",
    "read_results",
    "simulated_timings",
    "measured_timings",
]

SCENARIO_SUFFIXES = (".yaml", ".yml")
RESULTS_SUFFIXES = (".csv", ".json")


def read_results(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(frame, meta)`` of a results.csv or results.json (the loader the report uses: same checks, same errors)."""
    return load_results(path)


def _looks_like_results(path: Path) -> bool:
    """Whether a CSV's header is results.csv's."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            header = handle.readline().strip().split(",")
    except OSError:
        return False
    return header[: len(COLUMNS)] == list(COLUMNS)[: len(header)] and "latency_us" in header


@dataclass
class Simulated:
    """Simulated timings, with the results they came from and the directory those are in."""

    timings: Timings
    frame: pd.DataFrame
    meta: dict[str, Any]
    out_dir: Path


def simulated_timings(
    path: str | Path,
    *,
    model: str | None = None,
    launch: str | None = None,
    nodes: int = 1,
    source: str | None = None,
) -> Simulated:
    """The timings of a results.csv or results.json.

    ``model``, when given, must be the model of the file's rows. ``source``
    names the timings in notes and errors (default: the file).
    """
    p = Path(path)
    if p.suffix.lower() not in RESULTS_SUFFIXES:
        raise InputError(
            f"not a scenario or results file ({p.suffix or 'no suffix'})", file=str(p),
            choices=SCENARIO_SUFFIXES + RESULTS_SUFFIXES,
        )
    frame, meta = read_results(p)
    if model is not None:
        from collsim.models import get_model  # lazy: start-up

        name, _ = get_model(model)
        held = sorted(set(frame["model"].astype(str)) - {""})
        if held and held != [name]:
            raise InputError(
                f"{p} holds results of model {', '.join(held)}, not {name}: run the scenario with --model {name}",
                field="--model",
            )
    timings = from_results(frame, meta, launch=launch, nodes=nodes, source=source)
    return Simulated(timings, frame, meta, p.parent)


def measured_timings(
    path: str | Path, *, launch: str | None = None, nodes: int = 1, field: str = "--measured"
) -> tuple[Timings, list[str]]:
    """The timings of a measurement file (any input ``collsim ingest`` reads) and its reader's warnings."""
    from collsim.calibrate.ingest import IngestWarning, parse_log  # lazy: start-up

    p = Path(path)
    if p.suffix.lower() in SCENARIO_SUFFIXES or (p.suffix.lower() == ".csv" and p.is_file() and _looks_like_results(p)):
        raise InputError("is a scenario or results file, not measurements (collsim ingest output or nccl-tests logs)",
                         file=str(p), field=field)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        log = parse_log(p)
    return from_measurements(log.rows, str(p), launch=launch, nodes=nodes), list(log.warnings)

