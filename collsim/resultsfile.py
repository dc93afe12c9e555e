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

This module is the schema and nothing else: it runs nothing and imports no
other stage, so everything that reads or writes results (the runner,
:mod:`collsim.report`, :mod:`collsim.calibrate`) can depend on it.

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
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collsim.atomicfile import write_temp
from collsim.version import __version__

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


def records_frame(records: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> Any:
    """The records as a pandas DataFrame with the CSV's columns."""
    import pandas as pd

    return pd.DataFrame([{key: r.get(key) for key in columns} for r in records], columns=list(columns))

