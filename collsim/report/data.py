"""Reading and checking what a report is built from.

:func:`load_results` reads ``results.csv`` or ``results.json`` (as ``collsim
run`` writes them) and returns ``(frame, meta)``; :func:`check_frame` checks
a results DataFrame however it was obtained. Both raise
:class:`collsim.errors.InputError` with a one-line message that names the
file and what is wrong, so a bad input never becomes a blank report.

The ``meta`` mapping is the results.json document without its rows:
``collsim_version``, ``scenario`` (a dict with ``name``, ``topology``,
``costs`` …), ``topology`` (``name``, ``num_gpus``, ``summary``), ``model``,
``costs``, ``skipped`` and, when present, ``date``, ``timelines``,
``verification``. A CSV carries no metadata: its meta comes from a
``results.json`` beside it when there is one, else it is inferred (scenario
name from the directory, model from the ``model`` column).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.errors import InputError
from collsim.resultsfile import COLUMNS
from collsim.units import format_size
from collsim.version import __version__

__all__ = [
    "RESULT_COLUMNS",
    "INT_COLUMNS",
    "FLOAT_COLUMNS",
    "TEXT_COLUMNS",
    "load_results",
    "check_frame",
    "check_version",
    "normalize_timelines",
    "normalize_verification",
    "normalize_measured",
]


#: Columns of a results table, in order (those of results.csv).
RESULT_COLUMNS: tuple[str, ...] = tuple(COLUMNS)
INT_COLUMNS: tuple[str, ...] = ("ranks", "size_bytes", "count", "events")
FLOAT_COLUMNS: tuple[str, ...] = (
    "latency_us", "algbw_gbps", "busbw_gbps", "launch_us", "sync_us", "data_us", "reduce_us",
)
TEXT_COLUMNS: tuple[str, ...] = tuple(c for c in RESULT_COLUMNS if c not in INT_COLUMNS + FLOAT_COLUMNS)
#: Columns a report needs: all of them (a results file always has every column).
_REQUIRED = RESULT_COLUMNS


def _version_key(text: str) -> tuple[int, ...] | None:
    parts = str(text).split(".")
    try:
        return tuple(int("".join(ch for ch in p if ch.isdigit()) or "x") for p in parts[:2])
    except ValueError:
        return None


def check_version(version: Any, source: str) -> None:
    """Refuse results written by a collsim whose major.minor differs from this one."""
    if version is None or version == "":
        raise InputError(
            "not a collsim results file (no 'collsim_version'); rerun 'collsim run' to produce one",
            file=source,
        )
    theirs, ours = _version_key(str(version)), _version_key(__version__)
    if theirs is None or theirs != ours:
        raise InputError(
            f"results written by collsim {version}, this is collsim {__version__}: "
            "rerun 'collsim run' with this version",
            file=source,
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def check_frame(frame: Any, source: str = "results", *, first_line: int | None = None) -> pd.DataFrame:
    """Check and normalise a results table; return a clean copy.

    Every column of :data:`RESULT_COLUMNS` must be there; numbers must be
    numbers (``latency_us`` finite and positive), text columns become
    strings. Rows without a latency (combinations a model could not cost)
    are dropped; none left is an error.

    Parameters
    ----------
    frame : pandas.DataFrame
    source : str
        The file (or description) named in errors.
    first_line : int, optional
        Line number of the first row in ``source`` (CSV: 2), for errors.
    """
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"results must be a pandas DataFrame, not {type(frame).__name__}", file=source)
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(
            f"missing {'column' if len(missing) == 1 else 'columns'} {', '.join(missing)} "
            "(not a results file of this collsim version?)",
            file=source,
        )
    if len(frame) == 0:
        raise InputError("no result rows: nothing to report (did the run cost any configuration?)", file=source)
    out = frame.loc[:, list(RESULT_COLUMNS)].copy().reset_index(drop=True)

    def where(i: int) -> str:
        return f"line {first_line + i}" if first_line is not None else f"row {i + 1}"

    for col in INT_COLUMNS + FLOAT_COLUMNS:
        raw = out[col]
        blank = raw.isna() | (raw.astype(str).str.strip() == "")
        num = pd.to_numeric(raw.where(~blank, None), errors="coerce")
        bad = num.isna() & ~blank
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise InputError(f"{where(i)}: column {col!r} holds {str(raw.iloc[i])!r}, not a number", file=source)
        out[col] = num
    # rows a model could not cost carry no latency: leave them out
    costed = out["latency_us"].notna()
    dropped = int((~costed).sum())
    out = out[costed].reset_index(drop=True)
    if len(out) == 0:
        raise InputError(
            f"no costed rows: all {_plural(dropped, 'row')} lack a latency", file=source
        )
    for col in INT_COLUMNS:
        values = out[col]
        if col in ("ranks", "size_bytes") and values.isna().any():
            i = int(values.isna().to_numpy().nonzero()[0][0])
            raise InputError(f"row {i + 1}: column {col!r} is empty", file=source)
        if (values.dropna() % 1 != 0).any():
            raise InputError(f"column {col!r} holds non-integer values", file=source)
        out[col] = values.fillna(0).astype("int64")
    for col in FLOAT_COLUMNS:
        out[col] = out[col].astype("float64").fillna(0.0)
    lat = out["latency_us"]
    bad = ~(lat.map(math.isfinite)) | (lat <= 0)
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raise InputError(f"row {i + 1}: latency_us must be a positive finite number, not {lat.iloc[i]!r}", file=source)
    if (out["ranks"] < 1).any() or (out["size_bytes"] < 0).any():
        raise InputError("ranks must be >= 1 and size_bytes >= 0", file=source)
    for col in TEXT_COLUMNS:
        out[col] = out[col].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    for col in ("protocol", "algorithm"):
        if (out[col] == "").any():
            raise InputError(f"column {col!r} has empty values", file=source)
    key = ["topology", "ranks", "algorithm", "protocol", "launch", "size_bytes"]
    dup = out.duplicated(subset=key)
    if dup.any():
        r = out[dup].iloc[0]
        raise InputError(
            f"duplicate rows for {r['protocol']}/{r['algorithm']}, {r['ranks']} ranks, "
            f"{r['size_bytes']} B, launch {r['launch'] or '-'}",
            file=source,
        )
    out.attrs["dropped_rows"] = dropped
    return out


def _read_json(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    source = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg} (column {err.colno})", file=source, line=err.lineno) from None
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=source) from None
    if not isinstance(doc, dict):
        raise InputError("not a collsim results file (expected a JSON object with 'rows')", file=source)
    if "rows" not in doc:
        raise InputError("not a collsim results file (no 'rows')", file=source)
    check_version(doc.get("collsim_version"), source)
    columns = doc.get("columns")
    if columns is not None and list(columns) != list(RESULT_COLUMNS):
        missing = [c for c in RESULT_COLUMNS if c not in columns]
        extra = [c for c in columns if c not in RESULT_COLUMNS]
        what = []
        if missing:
            what.append("missing " + ", ".join(missing))
        if extra:
            what.append("unexpected " + ", ".join(extra))
        raise InputError(
            "its columns differ from this collsim's (" + ("; ".join(what) or "different order") + ")",
            file=source,
        )
    rows = doc["rows"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError("'rows' must be a list of objects", file=source)
    if not rows:
        raise InputError("no result rows: nothing to report (did the run cost any configuration?)", file=source)
    frame = pd.DataFrame(rows)
    meta = {k: v for k, v in doc.items() if k != "rows"}
    return frame, meta


def _read_csv(path: Path) -> pd.DataFrame:
    source = str(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[], encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise InputError("empty file: no header and no result rows", file=source) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise InputError(f"not a readable CSV ({' '.join(str(err).split())})", file=source) from None
    extra = [c for c in frame.columns if c not in RESULT_COLUMNS]
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if {"size_bytes", "time_us"} <= set(frame.columns) and "latency_us" not in frame.columns:
        raise InputError("is a measurement table, not simulated results: give results.csv or results.json of "
                         "'collsim run', and this file as --measured to overlay it", file=source)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {'column' if len(missing) == 1 else 'columns'} {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {'column' if len(extra) == 1 else 'columns'} {', '.join(extra)}")
        raise InputError(
            "; ".join(parts) + " (a results file of another collsim version?)", file=source
        )
    return frame


def _infer_meta(path: Path, frame: pd.DataFrame) -> dict[str, Any]:
    models = sorted(set(frame["model"].astype(str)) - {""})
    topologies = sorted(set(frame["topology"].astype(str)) - {""})
    gpus = sorted(set(frame["gpu"].astype(str)) - {""})
    name = path.parent.name or path.stem
    return {
        "collsim_version": __version__,
        "scenario": {"name": name, "topology": topologies[0] if len(topologies) == 1 else None},
        "topology": {
            "name": ", ".join(topologies),
            "summary": {"gpu_model": ", ".join(gpus)} if gpus else None,
        },
        "model": ", ".join(models),
        "costs": {},
    }


def load_results(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a results file written by ``collsim run``; return ``(frame, meta)``.

    Parameters
    ----------
    path : str or Path
        ``results.csv`` or ``results.json``.

    Returns
    -------
    frame : pandas.DataFrame
        The costed rows, columns :data:`RESULT_COLUMNS`, numbers as numbers.
    meta : dict
        The metadata (see the module docstring); ``meta["results_file"]`` is
        ``path`` as given.

    Raises
    ------
    InputError
        The file is missing, not a results file, from another collsim
        version, lacks columns, holds bad values or no rows.
    """
    p = Path(path)
    source = str(path)
    if not p.exists():
        raise InputError("no such file", file=source)
    if p.is_dir():
        raise InputError("is a directory; give results.csv or results.json", file=source)
    suffix = p.suffix.lower()
    if suffix == ".json":
        frame, meta = _read_json(p)
        first_line = None
    elif suffix == ".csv":
        frame = _read_csv(p)
        first_line = 2
        meta = None
        sibling = p.with_suffix(".json")
        if sibling.exists():
            try:
                _, meta = _read_json(sibling)
            except InputError:
                meta = None
        if meta is None:
            meta = _infer_meta(p, frame)
    else:
        raise InputError(f"unknown results format {p.suffix or '(no suffix)'!r}", file=source, choices=[".csv", ".json"])
    clean = check_frame(frame, source, first_line=first_line)
    meta = dict(meta)
    meta["results_file"] = source
    if clean.attrs.get("dropped_rows"):
        meta["dropped_rows"] = clean.attrs["dropped_rows"]
    return clean, meta


