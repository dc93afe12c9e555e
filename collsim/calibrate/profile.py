"""Cost profiles: cost-parameter overrides fitted to measurements, as a YAML file.

A profile is what ``collsim calibrate`` writes and what ``collsim run
--profile FILE`` and a scenario's ``profile:`` key read::

    collsim_profile: 1
    model: des                    # the model the values are for
    topology: hgx-h100            # the system the rows were measured on
    generation: hopper
    provenance: calibrated from allreduce_measured.csv, 118 rows, 2026-01-31
    costs:                        # the overrides, as a scenario's costs: takes them
      launch_overhead_us: 0.8
      poll_period_us: 0.13
    fit: {...}                    # parameters, bounds, refusals, errors, folds (informative)

:func:`load_profile` returns the ``costs`` mapping, checked against the
model: flat ``name: value`` for ``des``; for ``analytic``, table entries
nested as the analytic model takes them (``hw_latency_us: {nvlink: {ll: 0.7}}``).

>>> from collsim.calibrate.profile import load_profile      # doctest: +SKIP
>>> costs = load_profile("profiles/hgx-h100-des.yaml")      # doctest: +SKIP
>>> simulate("hgx-h100", ranks=8, costs=costs, model="des")  # doctest: +SKIP
"""
from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from collsim.atomicfile import atomic_write_text
from collsim.errors import InputError
from collsim.models import get_model, validate_costs

__all__ = ["PROFILE_FORMAT", "Profile", "read_profile", "load_profile", "profile_document", "write_profile"]

#: Value of ``collsim_profile`` in the files this version writes and reads.
PROFILE_FORMAT = 1

_HEADER = (
    "# collsim cost profile: cost-parameter overrides fitted to measurements by `collsim calibrate`.\n"
    "# Use it with `collsim run --profile FILE` or a scenario's `profile: FILE`. Only `costs` is applied;\n"
    "# `fit` records how the values were obtained.\n"
)


@dataclass
class Profile:
    """A profile as read: the costs (model-ready) and what the file says about them."""

    path: str
    model: str
    costs: dict[str, Any]
    topology: str = ""
    generation: str = ""
    provenance: str = ""
    document: dict[str, Any] = field(default_factory=dict)


def _round(value: float, digits: int = 6) -> float:
    return float(f"{value:.{digits}g}") if math.isfinite(value) else value


def _clean(value: Any) -> Any:
    """Plain YAML-safe data (numpy scalars to floats, tuples to lists, floats to 6 significant digits)."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float):
        return _round(value) if math.isfinite(value) else None
    return value


def profile_document(
    calibration: Any,
    *,
    topology: str,
    generation: str,
    sources: Sequence[str],
    folds: int,
    seed: int,
    date: str | None = None,
    unmapped: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The YAML document of a profile for a :class:`collsim.calibrate.fit.Calibration`.

    ``sources`` are the measurement files (only their names are recorded).
    """
    date = date or _dt.date.today().isoformat()
    names = [Path(s).name for s in sources]
    n = len(calibration.rows)
    params = {
        p.name: {
            "documented": p.default,
            "fitted": calibration.values[p.name],
            "bounds": [p.lower, p.upper],
            "standard_error_factor": calibration.uncertainty.get(p.name),
            **({"asked_as": p.asked_as} if p.asked_as and p.asked_as != p.name else {}),
            **({"at_bound": p.at_bound(calibration.values[p.name])} if p.at_bound(calibration.values[p.name]) else {}),
        }
        for p in calibration.params
    }
    fit: dict[str, Any] = {
        "method": "bounded least squares on log-latency (scipy.optimize.least_squares, trf), "
                  "parameters searched in log space",
        "rows": n,
        "families": sorted(set(calibration.rows["family_label"].astype(str))),
        "parameters": params,
        "median_abs_pct_error": {
            "documented_values": calibration.default_errors["median_abs_pct"],
            "fitted_values": calibration.fitted_errors["median_abs_pct"],
        },
        "max_abs_pct_error": {
            "documented_values": calibration.default_errors["max_abs_pct"],
            "fitted_values": calibration.fitted_errors["max_abs_pct"],
        },
    }
    if calibration.refused:
        fit["not_fitted"] = dict(calibration.refused)
    if calibration.folds:
        fit["cross_validation"] = {
            "folds": folds,
            "seed": seed,
            "heldout_median_abs_pct_error": {
                "documented_values": calibration.heldout_default["median_abs_pct"],
                "fitted_values": calibration.heldout_fitted["median_abs_pct"],
            },
            "per_fold": [f.to_dict() for f in calibration.folds],
        }
    if unmapped:
        fit["unmapped_rows"] = dict(unmapped)
    doc = {
        "collsim_profile": PROFILE_FORMAT,
        "model": calibration.model,
        "topology": topology,
        "generation": generation,
        "provenance": f"calibrated from {', '.join(names)}, {n} rows, {date}",
        "date": date,
        "sources": names,
        "costs": calibration.costs,
        "fit": fit,
    }
    return _clean(doc)


