"""A run's cost overrides: a calibrated profile underneath, the scenario's ``costs:`` on top.

The parameters themselves, their values and sources live with each model
(:mod:`collsim.sim.costs`, :mod:`collsim.analytic.constants`); a model's
registered validator checks overrides (:func:`collsim.models.validate_costs`).
This module only layers override tables.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collsim.calibrate.profile import load_profile

__all__ = ["merge_costs", "profile_costs", "with_profile"]


def merge_costs(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top, merging nested cost tables key by key.

    >>> merge_costs({"a": 1, "t": {"x": 1, "y": 2}}, {"t": {"y": 3}})
    {'a': 1, 't': {'x': 1, 'y': 3}}
    """
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_costs(merged[key], value)
        else:
            merged[key] = value
    return merged


def profile_costs(path: str | Path, costs: Mapping[str, Any], model_name: str) -> dict[str, Any]:
    """The costs of the calibrated profile at ``path`` (fitted for ``model_name``) with ``costs`` on top."""
    return merge_costs(load_profile(str(path), model=model_name), costs)


def with_profile(scenario: Any, profile: str | Path, model_name: str) -> Any:
    """``scenario`` with the costs of a calibrated profile underneath its own ``costs:``."""
    return dataclasses.replace(scenario, costs=profile_costs(profile, scenario.costs, model_name))