# ---------------------------------------------------------------------------
# optional inputs: timelines, verification verdicts, measurements

_EVENT_KEYS = ("rank", "kind", "start_us", "end_us")
_CONFIG_KEYS = ("protocol", "algorithm", "ranks", "size_bytes", "launch")


def _check_events(events: Any, where: str, source: str) -> list[dict[str, Any]]:
    if not isinstance(events, Sequence) or isinstance(events, (str, bytes)):
        raise InputError(f"{where}: events must be a list of objects", file=source)
    out = []
    for i, ev in enumerate(events):
        if not isinstance(ev, Mapping):
            raise InputError(f"{where}: event {i} is not an object", file=source)
        missing = [k for k in _EVENT_KEYS if k not in ev]
        if missing:
            raise InputError(f"{where}: event {i} lacks {', '.join(missing)}", file=source)
        try:
            start, end, rank = float(ev["start_us"]), float(ev["end_us"]), int(ev["rank"])
        except (TypeError, ValueError):
            raise InputError(f"{where}: event {i} has a non-numeric rank, start_us or end_us", file=source) from None
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise InputError(f"{where}: event {i} ends before it starts ({start} > {end})", file=source)
        out.append(
            {
                "rank": rank,
                "kind": str(ev["kind"]),
                "start_us": start,
                "end_us": end,
                "peer": ev.get("peer"),
                "bytes": ev.get("bytes"),
                "label": str(ev.get("label") or ev["kind"]),
            }
        )
    return out


