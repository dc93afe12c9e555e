"""Timelines for a report: simulate chosen configurations of a results table again, with events.

A *spec* names configurations: ``auto`` (every protocol · algorithm at the
largest rank count run, CUDA-graph launch when present, the size nearest
4 KiB) or ``PROTOCOL/ALGORITHM/RANKS/SIZE[/LAUNCH]`` such as
``ll/one-shot/8/4KiB``. Each is costed by :func:`collsim.models.simulate`
with ``timeline=True``, using the results' topology, model and cost
overrides, every rank simulated.

A timeline draws a bar per operation interval of every rank it shows: a
72-rank ring is 10^5 of them, more than a page can hold or anyone can read.
So a configuration shows every rank while its bars fit in
:data:`TIMELINE_BARS`, else as many ranks as do (at least
:data:`MIN_RANKS_SHOWN`, at most :data:`MAX_RANKS_SHOWN`): rank 0, the
slowest rank (whose end is the latency) and ranks spread evenly between,
and its title says which of how many (:func:`ranks_to_show`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from collsim.errors import InputError
from collsim.models import resolve_topology, simulate
from collsim.report.figures import ReportData
from collsim.units import format_size, parse_size

__all__ = ["parse_timeline_spec", "timelines_for", "ranks_to_show", "TIMELINE_BARS"]

AUTO_SIZE = 4096


def parse_timeline_spec(spec: str) -> dict[str, Any] | str:
    """``"auto"`` or a configuration dict from ``PROTOCOL/ALGORITHM/RANKS/SIZE[/LAUNCH]``.

    >>> parse_timeline_spec("ll/one-shot/8/4KiB")
    {'protocol': 'll', 'algorithm': 'one-shot', 'ranks': 8, 'size_bytes': 4096}
    >>> parse_timeline_spec("auto")
    'auto'
    """
    text = spec.strip()
    if text.lower() == "auto":
        return "auto"
    parts = [p.strip() for p in text.split("/")]
    if len(parts) not in (4, 5) or not all(parts):
        raise InputError(
            f"bad timeline {spec!r}: expected auto or PROTOCOL/ALGORITHM/RANKS/SIZE[/LAUNCH], e.g. ll/one-shot/8/4KiB",
            field="--timeline",
        )
    try:
        ranks = int(parts[2])
    except ValueError:
        raise InputError(f"bad timeline {spec!r}: ranks {parts[2]!r} is not a whole number", field="--timeline") from None
    try:
        size = parse_size(parts[3])
    except InputError as err:
        raise InputError(f"bad timeline {spec!r}: {err.message}", field="--timeline") from None
    cfg: dict[str, Any] = {"protocol": parts[0], "algorithm": parts[1], "ranks": ranks, "size_bytes": size}
    if len(parts) == 5:
        cfg["launch"] = parts[4]
    return cfg


#: About the most bars one configuration's timeline draws (the current 16-rank timelines' size: a report
#: of several configurations stays a few MB and opens at once).
TIMELINE_BARS = 4000
#: Fewest and most ranks a timeline shows when not every rank fits (16 rows are about what one can read).
MIN_RANKS_SHOWN = 2
MAX_RANKS_SHOWN = 16


def ranks_to_show(events: list[Mapping[str, Any]], ranks: int, bars: int = TIMELINE_BARS) -> list[int]:
    """The ranks a timeline of ``events`` (of ``ranks`` ranks) shows: all when they fit in ``bars``, else rank
    0, the slowest rank and ranks evenly spread between, as many as fit (see the module docstring).

    >>> evs = [{"rank": r, "end_us": 1.0 + (r == 5)} for r in range(8) for _ in range(100)]
    >>> ranks_to_show(evs, 8), ranks_to_show(evs, 8, bars=300)
    ([0, 1, 2, 3, 4, 5, 6, 7], [0, 5, 7])
    """
    per_rank = max(1.0, len(events) / max(1, ranks))
    fit = int(bars // per_rank)
    if fit >= ranks and ranks <= MAX_RANKS_SHOWN:
        return list(range(ranks))
    k = max(MIN_RANKS_SHOWN, min(MAX_RANKS_SHOWN, fit, ranks))
    ends: dict[int, float] = {}
    for ev in events:
        ends[int(ev["rank"])] = max(ends.get(int(ev["rank"]), 0.0), float(ev["end_us"]))
    slowest = max(ends, key=lambda r: (ends[r], -r)) if ends else 0
    chosen = [0] if slowest == 0 else [0, slowest]
    spread = [ranks - 1] + [round(i * (ranks - 1) / (k - 1)) for i in range(1, k - 1)]  # the last, then between
    for r in spread:
        if len(chosen) >= k:
            break
        if r not in chosen:
            chosen.append(r)
    return sorted(chosen)


def _auto(frame: pd.DataFrame) -> list[dict[str, Any]]:
    data = ReportData(frame)
    view = data.views[data.default_view]
    size = data.nearest_size(AUTO_SIZE)
    out = []
    for p, a in data.series:
        if data.row(view, p, a, size) is not None:
            out.append({"protocol": p, "algorithm": a, "ranks": view.ranks, "size_bytes": size, "launch": view.launch})
    return out


def timelines_for(
    frame: pd.DataFrame,
    meta: Mapping[str, Any],
    specs: Iterable[str | Mapping[str, Any]] = ("auto",),
) -> list[dict[str, Any]]:
    """Simulate the configurations ``specs`` names with timelines; return them for :func:`write_report`.

    Returns a list of ``{"protocol", "algorithm", "ranks", "size_bytes",
    "launch", "events"}``. A configuration that is not in ``frame`` is an
    :class:`InputError` (the report would show a timeline of something it
    does not plot).
    """
    source = str(meta.get("results_file") or "results")
    scen = meta.get("scenario") if isinstance(meta.get("scenario"), Mapping) else {}
    topo = scen.get("topology") or (meta.get("topology") or {}).get("name")
    if not topo:
        raise InputError("the results do not name their topology, so no timeline can be simulated", file=source)
    model = meta.get("model") or None
    if model and "," in str(model):
        raise InputError(f"results mix models ({model}); cannot choose one for a timeline", file=source)
    costs = meta.get("costs") if isinstance(meta.get("costs"), Mapping) else scen.get("costs") or {}
    configs: list[dict[str, Any]] = []
    for spec in specs:
        parsed = parse_timeline_spec(spec) if isinstance(spec, str) else dict(spec)
        if parsed == "auto":
            configs.extend(_auto(frame))
        else:
            configs.append(parsed)  # type: ignore[arg-type]
    launches = sorted(set(frame["launch"]))
    default_launch = "graph" if "graph" in launches else launches[0]
    out: list[dict[str, Any]] = []
    seen = set()
    topology = None  # built once for all timelines: a 72-GPU topology takes seconds to build and route
    for cfg in configs:
        cfg = dict(cfg)
        cfg.setdefault("launch", default_launch)
        key = (cfg["protocol"], cfg["algorithm"], int(cfg["ranks"]), int(cfg["size_bytes"]), cfg["launch"])
        if key in seen:
            continue
        seen.add(key)
        match = frame[
            (frame["protocol"] == key[0]) & (frame["algorithm"] == key[1]) & (frame["ranks"] == key[2])
            & (frame["size_bytes"] == key[3]) & (frame["launch"] == key[4])
        ]
        if len(match) == 0:
            raise InputError(
                f"timeline {key[0]}/{key[1]}/{key[2]}/{format_size(key[3])}/{key[4]} is not a configuration of "
                "these results (see the results table for the protocols, algorithms, ranks and sizes run)",
                file=source, field="--timeline",
            )
        r = match.iloc[0]
        if topology is None:
            topology = resolve_topology(topo)
        result = simulate(
            topology=topology, ranks=key[2], algorithm=key[1], protocol=key[0], size_bytes=key[3], launch=key[4],
            channels=scen.get("channels"), model=str(r["model"]) or model, dtype=str(r["dtype"]) or "float32",
            op=str(r["op"]) or "sum", costs=dict(costs) or None, timeline=True,
        )
        events = list(result.timeline or [])
        if not events:
            continue
        shown = ranks_to_show(events, key[2])
        entry = {"protocol": key[0], "algorithm": key[1], "ranks": key[2], "size_bytes": key[3],
                 "launch": key[4], "model": result.model}
        if len(shown) < key[2]:
            keep = set(shown)
            events = [ev for ev in events if int(ev["rank"]) in keep]
            entry["title"] = (f"{key[0]} {key[1]}, {key[2]} ranks, {format_size(key[3])}, {key[4]}: ranks "
                              f"{', '.join(map(str, shown))} of {key[2]} shown")
            entry["ranks_shown"] = shown
        out.append({**entry, "events": events})
    return out
