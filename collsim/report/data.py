"""The optional inputs of a report, checked: timelines, verification verdicts and measured points.

The results themselves are read by :func:`collsim.resultsfile.load_results`
(and a table of them checked by :func:`collsim.resultsfile.check_frame`);
this module turns what may come beside them into what the report draws:
:func:`normalize_timelines`, :func:`normalize_verification`,
:func:`normalize_measured`. Each raises :class:`collsim.errors.InputError`
with a one-line message that names the source and what is wrong, so a bad
input never becomes a blank report.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from collsim.errors import InputError
from collsim.units import format_size

__all__ = [
    "normalize_timelines",
    "normalize_verification",
    "normalize_measured",
]


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
