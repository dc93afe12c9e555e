"""Performance models: the registry, the request/result types and :func:`simulate`.

A *model* is a function ``fn(request: SimRequest) -> SimResult``. Models
register themselves with :func:`register_model`; the registry imports the
packages that hold models (``collsim.analytic``, ``collsim.sim``) the first
time it is asked for one, so users never import them by hand.

The default model is the one last registered with ``default=True`` (the
discrete-event simulator ``des`` claims it), else ``analytic``.

Examples
--------
>>> from collsim.models import simulate
>>> r = simulate("hgx-h100", ranks=8, algorithm="ring", protocol="ll",
...              size_bytes=8192, model="analytic")      # doctest: +SKIP
>>> sorted(r.breakdown)                                   # doctest: +SKIP
['data', 'launch', 'reduce', 'sync']
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collsim.config import (DTYPES, LAUNCH_MODES, OPS, RunConfig, algorithm_names, fabric_reason, resolve_protocol,
                            resolve_topology, unsupported_reason)
from collsim.errors import InputError, UnsupportedError
from collsim.lru import LRUCache

__all__ = [
    "BREAKDOWN_KEYS",
    "DTYPES",
    "LAUNCH_MODES",
    "OPS",
    "SimRequest",
    "SimResult",
    "ModelFn",
    "ModelRef",
    "PerformanceModel",
    "register_model",
    "list_models",
    "default_model",
    "performance_model",
    "get_model",
    "model_description",
    "validate_costs",
    "model_ref",
    "model_function",
    "unsupported_reason",
    "resolve_topology",
    "resolve_protocol",
    "simulate",
    "checked_request",
]

#: Keys of :attr:`SimResult.breakdown`, in display order.
BREAKDOWN_KEYS: tuple[str, ...] = ("launch", "sync", "data", "reduce")

# ---------------------------------------------------------------------------
# request and result


@dataclass(frozen=True)
class SimRequest:
    """One AllReduce to cost: everything a model needs, already resolved and checked.

    Attributes
    ----------
    topology : Topology
        The loaded topology (see :mod:`collsim.topology`).
    ranks : int
        Number of participating GPUs; they are GPUs ``0 .. ranks-1``.
    algorithm : str
        One of :data:`collsim.algorithms.ALGORITHMS`.
    protocol : Protocol
        A loaded protocol (``name``, ``algorithms``, ``analytic_family``,
        ``payload_efficiency``, ``barriers_per_exchange``, ``barriers_per_launch``).
    size_bytes : int
        Bytes per rank (the nccl-tests ``size`` column).
    launch : str
        ``"eager"`` or ``"graph"``.
    channels : int or None
        Channels (thread blocks per collective); ``None`` lets the model choose.
    dtype, elem_bytes, op : str, int, str
        Element type, its size, reduction operator.
    costs : Mapping
        Cost-parameter overrides for the model (validated by it).
    timeline : bool
        Whether the model should record a timeline.
    """

    topology: Any
    ranks: int
    algorithm: str
    protocol: Any
    size_bytes: int
    launch: str = "graph"
    channels: int | None = None
    dtype: str = "float32"
    elem_bytes: int = 4
    op: str = "sum"
    costs: Mapping[str, Any] = field(default_factory=dict)
    timeline: bool = False

    @classmethod
    def of(cls, config: RunConfig, costs: Mapping[str, Any] | None = None, timeline: bool = False) -> "SimRequest":
        """The request for a checked configuration, with the model's cost overrides."""
        return cls(topology=config.topology, ranks=config.ranks, algorithm=config.algorithm,
                   protocol=config.protocol, size_bytes=config.size_bytes, launch=config.launch,
                   channels=config.channels, dtype=config.dtype, elem_bytes=config.elem_bytes, op=config.op,
                   costs=dict(costs or {}), timeline=timeline)

    @property
    def count(self) -> int:
        """Elements per rank."""
        return self.size_bytes // self.elem_bytes

    @property
    def gpus(self) -> tuple[int, ...]:
        """The participating GPU indices."""
        return tuple(range(self.ranks))


