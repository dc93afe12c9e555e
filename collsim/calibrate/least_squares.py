"""The least-squares fit of a calibration: residuals of log-latency, their Jacobian, and the bounded solve.

The fit is bounded least squares on log-latency
(:func:`scipy.optimize.least_squares`, trust-region reflective): it
minimises ``sum_i (log model_i(p) - log measured_i)^2`` over the named
parameters ``p``, searched in ``log p`` so that every step is relative and
every bound positive.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from collsim.calibrate.evaluate import Config, Evaluator
from collsim.calibrate.parameters import Param, costs_from_values

__all__ = ["FD_STEP", "BROYDEN_REFRESH", "LogLatencyProblem", "fit_parameters"]

#: Relative finite-difference step of the Jacobian (1 %).
FD_STEP = math.log(1.01)
#: Broyden updates between two finite-difference Jacobians during a fit.
BROYDEN_REFRESH = 3


class LogLatencyProblem:
    """Residuals and Jacobian of log-latency over log-parameters for one set of rows.

    ``x`` is the vector of log-parameters (``params`` order); parameters not
    in ``params`` take ``base`` (or their documented values). Every model
    evaluation goes through ``evaluator`` and is memoised there.
    """

    def __init__(self, evaluator: Evaluator, cfgs: Sequence[Config], measured: np.ndarray,
                 params: Sequence[Param], base: Mapping[str, float]) -> None:
        self.ev = evaluator
        self.cfgs = list(cfgs)
        self.log_meas = np.log(np.asarray(measured, dtype=float))
        self.params = list(params)
        self.base = dict(base)
        self.lo = np.log([p.lower for p in self.params])
        self.hi = np.log([p.upper for p in self.params])
        self.refresh = BROYDEN_REFRESH
        self._jac: np.ndarray | None = None
        self._x: np.ndarray | None = None
        self._base: np.ndarray | None = None
        self._age = 0

    def values(self, x: np.ndarray) -> dict[str, float]:
        out = dict(self.base)
        out.update({p.name: float(math.exp(v)) for p, v in zip(self.params, x)})
        return out

    def costs(self, x: np.ndarray) -> dict[str, Any]:
        return costs_from_values(self.ev.model, self.values(x))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.ev.latencies(self.cfgs, self.costs(x))

    def residuals(self, x: np.ndarray) -> np.ndarray:
        pred = self.predict(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(pred) - self.log_meas
        return np.where(np.isfinite(r), r, 50.0)

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Forward differences (a 1 % step in each parameter); between refreshes a Broyden rank-one update.

        Every ``refresh + 1``-th call (and the first) costs ``k`` model
        passes; the others reuse the previous Jacobian corrected by the step
        just taken, which costs none (the residuals at ``x`` are memoised).
        """
        base = np.log(self.predict(x))
        if self._jac is not None and self._age < self.refresh:
            dx = x - self._x
            if float(dx @ dx) > 0:
                dr = np.where(np.isfinite(base - self._base), base - self._base, 0.0)
                jac = self._jac + np.outer(dr - self._jac @ dx, dx) / float(dx @ dx)
                self._jac, self._x, self._base, self._age = jac, x.copy(), base, self._age + 1
                return jac
        jac = self.finite_differences(x, base)
        self._jac, self._x, self._base, self._age = jac, x.copy(), base, 0
        return jac

    def finite_differences(self, x: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        base = np.log(self.predict(x)) if base is None else base
        jac = np.zeros((len(self.cfgs), len(self.params)))
        for j in range(len(self.params)):
            step = FD_STEP if x[j] + FD_STEP <= self.hi[j] else -FD_STEP
            xx = x.copy()
            xx[j] += step
            jac[:, j] = (np.log(self.predict(xx)) - base) / step
        return np.where(np.isfinite(jac), jac, 0.0)


def fit_parameters(evaluator: Evaluator, cfgs: Sequence[Config], measured: np.ndarray, params: Sequence[Param],
                   base: Mapping[str, float] | None = None, max_nfev: int | None = None) -> tuple[dict[str, float], Any]:
    """Least-squares fit of ``params`` on ``(cfgs, measured)``; returns ``(values, scipy result)``."""
    from scipy.optimize import least_squares

    prob = LogLatencyProblem(evaluator, cfgs, measured, params, base or {})
    x0 = np.log([p.default for p in params])
    span = prob.hi - prob.lo
    x0 = np.clip(x0, prob.lo + 1e-9 * span, prob.hi - 1e-9 * span)
    res = least_squares(prob.residuals, x0, jac=prob.jacobian, bounds=(prob.lo, prob.hi), method="trf",
                        x_scale=1.0, ftol=1e-7, xtol=1e-7, gtol=1e-8,
                        max_nfev=max_nfev or 40 * (len(params) + 1))
    return {p.name: float(math.exp(v)) for p, v in zip(params, res.x)}, res
