"""The results files of a run: their columns, their text, and how a set of them is written.

A run writes ``results.csv`` (one row per topology × ranks × algorithm ×
protocol × launch × size, fixed float precision, nothing time-dependent, so
the same scenario gives byte-identical files) and ``results.json`` (the same
rows plus metadata, and a ``run`` section: when the run started and which
collsim made it). The ``run`` section describes the run, not its results:
it is the only part of either file that differs between two runs of one
scenario, and tools that compare results ignore it (:func:`without_run`).
``SOURCE_DATE_EPOCH`` (seconds since 1970, the reproducible-builds
convention) fixes its date. A scenario with ``sweep:`` writes one such pair per
combination of the swept cost parameters, in a subdirectory named after it
(``poll_period_us=0.05,remote_write_us=0.4/``), plus ``sweep.csv`` listing
the combinations, their directories and counts (:func:`format_sweep`).
Every file is written to a temporary name first and renamed into place
(:func:`write_results`), so a failed run never leaves partial output.

:func:`load_results` reads such a file back as ``(frame, meta)`` (a pandas
DataFrame of the costed rows and the JSON document's metadata) and
:func:`check_frame` checks a results table however it was obtained; both
raise :class:`collsim.errors.InputError` naming the file and what is wrong.

This module is the schema and nothing else: it runs nothing and imports no
other stage, so everything that reads or writes results (the runner,
:mod:`collsim.report`, :mod:`collsim.tune`, :mod:`collsim.calibrate`) can
depend on it. It imports pandas only when a table is built or read: the
runner's workers import it for its columns.

>>> print(format_csv([{"topology": "t", "ranks": 2, "latency_us": 1.23456}], ("topology", "ranks", "latency_us")))
topology,ranks,latency_us
t,2,1.235
<BLANKLINE>
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collsim.atomicfile import write_temp
from collsim.errors import InputError
from collsim.version import __version__

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COLUMNS",
    "FLOAT_FORMAT",
    "IDENTITY_COLUMNS",
    "RUN_KEY",
    "run_section",
    "without_run",
    "SWEEP_INDEX_COLUMNS",
    "Skipped",
    "Failed",
    "result_columns",
    "sweep_directories",
    "format_value",
    "format_csv",
    "format_json",
    "format_sweep",
    "write_results",
    "records_frame",
    "INT_COLUMNS",
    "FLOAT_COLUMNS",
    "TEXT_COLUMNS",
    "load_results",
    "check_frame",
    "check_version",
]

#: Columns of results.csv, in order.
COLUMNS: tuple[str, ...] = (
    "topology",
    "gpu",
    "ranks",
    "algorithm",
    "protocol",
    "launch",
    "size_bytes",
    "count",
    "dtype",
    "op",
    "latency_us",
    "algbw_gbps",
    "busbw_gbps",
    "launch_us",
    "sync_us",
    "data_us",
    "reduce_us",
    "model",
    "events",
    "note",
)

#: Fixed precision of every float column (µs to the nanosecond, GB/s to 1e-4).
FLOAT_FORMAT: dict[str, str] = {
    "latency_us": "{:.3f}",
    "algbw_gbps": "{:.4f}",
    "busbw_gbps": "{:.4f}",
    "launch_us": "{:.3f}",
    "sync_us": "{:.3f}",
    "data_us": "{:.3f}",
    "reduce_us": "{:.3f}",
}

_DECIMALS = {key: int(fmt[3]) for key, fmt in FLOAT_FORMAT.items()}


def result_columns(sweep_keys: Sequence[str] = ()) -> tuple[str, ...]:
    """The columns of results.csv: :data:`COLUMNS`, with the swept parameters after ``op``."""
    if not sweep_keys:
        return COLUMNS
    at = COLUMNS.index("op") + 1
    return COLUMNS[:at] + tuple(sweep_keys) + COLUMNS[at:]


#: Columns of sweep.csv (the index of a sweep's result sets) around the swept parameters.
SWEEP_INDEX_COLUMNS: tuple[str, ...] = ("point", "directory", "rows", "skipped", "failed")


def sweep_directories(points: Sequence[tuple[tuple[str, Any], ...]]) -> list[str]:
    """The subdirectory of each sweep point: ``key=value`` pairs joined by ``,`` (deterministic).

    Characters other than letters, digits and ``._=,+-`` become ``_``; a name
    that would repeat another or exceed 120 characters becomes ``point-N``.

    >>> sweep_directories([(("poll_period_us", 0.05), ("remote_write_us", 0.4)), (("poll_period_us", 0.1),)])
    ['poll_period_us=0.05,remote_write_us=0.4', 'poll_period_us=0.1']
    """
    names: list[str] = []
    width = len(str(len(points)))
    for i, point in enumerate(points, 1):
        name = re.sub(r"[^A-Za-z0-9._=,+-]", "_", ",".join(f"{k}={v}" for k, v in point))
        if not name or len(name) > 120 or name in names or name.startswith("."):
            name = f"point-{i:0{width}d}"
        names.append(name)
    return names


#: The columns that name a configuration (a failed row is reported by these, plus its sweep point).
IDENTITY_COLUMNS: tuple[str, ...] = ("topology", "ranks", "algorithm", "protocol", "launch", "size_bytes")


@dataclass(frozen=True)
class Skipped:
    """A combination a run leaves out, and why."""

    ranks: int
    algorithm: str
    protocol: str
    reason: str
    rows: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": self.ranks,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "reason": self.reason,
            "rows": self.rows,
        }


@dataclass(frozen=True)
class Failed:
    """A row whose model raised twice: its configuration, the error and the attempts made."""

    config: tuple[tuple[str, Any], ...]
    error: str
    attempts: int

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.config), "error": self.error, "attempts": self.attempts}

    def label(self) -> str:
        """``ll/ring/8 ranks/graph/16 B`` plus any sweep values."""
        c = dict(self.config)
        text = f"{c['protocol']}/{c['algorithm']}/{c['ranks']} ranks/{c['launch']}/{c['size_bytes']} B"
        extra = [f"{k}={v}" for k, v in self.config if k not in IDENTITY_COLUMNS]
        return text + (f" ({', '.join(extra)})" if extra else "")


#: The key of results.json's section about the run itself (see the module docstring).
RUN_KEY = "run"


def run_section(now: float | None = None) -> dict[str, Any]:
    """``{"date": ..., "collsim_version": ...}``: when a run started (UTC, ISO 8601, to the second) and the
    collsim that made it. ``SOURCE_DATE_EPOCH``, when set, is the date; else ``now`` (default: the clock).

    >>> run_section(now=0.0)["date"]
    '1970-01-01T00:00:00Z'
    """
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = int(epoch) if epoch.isdigit() else int(time.time() if now is None else now)
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)), "collsim_version": __version__}


def without_run(text: str | Mapping[str, Any]) -> dict[str, Any]:
    """A results.json document (text or parsed) without its ``run`` section: what two runs of the same
    scenario agree on, to the byte of every value.

    >>> without_run('{"rows": [], "run": {"date": "2024-01-01T00:00:00Z"}}')
    {'rows': []}
    """
    doc = json.loads(text) if isinstance(text, str) else dict(text)
    doc.pop(RUN_KEY, None)
    return doc


def format_value(key: str, value: Any) -> str:
    """One cell of results.csv: empty for ``None``, the column's fixed precision for a float column."""
    if value is None:
        return ""
    if key in FLOAT_FORMAT:
        return FLOAT_FORMAT[key].format(value)
    return str(value)


