#!/usr/bin/env python3
"""Single-GPU measurements against the simulator's on-chip terms (docs/EMIT.md, "Comparing with the simulator").

A single-GPU run (``collsim_bench --mode single``) has no interconnect, so its
rows are compared with the simulator term by term rather than row by row. For
every measured (protocol, algorithm, ranks) of ``results.csv`` (graph launches,
one block per rank, fp32, rows whose check passed) this prints:

* ``meas_us``: the measured time at the smallest size;
* the simulated critical path at that size (``collsim explain --json`` on
  ``--topology``, graph launch, one channel), split into ``launch``
  (kernel_start + kernel_end), ``fence``, ``poll`` (the sample after a flag
  became visible), ``other`` on-chip intervals (issue, thread-group syncs,
  reduce, local copies) and ``link`` (the interconnect: "in flight",
  "request travels", "crossing links"); ``onchip`` is all but ``link``;
* ``hops``: the dependent flag or data hops over a link on that path, and
  ``per_hop = (meas_us - onchip) / hops``: what one such hop costs on one GPU
  if the simulator's on-chip terms are right (an L2 visibility, under a poll
  period or two);
* ``meas_slope`` and ``sim_slope``: µs per MiB between the two largest measured
  sizes (when both are at least 256 KiB), measured and simulated.

Run it where collsim is installed:
``python benchmarks/gpu/sim_terms.py DIR/results.csv [--topology hgx-h200] [--csv terms.csv]``.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["CATEGORIES", "categorize", "measured_groups", "compare", "main"]

#: How a critical-path interval's text maps to a term, first match wins; ``kind`` launch is "launch".
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("link", ("in flight", "request travels", "crossing links")),
    ("fence", ("fence",)),
    ("poll", ("poll saw",)),
)
TERMS = ("launch", "fence", "poll", "other", "link")


def categorize(step: dict[str, Any]) -> str:
    """The term of one critical-path interval of ``collsim explain --json``."""
    if step.get("kind") == "launch":
        return "launch"
    what = str(step.get("what", ""))
    for term, needles in CATEGORIES:
        if any(n in what for n in needles):
            return term
    return "other"


def measured_groups(path: Path, launch: str = "graph") -> dict[tuple[str, str, int], list[tuple[int, float]]]:
    """(protocol, algorithm, ranks) -> [(size, time_us)] of single-GPU rows, 1 block per rank, fp32, ``launch``."""
    groups: dict[tuple[str, str, int], dict[int, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if (row.get("gpu_mode") != "single-gpu" or row.get("launch") != launch or row.get("ctas") != "1"
                    or row.get("dtype") != "float32" or row.get("wrong", "false") == "true"):
                continue
            key = (row["protocol"], row["algorithm"], int(row["ranks"]))
            groups.setdefault(key, {})[int(row["size_bytes"])] = float(row["time_us"])
    return {k: sorted(v.items()) for k, v in sorted(groups.items())}


def _explain(protocol: str, algorithm: str, ranks: int, size: int, topology: str,
             launch: str = "graph") -> dict[str, Any]:
    from collsim.cli import main as cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli(["explain", "-t", topology, "-n", str(ranks), "-p", protocol, "-a", algorithm, "-s", str(size),
                    "-l", launch, "--channels", "1", "--json"])
    if code not in (0, None):
        raise RuntimeError(f"collsim explain {protocol} {algorithm} {ranks} {size}: exit {code}")
    return json.loads(out.getvalue())


def compare(groups: dict[tuple[str, str, int], list[tuple[int, float]]], topology: str,
            launch: str = "graph") -> list[dict[str, Any]]:
    rows = []
    for (protocol, algorithm, ranks), points in groups.items():
        size0, meas0 = points[0]
        sim = _explain(protocol, algorithm, ranks, size0, topology, launch)
        terms = dict.fromkeys(TERMS, 0.0)
        hops = 0
        for step in sim["critical_path"]:
            term = categorize(step)
            terms[term] += step["end_us"] - step["start_us"]
            hops += term == "link" and "crossing links" not in step["what"]
        onchip = sum(terms[t] for t in TERMS if t != "link")
        row: dict[str, Any] = {"protocol": protocol, "algorithm": algorithm, "ranks": ranks, "size_B": size0,
                               "meas_us": meas0, "sim_us": sim["latency_us"],
                               **{f"sim_{t}_us": terms[t] for t in TERMS}, "sim_onchip_us": onchip, "hops": hops,
                               "per_hop_us": (meas0 - onchip) / hops if hops else None,
                               "meas_slope_us_per_MiB": None, "sim_slope_us_per_MiB": None}
        big = [(s, t) for s, t in points if s >= 256 << 10]
        if len(big) >= 2:
            (s1, t1), (s2, t2) = big[-2], big[-1]
            mib = (s2 - s1) / float(1 << 20)
            row["meas_slope_us_per_MiB"] = (t2 - t1) / mib
            sim1 = _explain(protocol, algorithm, ranks, s1, topology, launch)["latency_us"]
            sim2 = _explain(protocol, algorithm, ranks, s2, topology, launch)["latency_us"]
            row["sim_slope_us_per_MiB"] = (sim2 - sim1) / mib
        rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="results.csv of benchmarks/gpu/run_all.sh")
    p.add_argument("--topology", default="hgx-h200", help="simulated topology (default hgx-h200)")
    p.add_argument("--launch", choices=("graph", "eager"), default="graph",
                   help="rows of this launch mode, simulated the same way (default graph; eager where the GPU "
                        "could not capture the cooperative launches into a graph)")
    p.add_argument("--csv", type=Path, help="also write the table as CSV")
    a = p.parse_args(argv)
    if not a.results.exists():
        print(f"sim_terms: error: {a.results}: no such file", file=sys.stderr)
        return 2
    groups = measured_groups(a.results, a.launch)
    if not groups:
        print(f"sim_terms: error: {a.results}: no single-gpu {a.launch} rows with 1 block per rank (fp32)",
              file=sys.stderr)
        return 2
    rows = compare(groups, a.topology, a.launch)
    cols = list(rows[0])
    print(" ".join(f"{c:>12}" for c in cols))
    for r in rows:
        print(" ".join(f"{_fmt(r[c]):>12}" for c in cols))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, cols)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
