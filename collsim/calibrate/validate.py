"""``collsim validate``: how well a model predicts the published measurements, before and after calibration.

For every family of measured rows that maps to a modelled configuration
(:mod:`collsim.calibrate.mapping`) it reports the median absolute % error of
the model with its documented cost values and with values calibrated on
the measurements, cross-validated: rows of each GPU generation (one cost file
each) are split into k folds stratified by family, each fold's rows are
predicted by a fit to the other folds (:func:`collsim.calibrate.fit.calibrate`),
so no row's calibrated prediction has seen that row. Families the model
cannot represent are listed with the reason.
"""
from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collsim.calibrate.accuracy import error_summary
from collsim.calibrate.evaluate import Evaluator, configs_of
from collsim.calibrate.fit import calibrate
from collsim.calibrate.ingest import IngestWarning, read_measurements
from collsim.calibrate.mapping import map_measurements
from collsim.calibrate.measurements import usable
from collsim.calibrate.parameters import resolve_params
from collsim.errors import InputError, UnsupportedError
from collsim.version import __version__

__all__ = [
    "DEFAULT_MEASURED",
    "unmapped_reasons",
    "DEFAULT_PARAMS",
    "GOAL_DEFAULT_PCT",
    "GOAL_CALIBRATED_PCT",
    "FamilyResult",
    "Validation",
    "default_measured_path",
    "validate",
    "to_markdown",
]

#: The published-measurements table, relative to the repository root.
DEFAULT_MEASURED = "../shared/data/measured/allreduce_measured.csv"

#: Parameters ``collsim validate`` fits when none are named (aliases; see collsim.calibrate.parameters.ALIASES).
DEFAULT_PARAMS: dict[str, tuple[str, ...]] = {
    "des": ("launch", "start", "hop_latency", "poll", "fence", "cta_bw", "bw_efficiency"),
    "analytic": ("launch", "base_latency", "hop_latency", "bw_efficiency", "ll_max_bw", "nvlink_bw"),
}

#: Median absolute error goals on mapped families (%).
GOAL_DEFAULT_PCT = 25.0
GOAL_CALIBRATED_PCT = 15.0


def unmapped_reasons(mapped: Any, unusable: int = 0) -> str:
    """Why rows map to nothing, for an error message: ``" (6 rows: collective sendrecv: ...; 2 rows ...)"``.

    ``mapped`` is :func:`~collsim.calibrate.mapping.map_measurements`' table; ``unusable`` counts rows left out
    before mapping (flagged wrong, no time).
    """
    parts = []
    lost = mapped[~mapped["mapped"]] if len(mapped) else mapped
    if len(lost):
        counts = lost["reason"].value_counts(sort=True)
        parts = [f"{n} row{'s' if n != 1 else ''}: {why}" for why, n in counts.items()][:3]
        if len(counts) > 3:
            parts.append(f"{int(counts.iloc[3:].sum())} more for {len(counts) - 3} other reason(s)")
    if unusable:
        parts.append(f"{unusable} row{'s' if unusable != 1 else ''} unusable (flagged wrong, or no time)")
    return f" ({'; '.join(parts)})" if parts else " (the file holds no measured rows)"


def default_measured_path() -> Path:
    """``../shared/data/measured/allreduce_measured.csv`` next to the repository, or an InputError."""
    root = Path(__file__).resolve().parents[2]  # the repository: collsim/calibrate/validate.py
    path = (root / DEFAULT_MEASURED).resolve()
    if not path.is_file():
        raise InputError(f"no measurement table to validate against: pass --measured FILE (a table 'collsim ingest' "
                         f"wrote, or nccl-tests output); the default, {DEFAULT_MEASURED} beside the repository, "
                         "is not there", field="--measured")
    return path


@dataclass
class FamilyResult:
    """One mapped family: its rows and median absolute % errors."""

    label: str
    generation: str
    rows: int
    modelled_as: str
    default_pct: float
    calibrated_pct: float  # cross-validated (held-out) prediction; NaN if not calibrated
    substitution: str = ""


