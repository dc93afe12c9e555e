"""Assemble the report: figures to HTML fragments, then one Jinja2 template.

The page is self-contained: plotly.js is embedded once (with the first
figure), the CSS and the small table script are inline, nothing is fetched.
Output is deterministic: fixed div ids, sorted inputs, no clock.
"""
from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.atomicfile import atomic_write_text
from collsim.report import figures as F
from collsim.report.protocol_facts import protocol_rows
from collsim.report.summary import approx_size, summarize, verdict_class, verdict_lines
from collsim.report.data import normalize_measured, normalize_timelines, normalize_verification
from collsim.errors import InputError
from collsim.tune import DEFAULT_TOLERANCE_PCT, build_config, build_table, from_results, result_groups
from collsim.tune.files import default_names
from collsim.resultsfile import COLUMNS, FLOAT_COLUMNS, FLOAT_FORMAT, INT_COLUMNS, check_frame
from collsim.version import __version__

__all__ = ["FIGURE_IDS", "build_report", "write_report", "figure_html", "page_templates"]

#: The div id of each figure (fixed, so reports are byte-identical and testable).
FIGURE_IDS: dict[str, str] = {
    "latency_size": "fig-latency-size",
    "latency_ranks": "fig-latency-ranks",
    "winner": "fig-winner",
    "breakdown": "fig-breakdown",
    "timeline": "fig-timeline",
    "busbw": "fig-busbw",
}

_PLOT_CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["select2d", "lasso2d"],
}


def figure_html(fig: Any, div_id: str, first: bool) -> str:
    """One figure as an HTML fragment (``first``: with plotly.js inline); the review page uses it too."""
    config = dict(_PLOT_CONFIG)
    config["toImageButtonOptions"] = dict(config["toImageButtonOptions"], filename=div_id)
    import plotly.io as pio

    out = pio.to_html(
        fig,
        validate=False,  # built as plain dicts; the tests validate them with plotly.graph_objects
        full_html=False,
        include_plotlyjs=True if first else False,
        include_mathjax=False,
        div_id=div_id,
        config=config,
        default_width="100%",
        default_height=f"{int(fig['layout'].get('height') or 500)}px",
    )
    return out


def _scenario(meta: Mapping[str, Any]) -> dict[str, Any]:
    s = meta.get("scenario")
    if isinstance(s, Mapping):
        return dict(s)
    if isinstance(s, str):
        return {"name": s}
    return {}


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt_value(x) for x in v)
    if isinstance(v, Mapping):
        return ", ".join(f"{k}: {_fmt_value(x)}" for k, x in v.items())
    return str(v)