def _config_title(cfg: Mapping[str, Any]) -> str:
    parts = []
    if cfg.get("protocol") or cfg.get("algorithm"):
        parts.append(" ".join(str(cfg[k]) for k in ("protocol", "algorithm") if cfg.get(k)))
    if cfg.get("ranks") is not None:
        parts.append(f"{cfg['ranks']} ranks")
    if cfg.get("size_bytes") is not None:
        try:
            parts.append(format_size(int(cfg["size_bytes"])))
        except (TypeError, ValueError):
            parts.append(str(cfg["size_bytes"]))
    if cfg.get("launch"):
        parts.append(str(cfg["launch"]))
    return ", ".join(parts)


def normalize_timelines(timeline: Any, source: str = "timeline") -> list[dict[str, Any]]:
    """Timelines as a list of ``{"title", "config", "events"}``.

    Accepted forms: one configuration's events (a list of event dicts
    ``{rank, kind, start_us, end_us, peer, bytes, label}``); a list of
    configurations ``{"events": [...], "protocol", "algorithm", "ranks",
    "size_bytes", "launch", "title"}`` (all but ``events`` optional); or a
    mapping ``title -> events``.
    """
    if timeline is None:
        return []
    configs: list[dict[str, Any]] = []
    if isinstance(timeline, Mapping):
        if "events" in timeline:
            timeline = [timeline]
        else:
            for title, events in timeline.items():
                configs.append({"title": str(title), "config": {}, "events": _check_events(events, str(title), source)})
            return [c for c in configs if c["events"]]
    if not isinstance(timeline, Sequence) or isinstance(timeline, (str, bytes)):
        raise InputError("timeline must be a list of events or of configurations", file=source)
    if not timeline:
        return []
    if all(isinstance(t, Mapping) and "events" in t for t in timeline):
        for i, t in enumerate(timeline):
            cfg = {k: t[k] for k in _CONFIG_KEYS if t.get(k) is not None}
            title = str(t.get("title") or _config_title(cfg) or f"configuration {i + 1}")
            configs.append({"title": title, "config": cfg, "events": _check_events(t["events"], title, source)})
    else:
        configs.append({"title": "simulated events", "config": {}, "events": _check_events(timeline, "timeline", source)})
    seen: dict[str, int] = {}
    for c in configs:  # titles name dropdown entries: keep them unique
        n = seen.get(c["title"], 0)
        seen[c["title"]] = n + 1
        if n:
            c["title"] = f"{c['title']} ({n + 1})"
    return [c for c in configs if c["events"]]


