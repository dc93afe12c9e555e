"""The configuration of one AllReduce, and the rules each of its fields is checked by.

One rule per field, one message per rule, whoever asks: :func:`collsim.simulate`
and ``collsim simulate`` / ``collsim explain`` check a :class:`RunConfig`; a
scenario file's lists are checked item by item with the same rule functions
(:mod:`collsim.scenario.loader`), so ``channels: 0`` in a scenario,
``simulate(channels=0)`` and ``--channels 0`` all say the same thing, each
located where it came from (file, line and key; argument; flag).

Every rule raises :class:`~collsim.errors.InputError` with ``field`` set to
the configuration's field name (``algorithm``, ``ranks``, ``size``, ...);
front ends relocate it (``protocols[1]``, ``--size``).

What costs the configuration (the performance model and its cost overrides)
is the model registry's to check (:func:`collsim.models.performance_model`,
:func:`collsim.models.validate_costs`): the parameters are each model's own.

Examples
--------
>>> c = RunConfig(topology="hgx-h100", protocol="ll", algorithm="ring", ranks=4, size_bytes="8KiB")
>>> c.ranks, c.size_bytes, c.elem_bytes, c.launch
(4, 8192, 4, 'graph')
>>> check_channels(0)
Traceback (most recent call last):
...
collsim.errors.InputError: channels: channels must be at least 1 (or unset, to choose like NCCL), got 0
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from collsim.errors import InputError
from collsim.algorithms import ALGORITHMS, generate
from collsim.ir.registry import load_protocol
from collsim.lru import LRUCache
from collsim.units import format_size, parse_ranks, parse_size

__all__ = [
    "LAUNCH_MODES",
    "DTYPES",
    "OPS",
    "RunConfig",
    "algorithm_names",
    "check_choice",
    "check_algorithm",
    "check_launch",
    "check_dtype",
    "check_op",
    "check_ranks",
    "check_ranks_fit",
    "check_channels",
    "check_size",
    "check_size_elements",
    "check_size_fits",
    "check_channels_fit",
    "MAX_CHANNELS",
    "resolve_topology",
    "resolve_protocol",
    "unsupported_reason",
    "fabric_needs",
    "fabric_reason",
    "topologies_for",
]

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

#: Most channels one collective can use: NCCL's ``MAXCHANNELS`` (64, ``src/include/device.h``; also its
#: default ``maxCTAs``). A channel is one CTA, so a GPU's SM count caps it too (:func:`check_channels_fit`).
MAX_CHANNELS = 64


# ---------------------------------------------------------------------------
# the rules, one per field


def algorithm_names() -> tuple[str, ...]:
    """The algorithms collsim knows."""
    return tuple(ALGORITHMS)


def check_choice(value: Any, choices: Sequence[str], what: str, field: str) -> str:
    """``value`` if it is one of ``choices``, else ``unknown <what> 'value'`` listing them.

    >>> check_choice("tree", ("ring",), "algorithm", "algorithm")
    Traceback (most recent call last):
    ...
    collsim.errors.InputError: algorithm: unknown algorithm 'tree' (valid: ring)
    """
    if value not in choices:
        raise InputError(f"unknown {what} {value!r}", field=field, choices=list(choices))
    return value


def check_algorithm(name: Any) -> str:
    """One of :func:`algorithm_names`."""
    return check_choice(name, algorithm_names(), "algorithm", "algorithm")


def check_launch(mode: Any) -> str:
    """One of :data:`LAUNCH_MODES`."""
    return check_choice(mode, LAUNCH_MODES, "launch mode", "launch")


def check_dtype(name: Any) -> str:
    """One of :data:`DTYPES`."""
    return check_choice(name, list(DTYPES), "dtype", "dtype")


def check_op(name: Any) -> str:
    """One of :data:`OPS`."""
    return check_choice(name, OPS, "reduction op", "op")


def check_ranks(value: Any) -> int:
    """One rank count: a whole number, at least 1 (the messages of a scenario's ``ranks:``).

    >>> check_ranks(2.5)
    Traceback (most recent call last):
    ...
    collsim.errors.InputError: ranks: expected a whole number of ranks, got 2.5
    """
    try:
        if isinstance(value, str) or not isinstance(value, (int, float)):
            raise InputError(f"expected a rank count, got {value!r}")
        (count,) = parse_ranks(value)
    except InputError as err:
        raise InputError(err.message, field="ranks", choices=err.choices) from None
    return count


def check_ranks_fit(ranks: int, topology: Any) -> None:
    """``ranks`` GPUs exist on ``topology``."""
    if ranks > topology.num_gpus:
        raise InputError(f"{ranks} ranks requested but topology {topology.name!r} has {topology.num_gpus} GPUs",
                         field="ranks")


def check_channels(value: Any) -> int | None:
    """A channel count of at least 1, or ``None`` (the model chooses, like NCCL)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"channels must be a positive whole number or unset, got {value!r}", field="channels")
    if value < 1:
        raise InputError(f"channels must be at least 1 (or unset, to choose like NCCL), got {value}",
                         field="channels")
    return value


