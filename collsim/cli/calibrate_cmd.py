"""Commands of this group register on collsim.cli.app.app.

``collsim ingest``: parse measured collective benchmarks (nccl-tests text or
JSON output, collsim measurement CSVs, the published-measurements CSV) into
one measurement table.
"""
from __future__ import annotations

import sys
from pathlib import Path

import typer

from collsim.cli.app import app
from collsim.errors import InputError


@app.command("ingest")
def ingest(
    logs: list[Path] = typer.Argument(
        ...,
        help="nccl-tests output (text as pasted, or -J JSON), collsim measurement CSVs, "
        "or the published-measurements CSV. The format is detected from the content.",
        show_default=False,
        metavar="LOG",
    ),
    output: str = typer.Option(
        ..., "-o", "--output", help="Measurement CSV to write ('-' for stdout). Written atomically.",
        show_default=False,
    ),
    topology: str = typer.Option(
        None, "--topology", help="collsim topology name to record on rows that have none.",
        show_default=False,
    ),
    collective: str = typer.Option(
        None, "--collective",
        help="Collective of rows whose collective the input does not tell (e.g. allreduce).",
        show_default=False,
    ),
) -> None:
    """Parse measured collective benchmarks into one measurement table.

    Rows whose data check failed (#wrong > 0) are kept but flagged ``wrong``;
    rows of a run that ended early are kept but flagged ``truncated``. Each
    such problem is printed as a warning naming the file and line.
    """
    from collsim.calibrate.ingest import ingest_files
    from collsim.calibrate.measurements import write_measurements

    table, logs_read, messages = ingest_files(logs, topology=topology, collective=collective)
    for message in messages:
        typer.echo(f"collsim: warning: {message}", err=True)
    if len(table) == 0:
        names = ", ".join(str(p) for p in logs)
        failures = [lg.meta.get("failure") for lg in logs_read if lg.meta.get("failure")]
        why = f" (the run failed: {failures[0]})" if failures else ""
        raise InputError(f"no result rows found{why}; nothing written", file=names)
    if output == "-":
        table.to_csv(sys.stdout, index=False, lineterminator="\n")
    else:
        target = Path(output)
        if target.is_dir():
            raise InputError("is a directory; give a file name", file=output, field="--output")
        write_measurements(table, target)
    wrong = int(table["wrong"].sum())
    truncated = int(table["truncated"].sum())
    extras = []
    if wrong:
        extras.append(f"{wrong} flagged wrong")
    if truncated:
        extras.append(f"{truncated} from truncated runs")
    note = f" ({', '.join(extras)})" if extras else ""
    where = "stdout" if output == "-" else output
    typer.echo(f"collsim: wrote {len(table)} rows from {len(logs_read)} file(s) to {where}{note}", err=True)
