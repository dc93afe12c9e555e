"""Which parameters the rows can determine, before a fit and at its solution.

Before fitting, the Jacobian of log-latency with respect to log-parameters
is taken at the starting values on the training rows. A parameter is refused

* when no row's modelled latency moves by more than 0.001 % for a 1 % change
  (a zero column: e.g. an LL128 cost with no LL128 row, launch overhead with
  only graph-launched rows), or
* when its column is collinear with another's (|cos| > 0.999: e.g. launch
  overhead and kernel start time on eager-only rows, which both add the same
  constant), or when a combination of columns is (smallest singular value of
  the normalised Jacobian below 1e-3 of the largest).

After the fit, the Jacobian at the solution gives each value a
multiplicative standard error (:attr:`collsim.calibrate.fit.Calibration.uncertainty`). A parameter
no row depends on at the fitted values, or whose one-standard-error band is
wider than a factor :data:`MAX_SE_FACTOR`, is not identified either: it is
reset to its documented value and the others are refitted. A value on a
bound is kept and flagged (the rows want it outside its physical range: a
mechanism the model lacks).

Named parameters are refused with an :class:`IdentifiabilityError` naming
each and why; members of a named table or alias group that the data cannot
identify (and parameters of the default set of ``collsim calibrate`` /
``collsim validate``) are left at their values and listed as not fitted.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from collsim.analytic.model import GENERATIONS
from collsim.calibrate.evaluate import Config, Evaluator
from collsim.calibrate.least_squares import LogLatencyProblem
from collsim.calibrate.parameters import Param
from collsim.errors import InputError
from collsim.ir.registry import load_protocol

__all__ = [
    "MIN_SENSITIVITY",
    "MAX_COLLINEARITY",
    "MIN_SINGULAR_RATIO",
    "MAX_SE_FACTOR",
    "IdentifiabilityError",
    "identifiability",
    "applies_to_rows",
    "uncertainty",
    "unidentified_at_solution",
]

#: Smallest relative effect (|d log t / d log p|) a parameter must have on some row.
MIN_SENSITIVITY = 1e-3
#: Columns whose |cosine| exceeds this are collinear.
MAX_COLLINEARITY = 0.999
#: Smallest singular value, relative to the largest, of the normalised Jacobian.
MIN_SINGULAR_RATIO = 1e-3
#: A fitted value whose one-standard-error band is wider than this factor is not identified by the rows.
MAX_SE_FACTOR = 10.0


class IdentifiabilityError(InputError):
    """The data cannot determine a named parameter; the message says which and why."""


def _families(cfgs: Sequence[Config]) -> set[str]:
    """The analytic families the rows' protocols declare (:attr:`collsim.ir.protocol.Protocol.analytic_family`)."""
    return {str(load_protocol(name).analytic_family).lower() for name in sorted({c.protocol for c in cfgs})}


def _hint(name: str, cfgs: Sequence[Config]) -> str:
    """Why no row depends on parameter ``name``, when the rows say (else ``""``)."""
    parts = name.split(".")
    families = _families(cfgs)
    for fam in ("ll128", "ll", "simple"):
        if fam in parts[1:] and fam not in families:
            return f"the data has no {fam.upper()}-family rows"
    if (name.startswith("pcie.") or "pci" in parts[1:] or parts[0] == "pci_bw_gbps"):
        return "no row's route leaves NVLink"
    if parts[0] == "launch_overhead_us" and not any(c.launch == "eager" for c in cfgs):
        return "no row is an eager launch (graph launches hide launch overhead)"
    if parts[0] in ("one_shot_steps", "two_shot_steps"):
        return "whole number"
    return ""


def applies_to_rows(name: str, ev: Evaluator, cfgs: Sequence[Config]) -> bool:
    """False for a table entry keyed by a GPU generation or SM version none of the rows has.

    Such entries (``ll_max_bw_gbps.volta`` in a fit to Hopper rows) are left
    out of a table named as a whole rather than reported as unidentifiable.
    """
    key = name.split(".")[-1]
    if key in GENERATIONS:
        return key in {ev.generation(c.topology, c.ranks) for c in cfgs}
    if key.isdigit() and name.split(".")[0] == "nvlink_bw_per_link_gbps":
        sms = set()
        for c in cfgs:
            info = ev.topology(c.topology).gpu_info(0)
            sm = info.get("sm")
            sms.add(str(int(round(float(sm) * 10)) if isinstance(sm, float) and sm < 20 else sm))
        return key in sms
    return True