def _cex_text(cex: Any) -> str:
    """A counterexample as readable text: the verifier's own timeline rendering when it is one of its."""
    if isinstance(cex, Mapping) and "steps" in cex and "reason" in cex:
        try:
            from collsim.verify.report import Counterexample  # lazy: start-up (z3)

            return Counterexample.from_json(dict(cex)).render()
        except Exception:  # noqa: BLE001 - fall back to the raw data
            pass
    if isinstance(cex, Mapping):
        return json.dumps(cex, indent=2, sort_keys=True, default=str)
    return str(cex)


def _cex_item(cex: Any, title: str) -> dict[str, Any]:
    href = None
    if isinstance(cex, Mapping):
        href = cex.get("href") or cex.get("path") or cex.get("file")
        title = str(cex.get("title") or cex.get("name") or title)
    elif isinstance(cex, str) and re.match(r"^[\w./-]+\.(json|txt|html|md|log|dot|svg)$", cex):
        href = cex
    if href is not None and re.match(r"^([a-z][a-z0-9+.-]*:)?//", str(href), flags=re.I):
        href = None  # the report stays offline: no links out
    return {"title": title, "body": _cex_text(cex), "href": str(href) if href else None}


def _bound_text(bound: Mapping[str, Any]) -> str:
    parts = []
    for key, unit in (("ranks", "rank"), ("iterations", "iteration"), ("lines", "line"), ("threads", "thread")):
        if bound.get(key) is not None:
            n = bound[key]
            parts.append(f"{n} {unit}{'' if n == 1 else 's'}")
    return "checked at " + " × ".join(parts) if parts else ""


