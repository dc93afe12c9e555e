"""Scenario runs: expand a scenario into rows, cost every row, write the results.

A run writes ``results.csv`` (one row per topology × ranks × algorithm ×
protocol × launch × size, fixed float precision, nothing time-dependent, so
the same scenario gives byte-identical files) and ``results.json`` (the same
rows plus metadata) under ``reports/<scenario>/``. Both files are written to
temporary names in the output directory and renamed into place, so a failed
run never leaves partial output.

The per-row loop is :func:`run_rows`; pass it any object with a
``map(fn, iterable)`` method (a ``concurrent.futures`` executor, a Dask
client wrapper) to run rows elsewhere.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from collsim.errors import InputError, UnsupportedError
from collsim.models import SimRequest, get_model, unsupported_reason

__all__ = [
    "COLUMNS",
    "FLOAT_FORMAT",
    "Row",
    "Skipped",
    "RunOutput",
    "expand_rows",
    "run_row",
    "run_rows",
    "records_frame",
    "format_csv",
    "format_json",
    "write_results",
    "run_scenario",
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


@dataclass(frozen=True)
class Row:
    """One measurement to take: a fully resolved AllReduce configuration plus its model."""

    topology: Any
    ranks: int
    algorithm: str
    protocol: Any
    launch: str
    size_bytes: int
    model: str
    channels: int | None = None
    dtype: str = "float32"
    elem_bytes: int = 4
    op: str = "sum"
    costs: Mapping[str, Any] = field(default_factory=dict)

    def request(self, timeline: bool = False) -> SimRequest:
        """The :class:`SimRequest` a model takes for this row."""
        return SimRequest(
            topology=self.topology,
            ranks=self.ranks,
            algorithm=self.algorithm,
            protocol=self.protocol,
            size_bytes=self.size_bytes,
            launch=self.launch,
            channels=self.channels,
            dtype=self.dtype,
            elem_bytes=self.elem_bytes,
            op=self.op,
            costs=dict(self.costs),
            timeline=timeline,
        )


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


@dataclass
class RunOutput:
    """What :func:`run_scenario` produced (also available as a DataFrame)."""

    scenario: Any
    model: str
    records: list[dict[str, Any]]
    skipped: list[Skipped]
    out_dir: Path | None = None

    def frame(self) -> Any:
        return records_frame(self.records)


def _gpu_label(topo: Any, ranks: int) -> str:
    models = []
    for r in range(ranks):
        name = str(topo.gpu_info(r).get("model", "?"))
        if name not in models:
            models.append(name)
    return "+".join(models)


def expand_rows(scenario: Any, model: str | None = None) -> tuple[list[Row], list[Skipped]]:
    """Every row of ``scenario`` in run order (ranks, algorithm, protocol, launch, size), and what is skipped.

    Combinations a protocol has no program for (an algorithm outside
    ``protocol.algorithms``, fewer than 2 ranks) become :class:`Skipped`
    entries with the reason.
    """
    from collsim.models import resolve_protocol

    model_name, _ = get_model(model if model is not None else scenario.model)
    protocols = [resolve_protocol(name) for name in scenario.protocols]
    rows: list[Row] = []
    skipped: list[Skipped] = []
    per_combo = len(scenario.sizes) * len(scenario.launch)
    for n in scenario.ranks:
        for algorithm in scenario.algorithms:
            for proto in protocols:
                why = unsupported_reason(proto, algorithm, n)
                if why:
                    skipped.append(Skipped(n, algorithm, proto.name, why, per_combo))
                    continue
                for launch in scenario.launch:
                    for size in scenario.sizes:
                        rows.append(
                            Row(
                                topology=scenario.topology,
                                ranks=n,
                                algorithm=algorithm,
                                protocol=proto,
                                launch=launch,
                                size_bytes=size,
                                model=model_name,
                                channels=scenario.channels,
                                dtype=scenario.dtype,
                                elem_bytes=scenario.elem_bytes,
                                op=scenario.op,
                                costs=scenario.costs,
                            )
                        )
    return rows, skipped


def run_row(row: Row) -> dict[str, Any]:
    """Cost one row; return its record (the CSV columns, numbers unformatted).

    A model that cannot cost the row raises :class:`UnsupportedError`; the
    record then carries ``latency_us = None`` and the reason in ``note``.
    """
    _, fn = get_model(row.model)
    base = {
        "topology": row.topology.name,
        "gpu": _gpu_label(row.topology, row.ranks),
        "ranks": row.ranks,
        "algorithm": row.algorithm,
        "protocol": row.protocol.name,
        "launch": row.launch,
        "size_bytes": row.size_bytes,
        "count": row.size_bytes // row.elem_bytes,
        "dtype": row.dtype,
        "op": row.op,
    }
    try:
        result = fn(row.request())
    except UnsupportedError as err:
        return {**base, **{key: None for key in COLUMNS if key not in base}, "model": row.model,
                "events": 0, "note": f"skipped: {err.message}"}
    return {
        **base,
        "latency_us": result.latency_us,
        "algbw_gbps": result.algbw_gbps,
        "busbw_gbps": result.busbw_gbps,
        "launch_us": result.breakdown["launch"],
        "sync_us": result.breakdown["sync"],
        "data_us": result.breakdown["data"],
        "reduce_us": result.breakdown["reduce"],
        "model": result.model,
        "events": int(result.events),
        "note": "; ".join(result.notes),
    }


def run_rows(
    rows: Sequence[Row],
    executor: Any = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Cost ``rows`` in order and return their records.

    Parameters
    ----------
    rows : sequence of Row
    executor : object with ``map(fn, iterable)``, optional
        Where to run :func:`run_row`; ``None`` runs in this process. Results
        come back in row order either way.
    on_result : callable, optional
        Called with each record as it arrives (progress bars).
    """
    results: Iterable[dict[str, Any]]
    results = map(run_row, rows) if executor is None else executor.map(run_row, rows)
    out = []
    for record in results:
        out.append(record)
        if on_result is not None:
            on_result(record)
    return out


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return ""
    if key in FLOAT_FORMAT:
        return FLOAT_FORMAT[key].format(value)
    return str(value)