@dataclass
class Validation:
    """Everything ``collsim validate`` reports."""

    model: str
    measured: str
    measured_rows: int
    sources: int
    families: list[FamilyResult]
    unmapped: list[tuple[str, int, str]]  # (family label, rows, reason)
    fits: dict[str, Any]  # generation -> Calibration, or a str saying why it was not calibrated
    default: dict[str, float]
    calibrated: dict[str, float]
    folds: int
    seed: int
    params: tuple[str, ...]
    rules: list[str] = field(default_factory=list)
    rows: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_dict(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return round(float(v), 2) if v is not None and math.isfinite(float(v)) else None

        fits = {}
        for gen, cal in self.fits.items():
            if isinstance(cal, str):
                fits[gen] = {"calibrated": False, "why": cal}
            else:
                fits[gen] = {
                    "calibrated": True, "rows": len(cal.rows),
                    "values": {p.name: {"documented": p.default, "fitted": float(f"{cal.values[p.name]:.6g}"),
                                        "standard_error_factor": (float(f"{cal.uncertainty[p.name]:.4g}")
                                                                  if math.isfinite(cal.uncertainty.get(p.name, math.inf))
                                                                  else None),
                                        "at_bound": p.at_bound(cal.values[p.name]) or None}
                               for p in cal.params},
                    "not_fitted": dict(cal.refused),
                    "in_sample_median_abs_pct": {"default": num(cal.default_errors["median_abs_pct"]),
                                                 "fitted": num(cal.fitted_errors["median_abs_pct"])},
                    "heldout_median_abs_pct": num(cal.heldout_fitted.get("median_abs_pct", math.nan))
                    if cal.heldout_fitted else None,
                }
        return {
            "model": self.model, "measured": Path(self.measured).name, "measured_rows": self.measured_rows,
            "sources": self.sources, "folds": self.folds, "seed": self.seed, "params": list(self.params),
            "median_abs_pct": {"default": num(self.default["median_abs_pct"]),
                               "calibrated_cv": num(self.calibrated.get("median_abs_pct", math.nan))},
            "goals_pct": {"default": GOAL_DEFAULT_PCT, "calibrated": GOAL_CALIBRATED_PCT},
            "families": [{"family": f.label, "generation": f.generation, "rows": f.rows, "modelled_as": f.modelled_as,
                          "default_median_abs_pct": num(f.default_pct),
                          "calibrated_cv_median_abs_pct": num(f.calibrated_pct),
                          **({"substitution": f.substitution} if f.substitution else {})}
                         for f in self.families],
            "fits": fits,
            "unmapped": [{"family": fam, "rows": n, "reason": why} for fam, n, why in self.unmapped],
        }


def _modelled_as(rows: pd.DataFrame) -> str:
    parts = []
    for (topo, ranks, algo, launch), g in rows.groupby(["m_topology", "m_ranks", "m_algorithm", "m_launch"], sort=True):
        protos = sorted(set(g["m_protocol"]))
        parts.append(f"{topo} x{ranks} {algo}/{'+'.join(protos)} {launch}")
    return "; ".join(parts)


def _median_abs(pred: np.ndarray, meas: np.ndarray) -> float:
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    if not ok.any():
        return math.nan
    return float(np.median(np.abs(pred[ok] / meas[ok] - 1.0) * 100.0))


def validate(
    measured: str | Path | None = None,
    *,
    model: str | None = None,
    params: Sequence[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> Validation:
    """Run the validation (see the module docstring) and return its results."""
    path = Path(measured) if measured is not None else default_measured_path()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        table = read_measurements(path)
    say = progress or (lambda message: None)
    ev = Evaluator(model, jobs=jobs)
    try:
        names = tuple(params) if params else DEFAULT_PARAMS.get(ev.model, ())
        if not names:
            raise InputError(f"no default parameters for model {ev.model!r}; name them with --params", field="--params")
        # an unknown name is the user's mistake (exit 2), before any fit: not one generation's "not calibrated"
        resolve_params(ev.model, names)
        good = usable(table)
        mapped = map_measurements(good)
        n_sources = len({re.match(r"\s*(\S+)", str(o)).group(1) for o in good["origin"] if str(o).strip()}) or \
            len(set(good["source"]))
        # what this model cannot cost (e.g. no cost file for a generation)
        cand = mapped[mapped["mapped"]].reset_index(drop=True)
        unsupported = ev.unsupported(configs_of(cand)) if len(cand) else {}
        if unsupported:
            for i, r in mapped[mapped["mapped"]].iterrows():
                group = (r["m_topology"], int(r["m_ranks"]), r["m_algorithm"], r["m_protocol"])
                if group in unsupported:
                    mapped.loc[i, "mapped"] = False
                    mapped.loc[i, "reason"] = unsupported[group]
        rows = mapped[mapped["mapped"]].reset_index(drop=True)
        if len(rows) == 0:
            raise InputError("no measured row maps to a configuration this model can cost"
                             + unmapped_reasons(mapped, len(table) - len(good)), file=str(path))
        cfgs = configs_of(rows)
        rows["generation"] = [ev.generation(c.topology, c.ranks) for c in cfgs]
        rows["default_us"] = ev.latencies(cfgs, {})
        rows["calibrated_us"] = np.nan
        fits: dict[str, Any] = {}
        for gen in sorted(set(rows["generation"])):
            sub_idx = np.flatnonzero(rows["generation"].to_numpy() == gen)
            sub = rows.iloc[sub_idx]
            k = min(folds, len(sub))
            if k < 2:
                fits[gen] = f"{len(sub)} row(s): too few to cross-validate"
                continue
            say(f"calibrating {ev.model} on {gen} ({len(sub)} rows, {k} folds)")
            try:
                cal = calibrate(sub, names, evaluator=ev, folds=k, seed=seed, strict=False, source=str(path))
            except (InputError, UnsupportedError) as err:
                fits[gen] = err.message
                continue
            fits[gen] = cal
            rows.loc[rows.index[sub_idx], "calibrated_us"] = cal.rows["heldout_us"].to_numpy()
        families = []
        for label, g in rows.groupby("family_label", sort=True):
            families.append(FamilyResult(
                label=str(label), generation=str(g["generation"].iloc[0]), rows=len(g), modelled_as=_modelled_as(g),
                default_pct=_median_abs(g["default_us"].to_numpy(float), g["measured_us"].to_numpy(float)),
                calibrated_pct=_median_abs(g["calibrated_us"].to_numpy(float), g["measured_us"].to_numpy(float)),
                substitution=str(g["substitution"].iloc[0] or ""),
            ))
        unmapped = []
        for (label, reason), g in mapped[~mapped["mapped"]].groupby(["family_label", "reason"], sort=True):
            unmapped.append((str(label), len(g), str(reason)))
        meas = rows["measured_us"].to_numpy(float)
        calibrated_rows = rows[rows["calibrated_us"].notna()]
        result = Validation(
            model=ev.model, measured=str(path), measured_rows=len(table), sources=n_sources, families=families,
            unmapped=unmapped, fits=fits, default=error_summary(rows["default_us"].to_numpy(float), meas),
            calibrated=error_summary(calibrated_rows["calibrated_us"].to_numpy(float),
                                     calibrated_rows["measured_us"].to_numpy(float)),
            folds=folds, seed=seed, params=names, rules=sorted(set(rows["rule"])), rows=rows,
        )
    finally:
        ev.close()
    return result


def _pct(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.1f} %"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(v: Validation, *, heading: str = "###") -> str:
    """The validation as a Markdown section (what ``collsim validate --markdown`` prints)."""
    lines = [
        f"{heading} Model `{v.model}`",
        "",
        f"`collsim validate --model {v.model} --markdown` (collsim {__version__}) on `{Path(v.measured).name}` "
        f"({v.measured_rows} rows, {v.sources} sources). Errors are median |model − measured| / measured per family. "
        f"*Calibrated* is cross-validated: each GPU generation's rows are split into {v.folds} folds stratified by "
        f"family (seed {v.seed}) and every row is predicted by the parameters fitted to the other folds. "
        f"Parameters asked for: `{','.join(v.params)}`.",
        "",
        "| family | rows | modelled as | default | calibrated (CV) |",
        "|---|---:|---|---:|---:|",
    ]
    for f in v.families:
        sub = " (substituted: " + f.substitution + ")" if f.substitution else ""
        lines.append(f"| {_cell(f.label)} | {f.rows} | {_cell(f.modelled_as + sub)} | {_pct(f.default_pct)} | "
                     f"{_pct(f.calibrated_pct)} |")
    n = sum(f.rows for f in v.families)
    lines.append(f"| **all mapped rows** | **{n}** | | **{_pct(v.default['median_abs_pct'])}** | "
                 f"**{_pct(v.calibrated.get('median_abs_pct', math.nan))}** |")
    d, c = v.default["median_abs_pct"], v.calibrated.get("median_abs_pct", math.nan)
    met = lambda x, goal: "met" if math.isfinite(x) and x <= goal else "not met"  # noqa: E731
    lines += [
        "",
        f"Goals on mapped rows: median ≤ {GOAL_DEFAULT_PCT:.0f} % with documented values: **{met(d, GOAL_DEFAULT_PCT)}** "
        f"({_pct(d)}); ≤ {GOAL_CALIBRATED_PCT:.0f} % after calibration: **{met(c, GOAL_CALIBRATED_PCT)}** ({_pct(c)}, "
        f"held out). Median of per-family medians: {_pct(float(np.nanmedian([f.default_pct for f in v.families])))} "
        f"default, {_pct(float(np.nanmedian([f.calibrated_pct for f in v.families])) if any(math.isfinite(f.calibrated_pct) for f in v.families) else math.nan)} calibrated.",
        "",
        "Values fitted to all rows of each generation (what `collsim calibrate` would write to a profile):",
        "",
        "| generation | rows | parameter | documented | fitted | std. error (x/) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    not_fitted = []
    for gen, cal in v.fits.items():
        if isinstance(cal, str):
            lines.append(f"| {gen} | | not calibrated: {_cell(cal)} | | | |")
            continue
        for p in cal.params:
            bound = p.at_bound(cal.values[p.name])
            note = f" (at {bound} bound)" if bound else ""
            err = cal.uncertainty.get(p.name, math.inf)
            err_text = f"{err:.3g}" if math.isfinite(err) else "unbounded"
            lines.append(f"| {gen} | {len(cal.rows)} | `{p.name}` | {p.default:g} | {cal.values[p.name]:.4g}{note} | "
                         f"{err_text} |")
        for name, why in cal.refused.items():
            not_fitted.append(f"- {gen}: `{name}` — {why}")
    if not_fitted:
        lines += ["", "Not fitted (the data cannot identify them):", ""] + not_fitted
    lines += ["", "Mapping rules used:", ""] + [f"- {_cell(r)}" for r in v.rules]
    lines += ["", "What the model cannot represent yet (unmapped rows):", "",
              "| family | rows | reason |", "|---|---:|---|"]
    for fam, count, why in v.unmapped:
        lines.append(f"| {_cell(fam)} | {count} | {_cell(why)} |")
    return "\n".join(lines) + "\n"
