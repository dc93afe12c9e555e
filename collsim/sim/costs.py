"""Cost parameters of the simulator: one YAML file per GPU generation, plus overrides.

``collsim/data/costs/<generation>.yaml`` holds every parameter the simulator
charges, each with its value and source. A request's ``costs`` mapping
overrides any of them by name; ``pcie.NAME`` (or ``{"pcie": {NAME: v}}``)
overrides only the value used on routes that are not NVLink-only. Unknown
names are an :class:`~collsim.errors.InputError` that lists the valid ones.

>>> costs = load_costs("hopper", {"poll_period_us": 0.1})
>>> costs.nvlink.poll_period_us, costs.pcie.poll_period_us
(0.1, 0.1)
>>> load_costs("hopper", {"pcie.remote_read_us": 2.0}).pcie.remote_read_us
2.0
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import SimpleNamespace
from typing import Any

import yaml

from collsim.errors import InputError

__all__ = ["GENERATIONS", "Costs", "load_costs", "parameter_table", "validate_costs", "INTEGER_PARAMETERS"]

#: GPU generations with a cost file, oldest first.
GENERATIONS: tuple[str, ...] = ("volta", "ampere", "hopper", "blackwell")
#: Parameters that must be whole numbers.
INTEGER_PARAMETERS = frozenset({"max_channels", "min_bytes_per_channel", "transfer_pieces"})


@lru_cache(maxsize=None)
def _file(generation: str) -> dict[str, Any]:
    path = resources.files("collsim").joinpath(f"data/costs/{generation}.yaml")
    if not path.is_file():
        raise InputError(f"no simulator cost file for GPU generation {generation!r}", field="topology",
                         choices=GENERATIONS)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for section in ("parameters", "pcie"):
        for name, entry in (data.get(section) or {}).items():
            if not isinstance(entry, Mapping) or "value" not in entry or not entry.get("source"):
                raise InputError(f"parameter {name} needs a value and a source", file=str(path),
                                 field=f"{section}.{name}")
    unknown = set(data.get("pcie") or {}) - set(data["parameters"])
    if unknown:
        raise InputError(f"pcie overrides {sorted(unknown)} name no parameter", file=str(path), field="pcie")
    return data


def parameter_table(generation: str) -> dict[str, dict[str, Any]]:
    """``name -> {"value", "pcie", "source", "pcie_source"}`` for one generation (for docs and ``explain``)."""
    data = _file(generation)
    out = {}
    for name, entry in data["parameters"].items():
        pcie = (data.get("pcie") or {}).get(name)
        out[name] = {"value": entry["value"], "source": entry["source"],
                     "pcie": pcie["value"] if pcie else entry["value"],
                     "pcie_source": pcie["source"] if pcie else None}
    return out


@dataclass(frozen=True)
class Costs:
    """Resolved parameters for one simulation: ``nvlink`` and ``pcie`` namespaces of floats.

    ``nvlink`` applies to NVLink-only routes and to everything local; ``pcie``
    to transfers whose route leaves NVLink.
    """

    generation: str
    nvlink: SimpleNamespace
    pcie: SimpleNamespace

    def for_route(self, nvlink_only: bool) -> SimpleNamespace:
        return self.nvlink if nvlink_only else self.pcie


def _number(name: str, value: Any, field: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected a number, got {value!r}", field=field)
    if value < 0:
        raise InputError(f"a cost parameter cannot be negative, got {value!r}", field=field)
    if name in INTEGER_PARAMETERS:
        if int(value) != value or value < 1:
            raise InputError(f"expected a positive whole number, got {value!r}", field=field)
        return int(value)
    return float(value)


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
    data = _file(generation)
    base = {name: entry["value"] for name, entry in data["parameters"].items()}
    pcie = {**base, **{name: entry["value"] for name, entry in (data.get("pcie") or {}).items()}}
    both, pcie_only = _split_overrides(costs)
    valid = sorted(base)
    for prefix, overrides in (("", both), ("pcie.", pcie_only)):
        for name in overrides:
            if name not in base:
                raise InputError(f"unknown cost parameter {prefix + name!r} for the des model",
                                 field=f"costs.{prefix}{name}", choices=valid + ["pcie.<name>"])
    for name, value in both.items():
        base[name] = pcie[name] = _number(name, value, f"costs.{name}")
    for name, value in pcie_only.items():
        pcie[name] = _number(name, value, f"costs.pcie.{name}")
    for table in (base, pcie):
        for name in table:
            table[name] = _number(name, table[name], f"{generation}.yaml: {name}")
    return Costs(generation, SimpleNamespace(**base), SimpleNamespace(**pcie))


def validate_costs(costs: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` if ``costs`` names a parameter the des model does not have."""
    load_costs("hopper", costs)
