"""Cost parameters of the simulator: one YAML file per GPU generation, plus overrides.

``collsim/data/costs/<generation>.yaml`` gives every parameter of
:class:`CostSet` a value and a source (a calibrated value also names the rows
it was fitted to and its physically plausible ``bounds``). A request's
``costs`` mapping overrides any of them by name; ``pcie.NAME`` (or ``{"pcie":
{NAME: v}}``) overrides only the value used on routes that are not
NVLink-only. Unknown names are an :class:`~collsim.errors.InputError` that
lists the valid ones (:func:`parameter_names`).

>>> costs = load_costs("hopper", {"poll_period_us": 0.1})
>>> costs.nvlink.poll_period_us, costs.pcie.poll_period_us
(0.1, 0.1)
>>> load_costs("hopper", {"pcie.remote_read_us": 2.0}).pcie.remote_read_us
2.0
>>> "pcie.fence_sys_us" in parameter_names()
True
>>> round(load_costs("hopper").nvlink.fence_gpu_us, 3)   # 285 cycles at 1.98 GHz
0.144
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from collsim.errors import InputError

__all__ = ["GENERATIONS", "Parameter", "CostSet", "Costs", "load_costs", "parameter_table", "parameter_names",
           "validate_costs", "INTEGER_PARAMETERS"]

#: GPU generations with a cost file, oldest first.
GENERATIONS: tuple[str, ...] = ("volta", "ampere", "hopper", "blackwell")


@dataclass(frozen=True, slots=True)
class CostSet:
    """The value of every cost parameter the simulator charges, for one kind of route (NVLink or PCIe).

    Units are in the names: ``_us`` microseconds, ``_gbps`` GB/s (10^9 B/s) per direction, ``_ghz``; the
    others are counts, bytes or fractions. What each one is, and where its value comes from, is in the
    cost files.
    """

    # clocks and instruction costs
    sm_clock_ghz: float
    op_overhead_us: float
    peer_issue_us: float
    sync_group_us: float
    # what one CTA (channel) moves and computes
    cta_store_gbps: float
    cta_bytes_in_flight: float
    cta_local_load_gbps: float
    fp32_lanes_per_sm: int
    max_channels: int
    min_bytes_per_channel: int
    hbm_efficiency: float
    # the memory system
    remote_write_us: float
    remote_read_us: float
    poll_period_us: float
    acquire_us: float
    fence_sys_us: float
    fence_gpu_us: float
    fence_sc_extra_us: float
    # atomics
    atomic_wire_factor: float
    atomic_remote_us: float
    l2_atomic_gops: float
    # NVLink SHARP: the switch multicasts and reduces (multimem operations, collsim.sim.fabric)
    nvls_link_efficiency: float
    nvls_reduce_gbps: float
    nvls_reduce_us: float
    nvls_multicast_us: float
    # launch and measurement harness
    launch_overhead_us: float
    host_call_us: float
    host_barrier_us: float
    # the host CPU's proxy thread (collsim.sim.host)
    host_poll_period_us: float
    host_copy_gbps: float
    kernel_start_us: float
    kernel_end_us: float
    stream_gap_us: float
    event_pair_us: float
    harness_cold_us: float
    start_skew_us: float
    transfer_pieces: int


#: Every parameter name, in :class:`CostSet` order.
_NAMES: tuple[str, ...] = tuple(f.name for f in fields(CostSet))
#: Parameters that must be whole numbers.
INTEGER_PARAMETERS = frozenset(f.name for f in fields(CostSet) if f.type in (int, "int"))


@dataclass(frozen=True)
class Parameter:
    """One documented parameter value: where it comes from and, for a calibrated value, its plausible range."""

    name: str
    value: float | int
    source: str
    bounds: tuple[float, float] | None = None


@dataclass(frozen=True)
class Costs:
    """Resolved parameters for one simulation.

    ``nvlink`` applies to NVLink-only routes and to everything local; ``pcie`` to transfers whose route
    leaves NVLink. ``documented`` holds the generation's file entries (sources kept), ``pcie.NAME`` for
    PCIe values that differ.
    """

    generation: str
    nvlink: CostSet
    pcie: CostSet
    documented: Mapping[str, Parameter] = field(default_factory=dict, compare=False, repr=False)

    def for_route(self, nvlink_only: bool) -> CostSet:
        return self.nvlink if nvlink_only else self.pcie


def _number(name: str, value: Any, field_name: str, file: str | None = None) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected a number, got {value!r}", file=file, field=field_name)
    if value < 0:
        raise InputError(f"a cost parameter cannot be negative, got {value!r}", file=file, field=field_name)
    if name in INTEGER_PARAMETERS:
        if int(value) != value or value < 1:
            raise InputError(f"expected a positive whole number, got {value!r}", file=file, field=field_name)
        return int(value)
    return float(value)


def _entry(path: str, section: str, name: str, entry: Any, clock_ghz: float | None) -> Parameter:
    """One file entry: ``value`` (in the unit of its name) or, for a ``_us`` parameter, ``cycles`` at the
    generation's ``sm_clock_ghz``; a ``source``; for a calibrated value, its ``bounds``."""
    where = f"{section}.{name}"
    if name not in _NAMES:
        raise InputError(f"{name} is no cost parameter of the simulator", file=path, field=where,
                         choices=list(_NAMES))
    if not isinstance(entry, Mapping) or ("value" in entry) == ("cycles" in entry) or not entry.get("source"):
        raise InputError(f"parameter {name} needs a value (or, in microseconds, cycles) and a source", file=path,
                         field=where)
    if "cycles" in entry:
        if not name.endswith("_us") or clock_ghz is None:
            raise InputError(f"only a microsecond parameter can be given in cycles, and the file needs "
                             f"sm_clock_ghz for it", file=path, field=f"{where}.cycles")
        value = _number(name, entry["cycles"], f"{where}.cycles", path) / (clock_ghz * 1e3)
    else:
        value = _number(name, entry["value"], where, path)
    bounds = entry.get("bounds")
    if bounds is not None:
        if (not isinstance(bounds, (list, tuple)) or len(bounds) != 2
                or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
                or not bounds[0] <= bounds[1]):
            raise InputError(f"bounds of {name} are [low, high], got {bounds!r}", file=path, field=f"{where}.bounds")
        if not bounds[0] <= value <= bounds[1]:
            raise InputError(f"{name} = {value} lies outside its plausible range {list(bounds)}", file=path,
                             field=where)
        bounds = (float(bounds[0]), float(bounds[1]))
    return Parameter(name, value, str(entry["source"]), bounds)