def format_csv(records: Iterable[Mapping[str, Any]]) -> str:
    """results.csv as text: fixed column order and float precision, ``\\n`` line ends."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for record in records:
        writer.writerow([_fmt(key, record.get(key)) for key in COLUMNS])
    return buf.getvalue()


def _rounded(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: (round(record[key], _DECIMALS[key]) if key in _DECIMALS and record.get(key) is not None else record.get(key))
        for key in COLUMNS
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
    scenario: Any, model: str, records: Sequence[Mapping[str, Any]], skipped: Sequence[Skipped]
) -> str:
    """results.json as text: metadata plus the rows (same precision as the CSV), no timestamps."""
    from collsim import __version__

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
        "columns": list(COLUMNS),
        "skipped": [s.to_dict() for s in skipped],
        "rows": [_rounded(r) for r in records],
    }
    return json.dumps(doc, indent=2) + "\n"


def write_results(out_dir: str | Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``{name: text}`` into ``out_dir`` atomically; return the paths written.

    Every file goes to a temporary name in ``out_dir`` first; only when all
    are written are they renamed into place. On failure the temporaries (and
    ``out_dir``, if this call created it) are removed.
    """
    out = Path(out_dir)
    created = not out.exists()
    temps: list[tuple[str, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            temps.append((name, Path(tmp)))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        paths = []
        for name, tmp in temps:
            os.replace(tmp, out / name)
            paths.append(out / name)
        return paths
    except BaseException:
        for _, tmp in temps:
            tmp.unlink(missing_ok=True)
        if created:
            try:
                out.rmdir()
            except OSError:
                pass
        raise


@contextmanager
def rich_progress(total: int, description: str, enabled: bool = True) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A rich progress bar on stderr; yields the ``on_result`` callback for :func:`run_rows`."""
    if not enabled:
        yield lambda record: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda record: progress.advance(task)


def execute(
    source: Any,
    out: str | Path | None = None,
    model: str | None = None,
    progress: bool = False,
    write: bool = True,
    executor: Any = None,
) -> RunOutput:
    """Load, expand, run and (optionally) write a scenario; the CLI and :func:`run_scenario` share it."""
    from collsim.scenario import load_scenario

    if model is not None:
        get_model(model)  # an unknown --model is reported before the file is read
    scenario = load_scenario(source, model=model)
    model_name, _ = get_model(model if model is not None else scenario.model)
    if model is not None and scenario.costs:
        from collsim.models import validate_costs

        validate_costs(model_name, scenario.costs)  # a Scenario passed in was checked for another model
    rows, skipped = expand_rows(scenario, model_name)
    if not rows:
        reasons = sorted({s.reason for s in skipped})
        raise InputError(
            "nothing to run: every combination is unsupported (" + "; ".join(reasons) + ")",
            file=scenario.source,
        )
    with rich_progress(len(rows), f"{scenario.name} ({model_name})", enabled=progress) as on_result:
        records = run_rows(rows, executor=executor, on_result=on_result)
    unsupported = [r for r in records if r["latency_us"] is None]
    records = [r for r in records if r["latency_us"] is not None]
    for r in unsupported:
        skipped.append(Skipped(r["ranks"], r["algorithm"], r["protocol"], r["note"].removeprefix("skipped: ")))
    result = RunOutput(scenario, model_name, records, skipped)
    if write:
        out_dir = Path(out) if out is not None else scenario.output
        write_results(
            out_dir,
            {
                "results.csv": format_csv(records),
                "results.json": format_json(scenario, model_name, records, skipped),
            },
        )
        result.out_dir = out_dir
    return result


def records_frame(records: Sequence[Mapping[str, Any]]) -> Any:
    """The records as a pandas DataFrame with the CSV's columns."""
    import pandas as pd

    return pd.DataFrame([{key: r.get(key) for key in COLUMNS} for r in records], columns=list(COLUMNS))


def run_scenario(
    path_or_model: Any,
    out: str | Path | None = None,
    model: str | None = None,
    progress: bool = False,
    write: bool = True,
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

    Returns
    -------
    pandas.DataFrame
        One row per configuration, columns :data:`COLUMNS`. ``df.attrs``
        holds ``scenario``, ``model``, ``skipped`` and ``out_dir``.
    """
    result = execute(path_or_model, out=out, model=model, progress=progress, write=write)
    frame = result.frame()
    frame.attrs["scenario"] = result.scenario.name
    frame.attrs["model"] = result.model
    frame.attrs["skipped"] = [s.to_dict() for s in result.skipped]
    frame.attrs["out_dir"] = str(result.out_dir) if result.out_dir is not None else None
    return frame
