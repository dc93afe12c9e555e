"""Speed of the discrete-event simulator: per scenario, per row, per event, and events versus message size.

Costs every row of the given scenarios with the ``des`` model in this
process and reports CPU seconds (``time.process_time``: the 2-core test
machines are shared, so wall time there is noisy), simulations and events
per second, and the slowest kinds of row. ``--sizes`` prints the events of
one configuration at every message size (the count must not grow with the
size). A reference loop (10 million integer additions) is timed alongside,
so figures from a loaded machine can be put in proportion.

    python benchmarks/sim_perf.py                          # scenarios/8gpu.yaml and scenarios/nvl72.yaml
    python benchmarks/sim_perf.py scenarios/8gpu.yaml --sizes
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collsim.ir.registry import load_protocol  # noqa: E402
from collsim.models import get_model, simulate  # noqa: E402
from collsim.results import expand_rows  # noqa: E402
from collsim.scenario import load_scenario  # noqa: E402
from collsim.units import format_size  # noqa: E402


def reference_loop_s() -> float:
    """CPU seconds of 10 million integer additions in a Python loop (about 0.4 s on an idle modern core)."""
    start, total = time.process_time(), 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - start


def scenario_speed(path: str) -> None:
    scenario = load_scenario(str(ROOT / path))
    rows, skipped = expand_rows(scenario, model="des")
    _, fn = get_model("des")
    per_kind: dict[tuple, list[float]] = defaultdict(list)
    events = 0
    start_wall, start = time.perf_counter(), time.process_time()
    for row in rows:
        t = time.process_time()
        result = fn(row.request())
        per_kind[(row.ranks, row.algorithm, row.protocol.name)].append(time.process_time() - t)
        events += result.events
    cpu, wall = time.process_time() - start, time.perf_counter() - start_wall
    print(f"\n{path}: {len(rows)} simulations ({len(skipped)} combinations skipped)")
    print(f"  CPU {cpu:.2f} s (wall {wall:.2f} s), {cpu / len(rows) * 1e3:.2f} ms per simulation, "
          f"{events / len(rows):.0f} events per simulation, {events / cpu:,.0f} events per CPU second")
    slowest = sorted(per_kind.items(), key=lambda kv: -sum(kv[1]))[:5]
    for (ranks, algorithm, protocol), times in slowest:
        print(f"  {protocol} {algorithm} x{ranks}: {sum(times):.2f} s over {len(times)} sizes "
              f"({sum(times) / len(times) * 1e3:.1f} ms each)")


def events_by_size(topology: str = "hgx-h100", ranks: int = 8) -> None:
    sizes = [8, 1024, 64 * 1024, 1 << 20, 16 << 20, 256 << 20, 1 << 30]
    print(f"\nevents per simulation on {topology}, {ranks} ranks:")
    print("| protocol | algorithm | " + " | ".join(format_size(s) for s in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for name, algorithm in (("ll", "one-shot"), ("barrier", "two-shot"), ("simple", "ring"), ("ll128", "ring")):
        counts = [simulate(topology, ranks=ranks, algorithm=algorithm, protocol=load_protocol(name),
                           size_bytes=s, model="des").events for s in sizes]
        print(f"| {name} | {algorithm} | " + " | ".join(str(c) for c in counts) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", default=["scenarios/8gpu.yaml", "scenarios/nvl72.yaml"])
    parser.add_argument("--sizes", action="store_true", help="also print events per simulation versus size")
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, {platform.machine()}, "
          f"reference loop {reference_loop_s():.2f} s")
    for path in args.scenarios:
        scenario_speed(path)
    if args.sizes:
        events_by_size()
    print(f"\nreference loop again: {reference_loop_s():.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