def bus_factor(ranks: int) -> float:
    """nccl-tests' AllReduce bus-bandwidth factor ``2(n-1)/n``.

    >>> bus_factor(8)
    1.75
    """
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


@dataclass
class SimResult:
    """What a model says about one request.

    Attributes
    ----------
    latency_us : float
        Time of one collective, µs.
    algbw_gbps, busbw_gbps : float
        ``size / time`` and ``algbw × 2(n-1)/n`` (nccl-tests definitions), GB/s (10^9 B/s).
    breakdown : dict
        µs spent in ``launch``, ``sync``, ``data``, ``reduce``; sums to ``latency_us``.
    model : str
        Name of the model that produced it.
    timeline : list of dict or None
        Events ``{rank, kind, start_us, end_us, peer, bytes, label}`` when asked for.
    events : int
        Simulation events processed (0 for closed-form models; rank 0's alone when ``des`` simulated one
        rank for all, see :mod:`collsim.sim.symmetry`).
    notes : list of str
        Remarks on the result (assumptions taken, caps hit).
    channels : int or None
        Channels the model used, when it chose or used a count.
    """

    latency_us: float
    algbw_gbps: float
    busbw_gbps: float
    breakdown: dict[str, float]
    model: str
    timeline: list[dict[str, Any]] | None = None
    events: int = 0
    notes: list[str] = field(default_factory=list)
    channels: int | None = None

    @classmethod
    def from_breakdown(
        cls,
        request: SimRequest,
        breakdown: Mapping[str, float],
        *,
        model: str,
        timeline: list[dict[str, Any]] | None = None,
        events: int = 0,
        notes: list[str] | None = None,
        channels: int | None = None,
    ) -> "SimResult":
        """Build a result whose latency is the sum of ``breakdown`` (keys :data:`BREAKDOWN_KEYS`)."""
        parts = {key: float(breakdown.get(key, 0.0)) for key in BREAKDOWN_KEYS}
        extra = set(breakdown) - set(BREAKDOWN_KEYS)
        if extra:
            raise ValueError(f"unknown breakdown keys {sorted(extra)}")
        latency = sum(parts.values())
        algbw = request.size_bytes / (latency * 1e3) if latency > 0 else 0.0
        return cls(
            latency_us=latency,
            algbw_gbps=algbw,
            busbw_gbps=algbw * bus_factor(request.ranks),
            breakdown=parts,
            model=model,
            timeline=timeline,
            events=events,
            notes=list(notes or []),
            channels=channels,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON-ready)."""
        return {
            "model": self.model,
            "latency_us": self.latency_us,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
            "breakdown": dict(self.breakdown),
            "channels": self.channels,
            "events": self.events,
            "notes": list(self.notes),
            "timeline": self.timeline,
        }


ModelFn = Callable[[SimRequest], SimResult]


# ---------------------------------------------------------------------------
# registry


@dataclass(frozen=True)
class PerformanceModel:
    """A registered performance model: what ``--model NAME`` / ``model: NAME`` runs.

    Attributes
    ----------
    name : str
        The name users give.
    fn : callable
        ``fn(SimRequest) -> SimResult``.
    description : str
        One line for ``--help`` and listings.
    validate_costs : callable or None
        ``validate_costs(costs)`` raises :class:`InputError` (``field`` set to
        ``costs.<key>``) for a cost override the model cannot use.
    """

    name: str
    fn: ModelFn
    description: str = ""
    validate_costs: Callable[[Mapping[str, Any]], None] | None = None

    def check_costs(self, costs: Mapping[str, Any] | None) -> None:
        """Raise :class:`InputError` when ``costs`` holds an override this model cannot use."""
        if costs and self.validate_costs is not None:
            self.validate_costs(costs)


_MODELS: dict[str, PerformanceModel] = {}
_DEFAULT: str | None = None
_FALLBACK_DEFAULT = "analytic"
#: Packages that register models when imported.
_MODEL_PACKAGES: tuple[str, ...] = ("collsim.analytic", "collsim.sim")
_discovered = False


def register_model(
    name: str,
    fn: ModelFn,
    *,
    default: bool = False,
    description: str = "",
    validate_costs: Callable[[Mapping[str, Any]], None] | None = None,
) -> ModelFn:
    """Make ``fn`` available as model ``name``.

    Parameters
    ----------
    name : str
        The name users pass as ``--model`` / ``model:``.
    fn : callable
        ``fn(SimRequest) -> SimResult``.
    default : bool
        Make it the default model.
    description : str
        One line for ``--help`` and listings.
    validate_costs : callable, optional
        ``validate_costs(costs)`` raises :class:`InputError` (``field`` set to
        ``costs.<key>``) when a cost override is unknown or ill-typed; run at
        scenario load time so errors point at the file.
    """
    global _DEFAULT
    _MODELS[name] = PerformanceModel(name, fn, description, validate_costs)
    if default:
        _DEFAULT = name
    return fn


def _discover() -> None:
    """Import the packages that register models (once; a package not installed is skipped).

    The packages are named as data, not imported by statement: they import this module to register, and
    this module never depends on them (the import graph stays a tree; see tests/test_import_graph.py).
    """
    global _discovered
    if _discovered:
        return
    for package in _MODEL_PACKAGES:
        try:
            importlib.import_module(package)
        except ModuleNotFoundError as err:
            # Only the package itself being absent is fine; a broken import inside it is not.
            if err.name is None or not (package == err.name or package.startswith(err.name + ".")):
                raise
    _discovered = True


def list_models() -> list[str]:
    """Names of the registered models, default first.

    >>> "analytic" in list_models()
    True
    """
    _discover()
    names = sorted(_MODELS)
    first = default_model()
    return [first] + [n for n in names if n != first] if first in _MODELS else names


def default_model() -> str:
    """The model used when none is named."""
    _discover()
    if _DEFAULT is not None and _DEFAULT in _MODELS:
        return _DEFAULT
    if _FALLBACK_DEFAULT in _MODELS:
        return _FALLBACK_DEFAULT
    if _MODELS:
        return sorted(_MODELS)[0]
    raise InputError("no performance model is installed")


def __getattr__(name: str) -> Any:  # DEFAULT_MODEL resolves lazily
    if name == "DEFAULT_MODEL":
        return default_model()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def performance_model(name: str | None) -> PerformanceModel:
    """The registered model called ``name`` (the default when ``None``); an unknown name is an InputError.

    >>> performance_model("analytic").name
    'analytic'
    """
    _discover()
    if name is None:
        name = default_model()
    entry = _MODELS.get(name)
    if entry is None:
        raise InputError(f"unknown model {name!r}", field="model", choices=list_models())
    return entry


def get_model(name: str | None) -> tuple[str, ModelFn]:
    """``(name, fn)`` of :func:`performance_model` ``(name)``; kept for callers written before it."""
    entry = performance_model(name)
    return entry.name, entry.fn


def model_description(name: str) -> str:
    """The one-line description a model registered with."""
    _discover()
    entry = _MODELS.get(name)
    return entry.description if entry else ""


def validate_costs(model: str | None, costs: Mapping[str, Any] | None) -> None:
    """Check cost overrides against ``model``; raises :class:`InputError`."""
    performance_model(model).check_costs(costs)


# ---------------------------------------------------------------------------
# a model's function where rows run (another process, a Dask worker)

ModelRef = tuple[str, str]

#: Model functions imported in this process, by :data:`ModelRef`.
_IMPORTED_FUNCTIONS: "LRUCache[ModelFn | None]" = LRUCache(maxsize=64)


def model_ref(name: str) -> ModelRef | None:
    """``(module, qualified name)`` of model ``name``'s function, if a worker can import it from there.

    >>> model_ref("analytic")
    ('collsim.analytic.model', 'analytic_model')
    """
    try:
        fn = performance_model(name).fn
    except InputError:
        return None
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<" in qualname or module == "__main__":
        return None
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return (module, qualname) if obj is fn else None


def _import_function(ref: ModelRef) -> ModelFn | None:
    try:
        obj: Any = importlib.import_module(ref[0])
        for part in ref[1].split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj if callable(obj) else None


def model_function(name: str, ref: ModelRef | None) -> ModelFn:
    """The function to run for model ``name``: the one at ``ref`` (what the process that made the row had
    registered), else this process's registry's."""
    if ref is not None:
        fn = _IMPORTED_FUNCTIONS.get(ref, lambda: _import_function(ref))
        if fn is not None:
            return fn
    return performance_model(name).fn


def simulate(
    topology: Any = "hgx-h100",
    ranks: int = 8,
    algorithm: str = "one-shot",
    protocol: Any = "ll",
    size_bytes: int | str = 8192,
    launch: str = "graph",
    channels: int | None = None,
    model: str | None = None,
    dtype: str = "float32",
    op: str = "sum",
    costs: Mapping[str, Any] | None = None,
    timeline: bool = False,
) -> SimResult:
    """Cost one AllReduce.

    Parameters
    ----------
    topology : str, dict or Topology
        Preset name (``collsim topologies`` lists them), topology file path, inline dict or loaded topology.
    ranks : int
        Number of GPUs taking part (GPUs ``0 .. ranks-1``).
    algorithm : str
        ``one-shot``, ``two-shot`` or ``ring``.
    protocol : str or Protocol
        Protocol name (``barrier``, ``simple``, ``ll``, ``ll128``, …) or loaded protocol.
    size_bytes : int or str
        Bytes per rank; strings such as ``"8KiB"`` are accepted.
    launch : str
        ``eager`` (pays kernel-launch overhead) or ``graph`` (CUDA-graph steady state).
    channels : int, optional
        Channels to use; ``None`` chooses like NCCL would.
    model : str, optional
        ``analytic`` or ``des``; ``None`` = the default model.
    dtype, op : str
        Element type and reduction operator.
    costs : dict, optional
        Cost-parameter overrides, validated by the model.
    timeline : bool
        Record a per-rank timeline in the result.

    Returns
    -------
    SimResult

    Raises
    ------
    InputError
        For unknown names and out-of-range values, and when the protocol has
        no program for this algorithm or rank count (the message lists what can run).
    UnsupportedError
        When the model cannot cost this configuration.
    """
    config = RunConfig(topology=topology, protocol=protocol, algorithm=algorithm, launch=launch, dtype=dtype,
                       op=op, ranks=ranks, channels=channels, size_bytes=size_bytes)
    entry, request = checked_request(config, model=model, costs=costs, timeline=timeline)
    return entry.fn(request)


def checked_request(config: RunConfig, model: str | None = None, costs: Mapping[str, Any] | None = None,
                    timeline: bool = False) -> tuple[PerformanceModel, SimRequest]:
    """What :func:`simulate` runs for a checked configuration: the model and the request.

    After the configuration's own checks (:class:`~collsim.config.RunConfig`, field by field): whether the
    protocol can run it, then the model's name, then its cost overrides.

    Raises
    ------
    InputError
        When the protocol has no program for this algorithm or rank count (the message lists what can run),
        for an unknown model or a cost override the model cannot use.
    """
    why = config.unsupported_reason()
    if why:
        proto, algorithm = config.protocol, config.algorithm
        runnable = [a for a in algorithm_names() if a in tuple(proto.algorithms)]
        if algorithm in runnable and config.ranks >= 2 and fabric_reason(proto, algorithm, config.topology):
            raise InputError(f"cannot run {proto.name} {algorithm} on {config.topology.name}: {why}",
                             field="topology")
        raise InputError(
            f"cannot run {proto.name} {algorithm} on {config.ranks} ranks: {why}",
            field="algorithm" if algorithm not in runnable else "ranks",
            choices=runnable if algorithm not in runnable else None,
        )
    entry = performance_model(model)
    entry.check_costs(costs)
    return entry, SimRequest.of(config, costs=costs, timeline=timeline)