@lru_cache(maxsize=None)
def _documented(generation: str) -> tuple[dict[str, Parameter], dict[str, Parameter]]:
    """``(parameters, pcie values)`` of a generation's cost file, checked."""
    path = resources.files("collsim").joinpath(f"data/costs/{generation}.yaml")
    if not path.is_file():
        raise InputError(f"no simulator cost file for GPU generation {generation!r}", field="topology",
                         choices=GENERATIONS)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    where = str(path)
    clock = (data.get("parameters") or {}).get("sm_clock_ghz")
    clock_ghz = _entry(where, "parameters", "sm_clock_ghz", clock, None).value if clock is not None else None
    tables = []
    for section in ("parameters", "pcie"):
        tables.append({name: _entry(where, section, name, entry, clock_ghz)
                       for name, entry in (data.get(section) or {}).items()})
    missing = [name for name in _NAMES if name not in tables[0]]
    if missing:
        raise InputError(f"the cost file gives no value for {', '.join(missing)}", file=where, field="parameters")
    return tables[0], tables[1]


def parameter_table(generation: str) -> dict[str, dict[str, Any]]:
    """``name -> {"value", "pcie", "source", "pcie_source", "bounds"}`` for one generation (for docs and
    calibration)."""
    base, pcie = _documented(generation)
    out = {}
    for name, p in base.items():
        other = pcie.get(name)
        out[name] = {"value": p.value, "source": p.source, "bounds": p.bounds,
                     "pcie": other.value if other else p.value, "pcie_source": other.source if other else None}
    return out


def parameter_names() -> list[str]:
    """Every name a ``costs:`` override may use: each parameter, and ``pcie.<parameter>``."""
    return list(_NAMES) + ["pcie." + name for name in _NAMES]


def _split_overrides(costs: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    both: dict[str, Any] = {}
    pcie: dict[str, Any] = {}
    for key, value in (costs or {}).items():
        key = str(key)
        if key == "pcie" and isinstance(value, Mapping):
            pcie.update({str(k): v for k, v in value.items()})
        elif key.startswith("pcie."):
            pcie[key[len("pcie."):]] = value
        else:
            both[key] = value
    return both, pcie


def load_costs(generation: str, costs: Mapping[str, Any] | None = None) -> Costs:
    """The parameters of ``generation`` with ``costs`` overrides applied.

    Raises
    ------
    InputError
        For an unknown generation, an unknown parameter (the message lists
        the valid ones) or a value that is not a non-negative number.
    """
    base, pcie_doc = _documented(generation)
    both, pcie_only = _split_overrides(costs)
    for prefix, overrides in (("", both), ("pcie.", pcie_only)):
        for name in overrides:
            if name not in base:
                raise InputError(f"unknown cost parameter {prefix + name!r} for the des model",
                                 field=f"costs.{prefix}{name}", choices=sorted(_NAMES) + ["pcie.<name>"])
    nvlink = {name: p.value for name, p in base.items()}
    pcie = dict(nvlink, **{name: p.value for name, p in pcie_doc.items()})
    for name, value in both.items():
        nvlink[name] = pcie[name] = _number(name, value, f"costs.{name}")
    for name, value in pcie_only.items():
        pcie[name] = _number(name, value, f"costs.pcie.{name}")
    documented = dict(base, **{"pcie." + name: p for name, p in pcie_doc.items()})
    return Costs(generation, CostSet(**nvlink), CostSet(**pcie), documented)


def validate_costs(costs: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` if ``costs`` names a parameter the des model does not have."""
    load_costs("hopper", costs)
