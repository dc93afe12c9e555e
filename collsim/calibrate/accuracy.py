"""How far modelled latencies are from measured ones: the % error summary every calibration report uses.

Examples
--------
>>> s = error_summary([11.0, 9.0, 20.0], [10.0, 10.0, 10.0])
>>> s["n"], round(s["median_abs_pct"], 1), round(s["max_abs_pct"], 1), round(s["median_signed_pct"], 1)
(3, 10.0, 100.0, 10.0)
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["error_summary"]


def error_summary(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Median/mean/max absolute and median signed % error of ``predicted`` against ``measured``."""
    predicted = np.asarray(predicted, dtype=float)
    measured = np.asarray(measured, dtype=float)
    ok = np.isfinite(predicted) & np.isfinite(measured) & (measured > 0)
    if not ok.any():
        return {"n": 0, "median_abs_pct": math.nan, "mean_abs_pct": math.nan, "max_abs_pct": math.nan,
                "median_signed_pct": math.nan}
    signed = (predicted[ok] / measured[ok] - 1.0) * 100.0
    return {
        "n": int(ok.sum()),
        "median_abs_pct": float(np.median(np.abs(signed))),
        "mean_abs_pct": float(np.mean(np.abs(signed))),
        "max_abs_pct": float(np.max(np.abs(signed))),
        "median_signed_pct": float(np.median(signed)),
    }
