"""Read measured collective benchmarks into one measurement table.

Inputs, recognised by content (not by file name):

* nccl-tests text output of every era, as people paste it
  (:mod:`collsim.calibrate.formats.nccl_text`);
* nccl-tests JSON output (:mod:`collsim.calibrate.formats.nccl_json`);
* collsim's own measurement CSV and the published-measurements CSV layout
  (:mod:`collsim.calibrate.formats.tables`).

Every input becomes rows with the columns of
:data:`~collsim.calibrate.measurements.MEASUREMENT_COLUMNS`.

Examples
--------
>>> from collsim.calibrate.ingest import parse_log          # doctest: +SKIP
>>> log = parse_log("all_reduce_8xH100.txt")                # doctest: +SKIP
>>> log.rows[["size_bytes", "time_us", "busbw_gbps"]].head()  # doctest: +SKIP
>>> log.meta["gpu"], log.meta["ranks"], log.warnings         # doctest: +SKIP
"""
from __future__ import annotations

import os
import warnings as _warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.calibrate.formats.nccl_json import parse_json
from collsim.calibrate.formats.nccl_text import parse_text
from collsim.calibrate.formats.tables import csv_kind, parse_collsim_csv, parse_published_csv
from collsim.calibrate.measurements import (
    COLLECTIVES,
    COLUMN_DOCS,
    MEASUREMENT_COLUMNS,
    canonical_collective,
    empty_table,
    normalize,
    usable,
    write_measurements,
)
from collsim.errors import InputError

__all__ = [
    "ParsedLog",
    "IngestWarning",
    "MEASUREMENT_COLUMNS",
    "COLUMN_DOCS",
    "parse_log",
    "read_measurements",
    "write_measurements",
    "ingest_files",
    "usable",
]

#: Largest input read (bytes); nccl-tests logs are kilobytes.
MAX_INPUT_BYTES = 256 * 1024 * 1024


class IngestWarning(UserWarning):
    """A problem in an input that did not stop it from being read."""


@dataclass
class ParsedLog:
    """One input file, read.

    Attributes
    ----------
    rows : pandas.DataFrame
        The measurement rows (schema: ``MEASUREMENT_COLUMNS``), in file order.
    meta : dict
        File-level facts: ``format`` (nccl-tests-text, nccl-tests-json,
        collsim-csv, published-csv), and for nccl-tests output ``era``,
        ``collective``, ``gpu``/``gpus``, ``ranks``, ``nodes``, ``hostnames``,
        ``nccl_version``, ``nccl_tests_version``, ``protocol``, ``algorithm``,
        ``graph``/``launch``, ``validation``, ``avg_busbw`` (``# Avg bus
        bandwidth``, ``None`` if absent), ``out_of_bounds``, ``truncated``,
        ``failure`` (the failure line of a crashed run), ``time_unit``,
        ``wrong_rows`` and, for text logs, ``sections`` (one dict per table).
    warnings : list of str
        One line each, ``file:line: message``.
    """

    rows: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _read_text(path: Path) -> str:
    """Decode ``path``; binary and empty files raise InputError."""
    name = str(path)
    if not path.exists():
        raise InputError("no such file", file=name)
    if path.is_dir():
        raise InputError("is a directory, not a file", file=name)
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise InputError(f"file too large ({size} bytes) for a benchmark log", file=name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=name) from None
    if data.startswith(b"\xff\xfe") or data.startswith(b"\xfe\xff"):
        # e.g. PowerShell's `>` writes UTF-16
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise InputError("binary file (undecodable UTF-16), not a benchmark log", file=name, line=1) from None
    else:
        nul = data.find(b"\x00")
        if nul >= 0:
            raise InputError("binary file (NUL byte), not a benchmark log", file=name,
                             line=data.count(b"\n", 0, nul) + 1)
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        if bad and bad > max(8, len(text) // 100):
            pos = text.find("\ufffd")
            raise InputError("binary file (not UTF-8 text), not a benchmark log", file=name,
                             line=text.count("\n", 0, pos) + 1)
        control = sum(1 for ch in text[:65536] if ord(ch) < 32 and ch not in "\n\r\t\f\v\x1b")
        if control > max(8, min(len(text), 65536) // 100):
            raise InputError("binary file (control characters), not a benchmark log", file=name, line=1)
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise InputError("empty file", file=name)
    return text


#: The time columns a measured row may carry (out-of-place, in-place).
TIME_COLUMNS = ("time_us", "time_us_inplace")


def _without_bad_times(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[Any, str]]]:
    """The rows whose every time is a positive number (or absent), and ``(line, what)`` of each left out.

    A time that is NaN, negative or zero is no measurement (a failed run, a broken column, a timer that did
    not start): the row cannot be trusted, so it is kept out of the table rather than passed on.
    """
    kept, dropped = [], []
    for row in rows:
        bad = [(column, value) for column in TIME_COLUMNS
               if isinstance(value := row.get(column), (int, float)) and not (value > 0)]
        if bad:
            line = row.get("source_line") or row.get("_csv_line")
            dropped.append((line, ", ".join(f"{c} {v:g}" for c, v in bad)))
        else:
            kept.append(row)
    return kept, dropped


def dropped_message(name: str, dropped: list[tuple[Any, str]]) -> str:
    """One warning for the rows :func:`_without_bad_times` left out: how many, and the first few."""
    shown = "; ".join(f"line {line}: {what}" if line else what for line, what in dropped[:4])
    more = f"; and {len(dropped) - 4} more" if len(dropped) > 4 else ""
    return (f"{name}: {len(dropped)} row{'s' if len(dropped) != 1 else ''} left out: a time that is not a positive "
            f"number (NaN, negative or zero) is no measurement ({shown}{more})")


def parse_log(path: str | os.PathLike[str]) -> ParsedLog:
    """Read one input (format detected from its content) into a :class:`ParsedLog`.

    nccl-tests text and JSON output, collsim measurement CSVs and the
    published-measurements CSV are accepted. A run that crashed or was cut
    off yields the rows it printed, each marked ``truncated``, and a warning.
    A row with a time that is NaN, negative or zero is left out, and one
    warning counts such rows.

    Raises
    ------
    InputError
        For a missing, empty or binary file, a file that is none of the
        accepted formats, or inconsistent units; the message names the file
        and line.
    """
    p = Path(path)
    name = str(path)
    text = _read_text(p)
    head = text.lstrip()
    if head.startswith("{"):
        rows, meta, warns = parse_json(text, name)
    else:
        kind = csv_kind(text)
        if kind == "results":
            raise InputError("is a collsim results file (simulated by 'collsim run'), not measurements: compare it "
                             "with 'collsim compare SIM.csv MEASURED' or give measurements here (nccl-tests output, "
                             "a table 'collsim ingest' wrote)", file=name)
        if kind == "published":
            rows, meta, warns = parse_published_csv(text, name)
        elif kind == "collsim":
            rows, meta, warns = parse_collsim_csv(text, name)
        else:
            rows, meta, warns = parse_text(text, name)
    rows, dropped = _without_bad_times(rows)
    if dropped:
        warns = list(warns) + [dropped_message(name, dropped)]
    frame = pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])
    table = normalize(frame) if len(frame) else empty_table()
    meta = dict(meta)
    meta["file"] = name
    return ParsedLog(rows=table, meta=meta, warnings=list(warns))


