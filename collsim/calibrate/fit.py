"""Fit a model's cost parameters to measured latencies, with identifiability checks and cross-validation.

:func:`calibrate` is the whole procedure, in modules of one concept each:

* the parameters and their physical bounds (:mod:`collsim.calibrate.parameters`);
* the model, costed per configuration and memoised, serially or on worker
  processes (:mod:`collsim.calibrate.evaluate`): rows are the mapped
  measurement rows of :mod:`collsim.calibrate.mapping`, and every model
  evaluation goes through the model registry
  (:func:`collsim.models.get_model`) with the parameters as cost overrides,
  exactly as ``collsim run`` would cost them;
* which parameters the rows determine (:mod:`collsim.calibrate.identify`),
  at the documented values before the fit and at the solution after it;
* the bounded least-squares fit on log-latency
  (:mod:`collsim.calibrate.least_squares`);
* k-fold cross-validation stratified by family (:mod:`collsim.calibrate.folds`);
* the % error summaries (:mod:`collsim.calibrate.accuracy`).

Named parameters the rows cannot identify are refused with an
:class:`~collsim.calibrate.identify.IdentifiabilityError` naming each and
why; members of a named table or alias group that the data cannot identify
(and parameters of the default set of ``collsim calibrate`` / ``collsim
validate``) are left at their values and listed as not fitted.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collsim.calibrate.accuracy import error_summary
from collsim.calibrate.evaluate import Evaluator, configs_of
from collsim.calibrate.folds import FoldResult, cross_validate
from collsim.calibrate.identify import (
    IdentifiabilityError,
    applies_to_rows,
    identifiability,
    uncertainty,
    unidentified_at_solution,
)
from collsim.calibrate.least_squares import LogLatencyProblem, fit_parameters
from collsim.calibrate.parameters import Param, costs_from_values, resolve_params
from collsim.errors import InputError

__all__ = ["Calibration", "calibrate"]


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
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Fit ``params`` to the mapped ``rows`` (of :func:`~collsim.calibrate.mapping.map_measurements`, ``mapped`` only).

    Parameters
    ----------
    rows : DataFrame
        Mapped rows: ``m_topology`` … ``m_launch``, ``size_bytes``, ``measured_us``, ``family``.
    params : names
        Canonical names, table prefixes or aliases (:func:`~collsim.calibrate.parameters.resolve_params`).
    model : str
        ``des`` or ``analytic`` (default: the default model).
    folds : int
        k of k-fold cross-validation (stratified by family); 0 or 1 skips it.
    strict : bool
        Raise :class:`IdentifiabilityError` when a named parameter cannot be
        identified (``collsim calibrate``); with ``False`` such parameters are
        dropped and listed in ``refused`` (``collsim validate``).
    progress : callable, optional
        Told, in a few words, of each step as it starts (the fit, each fold).

    Raises
    ------
    InputError
        Unknown parameters, too few rows, rows from several GPU generations
        (one cost file per fit), or (``IdentifiabilityError``) parameters
        the data cannot determine.
    """
    ev = evaluator or Evaluator(model)
    say = progress or (lambda message: None)
    if len(rows) == 0:
        raise InputError("no mapped rows to fit", file=source)
    rows = rows.reset_index(drop=True)
    cfgs = configs_of(rows)
    gens = sorted({ev.generation(c.topology, c.ranks) for c in cfgs})
    if ev.model == "des" and len(gens) > 1:
        raise InputError(f"rows span GPU generations {', '.join(gens)}; the des model has one cost file per "
                         "generation: fit one at a time (--topology)", file=source)
    resolved = resolve_params(ev.model, params, gens[0] if gens else "hopper")
    resolved = [p for p in resolved if p.explicit or applies_to_rows(p.name, ev, cfgs)] or resolved
    measured = rows["measured_us"].to_numpy(dtype=float)
    explicit_count = sum(1 for p in resolved if p.explicit) or 1
    if len(rows) < explicit_count + 2 or len(rows) < 3:
        k = max(explicit_count, 1)
        raise InputError(f"too few rows to fit {k} parameter(s): {len(rows)} mapped row(s), need at least {k + 2}",
                         file=source)
    # identifiability at the starting point, on all rows
    say(f"which of {len(resolved)} parameters {len(rows)} rows identify")
    prob = LogLatencyProblem(ev, cfgs, measured, resolved, {})
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
    say(f"fitting {len(fitted)} parameters to all {len(rows)} rows")
    values, res = fit_parameters(ev, cfgs, measured, fitted, max_nfev=max_nfev)
    bands = uncertainty(ev, cfgs, measured, fitted, values)
    lost = unidentified_at_solution(bands, fitted, values)
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
        bands = uncertainty(ev, cfgs, measured, fitted, values)
    fitted_costs = costs_from_values(ev.model, values)
    fitted_pred = ev.latencies(cfgs, fitted_costs)
    out_rows = rows.copy()
    out_rows["default_us"] = defaults_pred
    out_rows["fitted_us"] = fitted_pred
    cal = Calibration(
        model=ev.model, params=fitted, values=values, refused=refused_all, rows=out_rows,
        default_errors=error_summary(defaults_pred, measured), fitted_errors=error_summary(fitted_pred, measured),
        message=str(res.message), nfev=int(res.nfev), uncertainty=bands,
    )
    if folds and folds > 1:
        cal.folds, oof = cross_validate(ev, rows, cfgs, measured, fitted, defaults_pred, folds, seed, max_nfev,
                                        source, progress=progress)
        cal.rows["heldout_us"] = oof
        cal.heldout_default = error_summary(defaults_pred, measured)
        cal.heldout_fitted = error_summary(oof, measured)
    return cal