def format_csv(records: Iterable[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    """results.csv as text: fixed column order and float precision, ``\\n`` line ends."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for record in records:
        writer.writerow([format_value(key, record.get(key)) for key in columns])
    return buf.getvalue()


def _rounded(record: Mapping[str, Any], columns: Sequence[str] = COLUMNS) -> dict[str, Any]:
    return {
        key: (round(record[key], _DECIMALS[key]) if key in _DECIMALS and record.get(key) is not None else record.get(key))
        for key in columns
    }


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        if isinstance(value, Mapping):
            return {str(k): _jsonable(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v) for v in value]
        return str(value)


def format_json(
    scenario: Any,
    model: str,
    records: Sequence[Mapping[str, Any]],
    skipped: Sequence[Skipped],
    failed: Sequence[Failed] = (),
    sweep_point: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
) -> str:
    """results.json as text: metadata plus the rows (same precision as the CSV), then ``run``, if given.

    ``failed`` lists the rows whose model kept raising (configuration,
    ``error``, ``attempts``); nothing in the file says where rows ran.
    ``sweep_point``, for one combination of a sweep, is recorded as such
    (``scenario`` and ``costs`` are then those of the combination).
    ``run`` (:func:`run_section`) is the only time-dependent part.
    """
    columns = COLUMNS

    topo = scenario.topology
    try:
        summary = topo.summary()
    except Exception:  # a summary is informative only
        summary = None
    doc = {
        "collsim_version": __version__,
        "scenario": _jsonable(scenario.to_dict()),
        "topology": {"name": topo.name, "num_gpus": topo.num_gpus, "summary": _jsonable(summary)},
        "model": model,
        "costs": _jsonable(dict(scenario.costs)),
        **({"sweep_point": _jsonable(dict(sweep_point))} if sweep_point is not None else {}),
        "columns": list(columns),
        "skipped": [s.to_dict() for s in skipped],
        "failed": [_jsonable(f.to_dict()) for f in failed],
        "rows": [_rounded(r, columns) for r in records],
        **({RUN_KEY: dict(run)} if run is not None else {}),
    }
    return json.dumps(doc, indent=2) + "\n"


def write_results(out_dir: str | Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``{name: text}`` into ``out_dir`` atomically; return the paths written.

    A name may hold subdirectories (``"a=1/results.csv"``). Every file goes
    to a temporary name in its directory first; only when all are written
    are they renamed into place. On failure the temporaries (and the
    directories this call created, ``out_dir`` included) are removed.
    """
    out = Path(out_dir)
    made: list[Path] = []
    temps: list[tuple[Path, Path]] = []

    def mkdir(path: Path) -> None:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        made.extend(sorted(missing, key=lambda p: len(p.parts)))

    try:
        mkdir(out)
        for name, text in files.items():
            target = out / name
            mkdir(target.parent)
            temps.append((target, write_temp(target, text)))
        paths = []
        for target, tmp in temps:
            os.replace(tmp, target)
            paths.append(target)
        return paths
    except BaseException:
        for _, tmp in temps:
            tmp.unlink(missing_ok=True)
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError:
                pass
        raise


def format_sweep(
    scenario: Any,
    model: str,
    records: Sequence[Mapping[str, Any]],
    static: Sequence[Skipped],
    unsupported: Sequence[Mapping[str, Any]],
    failed: Sequence[Failed],
    points: Sequence[tuple[tuple[str, Any], ...]],
    directories: Sequence[str],
    run: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """results.csv/json per sweep point (in its directory) and the sweep.csv index.

    ``static`` are the combinations no point can run (protocol/algorithm/ranks;
    their ``rows`` count every point), ``unsupported`` the records a model declined.
    """
    keys = tuple(scenario.sweep_keys)
    n_points = max(1, len(points))

    def point_of(values: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        return tuple((k, values.get(k)) for k in keys)

    files: dict[str, str] = {}
    index = io.StringIO()
    writer = csv.writer(index, lineterminator="\n")
    writer.writerow(SWEEP_INDEX_COLUMNS[:1] + keys + SWEEP_INDEX_COLUMNS[1:])
    for number, (point, directory) in enumerate(zip(points, directories), 1):
        mine = [r for r in records if point_of(r) == point]
        lost = [f for f in failed if point_of(dict(f.config)) == point]
        skipped = [dataclasses.replace(s, rows=s.rows // n_points) for s in static] + [
            Skipped(r["ranks"], r["algorithm"], r["protocol"], r["note"].removeprefix("skipped: "))
            for r in unsupported
            if point_of(r) == point
        ]
        view = dataclasses.replace(scenario, costs=scenario.costs_for(point), sweep=())
        files[f"{directory}/results.csv"] = format_csv(mine)
        files[f"{directory}/results.json"] = format_json(view, model, mine, skipped, lost, sweep_point=dict(point),
                                                             run=run)
        writer.writerow(
            [number, *(format_value("", v) for _, v in point), directory, len(mine), sum(s.rows for s in skipped), len(lost)]
        )
    files["sweep.csv"] = index.getvalue()
    return files


def records_frame(records: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> pd.DataFrame:
    """The records as a pandas DataFrame with the CSV's columns."""
    import pandas as pd  # lazy: start-up (a worker that imports this module for its columns needs no pandas)

    return pd.DataFrame([{key: r.get(key) for key in columns} for r in records], columns=list(columns))


# ---------------------------------------------------------------------------
# reading results files back

#: The columns read back as whole numbers, as floats; the rest are text.
INT_COLUMNS: tuple[str, ...] = ("ranks", "size_bytes", "count", "events")
FLOAT_COLUMNS: tuple[str, ...] = (
    "latency_us", "algbw_gbps", "busbw_gbps", "launch_us", "sync_us", "data_us", "reduce_us",
)
TEXT_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in INT_COLUMNS + FLOAT_COLUMNS)


def _version_key(text: str) -> tuple[int, ...] | None:
    parts = str(text).split(".")
    try:
        return tuple(int("".join(ch for ch in p if ch.isdigit()) or "x") for p in parts[:2])
    except ValueError:
        return None


def check_version(version: Any, source: str) -> None:
    """Refuse results written by a collsim whose major.minor differs from this one."""
    if version is None or version == "":
        raise InputError(
            "not a collsim results file (no 'collsim_version'); rerun 'collsim run' to produce one",
            file=source,
        )
    theirs, ours = _version_key(str(version)), _version_key(__version__)
    if theirs is None or theirs != ours:
        raise InputError(
            f"results written by collsim {version}, this is collsim {__version__}: "
            "rerun 'collsim run' with this version",
            file=source,
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def check_frame(frame: Any, source: str = "results", *, first_line: int | None = None) -> pd.DataFrame:
    """Check and normalise a results table; return a clean copy.

    Every column of :data:`COLUMNS` must be there; numbers must be
    numbers (``latency_us`` finite and positive), text columns become
    strings. Rows without a latency (combinations a model could not cost)
    are dropped; none left is an error.

    Parameters
    ----------
    frame : pandas.DataFrame
    source : str
        The file (or description) named in errors.
    first_line : int, optional
        Line number of the first row in ``source`` (CSV: 2), for errors.
    """
    import pandas as pd  # lazy: start-up (a worker that imports this module for its columns needs no pandas)

    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"results must be a pandas DataFrame, not {type(frame).__name__}", file=source)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"missing {'column' if len(missing) == 1 else 'columns'} {', '.join(missing)} "
            "(not a results file of this collsim version?)",
            file=source,
        )
    if len(frame) == 0:
        raise InputError("no result rows: nothing to report (did the run cost any configuration?)", file=source)
    out = frame.loc[:, list(COLUMNS)].copy().reset_index(drop=True)

    def where(i: int) -> str:
        return f"line {first_line + i}" if first_line is not None else f"row {i + 1}"

    for col in INT_COLUMNS + FLOAT_COLUMNS:
        raw = out[col]
        blank = raw.isna() | (raw.astype(str).str.strip() == "")
        num = pd.to_numeric(raw.where(~blank, None), errors="coerce")
        bad = num.isna() & ~blank
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise InputError(f"{where(i)}: column {col!r} holds {str(raw.iloc[i])!r}, not a number", file=source)
        out[col] = num
    # rows a model could not cost carry no latency: leave them out
    costed = out["latency_us"].notna()
    dropped = int((~costed).sum())
    out = out[costed].reset_index(drop=True)
    if len(out) == 0:
        raise InputError(
            f"no costed rows: all {_plural(dropped, 'row')} lack a latency", file=source
        )
    for col in INT_COLUMNS:
        values = out[col]
        if col in ("ranks", "size_bytes") and values.isna().any():
            i = int(values.isna().to_numpy().nonzero()[0][0])
            raise InputError(f"row {i + 1}: column {col!r} is empty", file=source)
        if (values.dropna() % 1 != 0).any():
            raise InputError(f"column {col!r} holds non-integer values", file=source)
        out[col] = values.fillna(0).astype("int64")
    for col in FLOAT_COLUMNS:
        out[col] = out[col].astype("float64").fillna(0.0)
    lat = out["latency_us"]
    bad = ~(lat.map(math.isfinite)) | (lat <= 0)
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raise InputError(f"row {i + 1}: latency_us must be a positive finite number, not {lat.iloc[i]!r}", file=source)
    if (out["ranks"] < 1).any() or (out["size_bytes"] < 0).any():
        raise InputError("ranks must be >= 1 and size_bytes >= 0", file=source)
    for col in TEXT_COLUMNS:
        out[col] = out[col].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    for col in ("protocol", "algorithm"):
        if (out[col] == "").any():
            raise InputError(f"column {col!r} has empty values", file=source)
    key = ["topology", "ranks", "algorithm", "protocol", "launch", "size_bytes"]
    dup = out.duplicated(subset=key)
    if dup.any():
        r = out[dup].iloc[0]
        raise InputError(
            f"duplicate rows for {r['protocol']}/{r['algorithm']}, {r['ranks']} ranks, "
            f"{r['size_bytes']} B, launch {r['launch'] or '-'}",
            file=source,
        )
    out.attrs["dropped_rows"] = dropped
    return out


def _read_json(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    import pandas as pd  # lazy: start-up (a worker that imports this module for its columns needs no pandas)

    source = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg} (column {err.colno})", file=source, line=err.lineno) from None
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=source) from None
    if not isinstance(doc, dict):
        raise InputError("not a collsim results file (expected a JSON object with 'rows')", file=source)
    if "rows" not in doc:
        raise InputError("not a collsim results file (no 'rows')", file=source)
    check_version(doc.get("collsim_version"), source)
    columns = doc.get("columns")
    if columns is not None and list(columns) != list(COLUMNS):
        missing = [c for c in COLUMNS if c not in columns]
        extra = [c for c in columns if c not in COLUMNS]
        what = []
        if missing:
            what.append("missing " + ", ".join(missing))
        if extra:
            what.append("unexpected " + ", ".join(extra))
        raise InputError(
            "its columns differ from this collsim's (" + ("; ".join(what) or "different order") + ")",
            file=source,
        )
    rows = doc["rows"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError("'rows' must be a list of objects", file=source)
    if not rows:
        raise InputError("no result rows: nothing to report (did the run cost any configuration?)", file=source)
    frame = pd.DataFrame(rows)
    meta = {k: v for k, v in doc.items() if k != "rows"}
    return frame, meta


def _read_csv(path: Path) -> pd.DataFrame:
    import pandas as pd  # lazy: start-up (a worker that imports this module for its columns needs no pandas)

    source = str(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[], encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise InputError("empty file: no header and no result rows", file=source) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise InputError(f"not a readable CSV ({' '.join(str(err).split())})", file=source) from None
    extra = [c for c in frame.columns if c not in COLUMNS]
    missing = [c for c in COLUMNS if c not in frame.columns]
    if {"size_bytes", "time_us"} <= set(frame.columns) and "latency_us" not in frame.columns:
        raise InputError("is a measurement table, not simulated results: give results.csv or results.json of "
                         "'collsim run', and this file as --measured to overlay it", file=source)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {'column' if len(missing) == 1 else 'columns'} {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {'column' if len(extra) == 1 else 'columns'} {', '.join(extra)}")
        raise InputError(
            "; ".join(parts) + " (a results file of another collsim version?)", file=source
        )
    return frame


def _infer_meta(path: Path, frame: pd.DataFrame) -> dict[str, Any]:
    models = sorted(set(frame["model"].astype(str)) - {""})
    topologies = sorted(set(frame["topology"].astype(str)) - {""})
    gpus = sorted(set(frame["gpu"].astype(str)) - {""})
    name = path.parent.name or path.stem
    return {
        "collsim_version": __version__,
        "scenario": {"name": name, "topology": topologies[0] if len(topologies) == 1 else None},
        "topology": {
            "name": ", ".join(topologies),
            "summary": {"gpu_model": ", ".join(gpus)} if gpus else None,
        },
        "model": ", ".join(models),
        "costs": {},
    }


def load_results(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a results file written by ``collsim run``; return ``(frame, meta)``.

    Parameters
    ----------
    path : str or Path
        ``results.csv`` or ``results.json``.

    Returns
    -------
    frame : pandas.DataFrame
        The costed rows, columns :data:`COLUMNS`, numbers as numbers.
    meta : dict
        The results.json document without its rows: ``collsim_version``,
        ``scenario`` (a dict with ``name``, ``topology``, ``costs`` …),
        ``topology`` (``name``, ``num_gpus``, ``summary``), ``model``,
        ``costs``, ``skipped`` and, when present, ``date``, ``timelines``,
        ``verification``. A CSV carries no metadata: its meta comes from a
        ``results.json`` beside it when there is one, else it is inferred
        (scenario name from the directory, model from the ``model``
        column). ``meta["results_file"]`` is ``path`` as given.

    Raises
    ------
    InputError
        The file is missing, not a results file, from another collsim
        version, lacks columns, holds bad values or no rows.
    """
    p = Path(path)
    source = str(path)
    if not p.exists():
        raise InputError("no such file", file=source)
    if p.is_dir():
        raise InputError("is a directory; give results.csv or results.json", file=source)
    suffix = p.suffix.lower()
    if suffix == ".json":
        frame, meta = _read_json(p)
        first_line = None
    elif suffix == ".csv":
        frame = _read_csv(p)
        first_line = 2
        meta = None
        sibling = p.with_suffix(".json")
        if sibling.exists():
            try:
                _, meta = _read_json(sibling)
            except InputError:
                meta = None
        if meta is None:
            meta = _infer_meta(p, frame)
    else:
        raise InputError(f"unknown results format {p.suffix or '(no suffix)'!r}", file=source, choices=[".csv", ".json"])
    clean = check_frame(frame, source, first_line=first_line)
    meta = dict(meta)
    meta["results_file"] = source
    if clean.attrs.get("dropped_rows"):
        meta["dropped_rows"] = clean.attrs["dropped_rows"]
    return clean, meta