def _flatten(d: Any, prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(d, Mapping):
        for k in sorted(d, key=str):
            out += _flatten(d[k], f"{prefix}.{k}" if prefix else str(k))
    else:
        out.append((prefix, _fmt_value(d)))
    return out


def _header(frame: pd.DataFrame, meta: Mapping[str, Any], data: F.ReportData) -> dict[str, Any]:
    scen = _scenario(meta)
    topo = meta.get("topology") if isinstance(meta.get("topology"), Mapping) else {}
    summary = topo.get("summary") if isinstance(topo.get("summary"), Mapping) else {}
    topo_name = topo.get("name") or scen.get("topology") or ", ".join(data.topologies)
    facts: list[tuple[str, str]] = []
    gpu = summary.get("gpu_model") or ", ".join(sorted(set(frame["gpu"]) - {""}))
    if gpu:
        n = summary.get("gpus") or topo.get("num_gpus")
        facts.append(("GPUs", f"{n} × {gpu}" if n else str(gpu)))
    if summary.get("interconnect"):
        facts.append(("links", str(summary["interconnect"])))
    elif summary.get("links_per_gpu"):
        facts.append(("links per GPU", _fmt_value(summary["links_per_gpu"])))
    per_link = summary.get("per_link_gbps")
    if isinstance(per_link, Mapping):
        bits = []
        for kind, bw in per_link.items():
            if isinstance(bw, Mapping):
                bits.append(f"{kind} {_fmt_value(bw.get('nominal'))} GB/s nominal, {_fmt_value(bw.get('effective'))} effective")
            else:
                bits.append(f"{kind} {_fmt_value(bw)} GB/s")
        facts.append(("per link, per direction", "; ".join(bits)))
    per_gpu = summary.get("per_gpu_gbps")
    if isinstance(per_gpu, Mapping):
        facts.append(("per GPU, per direction", f"{_fmt_value(per_gpu.get('nominal'))} GB/s nominal, "
                                               f"{_fmt_value(per_gpu.get('effective'))} GB/s effective"))
    if summary.get("routing"):
        facts.append(("routing", str(summary["routing"])))
    model = meta.get("model") or ", ".join(sorted(set(frame["model"]) - {""}))
    costs = meta.get("costs") if meta.get("costs") is not None else scen.get("costs")
    run_meta = meta.get("run") if isinstance(meta.get("run"), Mapping) else {}
    date = run_meta.get("date") or meta.get("date") or scen.get("date")
    version = meta.get("collsim_version") or "unknown"
    run = [
        ("ranks", ", ".join(str(r) for r in data.ranks)),
        ("sizes", f"{F.size_label(data.sizes[0])} … {F.size_label(data.sizes[-1])} ({len(data.sizes)} sizes)"),
        ("algorithms", ", ".join(data.algorithms)),
        ("protocols", ", ".join(data.protocols)),
        ("launch", ", ".join(la or "?" for la in data.launches)),
        ("data type, op", ", ".join(sorted({f"{d} {o}" for d, o in zip(frame["dtype"], frame["op"])}))),
        ("rows", str(len(frame))),
    ]
    skipped = []
    for s in meta.get("skipped") or []:
        if isinstance(s, Mapping) and s.get("reason"):
            skipped.append(str(s["reason"]))
    skipped = list(dict.fromkeys(skipped))
    failed = []
    for f in meta.get("failed") or []:
        if isinstance(f, Mapping):
            where = "/".join(str(f[k]) for k in ("protocol", "algorithm", "ranks", "launch") if f.get(k) is not None)
            size = f.get("size_bytes")
            if isinstance(size, int):
                where += f"/{F.size_label(size)}"
            failed.append(f"{where}: {f.get('error', 'failed')}")
    return {
        "scenario": str(scen.get("name") or "results"),
        "description": str(scen.get("description") or summary.get("description") or ""),
        "topology": str(topo_name),
        "topology_description": str(summary.get("description") or ""),
        "facts": facts,
        "model": str(model),
        "date": str(date) if date else "",
        "version": str(version),
        "report_version": __version__,
        "costs": _flatten(costs) if costs else [],
        "run": run,
        "skipped": skipped,
        "failed": failed,
        "dropped": int(meta.get("dropped_rows") or frame.attrs.get("dropped_rows") or 0),
        "source": str(meta.get("results_file") or ""),
    }


def _table(frame: pd.DataFrame) -> dict[str, Any]:
    fmts = dict(FLOAT_FORMAT)
    cols = list(COLUMNS)
    kinds = ["num" if c in INT_COLUMNS or c in FLOAT_COLUMNS else "text" for c in cols]
    from markupsafe import Markup

    lines = []
    order = frame.sort_values(["topology", "launch", "ranks", "protocol", "algorithm", "size_bytes"], kind="mergesort")
    for rec in order.itertuples(index=False):
        cells = []
        for c in cols:
            v = getattr(rec, c)
            if c in FLOAT_COLUMNS:
                cells.append(fmts.get(c, "{:.3f}").format(float(v)))
            elif c in INT_COLUMNS:
                cells.append(str(int(v)))
            else:
                cells.append(html.escape(str(v), quote=False))
        lines.append("<tr><td>" + "</td><td>".join(cells) + "</td></tr>")
    # one pre-escaped block: 20 000 cells through the template engine one by one is slow
    return {"columns": list(zip(cols, kinds)), "count": len(lines), "body": Markup("\n".join(lines) + "\n")}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _verification(items: list[dict[str, Any]]) -> dict[str, Any]:
    rows, cexs = [], []
    used: set[str] = set()
    for v in items:
        cls = verdict_class(v["verdict"])
        links = []
        base = f"cex-{_slug(v['protocol'])}" + (f"-{_slug(v['variant'])}" if v["variant"] else "")
        for i, c in enumerate(v["counterexamples"]):
            anchor = f"{base}-{i + 1}"
            while anchor in used:
                anchor += "x"
            used.add(anchor)
            links.append({"anchor": anchor, "title": c["title"], "href": c["href"]})
            who = v["protocol"] + (f" ({v['variant']})" if v["variant"] else "")
            cexs.append({"anchor": anchor, "title": f"{who}: {c['title']}", "body": c["body"], "href": c["href"]})
        rows.append({**v, "cls": cls, "links": links})
    return {"rows": rows, "counterexamples": cexs}


def _measured_summary(measured: pd.DataFrame | None) -> list[dict[str, Any]]:
    if measured is None:
        return []
    out = []
    for label, sub in measured.groupby("label", sort=True):
        ranks = sorted({int(r) for r in sub["ranks"].dropna()})
        protos = sorted({f"{p} · {a}".strip(" ·") for p, a in zip(sub["protocol"], sub["algorithm"])} - {""})
        out.append({
            "label": str(label),
            "points": len(sub),
            "ranks": ", ".join(map(str, ranks)) or "any",
            "series": ", ".join(protos) or "library default",
            "sizes": f"{F.size_label(int(sub['size_bytes'].min()))} … {F.size_label(int(sub['size_bytes'].max()))}",
        })
    return out


def _data_uri(text: str, mime: str) -> str:
    return f"data:{mime};charset=utf-8;base64," + base64.b64encode(text.encode("utf-8")).decode("ascii")


@dataclass
class _Group:
    """One (topology, launch) of the results: its timings, decision table and names."""

    topology: str
    launch: str
    label: str
    names: dict[str, str]
    timings: Any
    table: Any


def _groups(frame: pd.DataFrame, meta: Mapping[str, Any], tolerance_pct: float) -> list[_Group]:
    """The decision table of each (topology, launch): what ``collsim tune RESULTS`` writes, and what the
    summary reads (one tie rule, one set of ranges)."""
    groups = result_groups(frame)
    several_topologies = len({t for t, _ in groups}) > 1
    out = []
    for topology, launch in groups:
        sub = frame[(frame["topology"] == topology) & (frame["launch"] == launch)]
        timings = from_results(sub, meta, launch=launch or None)
        qualifier = ".".join(x for x in ((topology if several_topologies else ""), (launch if len(groups) > 1 else "")) if x)
        label = " · ".join(x for x in ((topology if several_topologies else ""), (f"{launch} launch" if len(groups) > 1 else "")) if x)
        out.append(_Group(topology, launch, label, default_names(qualifier), timings, build_table(timings, tolerance_pct)))
    return out


def _downloads(groups: list[_Group], tolerance_pct: float) -> list[dict[str, Any]]:
    """The NCCL tuner config and decision table of each (topology, launch), as ``data:`` links.

    They are what ``collsim tune RESULTS`` writes (same tie rule, same
    ranges), embedded so the page stays one self-contained file.
    """
    out = []
    for g in groups:
        names = g.names
        links, missing = [], ""
        try:
            config = build_config(g.timings, tolerance_pct)
        except InputError as err:
            missing = err.message
        else:
            links.append({"name": names["config"], "title": "NCCL tuner config", "href": _data_uri(config.text(), "text/plain")})
        links.append({"name": names["markdown"], "title": "decision table (Markdown)",
                      "href": _data_uri(g.table.to_markdown(), "text/markdown")})
        links.append({"name": names["json"], "title": "decision table (JSON)",
                      "href": _data_uri(g.table.to_json(), "application/json")})
        out.append({"label": g.label, "links": links, "missing": missing})
    return out


def _summary(groups: list[_Group], data: F.ReportData, verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """The first screen (:mod:`collsim.report.summary`): bands per rank count, crossovers, verdict lines."""
    out_groups = []
    for g in summarize([(grp.label, grp.launch, grp.table) for grp in groups]):
        rows = []
        for row in g.rows:
            bands = []
            for i, b in enumerate(row.bands):
                names = [f"{p} · {a}" for p, a in b.choices]
                bands.append({
                    "choice": " / ".join(names), "tie": b.tie,
                    "color": F.TIE_COLOR if b.tie else data.colors.get(b.choices[0][0], F.UNMODELLED_COLOR),
                    "choice_keys": "|".join(f"{p}/{a}" for p, a in b.choices),
                    "sizes": F.size_label(b.first_size) if b.first_size == b.last_size
                    else f"{F.size_label(b.first_size)} – {F.size_label(b.last_size)}",
                    "first_size": b.first_size, "last_size": b.last_size,
                    "first_latency": FLOAT_FORMAT["latency_us"].format(b.first_latency),
                    "last_latency": FLOAT_FORMAT["latency_us"].format(b.last_latency),
                    "latency": _latency_span(b.first_latency, b.last_latency),
                    "margin": "" if b.margin_pct is None or b.tie else f"+{b.margin_pct:.0f}% over "
                              f"{b.runner_up[0]} · {b.runner_up[1]}" if b.runner_up else "",
                    # where the next band takes over (None for the last)
                    "next_from": approx_size(b.max_bytes + 1) if i + 1 < len(row.bands) else None,
                    "next_from_bytes": b.max_bytes + 1, "rule": row.bands[i].crossover,
                })
            rows.append({"ranks": row.ranks, "bands": bands})
        out_groups.append({"label": g.label, "launch": g.launch, "rows": rows})
    lines = [{"protocol": v.protocol, "status": v.status, "parts": v.parts,
              "color": data.colors.get(v.protocol, F.UNMODELLED_COLOR)}
             for v in verdict_lines(data.protocols, verdicts)]
    unverified = any(part.verdict.lower().startswith("not verified") for v in lines for part in v["parts"])
    return {"groups": out_groups, "verdicts": lines, "unverified": unverified}


def _latency_span(first: float, last: float) -> str:
    def fmt(x: float) -> str:
        return f"{x:.2f}" if x < 100 else f"{x:.0f}"

    return f"{fmt(first)} µs" if abs(first - last) < 5e-4 else f"{fmt(first)} – {fmt(last)} µs"


@lru_cache(maxsize=1)
def page_templates():
    """``(jinja2 environment, template folder)`` of the report's templates (the review page extends them)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    here = Path(__file__).parent / "templates"
    env = Environment(
        loader=FileSystemLoader(str(here)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env, here


def build_report(
    results: pd.DataFrame,
    meta: Mapping[str, Any] | None = None,
    *,
    timeline: Any = None,
    verification: Any = None,
    measured: Any = None,
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
) -> str:
    """The report as one HTML string (see :func:`write_report`)."""
    meta = dict(meta or {})
    source = str(meta.get("results_file") or "results")
    frame = check_frame(results, source)
    if timeline is None:
        timeline = meta.get("timelines", meta.get("timeline"))
    if verification is None:
        verification = meta.get("verification")
    timelines = normalize_timelines(timeline, source if timeline is meta.get("timelines") else "timeline")
    verdicts = normalize_verification(verification)
    measured_df = normalize_measured(measured)
    data = F.ReportData(frame, meta, measured_df, tolerance_pct)

    figs: list[tuple[str, Any]] = [
        ("latency_size", F.latency_vs_size(data)),
        ("latency_ranks", F.latency_vs_ranks(data)),
        ("winner", F.winner_map(data)),
        ("breakdown", F.breakdown(data)),
    ]
    if timelines:
        figs.append(("timeline", F.timeline_gantt(timelines)))
    figs.append(("busbw", F.busbw_vs_size(data)))
    fragments = {}
    for i, (key, fig) in enumerate(figs):
        fragments[key] = figure_html(fig, FIGURE_IDS[key], first=i == 0)
    header = _header(frame, meta, data)
    groups = _groups(frame, meta, tolerance_pct)
    limits = F.link_limits(meta)
    chosen = F.chosen_sizes(data)
    env, here = page_templates()
    page = env.get_template("report.html.j2").render(
        h=header,
        figs=fragments,
        fig_ids=FIGURE_IDS,
        trace_counts={key: len(fig["data"]) for key, fig in figs},
        css=(here / "report.css").read_text(encoding="utf-8"),
        js=(here / "report.js").read_text(encoding="utf-8"),
        table=_table(frame),
        timelines=[t["title"] for t in timelines],
        verification=_verification(verdicts),
        protocols=protocol_rows(frame),
        measured=_measured_summary(measured_df),
        limits=limits,
        chosen_sizes=[F.size_label(s) for s in chosen],
        breakdown_size=F.size_label(data.nearest_size(F.BREAKDOWN_SIZE)),
        default_view=data.views[data.default_view].label,
        views=[v.label for v in data.views],
        downloads=_downloads(groups, tolerance_pct),
        summary=_summary(groups, data, verdicts),
        tolerance=f"{tolerance_pct:g}",
    )
    return page


def write_report(
    results: pd.DataFrame,
    meta: Mapping[str, Any] | None,
    path: str | os.PathLike[str],
    *,
    timeline: Any = None,
    verification: Any = None,
    measured: Any = None,
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
) -> Path:
    """Write the self-contained HTML report of a results table; return its path.

    Parameters
    ----------
    results : pandas.DataFrame
        Rows with the columns of results.csv (``collsim.resultsfile.COLUMNS``).
    meta : mapping
        The results.json document (its ``rows`` are ignored) or a subset:
        ``scenario``, ``topology`` (with ``summary``), ``model``, ``costs``,
        ``collsim_version``, ``date``, ``skipped``; ``timelines`` and
        ``verification`` are used when the arguments below are not given.
    path : path
        Where to write (a directory means ``<path>/report.html``). Written to
        a temporary file in the same directory, then renamed into place.
    timeline : list, optional
        Simulated events ``{rank, kind, start_us, end_us, peer, bytes, label}``
        of one configuration, or a list of ``{"events": [...], "protocol",
        "algorithm", "ranks", "size_bytes", "launch"}`` (a dropdown picks one).
    verification : list or mapping, optional
        Verdicts ``{protocol, verdict, model, assumptions, hardware,
        counterexample}``.
    measured : pandas.DataFrame, optional
        Measurements (``collsim.calibrate`` table, or ``size_bytes`` plus
        ``time_us``/``latency_us``, optional ``ranks``, ``protocol``,
        ``algorithm``, ``label``), overlaid as markers.
    tolerance_pct : float
        Choices within this percentage of the fastest tie in the winner map
        and in the embedded tuner config and decision table (default 1).

    Raises
    ------
    InputError
        Results with missing columns, bad values or no rows.
    """
    page = build_report(results, meta, timeline=timeline, verification=verification, measured=measured,
                        tolerance_pct=tolerance_pct)
    out = Path(path)
    if out.is_dir():
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out, page, newline="\n")
