"""Rows: one AllReduce configuration each, expanded from a scenario, costed anywhere, reused when unchanged.

Rows run on an executor (:mod:`collsim.executors`): ``local`` (serial, the
default of the Python functions), ``auto`` (serial, then a process pool for
the rest when it is long; the default of ``collsim run``), ``processes`` (a
local process pool) or ``dask`` (a Dask cluster).
The results are the same, byte for byte, whichever runs them: rows travel
as plain specifications (a topology preset name or its document, the
protocol, the model function by module and name) and each worker rebuilds
and caches the topology once; records come back in row order.

A row whose model raises is run once more; if it fails again its record
says so (``error``, ``attempts``) and every other row is kept. With
``reuse``, rows whose inputs are unchanged since an earlier run come from
the row cache (:mod:`collsim.rowcache`) instead of being run.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collsim import rowcache
from collsim.config import resolve_protocol, unsupported_reason
from collsim.errors import ProtocolDefinitionError, UnsupportedError
from collsim.executors import map_tasks
from collsim.lru import LRUCache
from collsim.models import ModelRef, SimRequest, model_function, model_ref, performance_model
from collsim.resultsfile import COLUMNS, Skipped
from collsim.topology import list_presets, load_topology
from collsim.topology.build import build_topology
from collsim.yamlsource import load_yaml_with_lines

__all__ = ["TopologyRef", "Row", "cached_topology", "expand_rows", "run_row", "run_rows"]


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
        spec = getattr(scenario, "topology_spec", None)
        if isinstance(spec, Mapping):
            return cls.of(dict(spec))
        if not isinstance(spec, str):
            return None
        if spec in list_presets():
            return cls.of(spec)
        # A topology file: ship its content (workers need not see the file).
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
            return load_topology(self.spec)
        if self.default_name is None:
            return build_topology(self.spec)
        return build_topology(self.spec, default_name=self.default_name)


#: Topologies built in this process, by :attr:`TopologyRef.key`.
_TOPOLOGIES: "LRUCache[Any]" = LRUCache(maxsize=16)


def cached_topology(ref: TopologyRef) -> Any:
    """The topology ``ref`` describes, built once per process (the 16 most recently used are kept)."""
    return _TOPOLOGIES.get(ref.key, ref.load)


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
    model_ref: ModelRef | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.topology_ref is not None:
            state["topology"] = None
        if state["model_ref"] is None:
            state["model_ref"] = model_ref(self.model)
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
    model_name = performance_model(model if model is not None else scenario.model).name
    protocols = [resolve_protocol(name) for name in scenario.protocols]
    points_of = getattr(scenario, "sweep_points", None)
    points = points_of() if callable(points_of) else [()]
    ref = TopologyRef.for_scenario(scenario)
    ref_of_model = model_ref(model_name)
    rows: list[Row] = []
    skipped: list[Skipped] = []
    per_combo = len(scenario.sizes) * len(scenario.launch) * len(points)
    runnable = []
    for n in scenario.ranks:
        for algorithm in scenario.algorithms:
            for proto in protocols:
                why = unsupported_reason(proto, algorithm, n, scenario.topology)
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
                            model_ref=ref_of_model,
                        )
                    )
    return rows, skipped


def run_row(row: Row) -> dict[str, Any]:
    """Cost one row; return its record (the CSV columns, numbers unformatted).

    A model that cannot cost the row raises :class:`UnsupportedError`; the
    record then carries ``latency_us = None`` and the reason in ``note``. A
    protocol whose code fails to build the row's program (a
    :class:`~collsim.errors.ProtocolDefinitionError`) gives a record with
    ``input_error``, its one-line message.
    """
    fn = model_function(row.model, row.model_ref)
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
    except ProtocolDefinitionError as err:
        # the protocol's own code failed to build this program (ProgramBuildError: file, line, algorithm):
        # bad input that a retry cannot mend; the run stops with it (runner.run.execute)
        return {**base, **{key: None for key in COLUMNS if key not in base}, "model": row.model,
                "events": 0, "note": f"failed: {err}", "input_error": str(err)}
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
                               if keys[index] is not None and "error" not in records[index]
                               and "input_error" not in records[index])
    return records  # type: ignore[return-value] - every entry is filled by now