def _from_verify_result(r: Mapping[str, Any]) -> dict[str, Any]:
    """One ``collsim verify --json`` result (``VerifyResult.to_json``) as a verdict row."""
    props = r.get("properties") or {}
    violated = [p for p, v in props.items() if isinstance(v, Mapping) and v.get("status") == "violated"]
    unknown = [p for p, v in props.items() if isinstance(v, Mapping) and v.get("status") not in ("holds", "violated")]
    if violated:
        verdict = "violated: " + ", ".join(violated)
    elif unknown or not props:
        verdict = "unknown" + (": " + ", ".join(unknown) if unknown else "")
    else:
        verdict = "verified"
    bound = r.get("bound") if isinstance(r.get("bound"), Mapping) else {}
    assumptions = list(bound.get("assumptions") or [])
    if bound.get("data_domain"):
        assumptions.append("data domain")
    hardware, cexs = [], []
    for name, v in props.items():
        if isinstance(v, Mapping) and v.get("counterexample"):
            cexs.append(_cex_item(v["counterexample"], str(name)))
    for dep in r.get("dependencies") or []:
        if not isinstance(dep, Mapping) or not dep.get("needed"):
            continue
        broken = [p for p, v in (dep.get("results") or {}).items() if isinstance(v, Mapping) and v.get("status") == "violated"]
        text = str(dep.get("name"))
        if dep.get("statement"):
            text += f": {dep['statement']}"
        if broken:
            text += f" (without it: {', '.join(broken)} violated)"
        hardware.append(text)
        for p in broken:
            cex = dep["results"][p].get("counterexample")
            if cex:
                cexs.append(_cex_item(cex, f"without {dep.get('name')}: {p}"))
    detail = _bound_text(bound)
    if r.get("expected_violation"):
        detail += f"; mutant expected to violate {r['expected_violation']}"
    return {
        "protocol": str(r.get("protocol")),
        "variant": str(r.get("algorithm") or ""),
        "verdict": verdict,
        "model": str(r.get("model") or bound.get("model") or ""),
        "assumptions": assumptions,
        "hardware": hardware,
        "counterexamples": cexs,
        "detail": detail.strip("; "),
    }


