"""Scenario runs: load a scenario, run its rows, write its results and report.

A run writes ``results.csv`` and ``results.json`` (:mod:`collsim.resultsfile`)
under ``reports/<scenario>/`` (or ``--out``), and ``report.html`` beside them
(:mod:`collsim.report`). Where they go is checked before any row runs
(:func:`collsim.userpaths.check_output_dir`), and they are written together
at the end, each to a temporary name first: nothing is written unless every
file can be, and an interrupted run leaves nothing.

A row whose model raises is run once more; if it fails again it is left out
of ``results.csv`` and listed under ``failed`` in ``results.json`` with its
configuration and the error, and every other row is kept.

A scenario with ``sweep:`` runs every row once per combination of the swept
cost parameters (combinations outermost in row order, last parameter
fastest) and writes one ordinary result set per combination, in a
subdirectory named after it (``poll_period_us=0.05,remote_write_us=0.4/``),
plus ``sweep.csv`` listing the combinations, their directories and counts.
Each subdirectory's files are exactly what a run with those ``costs:`` would
write (``results.json`` also says ``sweep_point``), so every tool that reads
results reads them. In Python, :func:`run_scenario` returns all combinations
in one DataFrame with a column per swept parameter (after ``op``).

This module is the top of the run stack: it uses :mod:`collsim.scenario`,
:mod:`collsim.runner.rows` and :mod:`collsim.report`, and none of them uses it.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collsim.errors import CollsimError, InputError
from collsim.executors import open_executor, progress_bar
from collsim.models import performance_model
from collsim.report import build_report
from collsim.report.timelines import timelines_for
from collsim.resultsfile import (IDENTITY_COLUMNS, Failed, Skipped, format_csv, format_json, format_sweep,
                                 records_frame, result_columns, run_section, sweep_directories, write_results)
from collsim.runner.rows import expand_rows, run_rows
from collsim.scenario import load_scenario
from collsim.scenario.costs import with_profile
from collsim.scenario.loader import check_costs
from collsim.userpaths import check_output_dir

__all__ = ["RunOutput", "execute", "run_scenario", "recorded_verdicts"]


@dataclass
class RunOutput:
    """What :func:`run_scenario` produced (also available as a DataFrame)."""

    scenario: Any
    model: str
    records: list[dict[str, Any]]
    skipped: list[Skipped]
    out_dir: Path | None = None
    failed: list[Failed] = field(default_factory=list)
    executor: str = "local"
    #: ``(point, subdirectory)`` of each sweep combination (empty without a sweep).
    points: list[tuple[tuple[tuple[str, Any], ...], str]] = field(default_factory=list)
    #: the HTML report written beside the results, if any
    report: Path | None = None
    #: rows taken from the row cache (``reuse``), and rows run
    reused: int = 0
    ran: int = 0

    @property
    def columns(self) -> tuple[str, ...]:
        return result_columns(getattr(self.scenario, "sweep_keys", ()))

    def frame(self) -> Any:
        return records_frame(self.records, self.columns)


@contextmanager
def rich_progress(total: int, description: str, enabled: bool = True) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A rich progress bar on stderr; yields the ``on_result`` callback for :func:`run_rows`."""
    if not enabled:
        yield lambda record: None
        return
    with progress_bar(total, description) as advance:
        yield advance


