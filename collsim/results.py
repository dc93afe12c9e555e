"""Scenario runs: expand a scenario into rows, cost every row, write the results.

A run writes ``results.csv`` (one row per topology × ranks × algorithm ×
protocol × launch × size, fixed float precision, nothing time-dependent, so
the same scenario gives byte-identical files) and ``results.json`` (the same
rows plus metadata) under ``reports/<scenario>/``. Both files are written to
temporary names in the output directory and renamed into place, so a failed
run never leaves partial output.

Rows run on an executor (:mod:`collsim.executors`): ``local`` (serial, the
default of the Python functions), ``auto`` (serial, then a process pool for
the rest when it is long; the default of ``collsim run``), ``processes`` (a
local process pool) or ``dask`` (a Dask cluster).
The results are the same, byte for byte, whichever runs them: rows travel
as plain specifications (a topology preset name or its document, the
protocol, the model function by module and name) and each worker rebuilds
and caches the topology once; records come back in row order.

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
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib
import io
import json
import os
import pickle
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from collsim.atomicfile import write_temp
from collsim.errors import InputError, UnsupportedError
from collsim.models import SimRequest, get_model, unsupported_reason

__all__ = [
    "COLUMNS",
    "FLOAT_FORMAT",
    "Row",
    "Skipped",
    "Failed",
    "TopologyRef",
    "RunOutput",
    "result_columns",
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


# ---------------------------------------------------------------------------
# shipping rows to workers


@dataclass(frozen=True)
class TopologyRef:
    """How a worker rebuilds a scenario's topology: a preset name, or the topology document itself.

    ``key`` is a digest of the content, so a worker that lives across runs
    (a Dask cluster) never reuses a topology whose file has changed.
    """

    spec: Any
    default_name: str | None = None
    key: str = ""

    @classmethod
    def of(cls, spec: Any, default_name: str | None = None) -> "TopologyRef":
        digest = hashlib.sha256(pickle.dumps((spec, default_name), protocol=4)).hexdigest()[:24]
        return cls(spec, default_name, digest)

    @classmethod
    def for_scenario(cls, scenario: Any) -> "TopologyRef | None":
        """The ref of ``scenario``'s topology, or ``None`` when it cannot be described as data."""
        from collsim.topology import list_presets

        spec = getattr(scenario, "topology_spec", None)
        if isinstance(spec, Mapping):
            return cls.of(dict(spec))
        if not isinstance(spec, str):
            return None
        if spec in list_presets():
            return cls.of(spec)
        # A topology file: ship its content (workers need not see the file).
        from collsim.yamlsource import load_yaml_with_lines

        path = Path(spec)
        source = getattr(scenario, "source", None)
        if source and spec.endswith((".yaml", ".yml")) and (Path(source).parent / spec).exists():
            path = Path(source).parent / spec
        if not path.is_file():
            return None
        data, _ = load_yaml_with_lines(str(path), spec)
        return cls.of(data, os.path.splitext(os.path.basename(spec))[0])

    def load(self) -> Any:
        """Build the topology (uncached)."""
        if isinstance(self.spec, str):
            from collsim.topology import load_topology

            return load_topology(self.spec)
        from collsim.topology.build import build_topology

        if self.default_name is None:
            return build_topology(self.spec)
        return build_topology(self.spec, default_name=self.default_name)


#: Topologies built in this process, by :attr:`TopologyRef.key` (most recent last).
_TOPOLOGIES: "OrderedDict[str, Any]" = OrderedDict()
_TOPOLOGY_CACHE_SIZE = 16
_cache_lock = threading.Lock()
#: Model functions found by (module, qualified name) in this process.
_MODEL_FNS: dict[tuple[str, str], Any] = {}


def cached_topology(ref: TopologyRef) -> Any:
    """The topology ``ref`` describes, built once per process."""
    with _cache_lock:
        found = _TOPOLOGIES.get(ref.key)
        if found is None:
            found = ref.load()
            _TOPOLOGIES[ref.key] = found
            while len(_TOPOLOGIES) > _TOPOLOGY_CACHE_SIZE:
                _TOPOLOGIES.popitem(last=False)
        else:
            _TOPOLOGIES.move_to_end(ref.key)
        return found


