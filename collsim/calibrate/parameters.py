"""The parameters a calibration can fit: each model's cost keys, their short names, and physical bounds.

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

Examples
--------
>>> [(p.name, p.lower, p.upper) for p in resolve_params("des", ["launch"])]
[('launch_overhead_us', 0.05, 30.0)]
>>> costs_from_values("analytic", {"hw_latency_us.nvlink.ll": 0.7})
{'hw_latency_us': {'nvlink': {'ll': 0.7}}}
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collsim.analytic.constants import base_constants
from collsim.errors import InputError
from collsim.models import list_models
from collsim.sim.costs import INTEGER_PARAMETERS, parameter_table

__all__ = [
    "ALIASES",
    "BOUND_TOLERANCE",
    "Param",
    "parameter_defaults",
    "resolve_params",
    "bounds_for",
    "costs_from_values",
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

#: A fitted value within this relative distance of a bound is reported as on the bound.
BOUND_TOLERANCE = 5e-3


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
        for name, value in base_constants().items():
            if name not in ints:
                _flatten(name, value, out, ints)
    elif model == "des":
        table = parameter_table(generation)
        for name, entry in table.items():
            if name not in ints:
                out[name] = float(entry["value"])
        for name, entry in table.items():
            if name not in ints:
                out["pcie." + name] = float(entry["pcie"])
    else:
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