def _names(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [f"{k}: {val}" for k, val in value.items()]
    return [str(x) for x in value]


def normalize_verification(verification: Any, source: str = "verification") -> list[dict[str, Any]]:
    """Verdicts as a list of ``{protocol, variant, verdict, model, assumptions, hardware, counterexamples, detail}``.

    Accepts what ``collsim verify --json`` prints (one result, or with
    ``--all`` a summary whose ``protocols`` are tabulated; mutants are left
    out), the verifier's result objects, a list of either, or plain dicts
    with at least ``protocol`` and ``verdict`` (optional ``model``,
    ``assumptions``, ``hardware``, ``counterexample``, ``detail``), or a
    mapping ``protocol -> dict`` / ``protocol -> verdict``.
    ``counterexamples`` become ``{title, body, href}``.
    """
    if verification is None:
        return []
    if hasattr(verification, "to_json"):
        verification = verification.to_json()
    if isinstance(verification, Mapping):
        if "properties" in verification and "protocol" in verification:
            return [_from_verify_result(verification)]
        for key in ("protocols", "results", "verdicts"):
            if isinstance(verification.get(key), (list, Mapping)):
                return normalize_verification(verification[key], source)
        items = []
        for name, value in verification.items():
            if isinstance(value, Mapping):
                items.append({"protocol": name, **value})
            else:
                items.append({"protocol": name, "verdict": value})
        verification = items
    if not isinstance(verification, Sequence) or isinstance(verification, (str, bytes)):
        raise InputError("verification must be a list of verdicts", file=source)
    out = []
    for i, v in enumerate(verification):
        if hasattr(v, "to_json"):
            v = v.to_json()
        if not isinstance(v, Mapping):
            raise InputError(f"verdict {i} is not an object", file=source)
        if "properties" in v and "protocol" in v:
            out.append(_from_verify_result(v))
            continue
        if not v.get("protocol") or v.get("verdict") in (None, ""):
            raise InputError(f"verdict {i} lacks 'protocol' or 'verdict'", file=source)
        cex = v.get("counterexample", v.get("counterexamples"))
        if cex in (None, "", [], {}):
            raw: list[Any] = []
        elif isinstance(cex, list):
            raw = cex
        else:
            raw = [cex]
        out.append(
            {
                "protocol": str(v["protocol"]),
                "variant": str(v.get("algorithm") or v.get("variant") or ""),
                "verdict": str(v["verdict"]),
                "model": str(v.get("model") or v.get("memory_model") or ""),
                "assumptions": _names(v.get("assumptions")),
                "hardware": _names(v.get("hardware") or v.get("depends_on")),
                "counterexamples": [_cex_item(c, f"counterexample {k + 1}") for k, c in enumerate(raw)],
                "detail": str(v.get("detail") or v.get("message") or v.get("reason") or ""),
            }
        )
    return out


def normalize_measured(measured: Any, source: str = "measured") -> pd.DataFrame | None:
    """Measured points as a DataFrame: ``size_bytes, latency_us, busbw_gbps, ranks, protocol, algorithm, launch, label``.

    Takes collsim's measurement table (``collsim.calibrate``: ``time_us``,
    ``busbw_gbps`` …) or any frame/records with ``size_bytes`` and
    ``time_us`` or ``latency_us``. Rows of another collective and rows whose
    data check failed (``wrong``) are left out.
    """
    if measured is None:
        return None
    frame = measured if isinstance(measured, pd.DataFrame) else pd.DataFrame(list(measured))
    if len(frame) == 0:
        return None
    time_col = "latency_us" if "latency_us" in frame.columns else "time_us"
    missing = [c for c in ("size_bytes", time_col) if c not in frame.columns]
    if missing:
        raise InputError(f"measured data lacks {', '.join(missing)}", file=source)
    f = frame.copy()
    if "collective" in f.columns:
        col = f["collective"].fillna("").astype(str).str.lower()
        f = f[col.isin(["", "allreduce", "all_reduce", "all-reduce"])]
    if "wrong" in f.columns:
        f = f[~f["wrong"].fillna(False).astype(bool)]
    out = pd.DataFrame(
        {
            "size_bytes": pd.to_numeric(f["size_bytes"], errors="coerce"),
            "latency_us": pd.to_numeric(f[time_col], errors="coerce"),
        }
    )
    out["ranks"] = pd.to_numeric(f["ranks"], errors="coerce") if "ranks" in f.columns else float("nan")
    if "busbw_gbps" in f.columns:
        out["busbw_gbps"] = pd.to_numeric(f["busbw_gbps"], errors="coerce")
    else:
        out["busbw_gbps"] = float("nan")
    for col in ("protocol", "algorithm", "launch"):
        out[col] = f[col].fillna("").astype(str).str.lower() if col in f.columns else ""
    label = None
    for col in ("label", "system", "source"):
        if col in f.columns:
            label = f[col].fillna("").astype(str)
            break
    out["label"] = label if label is not None else "measured"
    out.loc[out["label"] == "", "label"] = "measured"
    out = out[out["size_bytes"].notna() & out["latency_us"].notna() & (out["latency_us"] > 0)]
    # bus bandwidth from the time where the input has none (AllReduce factor 2(n-1)/n)
    need = out["busbw_gbps"].isna() & out["ranks"].notna() & (out["ranks"] > 0)
    n = out.loc[need, "ranks"]
    out.loc[need, "busbw_gbps"] = out.loc[need, "size_bytes"] / (out.loc[need, "latency_us"] * 1e3) * 2 * (n - 1) / n
    if len(out) == 0:
        return None
    return out.reset_index(drop=True)