def identifiability(jac: np.ndarray, names: Sequence[str], cfgs: Sequence[Config] = ()) -> dict[str, str]:
    """``name -> reason`` for every parameter the Jacobian ``jac`` (rows x params) cannot determine.

    ``jac`` holds d log(latency) / d log(parameter). See the module docstring
    for the three tests; ``cfgs`` (the rows) only make the reasons more specific.
    """
    jac = np.asarray(jac, dtype=float)
    refused: dict[str, str] = {}
    alive = []
    for j, name in enumerate(names):
        col = jac[:, j]
        if not np.all(np.isfinite(col)) or np.max(np.abs(col)) < MIN_SENSITIVITY:
            why = _hint(name, cfgs) or "no row's modelled latency depends on it"
            refused[name] = f"{why}: zero Jacobian column"
        else:
            alive.append(j)
    if len(alive) < 2:
        return refused
    cols = jac[:, alive] / np.linalg.norm(jac[:, alive], axis=0)
    gram = cols.T @ cols
    for a in range(len(alive)):
        for b in range(a + 1, len(alive)):
            cos = abs(gram[a, b])
            na, nb = names[alive[a]], names[alive[b]]
            if cos > MAX_COLLINEARITY and na not in refused and nb not in refused:
                refused[nb] = f"collinear with {na} (|cos| = {cos:.4f}): the data cannot separate them"
    keep = [k for k, j in enumerate(alive) if names[j] not in refused]
    if len(keep) >= 2:
        sub = cols[:, keep]
        _, s, vt = np.linalg.svd(sub, full_matrices=False)
        if s[-1] < MIN_SINGULAR_RATIO * s[0]:
            v = vt[-1]
            involved = [names[alive[keep[i]]] for i in np.argsort(-np.abs(v)) if abs(v[i]) > 0.25]
            for name in involved[1:]:
                refused[name] = (f"jointly collinear with {', '.join(n for n in involved if n != name)} "
                                 f"(singular value ratio {s[-1] / s[0]:.1e}): a combination leaves every row "
                                 "unchanged")
    return refused


def uncertainty(ev: Evaluator, cfgs: Sequence[Config], measured: np.ndarray, params: Sequence[Param],
                values: Mapping[str, float]) -> dict[str, float]:
    """One-standard-error multiplicative band of each fitted value (1.1 = ±10 %).

    ``cov(log p) = s^2 (J^T J)^-1`` with ``s^2`` the residual variance of
    log-latency and ``J`` taken at the solution. A parameter no row depends
    on at the solution gets ``inf``; so do all when ``J^T J`` is singular.
    """
    prob = LogLatencyProblem(ev, cfgs, measured, params, {})
    x = np.log([values[p.name] for p in params])
    jac = prob.finite_differences(x)
    r = prob.residuals(x)
    out = {p.name: math.inf for p in params}
    live = [j for j in range(len(params)) if np.max(np.abs(jac[:, j])) >= MIN_SENSITIVITY]
    dof = len(cfgs) - len(live)
    if not live or dof <= 0:
        return out
    sub = jac[:, live]
    normal = sub.T @ sub
    if np.linalg.cond(normal) > 1e12:
        return out
    s2 = max(float(r @ r) / dof, 1e-30)
    cov = s2 * np.linalg.inv(normal)
    for i, j in enumerate(live):
        var = float(cov[i, i])
        if math.isfinite(var) and 0 <= var < 700:
            out[params[j].name] = float(math.exp(math.sqrt(var)))
    return out


def unidentified_at_solution(cal_unc: Mapping[str, float], params: Sequence[Param],
                             values: Mapping[str, float]) -> dict[str, str]:
    """``name -> reason`` for parameters the rows do not pin down at the fitted values (and not on a bound).

    Either no row depends on it there (infinite standard error), or its
    one-standard-error band is wider than :data:`MAX_SE_FACTOR`.
    """
    out = {}
    for p in params:
        factor = cal_unc.get(p.name, 1.0)
        if p.at_bound(values[p.name]):
            continue
        if not math.isfinite(factor):
            out[p.name] = "no row depends on it at the fitted values (zero Jacobian column at the solution)"
        elif factor > MAX_SE_FACTOR:
            out[p.name] = (f"the rows pin it only within a factor {factor:.3g} (one standard error) at the fitted "
                           "values")
    return out