def execute(
    source: Any,
    out: str | Path | None = None,
    model: str | None = None,
    progress: bool = False,
    write: bool = True,
    executor: Any = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    report: bool = True,
    profile: str | Path | None = None,
    reuse: bool = False,
    out_field: str = "out",
    tolerance_pct: float | None = None,
) -> RunOutput:
    """Load, expand, run and (optionally) write a scenario; the CLI and :func:`run_scenario` share it.

    With ``write`` and ``report``, ``report.html`` is written beside the
    results (not for sweeps: each sweep point is an ordinary result set that
    ``collsim report`` can render). ``profile`` is a calibrated cost profile
    (``collsim calibrate``) applied under the scenario's own ``costs:``, in
    place of the file's ``profile:`` key.

    ``executor``, ``workers`` and ``scheduler`` say where rows run (see
    :func:`collsim.executors.open_executor`); the results do not depend on it.
    ``reuse`` takes unchanged rows from earlier runs (see :func:`run_rows`).
    ``out_field`` names ``out`` in errors (the CLI's ``--out``); ``tolerance_pct`` is the report's tie
    tolerance (default: :data:`collsim.tune.DEFAULT_TOLERANCE_PCT`).
    """
    run = run_section()
    if model is not None:
        performance_model(model)  # an unknown --model is reported before the file is read
    # A file's own profile: key is replaced by --profile; a Scenario already loaded gets it underneath.
    scenario = load_scenario(source, model=model, profile=profile)
    model_name = performance_model(model if model is not None else scenario.model).name
    if profile is not None and scenario is source:
        scenario = with_profile(scenario, profile, model_name)
    if model is not None or profile is not None:
        check_costs(scenario, model_name)  # a Scenario passed in was checked for another model
    out_dir = Path(out) if out is not None else scenario.output
    if write:  # before any row runs: a bad --out (or output:) must not cost the whole run
        if out is not None:
            check_output_dir(out_dir, field=out_field)
        else:
            key, line = scenario.output_from or ("output", None)
            check_output_dir(out_dir, field=key, file=scenario.source, line=line)
    rows, skipped = expand_rows(scenario, model_name)
    if not rows:
        reasons = sorted({s.reason for s in skipped})
        raise InputError(
            "nothing to run: every combination is unsupported (" + "; ".join(reasons) + ")",
            file=scenario.source,
        )
    where = open_executor(executor, workers=workers, scheduler=scheduler)
    counts: dict[str, int] = {}
    try:
        with rich_progress(len(rows), f"{scenario.name} ({model_name})", enabled=progress) as on_result:
            records = run_rows(rows, executor=where, on_result=on_result, reuse=reuse, counts=counts)
        label = where.describe()
    finally:
        if where is not executor:  # close only what was opened here
            where.close()
    broken = next((r["input_error"] for r in records if r.get("input_error")), None)
    if broken is not None:  # a protocol's code failed to build a program: the run's input is wrong
        raise InputError(broken)
    failed = [
        Failed(tuple((k, r[k]) for k in IDENTITY_COLUMNS + scenario.sweep_keys), r["error"], r["attempts"])
        for r in records
        if "error" in r
    ]
    unsupported = [r for r in records if r["latency_us"] is None and "error" not in r]
    records = [r for r in records if r["latency_us"] is not None]
    static = list(skipped)
    for r in unsupported:
        skipped.append(Skipped(r["ranks"], r["algorithm"], r["protocol"], r["note"].removeprefix("skipped: ")))
    result = RunOutput(scenario, model_name, records, skipped, failed=failed, executor=label,
                       reused=counts.get("reused", 0), ran=counts.get("run", len(rows)))
    points = scenario.sweep_points() if scenario.sweep else []
    directories = sweep_directories(points)
    result.points = list(zip(points, directories))
    if write:
        if points:
            files = format_sweep(scenario, model_name, records, static, unsupported, failed, points, directories,
                                 run=run)
        else:
            files = {
                "results.csv": format_csv(records),
                "results.json": format_json(scenario, model_name, records, skipped, failed, run=run),
            }
            if report and records:
                files["report.html"] = _report_page(files["results.json"], records, model_name, tolerance_pct)
        write_results(out_dir, files)
        result.out_dir = out_dir
        if "report.html" in files:
            result.report = out_dir / "report.html"
    return result


