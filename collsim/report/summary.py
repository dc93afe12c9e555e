"""The report's first screen: what is fastest where, where that changes, and whether each protocol is verified.

:func:`summarize` reads the decision tables the report already builds for
its downloads (:func:`collsim.tune.build_table`: the tie rule of
:mod:`collsim.tune.ties` and the crossovers of :mod:`collsim.tune.ranges`,
the same ones ``collsim tune`` writes), so the summary, the winner map and
the deployable files never disagree. Per rank count it lists the size bands
in order, each with the protocol · algorithm that is fastest there (or the
choices that tie within the tolerance), its latency at the first and last
run size of the band, and the crossover size where the next band begins.
Per protocol it gives one verdict line.

Every number carries its source in ``data-`` attributes of the page
(rank count, run sizes, latencies as results.csv writes them), so a test
can check the summary against the results file.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Band", "RankRow", "SummaryGroup", "VerdictPart", "VerdictLine", "summarize", "approx_size",
           "verdict_lines", "verdict_class"]


def approx_size(nbytes: int) -> str:
    """A byte count rounded for reading: ``24.9 KiB``, ``1 MiB``, ``512 B``.

    >>> approx_size(25_500), approx_size(1 << 20), approx_size(512)
    ('24.9 KiB', '1 MiB', '512 B')
    """
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            text = f"{value:.0f}" if unit == "B" or value >= 100 or value == int(value) else f"{value:.1f}"
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@dataclass
class Band:
    """Sizes ``min_bytes .. max_bytes`` where ``choices`` (``(protocol, algorithm)``) win, or tie."""

    choices: list[tuple[str, str]]
    min_bytes: int
    max_bytes: int
    first_size: int
    last_size: int
    first_latency: float
    last_latency: float
    margin_pct: float | None
    runner_up: tuple[str, str] | None
    crossover: str  # how the band's end was placed: crossover, midpoint, end

    @property
    def tie(self) -> bool:
        return len(self.choices) > 1


@dataclass
class RankRow:
    ranks: int
    bands: list[Band]


@dataclass
class SummaryGroup:
    """The bands of one machine and launch mode (a report holds one per topology × launch)."""

    label: str
    launch: str
    rows: list[RankRow] = field(default_factory=list)


@dataclass
class VerdictPart:
    """One verdict of a protocol and where it holds: ``verified`` for ``one-shot, ring`` at a bound, needing ..."""

    verdict: str
    status: str  # ok, bad, unknown
    where: str
    needs: list[str]

    @property
    def text(self) -> str:
        return self.verdict + (f" ({self.where})" if self.where else "") + (
            f"; needs {', '.join(self.needs)}" if self.needs else "")


@dataclass
class VerdictLine:
    """A protocol's verdicts: ``status`` is the worst of its parts."""

    protocol: str
    status: str  # ok, bad, unknown
    parts: list[VerdictPart]

    @property
    def text(self) -> str:
        return "; ".join(p.text for p in self.parts)


def summarize(tables: Sequence[tuple[str, str, Any]]) -> list[SummaryGroup]:
    """The summary of each ``(label, launch, DecisionTable)`` (see the module docstring)."""
    groups = []
    for label, launch, table in tables:
        group = SummaryGroup(label, launch)
        for _nodes, ranks in table.placements():
            bands = []
            for r in (r for r in table.ranges if r.ranks == ranks):
                first, last = r.points[0], r.points[-1]
                margins = r.margin_range
                weakest = r.weakest
                bands.append(Band(
                    choices=[(protocol, algorithm) for algorithm, protocol in r.choices],
                    min_bytes=r.min_bytes, max_bytes=r.max_bytes,
                    first_size=first.size, last_size=last.size,
                    first_latency=first.latency_us, last_latency=last.latency_us,
                    margin_pct=None if margins is None else margins[0],
                    runner_up=None if weakest.runner_up is None else (weakest.runner_up[1], weakest.runner_up[0]),
                    crossover=r.rule,
                ))
            group.rows.append(RankRow(ranks, bands))
        groups.append(group)
    return groups


def verdict_lines(protocols: Sequence[str], verdicts: Sequence[Mapping[str, Any]]) -> list[VerdictLine]:
    """One line per protocol from the report's verdict rows (:func:`collsim.report.data.normalize_verification`).

    >>> rows = [{"protocol": "ll", "variant": "ring", "verdict": "verified", "model": "ptx", "hardware": [],
    ...          "detail": "checked at 3 ranks × 2 iterations"}]
    >>> [(v.status, v.text) for v in verdict_lines(["ll", "simple"], rows)]  # doctest: +NORMALIZE_WHITESPACE
    [('ok', 'verified (ptx: ring; checked at 3 ranks × 2 iterations)'),
     ('unknown', 'no verdict in this report')]
    """
    by_protocol: dict[str, list[Mapping[str, Any]]] = {}
    for v in verdicts:
        by_protocol.setdefault(str(v["protocol"]), []).append(v)
    out = []
    for protocol in protocols:
        rows = by_protocol.get(protocol, [])
        if not rows:
            out.append(VerdictLine(protocol, "unknown", [VerdictPart("no verdict in this report", "unknown", "", [])]))
            continue
        by_verdict: dict[str, list[Mapping[str, Any]]] = {}
        for v in rows:
            by_verdict.setdefault(str(v["verdict"]), []).append(v)
        parts = []
        for verdict, same in by_verdict.items():
            status = verdict_class(verdict)
            algorithms = ", ".join(str(v.get("variant")) for v in same if v.get("variant"))
            model = ", ".join(sorted({str(v.get("model")) for v in same if v.get("model")}))
            # a missing verdict says only where; how to get one is said once, under the lines
            detail = "" if status == "unknown" and verdict.lower().startswith("not verified") else \
                str(same[0].get("detail") or "")
            where = "; ".join(x for x in (f"{model}: {algorithms}" if model and algorithms else model or algorithms,
                                           detail) if x)
            needs = sorted({str(h).split(":")[0] for v in same for h in (v.get("hardware") or [])}) \
                if status == "ok" else []
            parts.append(VerdictPart(verdict, status, where, needs))
        statuses = {p.status for p in parts}
        overall = "bad" if "bad" in statuses else "unknown" if "unknown" in statuses else "ok"
        out.append(VerdictLine(protocol, overall, parts))
    return out


_VERDICT_CLASS = (
    (re.compile(r"^(verified|proved|proven|pass(ed)?|ok|correct|safe|holds)\b", re.I), "ok"),
    (re.compile(r"(counterexample|fail|unsafe|violat|incorrect|bug|race|broken)", re.I), "bad"),
)


def verdict_class(verdict: str) -> str:
    """``ok``, ``bad`` or ``unknown`` for a verdict's text (the badge colour of the report).

    >>> verdict_class("verified"), verdict_class("violated: stale-read"), verdict_class("not verified")
    ('ok', 'bad', 'unknown')
    """
    for pattern, name in _VERDICT_CLASS:
        if pattern.search(verdict):
            return name
    return "unknown"
