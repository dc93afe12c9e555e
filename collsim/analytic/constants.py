"""The analytic model's constants: loaded from ``collsim/data/costs/nccl_tuning.yaml``.

Each constant is a scalar or a one- or two-level table. Scenario ``costs:``
overrides replace a scalar, or single entries of a table.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from collsim.errors import InputError

__all__ = ["COSTS_FILE", "base_constants", "constant_sources", "merged_constants", "validate_costs"]

COSTS_FILE = "data/costs/nccl_tuning.yaml"


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    text = resources.files("collsim").joinpath(COSTS_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return data


def base_constants() -> dict[str, Any]:
    """Name → value of every constant (a fresh copy)."""
    return {name: copy.deepcopy(entry["value"]) for name, entry in _load()["constants"].items()}


def constant_sources() -> dict[str, str]:
    """Name → where the value comes from."""
    return {name: entry["source"] for name, entry in _load()["constants"].items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _norm_key(table: Mapping[Any, Any], key: Any) -> Any:
    """Table keys may be ints (SM numbers); accept ``"90"`` or ``"sm90"`` for ``90``."""
    if key in table:
        return key
    text = str(key).lower().removeprefix("sm").removeprefix("_")
    for k in table:
        if str(k).lower() == text:
            return k
    return None


def _merge(name: str, base: Any, override: Any, path: str) -> Any:
    if isinstance(base, Mapping):
        if not isinstance(override, Mapping):
            raise InputError(
                f"expected a table of {', '.join(map(str, base))} values, got {override!r}",
                field=path,
            )
        out = dict(base)
        for key, value in override.items():
            real = _norm_key(base, key)
            if real is None:
                raise InputError(f"unknown entry {key!r}", field=f"{path}.{key}", choices=[str(k) for k in base])
            out[real] = _merge(name, base[real], value, f"{path}.{key}")
        return out
    if not _is_number(override):
        raise InputError(f"expected a number, got {override!r}", field=path)
    if override < 0:
        raise InputError(f"must not be negative, got {override!r}", field=path)
    if name in ("max_channels", "one_shot_steps", "two_shot_steps"):
        if int(override) != override or override < 1:
            raise InputError(f"expected a positive whole number, got {override!r}", field=path)
        return int(override)
    return float(override)


def merged_constants(costs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The constants with ``costs`` applied; raises :class:`InputError` on a bad override."""
    consts = base_constants()
    for name, value in (costs or {}).items():
        if name not in consts:
            raise InputError(
                f"unknown cost parameter {name!r} for the analytic model",
                field=f"costs.{name}",
                choices=sorted(consts),
            )
        consts[name] = _merge(name, consts[name], value, f"costs.{name}")
    return consts


def validate_costs(costs: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` if ``costs`` holds an override the analytic model cannot use."""
    merged_constants(costs)
