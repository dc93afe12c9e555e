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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collsim.errors import InputError, UnsupportedError

__all__ = [
    "BREAKDOWN_KEYS",
    "DTYPES",
    "LAUNCH_MODES",
    "OPS",
    "SimRequest",
    "SimResult",
    "ModelFn",
    "register_model",
    "list_models",
    "default_model",
    "get_model",
    "validate_costs",
    "unsupported_reason",
    "resolve_topology",
    "resolve_protocol",
    "simulate",
]

#: Keys of :attr:`SimResult.breakdown`, in display order.
BREAKDOWN_KEYS: tuple[str, ...] = ("launch", "sync", "data", "reduce")

#: How a collective is launched and timed (the measurement harness): ``graph``: CUDA-graph steady state;
#: ``eager``: back-to-back launches on a stream (nccl-tests without -G), each overlapping the running kernel;
#: ``host-loop``: back-to-back calls timed on the host (launches overlap the same way); ``events``: one call
#: between two CUDA events with its launch hidden (kraken-style benchmarks); ``single-call``: one call on an
#: idle stream between two CUDA events, its launch inside the interval. The des model says what each adds
#: to the kernel (collsim.sim.model.harness_us).
LAUNCH_MODES: tuple[str, ...] = ("eager", "graph", "host-loop", "events", "single-call")

#: Element size in bytes of every dtype collsim knows (nccl-tests' names).
DTYPES: dict[str, int] = {
    "int8": 1,
    "uint8": 1,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}

#: Reduction operators (nccl-tests' ``redop`` names).
OPS: tuple[str, ...] = ("sum", "prod", "min", "max", "avg")


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
        One of :data:`collsim.ir.registry.ALGORITHMS`.
    protocol : Protocol
        A loaded protocol (``name``, ``algorithms``, ``analytic_family``,
        ``payload_efficiency``, ``sync_rounds(algorithm)``).
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


@dataclass
class _Entry:
    name: str
    fn: ModelFn
    description: str
    validate_costs: Callable[[Mapping[str, Any]], None] | None


_MODELS: dict[str, _Entry] = {}
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
    _MODELS[name] = _Entry(name, fn, description, validate_costs)
    if default:
        _DEFAULT = name
    return fn


def _discover() -> None:
    """Import the packages that register models (once; a package not installed is skipped)."""
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


def get_model(name: str | None) -> tuple[str, ModelFn]:
    """Return ``(name, fn)`` for ``name`` (the default when ``None``)."""
    _discover()
    if name is None:
        name = default_model()
    entry = _MODELS.get(name)
    if entry is None:
        raise InputError(f"unknown model {name!r}", field="model", choices=list_models())
    return name, entry.fn


def model_description(name: str) -> str:
    """The one-line description a model registered with."""
    _discover()
    entry = _MODELS.get(name)
    return entry.description if entry else ""


def validate_costs(model: str | None, costs: Mapping[str, Any] | None) -> None:
    """Check cost overrides against ``model``; raises :class:`InputError`."""
    name, _ = get_model(model)
    entry = _MODELS[name]
    if costs and entry.validate_costs is not None:
        entry.validate_costs(costs)


# ---------------------------------------------------------------------------
# resolution helpers shared with the scenario runner


def resolve_topology(topology: Any) -> Any:
    """Load ``topology`` (preset name, path or dict) unless it is already loaded."""
    if hasattr(topology, "num_gpus") and hasattr(topology, "route"):
        return topology
    from collsim.topology import load_topology

    return load_topology(topology)


def resolve_protocol(protocol: Any) -> Any:
    """Load ``protocol`` by name unless it is already a protocol object."""
    if not isinstance(protocol, str):
        return protocol
    from collsim.ir.registry import load_protocol

    return load_protocol(protocol)


def algorithm_names() -> tuple[str, ...]:
    """The algorithms collsim knows."""
    from collsim.ir.registry import ALGORITHMS

    return tuple(ALGORITHMS)


def unsupported_reason(protocol: Any, algorithm: str, ranks: int) -> str | None:
    """Why ``protocol`` cannot run ``algorithm`` on ``ranks`` GPUs, or ``None`` if it can."""
    supported = tuple(getattr(protocol, "algorithms", ()))
    if algorithm not in supported:
        return (
            f"protocol {protocol.name!r} has no {algorithm!r} program "
            f"(it supports: {', '.join(supported) or 'nothing'})"
        )
    if ranks < 2:
        return f"an AllReduce needs at least 2 ranks, got {ranks}"
    check = getattr(protocol, "unsupported_reason", None)
    if callable(check):
        return check(algorithm, ranks)
    return None


def _check_choice(value: Any, choices: tuple[str, ...] | list[str], what: str, fld: str) -> str:
    if value not in choices:
        raise InputError(f"unknown {what} {value!r}", field=fld, choices=list(choices))
    return value


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
        For unknown names and out-of-range values.
    UnsupportedError
        When the protocol has no program for this algorithm or rank count; the
        message lists what can run.
    """
    from collsim.units import parse_size

    topo = resolve_topology(topology)
    proto = resolve_protocol(protocol)
    _check_choice(algorithm, algorithm_names(), "algorithm", "algorithm")
    _check_choice(launch, LAUNCH_MODES, "launch mode", "launch")
    _check_choice(dtype, list(DTYPES), "dtype", "dtype")
    _check_choice(op, OPS, "reduction op", "op")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise InputError(f"ranks must be a positive whole number, got {ranks!r}", field="ranks")
    if ranks > topo.num_gpus:
        raise InputError(
            f"{ranks} ranks requested but topology {topo.name!r} has {topo.num_gpus} GPUs", field="ranks"
        )
    if channels is not None and (isinstance(channels, bool) or not isinstance(channels, int) or channels < 1):
        raise InputError(f"channels must be a positive whole number or unset, got {channels!r}", field="channels")
    size = parse_size(size_bytes) if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) else size_bytes
    if size <= 0:
        raise InputError(f"size must be a positive number of bytes, got {size}", field="size")
    elem = DTYPES[dtype]
    if size % elem:
        raise InputError(f"size {size} B is not a whole number of {dtype} elements ({elem} B each)", field="size")
    why = unsupported_reason(proto, algorithm, ranks)
    if why:
        runnable = [a for a in algorithm_names() if a in tuple(proto.algorithms)]
        raise UnsupportedError(
            f"cannot run {proto.name} {algorithm} on {ranks} ranks: {why}",
            field="algorithm" if algorithm not in runnable else "ranks",
            choices=runnable if algorithm not in runnable else None,
        )
    name, fn = get_model(model)
    validate_costs(name, costs)
    request = SimRequest(
        topology=topo,
        ranks=ranks,
        algorithm=algorithm,
        protocol=proto,
        size_bytes=size,
        launch=launch,
        channels=channels,
        dtype=dtype,
        elem_bytes=elem,
        op=op,
        costs=dict(costs or {}),
        timeline=timeline,
    )
    return fn(request)