def check_channels_fit(channels: int | None, topology: Any, ranks: int) -> None:
    """``channels`` CTAs can run at once on GPUs ``0 .. ranks-1``: at most :data:`MAX_CHANNELS` and at most
    the SM count of the smallest of them (each channel is one CTA, all resident together)."""
    if channels is None:
        return
    gpus = [topology.gpu_info(rank) for rank in range(min(ranks, topology.num_gpus))] or [topology.gpu_info(0)]
    smallest = min(gpus, key=lambda g: g["sm_count"])
    limit = min(MAX_CHANNELS, int(smallest["sm_count"]))
    if channels > limit:
        raise InputError(
            f"{channels} channels requested; at most {limit}: a channel is one CTA, NCCL runs at most "
            f"{MAX_CHANNELS} (MAXCHANNELS) and a {smallest['model']} has {smallest['sm_count']} SMs",
            field="channels")


def check_size_fits(size: int, topology: Any) -> None:
    """``size`` bytes per rank fit in the memory of a GPU of ``topology`` (the largest among its GPUs)."""
    from collsim.topology.catalog import gpu_memory_bytes  # lazy: the topology package imports networkx

    models = sorted({topology.gpu_info(rank)["model"] for rank in range(topology.num_gpus)})
    limit, model = max((gpu_memory_bytes(m), m) for m in models)
    if size > limit:
        raise InputError(
            f"{format_size(size)} per rank does not fit in a GPU's memory: the largest GPU of "
            f"{topology.name!r} ({model}) holds {format_size(limit)}, and each rank's buffer lives there",
            field="size")


def check_size_elements(size: int, dtype: str) -> None:
    """``size`` bytes hold a whole number of ``dtype`` elements."""
    elem = DTYPES[dtype]
    if size % elem:
        raise InputError(f"size {size} B is not a whole number of {dtype} elements ({elem} B each)", field="size")


def check_size(value: Any, dtype: str) -> int:
    """Bytes per rank (``8192``, ``"8KiB"``): a positive whole number of bytes and of ``dtype`` elements."""
    try:
        size = parse_size(value)
    except InputError as err:
        raise InputError(err.message, field="size", choices=err.choices) from None
    check_size_elements(size, dtype)
    return size


def resolve_topology(topology: Any) -> Any:
    """Load ``topology`` (preset name, path or dict) unless it is already loaded."""
    if hasattr(topology, "num_gpus") and hasattr(topology, "route"):
        return topology
    from collsim.topology import load_topology  # lazy: start-up (networkx; the model registry imports this module)

    return load_topology(topology)


def resolve_protocol(protocol: Any) -> Any:
    """Load ``protocol`` by name unless it is already a protocol object."""
    if not isinstance(protocol, str):
        return protocol
    return load_protocol(protocol)


#: (protocol key, algorithm) -> what its program needs of the switches
_FABRIC_NEEDS = LRUCache(256)

_FEATURE_WORDS = {"multicast": "multicast", "reduction": "reduce"}


def fabric_needs(protocol: Any, algorithm: str) -> frozenset[str]:
    """What ``protocol``'s program under ``algorithm`` needs of the switches (``multicast``, ``reduction``:
    NVLink SHARP), read off its operations (:attr:`collsim.ir.program.Program.fabric_needs`)."""
    return _FABRIC_NEEDS.get((protocol.key, algorithm), lambda: generate(protocol, algorithm).fabric_needs)


def topologies_for(protocol: Any, algorithm: str) -> list[str]:
    """The presets whose switches do what ``protocol``'s program under ``algorithm`` needs of them."""
    from collsim.topology import presets_with  # lazy: start-up (networkx; the model registry imports this module)

    return presets_with(fabric_needs(protocol, algorithm))


