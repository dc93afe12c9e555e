"""The analytic baseline model (``--model analytic``): NCCL's tuning formula, extended.

Importing this package registers the model; :mod:`collsim.models` does so on
first use. See :mod:`collsim.analytic.model` for the formulas and
``collsim/data/costs/nccl_tuning.yaml`` for the constants and their sources.
"""
from __future__ import annotations

from collsim.analytic.constants import base_constants, constant_sources, validate_costs
from collsim.analytic.model import Plan, analytic_model, plan
from collsim.models import register_model

__all__ = ["analytic_model", "plan", "Plan", "base_constants", "constant_sources", "validate_costs"]

register_model(
    "analytic",
    analytic_model,
    description="closed form: NCCL's tuning model (baseLat + steps x hwLat + bytes/bw), extended to one-/two-shot",
    validate_costs=validate_costs,
)