def read_measurements(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The measurement table of one input of any accepted format.

    Its warnings are issued as :class:`IngestWarning`. Rows flagged ``wrong``
    are included; select with :func:`collsim.calibrate.measurements.usable`.
    """
    log = parse_log(path)
    for message in log.warnings:
        _warnings.warn(message, IngestWarning, stacklevel=2)
    return log.rows


def ingest_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    topology: str | None = None,
    collective: str | None = None,
) -> tuple[pd.DataFrame, list[ParsedLog], list[str]]:
    """Read several inputs into one table, as ``collsim ingest`` does.

    ``topology`` fills the ``topology`` column where it is empty;
    ``collective`` names the collective of rows whose collective could not be
    told (and overrides rows whose collective came from a guess). Returns
    ``(table, logs, warnings)``. Any bad input raises before anything is
    returned: a partial set is never passed on as complete.
    """
    if collective is not None and not canonical_collective(collective):
        raise InputError(f"unknown collective {collective!r}", field="--collective", choices=COLLECTIVES)
    logs: list[ParsedLog] = []
    messages: list[str] = []
    frames: list[pd.DataFrame] = []
    for path in paths:
        log = parse_log(path)
        logs.append(log)
        messages.extend(log.warnings)
        rows = log.rows
        if collective is not None and len(rows):
            name = canonical_collective(collective)
            guessed = log.meta.get("collective_from") in ("table shape", "file name", "")
            mask = (rows["collective"] == "") | (guessed & (rows["collective"] != name))
            if guessed and (rows["collective"].ne("") & rows["collective"].ne(name)).any():
                messages.append(f"{log.meta['file']}: collective {rows['collective'].iloc[0]!r} "
                                f"(guessed from the {log.meta.get('collective_from') or 'table'}) "
                                f"replaced by --collective {name}")
            rows.loc[mask, "collective"] = name
        if topology:
            rows.loc[rows["topology"] == "", "topology"] = topology
        frames.append(rows)
    nonempty = [f for f in frames if len(f)]
    table = normalize(pd.concat(nonempty, ignore_index=True)) if nonempty else empty_table()
    return table, logs, messages


def _iter_columns() -> Iterable[tuple[str, str]]:  # for docs and --help
    return ((name, COLUMN_DOCS[name]) for name in MEASUREMENT_COLUMNS)
