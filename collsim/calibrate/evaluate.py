"""Costing modelled configurations with one performance model, memoised, serially or on worker processes.

A :class:`Config` is one mapped measurement row (topology, ranks, algorithm,
protocol, launch, size, dtype); :class:`Evaluator` costs it through the model
registry (:func:`collsim.models.get_model`) with cost overrides, exactly as
``collsim run`` would, and remembers every (configuration, costs) answer.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from collsim.analytic.model import GENERATIONS
from collsim.errors import InputError, UnsupportedError
from collsim.executors import Executor, open_executor
from collsim.ir.registry import load_protocol
from collsim.models import DTYPES, SimRequest, get_model
from collsim.topology import load_topology

__all__ = ["Config", "Evaluator", "configs_of"]


class Config(NamedTuple):
    """One modelled configuration (a mapped measurement row)."""

    topology: str
    ranks: int
    algorithm: str
    protocol: str
    launch: str
    size_bytes: int
    dtype: str = "float32"


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    return value


class Evaluator:
    """Costs configurations with one model, memoising every (configuration, costs) pair.

    ``jobs`` > 1 costs uncached configurations in that many worker processes
    (the discrete-event model takes tens of milliseconds per configuration):
    a ``processes`` executor of :mod:`collsim.executors`, opened on first use
    and kept until :meth:`close`. Each worker keeps one evaluator of the
    model (:func:`_latency_in_worker`), so it loads a topology or protocol
    once. The model must be registered where collsim is imported (the
    workers are spawned, not forked).
    """

    def __init__(self, model: str | None, jobs: int = 1) -> None:
        self.model, self.fn = get_model(model)
        self._topologies: dict[str, Any] = {}
        self._protocols: dict[str, Any] = {}
        self._memo: dict[tuple, float] = {}
        self.calls = 0
        self.jobs = max(1, int(jobs or 1))
        self._executor: Executor | None = None

    def close(self) -> None:
        """Stop the worker processes, if any."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _map(self, items: list[tuple[Config, dict[str, Any]]]) -> list[float]:
        """Latencies of ``items`` from the workers; NaN where a worker could not cost one."""
        if self._executor is None:
            self._executor = open_executor("processes", workers=self.jobs)
        chunk = max(1, len(items) // (4 * self.jobs))
        outcomes = self._executor.map(_latency_in_worker, [(self.model, cfg, costs) for cfg, costs in items],
                                      retries=0, chunksize=chunk)
        return [o.value if o.ok else math.nan for o in outcomes]

    def topology(self, name: str) -> Any:
        """The topology preset ``name``, loaded once."""
        if name not in self._topologies:
            self._topologies[name] = load_topology(name)
        return self._topologies[name]

    def protocol(self, name: str) -> Any:
        """The protocol ``name``, loaded once."""
        if name not in self._protocols:
            self._protocols[name] = load_protocol(name)
        return self._protocols[name]

    def generation(self, topology: str, ranks: int = 1) -> str:
        topo = self.topology(topology)
        gens = [str(topo.generation(r)).lower() for r in range(ranks)]
        known = [g for g in gens if g in GENERATIONS] or gens
        return min(known, key=lambda g: GENERATIONS.index(g) if g in GENERATIONS else -1)

    def latency(self, cfg: Config, costs: Mapping[str, Any] | None = None, frozen: Any = None) -> float:
        """Modelled latency (µs) of ``cfg``; raises what the model raises."""
        key = (cfg, frozen if frozen is not None else _freeze(costs or {}))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        request = SimRequest(
            topology=self.topology(cfg.topology), ranks=cfg.ranks, algorithm=cfg.algorithm,
            protocol=self.protocol(cfg.protocol), size_bytes=cfg.size_bytes, launch=cfg.launch,
            dtype=cfg.dtype, elem_bytes=DTYPES[cfg.dtype], costs=dict(costs or {}),
        )
        self.calls += 1
        value = float(self.fn(request).latency_us)
        self._memo[key] = value
        return value

    def latencies(self, cfgs: Sequence[Config], costs: Mapping[str, Any] | None = None) -> np.ndarray:
        frozen = _freeze(costs or {})
        if self.jobs > 1:
            todo = list(dict.fromkeys(c for c in cfgs if (c, frozen) not in self._memo))
            if len(todo) >= 2 * self.jobs:
                values = self._map([(c, dict(costs or {})) for c in todo])
                for c, v in zip(todo, values):
                    if math.isnan(v):
                        # here the model raises its own error; a worker that failed otherwise is made up for
                        v = self.latency(c, costs, frozen)
                    self._memo[(c, frozen)] = v
                self.calls += len(todo)
        return np.array([self.latency(c, costs, frozen) for c in cfgs], dtype=float)

    def unsupported(self, cfgs: Iterable[Config]) -> dict[tuple, str]:
        """``(topology, ranks, algorithm, protocol) -> reason`` for the groups this model cannot cost."""
        out: dict[tuple, str] = {}
        seen: set[tuple] = set()
        for cfg in cfgs:
            group = (cfg.topology, cfg.ranks, cfg.algorithm, cfg.protocol)
            if group in seen:
                continue
            seen.add(group)
            try:
                self.latency(cfg)
            except (InputError, UnsupportedError) as err:
                out[group] = f"{self.model}: {err.message}"
        return out


#: The evaluator of each model in a worker process (see :meth:`Evaluator._map`).
_WORKER_EVALUATORS: dict[str, Evaluator] = {}


def _latency_in_worker(item: tuple[str, Config, dict[str, Any]]) -> float:
    """Run in a worker: the latency of one configuration, NaN when the model cannot cost it."""
    model, cfg, costs = item
    evaluator = _WORKER_EVALUATORS.get(model)
    if evaluator is None:
        evaluator = _WORKER_EVALUATORS[model] = Evaluator(model)
    try:
        return evaluator.latency(cfg, costs)
    except (InputError, UnsupportedError):
        return math.nan


def _dtype_for(dtype: str, size: int) -> str:
    if dtype in DTYPES and size % DTYPES[dtype] == 0:
        return dtype
    return "float32" if size % 4 == 0 else "int8"


def configs_of(rows: pd.DataFrame) -> list[Config]:
    """The :class:`Config` of every mapped row (``m_*`` columns of :func:`map_measurements`)."""
    out = []
    for r in rows.to_dict("records"):
        size = int(r["size_bytes"])
        out.append(Config(str(r["m_topology"]), int(r["m_ranks"]), str(r["m_algorithm"]), str(r["m_protocol"]),
                          str(r["m_launch"]), size, _dtype_for(str(r.get("dtype") or ""), size)))
    return out