def fabric_reason(protocol: Any, algorithm: str, topology: Any) -> str | None:
    """Why ``topology``'s switches cannot run ``protocol``'s program under ``algorithm`` (it has multimem
    operations and the switches do not multicast or reduce), or ``None``; the message names the presets
    whose switches can."""
    needs = fabric_needs(protocol, algorithm)
    fabric = getattr(topology, "fabric", None)
    if not needs or fabric is None:
        return None
    missing = fabric.lacks(needs)
    if not missing:
        return None
    what = " and ".join(_FEATURE_WORDS[f] for f in sorted(needs))
    lacking = " or ".join(_FEATURE_WORDS[f] for f in missing)
    said = f": {fabric.source}" if fabric.source else " (its file does not say they do)"
    return (f"protocol {protocol.name!r} needs switches that {what} (NVLink SHARP); the switches of topology "
            f"{topology.name!r} do not {lacking}{said}; topologies whose switches do: "
            f"{', '.join(topologies_for(protocol, algorithm))}")


def unsupported_reason(protocol: Any, algorithm: str, ranks: int, topology: Any = None) -> str | None:
    """Why ``protocol`` cannot run ``algorithm`` on ``ranks`` GPUs (of ``topology``, when given), or ``None``
    if it can.

    A scenario skips such combinations with this reason as a note; :func:`collsim.simulate` refuses them
    with an :class:`~collsim.errors.InputError` listing what can run.
    """
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
        why = check(algorithm, ranks)
        if why:
            return why
    if topology is not None:
        return fabric_reason(protocol, algorithm, topology)
    return None


# ---------------------------------------------------------------------------
# the configuration

#: The rule of each field that needs nothing but its own value.
_FIELD_RULES = {"algorithm": check_algorithm, "launch": check_launch, "dtype": check_dtype, "op": check_op,
                "channels": check_channels}


class RunConfig(BaseModel):
    """One AllReduce to cost, every field checked by its rule (in this order, the first failure raised).

    Attributes
    ----------
    topology : Topology
        Given as a preset name, a topology file path, an inline mapping or a loaded topology.
    protocol : Protocol
        Given as a name (shipped, mutant or ``.py`` file) or a loaded protocol.
    algorithm : str
        ``one-shot``, ``two-shot`` or ``ring``.
    launch : str
        One of :data:`LAUNCH_MODES` (the measurement harness).
    dtype, op : str
        Element type and reduction operator.
    ranks : int
        GPUs ``0 .. ranks-1`` of the topology take part.
    channels : int or None
        ``None`` lets the model choose.
    size_bytes : int
        Bytes per rank; given as a number or a size such as ``"8KiB"``.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    topology: Any
    protocol: Any
    algorithm: str
    launch: str = "graph"
    dtype: str = "float32"
    op: str = "sum"
    ranks: int
    channels: int | None = None
    size_bytes: int

    @field_validator("topology", mode="before")
    @classmethod
    def _topology(cls, value: Any) -> Any:
        try:
            return resolve_topology(value)
        except InputError as err:
            if err.file:  # located in the topology's own file
                raise
            inner = f"topology.{err.field}" if err.field else "topology"
            raise type(err)(err.message, field=inner, choices=err.choices) from None

    @field_validator("protocol", mode="before")
    @classmethod
    def _protocol(cls, value: Any) -> Any:
        return resolve_protocol(value)

    @field_validator("algorithm", "launch", "dtype", "op", "channels", mode="before")
    @classmethod
    def _by_rule(cls, value: Any, info: ValidationInfo) -> Any:
        return _FIELD_RULES[info.field_name](value)

    @field_validator("ranks", mode="before")
    @classmethod
    def _ranks(cls, value: Any, info: ValidationInfo) -> int:
        count = check_ranks(value)
        check_ranks_fit(count, info.data["topology"])
        return count

    @field_validator("channels", mode="after")
    @classmethod
    def _channels_fit(cls, value: int | None, info: ValidationInfo) -> int | None:
        if "ranks" in info.data:
            check_channels_fit(value, info.data["topology"], info.data["ranks"])
        return value

    @field_validator("size_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any, info: ValidationInfo) -> int:
        size = check_size(value, info.data["dtype"])
        check_size_fits(size, info.data["topology"])
        return size

    @property
    def elem_bytes(self) -> int:
        """Bytes per element of :attr:`dtype`."""
        return DTYPES[self.dtype]

    def unsupported_reason(self) -> str | None:
        """Why the protocol cannot run this algorithm on this many ranks of this topology, or ``None`` (see
        :func:`unsupported_reason`)."""
        return unsupported_reason(self.protocol, self.algorithm, self.ranks, self.topology)
