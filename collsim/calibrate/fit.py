"""Fit a model's cost parameters to measured latencies.

The fit is bounded least squares on log-latency
(:func:`scipy.optimize.least_squares`, trust-region reflective): it
minimises ``sum_i (log model_i(p) - log measured_i)^2`` over the named
parameters ``p``, searched in ``log p`` so that every step is relative and
every bound positive. Rows are the mapped measurement rows of
:mod:`collsim.calibrate.mapping`; every model evaluation goes through the
model registry (:func:`collsim.models.get_model`) with the parameters as
cost overrides, exactly as ``collsim run`` would cost them, and is memoised.

Parameters are the model's own cost keys:

* ``des``: the names of ``collsim/data/costs/<generation>.yaml``
  (``launch_overhead_us``, ``remote_write_us`` …) and ``pcie.<name>``;
* ``analytic``: the constants of ``collsim/data/costs/nccl_tuning.yaml``, table
  entries written with dots (``hw_latency_us.nvlink.ll``); naming a table
  (``hw_latency_us``) or part of one (``hw_latency_us.nvlink``) names every
  entry in it.

Short aliases (:data:`ALIASES`) stand for the common ones (``launch``,
``hop_latency``, ``fence``, ``poll``, ``bw_efficiency`` …). Whole-number
parameters (channel counts, step counts) are not fitted.

Bounds (:func:`bounds_for`) are physical ranges: HBM efficiency in [0.3, 1],
other efficiencies and bandwidth factors in [0.05, 1], latencies of one mechanism in [1 ns, 50 µs], launch
overhead in [0.05, 30] µs, base latencies in [0.1, 100] µs, bandwidths and
anything else within 20x of the documented value; a range always contains the
documented value.

Identifiability
---------------
Before fitting, the Jacobian of log-latency with respect to log-parameters
is taken at the starting values on the training rows. A parameter is refused

* when no row's modelled latency moves by more than 0.001 % for a 1 % change
  (a zero column: e.g. an LL128 cost with no LL128 row, launch overhead with
  only graph-launched rows), or
* when its column is collinear with another's (|cos| > 0.999: e.g. launch
  overhead and kernel start time on eager-only rows, which both add the same
  constant), or when a combination of columns is (smallest singular value of
  the normalised Jacobian below 1e-3 of the largest).

After the fit, the Jacobian at the solution gives each value a
multiplicative standard error (:attr:`Calibration.uncertainty`). A parameter
no row depends on at the fitted values, or whose one-standard-error band is
wider than a factor :data:`MAX_SE_FACTOR`, is not identified either: it is
reset to its documented value and the others are refitted. A value on a
bound is kept and flagged (the rows want it outside its physical range: a
mechanism the model lacks).

Named parameters are refused with an :class:`IdentifiabilityError` naming
each and why; members of a named table or alias group that the data cannot
identify (and parameters of the default set of ``collsim calibrate`` /
``collsim validate``) are left at their values and listed as not fitted.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from collsim.errors import InputError, UnsupportedError

__all__ = [
    "ALIASES",
    "Config",
    "Param",
    "Evaluator",
    "IdentifiabilityError",
    "Calibration",
    "FoldResult",
    "parameter_defaults",
    "resolve_params",
    "bounds_for",
    "costs_from_values",
    "error_summary",
    "identifiability",
    "configs_of",
    "assign_folds",
    "fit_parameters",
    "calibrate",
]

#: Short names accepted by ``--params`` for each model.
ALIASES: dict[str, dict[str, str]] = {
    "analytic": {
        "launch": "launch_overhead_us",
        "base_latency": "base_latency_us",
        "hop_latency": "hw_latency_us.nvlink",
        "hw_latency": "hw_latency_us",
        "sync": "sync_round_latency_us.nvlink",
        "bw_efficiency": "bw_factor",
        "nvlink_bw": "nvlink_bw_per_link_gbps",
        "ll_max_bw": "ll_max_bw_gbps",
        "ll128_bw": "per_channel_max_ring_ll128_bw_gbps",
        "pci_bw": "pci_bw_gbps",
    },
    "des": {
        "launch": "launch_overhead_us",
        "start": "kernel_start_us",
        "kernel_start": "kernel_start_us",
        "kernel_end": "kernel_end_us",
        "hop_latency": "remote_write_us",
        "remote_write": "remote_write_us",
        "read_latency": "remote_read_us",
        "remote_read": "remote_read_us",
        "poll": "poll_period_us",
        "fence": "fence_sys_us",
        "fence_gpu": "fence_gpu_us",
        "acquire": "acquire_us",
        "bw_efficiency": "hbm_efficiency",
        "cta_bw": "cta_store_gbps",
        "cta_store": "cta_store_gbps",
        "cta_load": "cta_bytes_in_flight",
        "op_overhead": "op_overhead_us",
        "sync_group": "sync_group_us",
        "atomic": "atomic_remote_us",
    },
}

#: Smallest relative effect (|d log t / d log p|) a parameter must have on some row.
MIN_SENSITIVITY = 1e-3
#: Columns whose |cosine| exceeds this are collinear.
MAX_COLLINEARITY = 0.999
#: Smallest singular value, relative to the largest, of the normalised Jacobian.
MIN_SINGULAR_RATIO = 1e-3
#: Relative finite-difference step of the Jacobian (1 %).
FD_STEP = math.log(1.01)
#: Broyden updates between two finite-difference Jacobians during a fit.
BROYDEN_REFRESH = 3
#: A fitted value within this relative distance of a bound is reported as on the bound.
BOUND_TOLERANCE = 5e-3
#: A fitted value whose one-standard-error band is wider than this factor is not identified by the rows.
MAX_SE_FACTOR = 10.0


class IdentifiabilityError(InputError):
    """The data cannot determine a named parameter; the message says which and why."""


class Config(NamedTuple):
    """One modelled configuration (a mapped measurement row)."""

    topology: str
    ranks: int
    algorithm: str
    protocol: str
    launch: str
    size_bytes: int
    dtype: str = "float32"


@dataclass(frozen=True)
class Param:
    """One fitted parameter: canonical name, documented value, bounds, how it was asked for."""

    name: str
    default: float
    lower: float
    upper: float
    asked_as: str = ""
    explicit: bool = True  # named directly (refusal is an error) rather than through a group

    def at_bound(self, value: float) -> str:
        """``"lower"``/``"upper"`` when ``value`` sits on that bound (the data pushes past the physical range)."""
        if value <= self.lower * (1 + BOUND_TOLERANCE):
            return "lower"
        if value >= self.upper * (1 - BOUND_TOLERANCE):
            return "upper"
        return ""


# ---------------------------------------------------------------------------
# parameters of each model


def _flatten(prefix: str, value: Any, out: dict[str, float], skip: set[str]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}", sub, out, skip)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = float(value)


def _integer_names(model: str) -> set[str]:
    if model == "analytic":
        return {"max_channels", "one_shot_steps", "two_shot_steps"}
    if model == "des":
        from collsim.sim.costs import INTEGER_PARAMETERS

        return set(INTEGER_PARAMETERS) | {"pcie." + n for n in INTEGER_PARAMETERS}
    return set()


def parameter_defaults(model: str, generation: str = "hopper") -> dict[str, float]:
    """Every fittable parameter of ``model`` (canonical name -> documented value).

    Raises
    ------
    InputError
        For a model without a calibration adapter or a generation without a cost file.
    """
    ints = _integer_names(model)
    out: dict[str, float] = {}
    if model == "analytic":
        from collsim.analytic.constants import base_constants

        for name, value in base_constants().items():
            if name not in ints:
                _flatten(name, value, out, ints)
    elif model == "des":
        from collsim.sim.costs import parameter_table

        table = parameter_table(generation)
        for name, entry in table.items():
            if name not in ints:
                out[name] = float(entry["value"])
        for name, entry in table.items():
            if name not in ints:
                out["pcie." + name] = float(entry["pcie"])
    else:
        from collsim.models import list_models

        raise InputError(f"no calibration adapter for model {model!r}", field="--model",
                         choices=[m for m in list_models() if m in ALIASES])
    return out


def bounds_for(name: str, default: float) -> tuple[float, float]:
    """Physical search range of a parameter (see the module docstring)."""
    leaf = name.split(".", 1)[1] if name.startswith("pcie.") else name
    head = leaf.split(".")[0]
    if head == "hbm_efficiency":
        lo, hi = 0.3, 1.0  # streaming kernels reach 30-95 % of peak HBM bandwidth
    elif "efficiency" in head or head == "bw_factor":
        lo, hi = 0.05, 1.0
    elif head == "atomic_wire_factor":
        lo, hi = 1.0, 8.0
    elif head == "launch_overhead_us":
        lo, hi = 0.05, 30.0
    elif head == "base_latency_us":
        lo, hi = 0.1, 100.0
    elif head.endswith("_us"):
        lo, hi = 0.001, 50.0
    else:
        lo, hi = max(default / 20.0, 1e-6), max(default * 20.0, 1e-5)
    if default > 0:
        lo, hi = min(lo, default), max(hi, default)
    return lo, hi


def resolve_params(model: str, names: Iterable[str], generation: str = "hopper") -> list[Param]:
    """The parameters ``names`` (canonical names, table prefixes or aliases) stand for.

    Raises
    ------
    InputError
        For an unknown or whole-number parameter, listing the valid names.
    """
    defaults = parameter_defaults(model, generation)
    aliases = ALIASES.get(model, {})
    ints = _integer_names(model)
    out: dict[str, Param] = {}
    for raw in names:
        name = str(raw).strip()
        if not name:
            continue
        target = aliases.get(name, name)
        candidates = [target, target + "_us", target + "_gbps"]
        if target in ints or any(c in ints for c in candidates[1:]):
            raise InputError(f"parameter {name!r} is a whole number ({target}); it is not fitted", field="--params")
        hit = next((c for c in candidates if c in defaults), None)
        if hit is not None:
            members, explicit = [hit], name not in aliases or aliases[name] == hit
        else:
            members = [k for k in defaults if k.startswith(target + ".")]
            explicit = False
            if not members:
                valid = sorted(aliases) + sorted(k for k in defaults if "." not in k or k.startswith("pcie."))
                tables = sorted({k.split(".")[0] for k in defaults if "." in k and not k.startswith("pcie.")})
                raise InputError(f"unknown parameter {name!r} for the {model} model", field="--params",
                                 choices=valid + [f"{t}.<entry>" for t in tables])
        for member in members:
            if member in out:
                continue
            lo, hi = bounds_for(member, defaults[member])
            out[member] = Param(member, defaults[member], lo, hi, asked_as=name, explicit=explicit)
    if not out:
        raise InputError("no parameters named", field="--params")
    return list(out.values())


def _nest(flat: Mapping[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in flat.items():
        parts = name.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def costs_from_values(model: str, values: Mapping[str, float]) -> dict[str, Any]:
    """The cost overrides ``values`` make, in the form ``model`` accepts (``simulate(costs=...)``).

    ``des`` takes flat names (``pcie.NAME`` included); ``analytic`` takes
    table entries nested (``{"hw_latency_us": {"nvlink": {"ll": 0.7}}}``).
    """
    if model == "analytic":
        return _nest({k: float(v) for k, v in values.items()})
    return {k: float(v) for k, v in values.items()}


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    return value


# ---------------------------------------------------------------------------
# evaluating the model


_WORKER: "Evaluator | None" = None


def _worker_init(model: str) -> None:
    global _WORKER
    _WORKER = Evaluator(model)


def _worker_latency(item: tuple[Config, dict[str, Any]]) -> float:
    assert _WORKER is not None
    cfg, costs = item
    try:
        return _WORKER.latency(cfg, costs)
    except (InputError, UnsupportedError):
        return math.nan


class Evaluator:
    """Costs configurations with one model, memoising every (configuration, costs) pair.

    ``jobs`` > 1 costs uncached configurations in that many worker processes
    (the discrete-event model takes tens of milliseconds per configuration).
    """

    def __init__(self, model: str | None, jobs: int = 1) -> None:
        from collsim.models import get_model

        self.model, self.fn = get_model(model)
        self._topologies: dict[str, Any] = {}
        self._protocols: dict[str, Any] = {}
        self._memo: dict[tuple, float] = {}
        self.calls = 0
        self.jobs = max(1, int(jobs or 1))
        self._pool: Any = None

    def close(self) -> None:
        """Stop the worker processes, if any."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _map(self, items: list[tuple[Config, dict[str, Any]]]) -> list[float]:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            try:
                ctx = multiprocessing.get_context("fork")
            except ValueError:  # no fork on this platform
                ctx = multiprocessing.get_context()
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx, initializer=_worker_init,
                                             initargs=(self.model,))
        chunk = max(1, len(items) // (4 * self.jobs))
        return list(self._pool.map(_worker_latency, items, chunksize=chunk))

    def _topology(self, name: str) -> Any:
        if name not in self._topologies:
            from collsim.topology import load_topology

            self._topologies[name] = load_topology(name)
        return self._topologies[name]

    def _protocol(self, name: str) -> Any:
        if name not in self._protocols:
            from collsim.ir.registry import load_protocol

            self._protocols[name] = load_protocol(name)
        return self._protocols[name]

    def generation(self, topology: str, ranks: int = 1) -> str:
        from collsim.analytic.model import GENERATIONS

        topo = self._topology(topology)
        gens = [str(topo.generation(r)).lower() for r in range(ranks)]
        known = [g for g in gens if g in GENERATIONS] or gens
        return min(known, key=lambda g: GENERATIONS.index(g) if g in GENERATIONS else -1)

    def latency(self, cfg: Config, costs: Mapping[str, Any] | None = None, frozen: Any = None) -> float:
        """Modelled latency (µs) of ``cfg``; raises what the model raises."""
        from collsim.models import DTYPES, SimRequest

        key = (cfg, frozen if frozen is not None else _freeze(costs or {}))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        request = SimRequest(
            topology=self._topology(cfg.topology), ranks=cfg.ranks, algorithm=cfg.algorithm,
            protocol=self._protocol(cfg.protocol), size_bytes=cfg.size_bytes, launch=cfg.launch,
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
                        self.latency(c, costs, frozen)  # raise the model's own error here
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


def _dtype_for(dtype: str, size: int) -> str:
    from collsim.models import DTYPES

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


# ---------------------------------------------------------------------------
# errors


def error_summary(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Median/mean/max absolute and median signed % error of ``predicted`` against ``measured``."""
    predicted = np.asarray(predicted, dtype=float)
    measured = np.asarray(measured, dtype=float)
    ok = np.isfinite(predicted) & np.isfinite(measured) & (measured > 0)
    if not ok.any():
        return {"n": 0, "median_abs_pct": math.nan, "mean_abs_pct": math.nan, "max_abs_pct": math.nan,
                "median_signed_pct": math.nan}
    signed = (predicted[ok] / measured[ok] - 1.0) * 100.0
    return {
        "n": int(ok.sum()),
        "median_abs_pct": float(np.median(np.abs(signed))),
        "mean_abs_pct": float(np.mean(np.abs(signed))),
        "max_abs_pct": float(np.max(np.abs(signed))),
        "median_signed_pct": float(np.median(signed)),
    }


# ---------------------------------------------------------------------------
# identifiability


def _hint(name: str, cfgs: Sequence[Config]) -> str:
    parts = name.split(".")
    protocols = {c.protocol for c in cfgs}
    families = set()
    for p in protocols:
        families.add({"ll": "ll", "ll128": "ll128", "ll128-atomic": "ll128", "sentinel": "ll"}.get(p, "simple"))
    for fam in ("ll128", "ll", "simple"):
        if fam in parts[1:] and fam not in families:
            return f"the data has no {fam.upper()}-family rows"
    if (name.startswith("pcie.") or "pci" in parts[1:] or parts[0] == "pci_bw_gbps"):
        return "no row's route leaves NVLink"
    if parts[0] == "launch_overhead_us" and not any(c.launch == "eager" for c in cfgs):
        return "no row is an eager launch (graph launches hide launch overhead)"
    if parts[0] in ("one_shot_steps", "two_shot_steps"):
        return "whole number"
    return ""


def _relevant(name: str, ev: Evaluator, cfgs: Sequence[Config]) -> bool:
    """False for a table entry keyed by a GPU generation or SM version none of the rows has.

    Such entries (``ll_max_bw_gbps.volta`` in a fit to Hopper rows) are left
    out of a table named as a whole rather than reported as unidentifiable.
    """
    from collsim.analytic.model import GENERATIONS

    key = name.split(".")[-1]
    if key in GENERATIONS:
        return key in {ev.generation(c.topology, c.ranks) for c in cfgs}
    if key.isdigit() and name.split(".")[0] == "nvlink_bw_per_link_gbps":
        sms = set()
        for c in cfgs:
            info = ev._topology(c.topology).gpu_info(0)
            sm = info.get("sm")
            sms.add(str(int(round(float(sm) * 10)) if isinstance(sm, float) and sm < 20 else sm))
        return key in sms
    return True


def identifiability(jac: np.ndarray, names: Sequence[str], cfgs: Sequence[Config] = ()) -> dict[str, str]:
    """``name -> reason`` for every parameter the Jacobian ``jac`` (rows x params) cannot determine.

    ``jac`` holds d log(latency) / d log(parameter). See the module docstring
    for the three tests.
    """
    jac = np.asarray(jac, dtype=float)
    refused: dict[str, str] = {}
    alive = []
    for j, name in enumerate(names):
        col = jac[:, j]
        if not np.all(np.isfinite(col)) or np.max(np.abs(col)) < MIN_SENSITIVITY:
            why = _hint(name, cfgs) or "no row's modelled latency depends on it"
            refused[name] = f"{why}: zero Jacobian column"
        else:
            alive.append(j)
    if len(alive) < 2:
        return refused
    cols = jac[:, alive] / np.linalg.norm(jac[:, alive], axis=0)
    gram = cols.T @ cols
    for a in range(len(alive)):
        for b in range(a + 1, len(alive)):
            cos = abs(gram[a, b])
            na, nb = names[alive[a]], names[alive[b]]
            if cos > MAX_COLLINEARITY and na not in refused and nb not in refused:
                refused[nb] = f"collinear with {na} (|cos| = {cos:.4f}): the data cannot separate them"
    keep = [k for k, j in enumerate(alive) if names[j] not in refused]
    if len(keep) >= 2:
        sub = cols[:, keep]
        _, s, vt = np.linalg.svd(sub, full_matrices=False)
        if s[-1] < MIN_SINGULAR_RATIO * s[0]:
            v = vt[-1]
            involved = [names[alive[keep[i]]] for i in np.argsort(-np.abs(v)) if abs(v[i]) > 0.25]
            for name in involved[1:]:
                refused[name] = (f"jointly collinear with {', '.join(n for n in involved if n != name)} "
                                 f"(singular value ratio {s[-1] / s[0]:.1e}): a combination leaves every row "
                                 "unchanged")
    return refused


# ---------------------------------------------------------------------------
# the fit


class _Problem:
    """Residuals and Jacobian of log-latency over log-parameters for one set of rows."""

    def __init__(self, evaluator: Evaluator, cfgs: Sequence[Config], measured: np.ndarray,
                 params: Sequence[Param], base: Mapping[str, float]) -> None:
        self.ev = evaluator
        self.cfgs = list(cfgs)
        self.log_meas = np.log(np.asarray(measured, dtype=float))
        self.params = list(params)
        self.base = dict(base)
        self.lo = np.log([p.lower for p in self.params])
        self.hi = np.log([p.upper for p in self.params])
        self.refresh = BROYDEN_REFRESH
        self._jac: np.ndarray | None = None
        self._x: np.ndarray | None = None
        self._base: np.ndarray | None = None
        self._age = 0

    def values(self, x: np.ndarray) -> dict[str, float]:
        out = dict(self.base)
        out.update({p.name: float(math.exp(v)) for p, v in zip(self.params, x)})
        return out

    def costs(self, x: np.ndarray) -> dict[str, Any]:
        return costs_from_values(self.ev.model, self.values(x))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.ev.latencies(self.cfgs, self.costs(x))

    def residuals(self, x: np.ndarray) -> np.ndarray:
        pred = self.predict(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(pred) - self.log_meas
        return np.where(np.isfinite(r), r, 50.0)

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Forward differences (a 1 % step in each parameter); between refreshes a Broyden rank-one update.

        Every ``refresh + 1``-th call (and the first) costs ``k`` model
        passes; the others reuse the previous Jacobian corrected by the step
        just taken, which costs none (the residuals at ``x`` are memoised).
        """
        base = np.log(self.predict(x))
        if self._jac is not None and self._age < self.refresh:
            dx = x - self._x
            if float(dx @ dx) > 0:
                dr = np.where(np.isfinite(base - self._base), base - self._base, 0.0)
                jac = self._jac + np.outer(dr - self._jac @ dx, dx) / float(dx @ dx)
                self._jac, self._x, self._base, self._age = jac, x.copy(), base, self._age + 1
                return jac
        jac = self.finite_differences(x, base)
        self._jac, self._x, self._base, self._age = jac, x.copy(), base, 0
        return jac

    def finite_differences(self, x: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        base = np.log(self.predict(x)) if base is None else base
        jac = np.zeros((len(self.cfgs), len(self.params)))
        for j in range(len(self.params)):
            step = FD_STEP if x[j] + FD_STEP <= self.hi[j] else -FD_STEP
            xx = x.copy()
            xx[j] += step
            jac[:, j] = (np.log(self.predict(xx)) - base) / step
        return np.where(np.isfinite(jac), jac, 0.0)


@dataclass
class FoldResult:
    """One cross-validation fold: errors before/after on its training and held-out rows."""

    fold: int
    train_rows: int
    heldout_rows: int
    values: dict[str, float]
    train_before: dict[str, float]
    train_after: dict[str, float]
    heldout_before: dict[str, float]
    heldout_after: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        def r(d: Mapping[str, float]) -> float:
            return round(float(d["median_abs_pct"]), 2)

        return {"fold": self.fold, "train_rows": self.train_rows, "heldout_rows": self.heldout_rows,
                "train_median_abs_pct": {"default": r(self.train_before), "fitted": r(self.train_after)},
                "heldout_median_abs_pct": {"default": r(self.heldout_before), "fitted": r(self.heldout_after)},
                "values": {k: float(f"{v:.6g}") for k, v in self.values.items()}}


@dataclass
class Calibration:
    """The outcome of :func:`calibrate`."""

    model: str
    params: list[Param]
    values: dict[str, float]  # fitted on every row
    refused: dict[str, str]  # group members not fitted (and, with strict=False, named ones)
    rows: pd.DataFrame  # the rows fitted, with predictions
    default_errors: dict[str, float]
    fitted_errors: dict[str, float]
    folds: list[FoldResult] = field(default_factory=list)
    heldout_default: dict[str, float] = field(default_factory=dict)
    heldout_fitted: dict[str, float] = field(default_factory=dict)
    message: str = ""
    nfev: int = 0
    base_costs: dict[str, float] = field(default_factory=dict)
    #: name -> multiplicative one-standard-error band of the fitted value (1.1 = ±10 %), from the
    #: Jacobian at the solution and the residual variance; inf when the rows cannot pin it down.
    uncertainty: dict[str, float] = field(default_factory=dict)

    @property
    def costs(self) -> dict[str, Any]:
        """The fitted values as cost overrides for the model."""
        return costs_from_values(self.model, {**self.base_costs, **self.values})


def fit_parameters(evaluator: Evaluator, cfgs: Sequence[Config], measured: np.ndarray, params: Sequence[Param],
                   base: Mapping[str, float] | None = None, max_nfev: int | None = None) -> tuple[dict[str, float], Any]:
    """Least-squares fit of ``params`` on ``(cfgs, measured)``; returns ``(values, scipy result)``."""
    from scipy.optimize import least_squares

    prob = _Problem(evaluator, cfgs, measured, params, base or {})
    x0 = np.log([p.default for p in params])
    span = prob.hi - prob.lo
    x0 = np.clip(x0, prob.lo + 1e-9 * span, prob.hi - 1e-9 * span)
    res = least_squares(prob.residuals, x0, jac=prob.jacobian, bounds=(prob.lo, prob.hi), method="trf",
                        x_scale=1.0, ftol=1e-7, xtol=1e-7, gtol=1e-8,
                        max_nfev=max_nfev or 40 * (len(params) + 1))
    return {p.name: float(math.exp(v)) for p, v in zip(params, res.x)}, res


def _uncertainty(ev: Evaluator, cfgs: Sequence[Config], measured: np.ndarray, params: Sequence[Param],
                 values: Mapping[str, float]) -> dict[str, float]:
    """One-standard-error multiplicative band of each fitted value (see :attr:`Calibration.uncertainty`).

    ``cov(log p) = s^2 (J^T J)^-1`` with ``s^2`` the residual variance of
    log-latency and ``J`` taken at the solution. A parameter no row depends
    on at the solution gets ``inf``; so do all when ``J^T J`` is singular.
    """
    prob = _Problem(ev, cfgs, measured, params, {})
    x = np.log([values[p.name] for p in params])
    jac = prob.finite_differences(x)
    r = prob.residuals(x)
    out = {p.name: math.inf for p in params}
    live = [j for j in range(len(params)) if np.max(np.abs(jac[:, j])) >= MIN_SENSITIVITY]
    dof = len(cfgs) - len(live)
    if not live or dof <= 0:
        return out
    sub = jac[:, live]
    normal = sub.T @ sub
    if np.linalg.cond(normal) > 1e12:
        return out
    s2 = max(float(r @ r) / dof, 1e-30)
    cov = s2 * np.linalg.inv(normal)
    for i, j in enumerate(live):
        var = float(cov[i, i])
        if math.isfinite(var) and 0 <= var < 700:
            out[params[j].name] = float(math.exp(math.sqrt(var)))
    return out


def _lost_at_solution(cal_unc: Mapping[str, float], params: Sequence[Param],
                      values: Mapping[str, float]) -> dict[str, str]:
    """``name -> reason`` for parameters the rows do not pin down at the fitted values (and not on a bound).

    Either no row depends on it there (infinite standard error), or its
    one-standard-error band is wider than :data:`MAX_SE_FACTOR`.
    """
    out = {}
    for p in params:
        factor = cal_unc.get(p.name, 1.0)
        if p.at_bound(values[p.name]):
            continue
        if not math.isfinite(factor):
            out[p.name] = "no row depends on it at the fitted values (zero Jacobian column at the solution)"
        elif factor > MAX_SE_FACTOR:
            out[p.name] = (f"the rows pin it only within a factor {factor:.3g} (one standard error) at the fitted "
                           "values")
    return out


def assign_folds(families: Sequence[str], folds: int, seed: int = 0) -> np.ndarray:
    """Fold index of every row: rows of each family shuffled and dealt round-robin (stratified)."""
    rng = np.random.default_rng(seed)
    out = np.zeros(len(families), dtype=int)
    groups: dict[str, list[int]] = {}
    for i, fam in enumerate(families):
        groups.setdefault(fam, []).append(i)
    offset = 0
    for fam in sorted(groups):
        idx = np.array(groups[fam])
        rng.shuffle(idx)
        out[idx] = (offset + np.arange(len(idx))) % folds
        offset += len(idx)
    return out


def calibrate(
    rows: pd.DataFrame,
    params: Sequence[str],
    *,
    model: str | None = None,
    folds: int = 5,
    seed: int = 0,
    strict: bool = True,
    evaluator: Evaluator | None = None,
    max_nfev: int | None = None,
    source: str | None = None,
) -> Calibration:
    """Fit ``params`` to the mapped ``rows`` (output of :func:`map_measurements`, ``mapped`` rows only).

    Parameters
    ----------
    rows : DataFrame
        Mapped rows: ``m_topology`` … ``m_launch``, ``size_bytes``, ``measured_us``, ``family``.
    params : names
        Canonical names, table prefixes or aliases (:func:`resolve_params`).
    model : str
        ``des`` or ``analytic`` (default: the default model).
    folds : int
        k of k-fold cross-validation (stratified by family); 0 or 1 skips it.
    strict : bool
        Raise :class:`IdentifiabilityError` when a named parameter cannot be
        identified (``collsim calibrate``); with ``False`` such parameters are
        dropped and listed in ``refused`` (``collsim validate``).

    Raises
    ------
    InputError
        Unknown parameters, too few rows, rows from several GPU generations
        (one cost file per fit), or (``IdentifiabilityError``) parameters
        the data cannot determine.
    """
    ev = evaluator or Evaluator(model)
    if len(rows) == 0:
        raise InputError("no mapped rows to fit", file=source)
    rows = rows.reset_index(drop=True)
    cfgs = configs_of(rows)
    gens = sorted({ev.generation(c.topology, c.ranks) for c in cfgs})
    if ev.model == "des" and len(gens) > 1:
        raise InputError(f"rows span GPU generations {', '.join(gens)}; the des model has one cost file per "
                         "generation: fit one at a time (--topology)", file=source)
    resolved = resolve_params(ev.model, params, gens[0] if gens else "hopper")
    resolved = [p for p in resolved if p.explicit or _relevant(p.name, ev, cfgs)] or resolved
    measured = rows["measured_us"].to_numpy(dtype=float)
    explicit_count = sum(1 for p in resolved if p.explicit) or 1
    if len(rows) < explicit_count + 2 or len(rows) < 3:
        k = max(explicit_count, 1)
        raise InputError(f"too few rows to fit {k} parameter(s): {len(rows)} mapped row(s), need at least {k + 2}",
                         file=source)
    # identifiability at the starting point, on all rows
    prob = _Problem(ev, cfgs, measured, resolved, {})
    x0 = np.log([p.default for p in resolved])
    jac = prob.finite_differences(x0)
    refused_all = identifiability(jac, [p.name for p in resolved], cfgs)
    explicit_refused = {n: why for n, why in refused_all.items()
                        if next(p for p in resolved if p.name == n).explicit}
    if strict and explicit_refused:
        kept = [p.name for p in resolved if p.name not in refused_all]
        detail = "; ".join(f"{n} ({why})" for n, why in explicit_refused.items())
        hint = f"; fit the others with --params {','.join(kept)}" if kept else ""
        raise IdentifiabilityError(f"the data cannot identify {detail}{hint}",
                                   file=source, field="--params")
    fitted = [p for p in resolved if p.name not in refused_all]
    if fitted and len(rows) < len(fitted) + 2:
        raise InputError(f"too few rows to fit {len(fitted)} parameter(s): {len(rows)} mapped row(s), need at least "
                         f"{len(fitted) + 2}", file=source)
    if not fitted:
        detail = "; ".join(f"{n} ({why})" for n, why in refused_all.items())
        raise IdentifiabilityError(f"the data identifies none of the parameters: {detail}", file=source,
                                   field="--params")
    defaults_pred = ev.latencies(cfgs, {})
    values, res = fit_parameters(ev, cfgs, measured, fitted, max_nfev=max_nfev)
    uncertainty = _uncertainty(ev, cfgs, measured, fitted, values)
    lost = _lost_at_solution(uncertainty, fitted, values)
    if lost:
        # identified at the documented values but not at the fitted ones (the rows moved onto another
        # regime, e.g. a bandwidth cap, or leave the value loose): leave them at their documented values
        # and refit the others
        explicit_lost = {n: why for n, why in lost.items() if next(p for p in fitted if p.name == n).explicit}
        if strict and explicit_lost:
            kept = [p.name for p in fitted if p.name not in lost]
            hint = f"; fit the others with --params {','.join(kept)}" if kept else ""
            detail = "; ".join(f"{n} ({why})" for n, why in explicit_lost.items())
            raise IdentifiabilityError(f"the data cannot identify {detail}{hint}", file=source, field="--params")
        refused_all.update(lost)
        fitted = [p for p in fitted if p.name not in lost]
        if not fitted:
            detail = "; ".join(f"{n} ({why})" for n, why in lost.items())
            raise IdentifiabilityError(f"the data identifies none of the parameters: {detail}", file=source,
                                       field="--params")
        values, res = fit_parameters(ev, cfgs, measured, fitted, max_nfev=max_nfev)
        uncertainty = _uncertainty(ev, cfgs, measured, fitted, values)
    fitted_costs = costs_from_values(ev.model, values)
    fitted_pred = ev.latencies(cfgs, fitted_costs)
    out_rows = rows.copy()
    out_rows["default_us"] = defaults_pred
    out_rows["fitted_us"] = fitted_pred
    cal = Calibration(
        model=ev.model, params=fitted, values=values, refused=refused_all, rows=out_rows,
        default_errors=error_summary(defaults_pred, measured), fitted_errors=error_summary(fitted_pred, measured),
        message=str(res.message), nfev=int(res.nfev), uncertainty=uncertainty,
    )
    if folds and folds > 1:
        if len(rows) < folds:
            raise InputError(f"{len(rows)} rows cannot be split into {folds} folds; use --folds {max(0, len(rows))} "
                             "or fewer", file=source, field="--folds")
        fold_of = assign_folds(list(rows["family"].astype(str)), folds, seed)
        oof = np.full(len(rows), np.nan)
        for f in range(folds):
            test = np.flatnonzero(fold_of == f)
            train = np.flatnonzero(fold_of != f)
            if len(test) == 0:
                continue
            if len(train) < len(fitted) + 1:
                raise InputError(f"fold {f + 1} leaves {len(train)} training rows for {len(fitted)} parameter(s); "
                                 "use fewer --folds", file=source, field="--folds")
            tr_cfgs = [cfgs[i] for i in train]
            vals, _ = fit_parameters(ev, tr_cfgs, measured[train], fitted, max_nfev=max_nfev)
            costs = costs_from_values(ev.model, vals)
            tr_pred = ev.latencies(tr_cfgs, costs)
            te_pred = ev.latencies([cfgs[i] for i in test], costs)
            oof[test] = te_pred
            cal.folds.append(FoldResult(
                fold=f + 1, train_rows=len(train), heldout_rows=len(test), values=vals,
                train_before=error_summary(defaults_pred[train], measured[train]),
                train_after=error_summary(tr_pred, measured[train]),
                heldout_before=error_summary(defaults_pred[test], measured[test]),
                heldout_after=error_summary(te_pred, measured[test]),
            ))
        cal.rows["heldout_us"] = oof
        cal.heldout_default = error_summary(defaults_pred, measured)
        cal.heldout_fitted = error_summary(oof, measured)
    return cal
