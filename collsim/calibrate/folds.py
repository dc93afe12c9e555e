"""Cross-validation of a calibration: rows dealt into folds stratified by family, each fold fitted without its rows."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collsim.calibrate.accuracy import error_summary
from collsim.calibrate.evaluate import Config, Evaluator
from collsim.calibrate.least_squares import fit_parameters
from collsim.calibrate.parameters import Param, costs_from_values
from collsim.errors import InputError

__all__ = ["FoldResult", "assign_folds", "cross_validate"]


@dataclass
class FoldResult:
    """One cross-validation fold: errors before/after on its training and held-out rows."""

    fold: int
    train_rows: int
    heldout_rows: int
    values: dict[str, float]
    train_before: dict[str, float]
    train_after: dict[str, float]
    heldout_before: dict[str, float]
    heldout_after: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        def r(d: Mapping[str, float]) -> float:
            return round(float(d["median_abs_pct"]), 2)

        return {"fold": self.fold, "train_rows": self.train_rows, "heldout_rows": self.heldout_rows,
                "train_median_abs_pct": {"default": r(self.train_before), "fitted": r(self.train_after)},
                "heldout_median_abs_pct": {"default": r(self.heldout_before), "fitted": r(self.heldout_after)},
                "values": {k: float(f"{v:.6g}") for k, v in self.values.items()}}


def assign_folds(families: Sequence[str], folds: int, seed: int = 0) -> np.ndarray:
    """Fold index of every row: rows of each family shuffled and dealt round-robin (stratified)."""
    rng = np.random.default_rng(seed)
    out = np.zeros(len(families), dtype=int)
    groups: dict[str, list[int]] = {}
    for i, fam in enumerate(families):
        groups.setdefault(fam, []).append(i)
    offset = 0
    for fam in sorted(groups):
        idx = np.array(groups[fam])
        rng.shuffle(idx)
        out[idx] = (offset + np.arange(len(idx))) % folds
        offset += len(idx)
    return out



def cross_validate(ev: Evaluator, rows: pd.DataFrame, cfgs: Sequence[Config], measured: np.ndarray,
                   params: Sequence[Param], defaults_pred: np.ndarray, folds: int, seed: int = 0,
                   max_nfev: int | None = None, source: str | None = None,
                   progress: Callable[[str], None] | None = None) -> tuple[list[FoldResult], np.ndarray]:
    """Fit ``params`` on every fold's training rows and predict its held-out rows (``progress`` hears of
    each fold as it starts).

    Returns each fold's errors before and after, and every row's prediction
    by the fit that did not see it (``nan`` for none).

    Raises
    ------
    InputError
        When the rows cannot be split into ``folds`` folds, or a fold leaves
        too few training rows for the parameters.
    """
    if len(rows) < folds:
        raise InputError(f"{len(rows)} rows cannot be split into {folds} folds; use --folds {max(0, len(rows))} "
                         "or fewer", file=source, field="--folds")
    fold_of = assign_folds(list(rows["family"].astype(str)), folds, seed)
    oof = np.full(len(rows), np.nan)
    results: list[FoldResult] = []
    for f in range(folds):
        test = np.flatnonzero(fold_of == f)
        train = np.flatnonzero(fold_of != f)
        if len(test) == 0:
            continue
        if len(train) < len(params) + 1:
            raise InputError(f"fold {f + 1} leaves {len(train)} training rows for {len(params)} parameter(s); "
                             "use fewer --folds", file=source, field="--folds")
        tr_cfgs = [cfgs[i] for i in train]
        if progress is not None:
            progress(f"cross-validation: fitting fold {f + 1} of {folds} ({len(train)} training rows)")
        vals, _ = fit_parameters(ev, tr_cfgs, measured[train], params, max_nfev=max_nfev)
        costs = costs_from_values(ev.model, vals)
        tr_pred = ev.latencies(tr_cfgs, costs)
        te_pred = ev.latencies([cfgs[i] for i in test], costs)
        oof[test] = te_pred
        results.append(FoldResult(
            fold=f + 1, train_rows=len(train), heldout_rows=len(test), values=vals,
            train_before=error_summary(defaults_pred[train], measured[train]),
            train_after=error_summary(tr_pred, measured[train]),
            heldout_before=error_summary(defaults_pred[test], measured[test]),
            heldout_after=error_summary(te_pred, measured[test]),
        ))
    return results, oof
