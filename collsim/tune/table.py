"""Decision tables for custom kernels: which choice wins in which size range, and by how much.

A custom AllReduce (vLLM's, PyTorch symmetric memory's, SGLang's) picks its
algorithm with size thresholds per rank count. :func:`build_table` gives
them: per (nodes, ranks), contiguous byte ranges from 0 to the largest size,
each naming the choice that wins there and its margin over the runner-up at
every run size inside, or the choices that *tie* there (within the tolerance
of the fastest, :mod:`collsim.tune.ties`): a tie is not a recommendation,
any tied choice will do. Boundaries are placed by :mod:`collsim.tune.ranges`.

:meth:`DecisionTable.to_json` and :meth:`DecisionTable.to_markdown` are the
two file forms ``collsim tune --table`` writes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from collsim.tune.ranges import spans
from collsim.tune.ties import DEFAULT_TOLERANCE_PCT, Outcome, rank_choices
from collsim.tune.timings import Choice, Timings, choice_label
from collsim.units import format_size
from collsim.version import __version__

__all__ = ["PointDecision", "TableRange", "DecisionTable", "build_table", "TABLE_FORMAT"]

#: The ``format`` field of the JSON form.
TABLE_FORMAT = "collsim-decision-table/1"


@dataclass(frozen=True)
class PointDecision:
    """The tie rule's outcome at one run size.

    ``choices`` are the winner, or the tied choices fastest first;
    ``margin_pct`` how much slower the runner-up (the fastest choice outside
    them) is than the fastest, percent; ``None`` when there is none.
    """

    size: int
    choices: tuple[Choice, ...]
    latency_us: float
    spread_pct: float
    runner_up: Choice | None
    runner_up_latency_us: float | None
    margin_pct: float | None

    @classmethod
    def of(cls, size: int, outcome: Outcome) -> "PointDecision":
        return cls(size, tuple(outcome.tied), outcome.best_latency, outcome.spread_pct,
                   outcome.runner_up, outcome.runner_up_latency, outcome.margin_pct)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TableRange:
    """Sizes ``min_bytes .. max_bytes`` at one placement, where ``choices`` win (one) or tie (several)."""

    nodes: int
    ranks: int
    min_bytes: int
    max_bytes: int
    choices: tuple[Choice, ...]
    points: tuple[PointDecision, ...]
    rule: str

    @property
    def tie(self) -> bool:
        return len(self.choices) > 1

    @property
    def weakest(self) -> PointDecision:
        """The run size where the margin over the runner-up is smallest."""
        with_margin = [p for p in self.points if p.margin_pct is not None]
        return min(with_margin, key=lambda p: p.margin_pct) if with_margin else self.points[0]  # type: ignore[arg-type,return-value]

    @property
    def margin_range(self) -> tuple[float, float] | None:
        """(smallest, largest) margin over the runner-up across the run sizes, percent."""
        margins = [p.margin_pct for p in self.points if p.margin_pct is not None]
        return (min(margins), max(margins)) if margins else None


def _c(choice: Choice | None) -> dict[str, str] | None:
    return None if choice is None else {"algorithm": choice[0], "protocol": choice[1]}


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


@dataclass
class DecisionTable:
    """Ranges per placement, and where they came from."""

    ranges: list[TableRange]
    timings: Timings
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT
    notes: list[str] = field(default_factory=list)

    def placements(self) -> list[tuple[int, int]]:
        return list(dict.fromkeys((r.nodes, r.ranks) for r in self.ranges))

    def to_dict(self) -> dict:

        t = self.timings
        doc = {
            "format": TABLE_FORMAT,
            "written_by": f"collsim {__version__}",
            "kind": t.kind,
            "topology": t.topology,
            "description": t.description,
            "origin": t.origin,
            "model": t.model,
            "launch": t.launch,
            "tolerance_pct": self.tolerance_pct,
            "sizes": "bytes per rank (nccl-tests' size); ranges are inclusive and cover 0 .. the largest run size",
            "boundaries": "where the latencies of the choices on either side cross, taken as linear in bytes "
                          "between run sizes ('crossover'), else their geometric midpoint ('midpoint')",
            "notes": list(t.notes) + list(self.notes),
            "placements": [],
        }
        for nodes, ranks in self.placements():
            items = []
            for r in (r for r in self.ranges if (r.nodes, r.ranks) == (nodes, ranks)):
                weakest = r.weakest
                margins = r.margin_range
                items.append({
                    "min_bytes": r.min_bytes,
                    "max_bytes": r.max_bytes,
                    "choices": [_c(c) for c in r.choices],
                    "tie": r.tie,
                    "margin_pct": None if margins is None else {"min": _r(margins[0]), "max": _r(margins[1])},
                    "runner_up": _c(weakest.runner_up),
                    "boundary": r.rule,
                    "points": [{
                        "size_bytes": p.size,
                        "choices": [_c(c) for c in p.choices],
                        "latency_us": _r(p.latency_us),
                        "spread_pct": _r(p.spread_pct),
                        "runner_up": _c(p.runner_up),
                        "runner_up_latency_us": _r(p.runner_up_latency_us),
                        "margin_pct": _r(p.margin_pct),
                    } for p in r.points],
                })
            doc["placements"].append({"nodes": nodes, "ranks": ranks, "ranges": items})
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_markdown(self) -> str:

        t = self.timings
        tol = f"{self.tolerance_pct:g} %"
        what = "simulated" if t.kind == "simulated" else "measured"
        lines = [
            f"# Decision table: AllReduce on {t.topology or 'an unnamed machine'}",
            "",
            f"{what.capitalize()} ({t.model}, launch {t.launch or 'not known'}) from {t.origin}, "
            f"written by collsim {__version__}.",
            "",
            "Per rank count, the choice that is fastest in each range of message sizes (bytes per rank, "
            "nccl-tests' size; ranges are inclusive). **tie** names every choice within "
            f"{tol} of the fastest there: any of them will do. The margin is how much slower the runner-up "
            "(the fastest choice outside the winner or the tie) is, smallest and largest over the run sizes "
            f"in the range. Boundaries sit where the latencies on either side cross (taken as linear in bytes "
            f"between run sizes); nothing is said above {t.sizes[-1]} bytes.",
        ]
        for note in list(t.notes) + list(self.notes):
            lines += ["", f"Note: {note}"]
        for nodes, ranks in self.placements():
            lines += ["", f"## {ranks} ranks, {nodes} node{'s' if nodes != 1 else ''}", "",
                      "| bytes from | bytes to | run sizes | choice | margin over runner-up | runner-up |",
                      "|---:|---:|---|---|---|---|"]
            for r in (r for r in self.ranges if (r.nodes, r.ranks) == (nodes, ranks)):
                sizes = [p.size for p in r.points]
                run = format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])} – {format_size(sizes[-1])}"
                if r.tie:
                    spread = max(p.spread_pct for p in r.points)
                    choice = "tie: " + ", ".join(choice_label(c) for c in r.choices) + f" (within {spread:.2f} %)"
                else:
                    choice = f"**{choice_label(r.choices[0])}**"
                margins = r.margin_range
                if margins is None:
                    margin = "—"
                elif abs(margins[1] - margins[0]) < 0.005:
                    margin = f"{margins[0]:.2f} %"
                else:
                    margin = f"{margins[0]:.2f} % – {margins[1]:.2f} %"
                runner = r.weakest.runner_up
                lines.append(f"| {r.min_bytes} | {r.max_bytes} | {run} | {choice} | {margin} | "
                             f"{choice_label(runner) if runner is not None else '—'} |")
        return "\n".join(lines) + "\n"


def build_table(timings: Timings, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> DecisionTable:
    """The decision table of every choice in ``timings``.

    Consecutive run sizes where the same choice wins, or the same choices
    tie, make one range.
    """
    ranges: list[TableRange] = []
    for nodes, ranks in timings.placements():
        points = timings.points(nodes, ranks)
        sizes = [s for s, _ in points]
        outcomes = [rank_choices(sorted(lats.items()), tolerance_pct) for _, lats in points]
        keys = [frozenset(o.tied) for o in outcomes]
        leaders = [o.best for o in outcomes]
        for span in spans(sizes, keys, leaders, lambda c, i: points[i][1].get(c)):
            inside = range(span.first, span.last + 1)
            decisions = tuple(PointDecision.of(sizes[i], outcomes[i]) for i in inside)
            ranges.append(TableRange(nodes, ranks, span.min_bytes, span.max_bytes, decisions[0].choices, decisions,
                                     span.rule))
    return DecisionTable(ranges, timings, tolerance_pct)