def _report_page(json_text: str, records: Sequence[Mapping[str, Any]], model_name: str,
                 tolerance_pct: float | None = None) -> str:
    """report.html of the results, with a few simulated timelines when the model makes them and the verdicts
    on record for its protocols."""
    meta = json.loads(json_text)
    frame = records_frame(records)
    timelines = timelines_for(frame, meta) if model_name == "des" else None
    pairs = list(dict.fromkeys(zip(frame["protocol"], frame["algorithm"])))
    extra = {} if tolerance_pct is None else {"tolerance_pct": tolerance_pct}
    return build_report(frame, meta, timeline=timelines, verification=recorded_verdicts(pairs), **extra)


def recorded_verdicts(pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The verifier's verdict on record (its cache; nothing is solved) for each ``(protocol, algorithm)``, as
    the report tabulates them; a pair without one is ``not verified``, saying how to verify it."""
    from collsim.emit.gate import MODEL  # lazy: start-up (the verifier and z3 load only for a report)
    from collsim.verify.verifier import verdict_for  # lazy: start-up

    out: list[dict[str, Any]] = []
    for protocol, algorithm in pairs:
        try:
            result = verdict_for(protocol, algorithm, model=MODEL, solve=False)
        except CollsimError:  # a protocol the registry cannot load here, a pair without a program
            result = None
        if result is None:
            out.append({"protocol": protocol, "algorithm": algorithm, "verdict": "not verified", "model": MODEL,
                        "detail": f"no verdict on record here: collsim verify {protocol} --algorithm {algorithm}"
                                  " (or verify --all)"})
        else:
            out.append(result.to_json())
    return out


def run_scenario(
    path_or_model: Any,
    out: str | Path | None = None,
    model: str | None = None,
    progress: bool = False,
    write: bool = True,
    executor: Any = None,
    workers: int | None = None,
    scheduler: str | None = None,
    report: bool = True,
    profile: str | Path | None = None,
    reuse: bool = False,
) -> Any:
    """Run a scenario and return its rows as a :class:`pandas.DataFrame`.

    Parameters
    ----------
    path_or_model : path, mapping or Scenario
        A scenario file, its content as a mapping, or a loaded scenario.
    out : path, optional
        Output directory (default: the scenario's ``output``, ``reports/<name>``).
    model : str, optional
        Model to use instead of the scenario's.
    progress : bool
        Show a progress bar on stderr.
    write : bool
        Write results.csv and results.json (default ``True``).
    executor : str or object, optional
        Where rows run: ``"local"`` (default), ``"processes"``, ``"dask"``, or
        an executor object (see :func:`collsim.executors.open_executor`).
    workers : int, optional
        Worker processes (``processes``; ``dask`` without ``scheduler``).
    scheduler : str, optional
        Address of a running Dask scheduler, ``tcp://HOST:8786``.
    report : bool
        Also write ``report.html`` beside the results (default ``True``).
    profile : path, optional
        A calibrated cost profile applied under the scenario's ``costs:``.
    reuse : bool
        Take rows whose inputs are unchanged since an earlier run from the
        row cache (:mod:`collsim.rowcache`) instead of running them again.

    Returns
    -------
    pandas.DataFrame
        One row per configuration, columns :data:`COLUMNS` (plus one per swept
        parameter, after ``op``, for every sweep point at once). ``df.attrs``
        holds ``scenario``, ``model``, ``skipped``, ``failed`` (rows whose
        model kept raising), ``out_dir`` and, with a sweep, ``sweep_points``
        (``[{"point": {...}, "directory": ...}]``).
    """
    result = execute(path_or_model, out=out, model=model, progress=progress, write=write,
                     executor=executor, workers=workers, scheduler=scheduler, report=report, profile=profile,
                     reuse=reuse)
    frame = result.frame()
    frame.attrs["scenario"] = result.scenario.name
    frame.attrs["model"] = result.model
    frame.attrs["skipped"] = [s.to_dict() for s in result.skipped]
    frame.attrs["failed"] = [f.to_dict() for f in result.failed]
    if result.points:
        frame.attrs["sweep_points"] = [{"point": dict(p), "directory": d} for p, d in result.points]
    frame.attrs["out_dir"] = str(result.out_dir) if result.out_dir is not None else None
    return frame