def _model_ref(name: str) -> tuple[str, str] | None:
    """``(module, qualified name)`` of model ``name``'s function, if a worker can import it from there."""
    try:
        _, fn = get_model(name)
    except InputError:
        return None
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<" in qualname or module == "__main__":
        return None
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return (module, qualname) if obj is fn else None


def _model_fn(name: str, ref: tuple[str, str] | None) -> Any:
    """The function to run for model ``name``: the one the parent process had registered, else the registry's."""
    if ref is not None:
        fn = _MODEL_FNS.get(ref)
        if fn is None:
            try:
                obj: Any = importlib.import_module(ref[0])
                for part in ref[1].split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError):
                obj = None
            if callable(obj):
                fn = _MODEL_FNS[ref] = obj
        if fn is not None:
            return fn
    return get_model(name)[1]


def _restore_row(state: dict[str, Any]) -> "Row":
    """Unpickle a :class:`Row` on a worker: rebuild its topology from the ref (cached)."""
    ref = state.get("topology_ref")
    if state.get("topology") is None and ref is not None:
        state["topology"] = cached_topology(ref)
    return Row(**state)


@dataclass(frozen=True)
class Row:
    """One measurement to take: a fully resolved AllReduce configuration plus its model.

    Rows pickle as specifications, not live objects: the topology as its
    :class:`TopologyRef` (rebuilt once per worker process), the model
    function by module and name (so a model registered by the caller's own
    code runs on workers that can import it).
    """

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
    sweep: tuple[tuple[str, Any], ...] = ()
    topology_ref: TopologyRef | None = field(default=None, compare=False, repr=False)
    model_ref: tuple[str, str] | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.topology_ref is not None:
            state["topology"] = None
        if state["model_ref"] is None:
            state["model_ref"] = _model_ref(self.model)
        state["costs"] = dict(self.costs)
        return (_restore_row, (state,))

    @property
    def cost_hint(self) -> float:
        """Relative cost of running this row, for spreading rows over workers: every algorithm has each
        rank work with every other rank (directly or over ring steps), so ``ranks ** 2``."""
        return float(self.ranks * self.ranks)

    def identity(self) -> dict[str, Any]:
        """The configuration as plain data (for failure reports)."""
        return {
            "topology": getattr(self.topology, "name", str(self.topology)),
            "ranks": self.ranks,
            "algorithm": self.algorithm,
            "protocol": getattr(self.protocol, "name", str(self.protocol)),
            "launch": self.launch,
            "size_bytes": self.size_bytes,
            **dict(self.sweep),
        }

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
        extra = [f"{k}={v}" for k, v in self.config if k not in _IDENTITY]
        return text + (f" ({', '.join(extra)})" if extra else "")


_IDENTITY = ("topology", "ranks", "algorithm", "protocol", "launch", "size_bytes")


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


def _gpu_label(topo: Any, ranks: int) -> str:
    models = []
    for r in range(ranks):
        name = str(topo.gpu_info(r).get("model", "?"))
        if name not in models:
            models.append(name)
    return "+".join(models)


def expand_rows(scenario: Any, model: str | None = None) -> tuple[list[Row], list[Skipped]]:
    """Every row of ``scenario`` in run order, and what is skipped.

    Run order: sweep combination (if any), ranks, algorithm, protocol,
    launch, size. Combinations a protocol has no program for (an algorithm
    outside ``protocol.algorithms``, fewer than 2 ranks) become
    :class:`Skipped` entries with the reason (``rows`` counts every sweep
    combination).
    """
    from collsim.models import resolve_protocol

    model_name, _ = get_model(model if model is not None else scenario.model)
    protocols = [resolve_protocol(name) for name in scenario.protocols]
    points_of = getattr(scenario, "sweep_points", None)
    points = points_of() if callable(points_of) else [()]
    ref = TopologyRef.for_scenario(scenario)
    model_ref = _model_ref(model_name)
    rows: list[Row] = []
    skipped: list[Skipped] = []
    per_combo = len(scenario.sizes) * len(scenario.launch) * len(points)
    runnable = []
    for n in scenario.ranks:
        for algorithm in scenario.algorithms:
            for proto in protocols:
                why = unsupported_reason(proto, algorithm, n)
                if why:
                    skipped.append(Skipped(n, algorithm, proto.name, why, per_combo))
                else:
                    runnable.append((n, algorithm, proto))
    for point in points:
        costs = scenario.costs_for(point) if point else scenario.costs
        for n, algorithm, proto in runnable:
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
                            costs=costs,
                            sweep=point,
                            topology_ref=ref,
                            model_ref=model_ref,
                        )
                    )
    return rows, skipped


