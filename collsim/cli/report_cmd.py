"""``collsim report``: rebuild the HTML report of a results file.

:func:`open_report` is shared with ``collsim run --open``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer

from collsim.cli.app import app
from collsim.errors import InputError
from collsim.userpaths import check_report_path, read_text

__all__ = ["report", "open_report", "open_or_say", "default_report_path"]


def default_report_path(results: str | Path) -> Path:
    """Where a report of ``results`` goes by default: ``report.html`` beside it."""
    return Path(results).with_name("report.html")


def open_report(path: str | Path) -> bool:
    """Open a written report in the user's web browser; return whether one was started.

    Never raises: a machine without a browser just prints the path (the
    caller does that) and carries on.
    """
    import webbrowser

    try:
        return bool(webbrowser.open(Path(path).resolve().as_uri()))
    except Exception:  # noqa: BLE001 - opening is a convenience only
        return False


def open_or_say(path: str | Path) -> None:
    """Open ``path`` in a web browser, or say on stderr that none started and where the report is."""
    if not open_report(path):
        typer.echo(f"collsim: could not start a web browser (none found, or no display); the report is "
                   f"{Path(path).resolve().as_uri()}", err=True)


def _load_verification(path: Path) -> Any:
    from collsim.report.data import normalize_verification  # lazy: start-up

    text = read_text(path, what="verdicts file (JSON)", field="--verification")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg}", file=str(path), line=err.lineno,
                         field="--verification") from None
    if isinstance(doc, dict) and "rows" in doc and "columns" in doc:
        raise InputError("is a results file ('collsim run' wrote it), not verdicts: give the output of "
                         "'collsim verify --all --json' (or 'collsim verify PROTOCOL --json')", file=str(path),
                         field="--verification")
    try:
        normalize_verification(doc, str(path))
    except InputError as err:
        raise InputError(err.message, file=str(path), line=err.line, field="--verification",
                         choices=err.choices) from None
    return doc


def _load_measured(paths: List[Path]) -> Any:
    import warnings

    import pandas as pd

    from collsim.calibrate import read_measurements  # lazy: start-up

    frames = []
    for p in paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = read_measurements(p)
        if len(table):
            table = table.copy()
            if "source" in table.columns:
                table["label"] = table["source"].astype(str).map(lambda s: Path(s).name if s else p.name)
            else:
                table["label"] = p.name
            frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else None


@app.command("report")
def report(
    results: Path = typer.Argument(..., help="results.csv or results.json written by 'collsim run'.", show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Report file (default: report.html beside RESULTS)."),
    open_: bool = typer.Option(False, "--open", help="Open the report in a web browser when written."),
    timeline: Optional[List[str]] = typer.Option(
        None, "--timeline", "-t",
        help="Simulate a per-rank timeline: 'auto' (every protocol/algorithm at the largest rank count, ~4 KiB) "
             "or PROTOCOL/ALGORITHM/RANKS/SIZE or PROTOCOL/ALGORITHM/RANKS/SIZE/LAUNCH, e.g. ll/one-shot/8/4KiB. Repeatable.",
    ),
    verification: Optional[Path] = typer.Option(None, "--verification", help="Verdicts JSON to tabulate."),
    measured: Optional[List[Path]] = typer.Option(
        None, "--measured", help="Measurements to overlay (nccl-tests output or a collsim measurement CSV). Repeatable."
    ),
    tolerance: float = typer.Option(1.0, "--tolerance", help="Choices within this percentage of the fastest tie in the "
                                                             "winner map and the embedded tuner config and decision table."),
) -> None:
    """Build the self-contained HTML report of a results file.

    The report (one file, no network needed) shows latency against size and
    rank count, the fastest protocol per size, where the time goes, bus
    bandwidth against the link limit and the full sortable table.
    """
    from collsim.report import load_results, timelines_for, write_report  # lazy: start-up
    from collsim.tune import check_tolerance  # lazy: start-up

    tolerance_pct = check_tolerance(tolerance)
    target = out if out is not None else default_report_path(results)
    check_report_path(target, field="--out" if out is not None else "RESULTS")
    frame, meta = load_results(results)
    timelines = timelines_for(frame, meta, timeline) if timeline else None
    if verification is not None:
        verdicts = _load_verification(verification)
    else:  # the verdicts on record here, as `collsim run` shows them
        from collsim.runner.run import recorded_verdicts  # lazy: start-up

        verdicts = recorded_verdicts(list(dict.fromkeys(zip(frame["protocol"], frame["algorithm"]))))
    measured_df = _load_measured(list(measured)) if measured else None
    path = write_report(
        frame, meta, target,
        timeline=timelines, verification=verdicts, measured=measured_df, tolerance_pct=tolerance_pct,
    )
    size_mb = path.stat().st_size / 1e6
    typer.echo(f"report -> {path} ({size_mb:.1f} MB)")
    if open_:
        open_or_say(path)
