"""Self-contained, interactive HTML latency reports.

>>> from collsim.report import load_results, write_report      # doctest: +SKIP
>>> frame, meta = load_results("reports/8gpu/results.json")     # doctest: +SKIP
>>> write_report(frame, meta, "reports/8gpu/report.html")       # doctest: +SKIP

The report holds: a header (scenario, topology, model, version, overridden
costs), latency against size and against rank count, a winner map, a time
breakdown, a per-rank timeline (when timelines are given), bus bandwidth
against the link limit, verification verdicts and measured overlays (when
given) and the full sortable table. One file, plotly.js embedded, no network.
"""
from __future__ import annotations

from collsim.report.render import FIGURE_IDS, build_report, write_report
from collsim.report.timelines import parse_timeline_spec, timelines_for
from collsim.resultsfile import check_frame, load_results

__all__ = [
    "FIGURE_IDS",
    "build_report",
    "check_frame",
    "load_results",
    "parse_timeline_spec",
    "timelines_for",
    "write_report",
]