def run_row(row: Row) -> dict[str, Any]:
    """Cost one row; return its record (the CSV columns, numbers unformatted).

    A model that cannot cost the row raises :class:`UnsupportedError`; the
    record then carries ``latency_us = None`` and the reason in ``note``.
    """
    fn = _model_fn(row.model, row.model_ref)
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
        **dict(row.sweep),
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


def _failed_record(row: Row, error: str, attempts: int) -> dict[str, Any]:
    """The record of a row that failed: no numbers, the error in ``note``, ``error``/``attempts`` keys."""
    base = {key: None for key in COLUMNS}
    base.update(
        {
            "topology": getattr(row.topology, "name", None),
            "ranks": row.ranks,
            "algorithm": row.algorithm,
            "protocol": getattr(row.protocol, "name", None),
            "launch": row.launch,
            "size_bytes": row.size_bytes,
            "count": row.size_bytes // row.elem_bytes,
            "dtype": row.dtype,
            "op": row.op,
            **dict(row.sweep),
            "model": row.model,
            "events": 0,
            "note": f"failed: {error}",
            "error": error,
            "attempts": attempts,
        }
    )
    return base


def run_rows(
    rows: Sequence[Row],
    executor: Any = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    retries: int = 1,
    reuse: bool = False,
    counts: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Cost ``rows`` and return their records, in row order whatever the executor.

    Parameters
    ----------
    rows : sequence of Row
    executor : str or object, optional
        ``"local"`` (``None``, the default), ``"processes"``, ``"dask"``, an
        executor from :func:`collsim.executors.open_executor`, or any object
        it accepts (a ``concurrent.futures`` executor, a Dask client).
    on_result : callable, optional
        Called with each record as it arrives (completion order; progress bars).
    workers, scheduler : optional
        See :func:`collsim.executors.open_executor`.
    retries : int
        Extra attempts for a row whose model raised (default 1).
    reuse : bool
        Take the records of rows whose inputs are unchanged since an earlier
        run from the row cache (:mod:`collsim.rowcache`), and store the new
        ones there; the records are the same as if every row ran.
    counts : dict, optional
        Filled with ``reused`` (rows taken from the cache) and ``run``.

    Returns
    -------
    list of dict
        One record per row. A row that kept failing has ``latency_us`` None,
        ``note`` ``"failed: <error>"`` and ``error``/``attempts`` keys.
    """
    from collsim.executors import map_tasks
    from collsim import rowcache

    keys: list[str | None] = [rowcache.row_key(row) for row in rows] if reuse else [None] * len(rows)
    records: list[dict[str, Any] | None] = rowcache.load_records(keys) if reuse else [None] * len(rows)
    todo = [index for index, record in enumerate(records) if record is None]
    if counts is not None:
        counts.update(reused=len(rows) - len(todo), run=len(todo))
    if on_result is not None:
        for record in records:
            if record is not None:
                on_result(record)

    def record_of(outcome: Any) -> dict[str, Any]:
        if outcome.ok:
            return outcome.value
        return _failed_record(outcome.item, outcome.error, outcome.attempts)

    def progress(outcome: Any) -> None:
        if on_result is not None:
            on_result(record_of(outcome))

    if todo:
        outcomes = map_tasks(
            run_row,
            [rows[index] for index in todo],
            executor if executor is not None else "local",
            progress=progress,
            workers=workers,
            scheduler=scheduler,
            retries=retries,
            weights=[rows[index].cost_hint for index in todo],
        )
        for index, outcome in zip(todo, outcomes):
            records[index] = record_of(outcome)
    if reuse:
        rowcache.store_records((keys[index], records[index]) for index in todo
                               if keys[index] is not None and "error" not in records[index])
    return records  # type: ignore[return-value] - every entry is filled by now


def _fmt(key: str, value: Any) -> str:
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
        writer.writerow([_fmt(key, record.get(key)) for key in columns])
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
) -> str:
    """results.json as text: metadata plus the rows (same precision as the CSV), no timestamps.

    ``failed`` lists the rows whose model kept raising (configuration,
    ``error``, ``attempts``); nothing in the file says where rows ran.
    ``sweep_point``, for one combination of a sweep, is recorded as such
    (``scenario`` and ``costs`` are then those of the combination).
    """
    from collsim import __version__

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


def _sweep_files(
    scenario: Any,
    model: str,
    records: Sequence[Mapping[str, Any]],
    static: Sequence[Skipped],
    unsupported: Sequence[Mapping[str, Any]],
    failed: Sequence[Failed],
    points: Sequence[tuple[tuple[str, Any], ...]],
    directories: Sequence[str],
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
        files[f"{directory}/results.json"] = format_json(view, model, mine, skipped, lost, sweep_point=dict(point))
        writer.writerow(
            [number, *(_fmt("", v) for _, v in point), directory, len(mine), sum(s.rows for s in skipped), len(lost)]
        )
    files["sweep.csv"] = index.getvalue()
    return files


@contextmanager
def rich_progress(total: int, description: str, enabled: bool = True) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A rich progress bar on stderr; yields the ``on_result`` callback for :func:`run_rows`."""
    if not enabled:
        yield lambda record: None
        return
    from collsim.executors import progress_bar

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
    """
    from collsim.executors import open_executor
    from collsim.scenario import load_scenario
    from collsim.scenario.loader import check_costs

    if model is not None:
        get_model(model)  # an unknown --model is reported before the file is read
    # A file's own profile: key is replaced by --profile; a Scenario already loaded gets it underneath.
    scenario = load_scenario(source, model=model, profile=profile)
    model_name, _ = get_model(model if model is not None else scenario.model)
    if profile is not None and scenario is source:
        scenario = with_profile(scenario, profile, model_name)
    if model is not None or profile is not None:
        check_costs(scenario, model_name)  # a Scenario passed in was checked for another model
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
    failed = [
        Failed(tuple((k, r[k]) for k in _IDENTITY + scenario.sweep_keys), r["error"], r["attempts"])
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
        out_dir = Path(out) if out is not None else scenario.output
        if points:
            files = _sweep_files(scenario, model_name, records, static, unsupported, failed, points, directories)
        else:
            files = {
                "results.csv": format_csv(records),
                "results.json": format_json(scenario, model_name, records, skipped, failed),
            }
        write_results(out_dir, files)
        result.out_dir = out_dir
        if report and not points and records:
            result.report = _write_report(out_dir, files["results.json"], records, model_name)
    return result


def with_profile(scenario: Any, profile: str | Path, model_name: str) -> Any:
    """``scenario`` with the costs of a calibrated profile underneath its own ``costs:``."""
    import dataclasses

    from collsim.calibrate.profile import load_profile

    costs = merge_costs(load_profile(str(profile), model=model_name), scenario.costs)
    return dataclasses.replace(scenario, costs=costs)


def merge_costs(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top, merging nested cost tables key by key.

    >>> merge_costs({"a": 1, "t": {"x": 1, "y": 2}}, {"t": {"y": 3}})
    {'a': 1, 't': {'x': 1, 'y': 3}}
    """
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_costs(merged[key], value)
        else:
            merged[key] = value
    return merged


def _write_report(out_dir: Path, json_text: str, records: Sequence[Mapping[str, Any]], model_name: str) -> Path:
    """Write report.html beside the results, with a few simulated timelines when the model makes them."""
    import json

    from collsim.report import write_report
    from collsim.report.timelines import timelines_for

    meta = json.loads(json_text)
    frame = records_frame(records)
    timelines = timelines_for(frame, meta) if model_name == "des" else None
    return write_report(frame, meta, out_dir / "report.html", timeline=timelines)


def records_frame(records: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> Any:
    """The records as a pandas DataFrame with the CSV's columns."""
    import pandas as pd

    return pd.DataFrame([{key: r.get(key) for key in columns} for r in records], columns=list(columns))


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