def write_profile(path: str | os.PathLike[str], document: Mapping[str, Any]) -> Path:
    """Write a profile document as YAML at ``path`` atomically; return the path."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise InputError("is a directory; give a file name", file=str(target), field="--output")
    if not directory.is_dir():
        raise InputError(f"directory {directory} does not exist", file=str(target), field="--output")
    text = _HEADER + yaml.safe_dump(_clean(dict(document)), sort_keys=False, allow_unicode=True, width=120)
    atomic_write_text(target, text, newline="\n")
    return target


def _check_costs(costs: Any, file: str, prefix: str = "costs") -> None:
    if not isinstance(costs, Mapping):
        raise InputError(f"'{prefix}' must be a mapping of parameter names to numbers", file=file, field=prefix)
    for key, value in costs.items():
        where = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            _check_costs(value, file, where)
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"expected a number, got {value!r}", file=file, field=where)
        elif value < 0:
            raise InputError(f"a cost parameter cannot be negative, got {value!r}", file=file, field=where)


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and check a profile; raise :class:`InputError` (one line, naming the file) if it is not one."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise InputError("no such profile", file=name)
    if p.is_dir():
        raise InputError("is a directory, not a profile file", file=name)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file, not a profile", file=name) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=name) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise InputError(f"not valid YAML: {problem}", file=name, line=line) from None
    if not isinstance(doc, Mapping):
        raise InputError("not a collsim profile (expected a mapping with 'collsim_profile', 'model' and 'costs')",
                         file=name)
    if "collsim_profile" not in doc:
        raise InputError("not a collsim profile (no 'collsim_profile' key; write one with 'collsim calibrate')",
                         file=name)
    if doc["collsim_profile"] != PROFILE_FORMAT:
        raise InputError(f"profile format {doc['collsim_profile']!r} is not supported (this collsim reads "
                         f"{PROFILE_FORMAT})", file=name, field="collsim_profile")
    model = doc.get("model")
    if not isinstance(model, str) or not model:
        raise InputError("missing 'model' (the model the costs are for)", file=name, field="model")
    costs = doc.get("costs")
    if costs is None:
        raise InputError("missing 'costs'", file=name, field="costs")
    _check_costs(costs, name)
    try:
        validate_costs(model, costs)
    except InputError as err:
        raise InputError(err.message, file=name, field=err.field, choices=err.choices) from None
    return Profile(path=name, model=model, costs=dict(costs), topology=str(doc.get("topology") or ""),
                   generation=str(doc.get("generation") or ""), provenance=str(doc.get("provenance") or ""),
                   document=dict(doc))


def load_profile(path: str | os.PathLike[str], model: str | None = None) -> dict[str, Any]:
    """The cost overrides of a profile file, ready for ``simulate(costs=...)`` or a scenario's ``costs:``.

    Parameters
    ----------
    path : path
        A profile written by ``collsim calibrate``.
    model : str, optional
        The model that will run; a profile fitted for another model is an
        error (its parameter names are the other model's).

    Returns
    -------
    dict
        ``des``: ``{name: float}`` (``pcie.NAME`` keys included). ``analytic``:
        ``{name: float | {key: float | {key: float}}}`` (table entries nested).

    Raises
    ------
    InputError
        One line naming the file (and YAML line): missing file, not a profile,
        unsupported format, costs the profile's model rejects, or a model mismatch.
    """
    prof = read_profile(path)
    if model is not None:
        name, _ = get_model(model)
        if name != prof.model:
            raise InputError(f"profile was fitted for the {prof.model} model, not {name}; use --model {prof.model} "
                             "or a profile calibrated for this model", file=prof.path, field="model")
    return prof.costs
