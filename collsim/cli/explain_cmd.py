"""``collsim explain``: where the time of one AllReduce goes, as the simulator's critical path.

The critical path is the chain of waits that sets the latency: which
operation on which rank waited for what (another rank's store, its own
fence, a lane of a loop) and for how long. Every interval of the latency is
on it exactly once, so the breakdown (launch, sync, data, reduce) is its sum
by kind (see :mod:`collsim.sim.trace` for the rule).
"""
from __future__ import annotations

import json
import sys
from collections import OrderedDict
from typing import Any, Optional

import typer

from collsim.cli.app import app
from collsim.cli.options import at_least, errors_at_flags
from collsim.errors import InputError
from collsim.units import format_size

__all__ = ["explain", "render_explanation"]


def _console() -> Any:
    from rich.console import Console

    console = Console(markup=False, highlight=False)
    if not console.is_terminal:
        console = Console(width=200, no_color=True, highlight=False, markup=False)
    return console


def _parse_costs(pairs: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise InputError(f"expected NAME=VALUE, got {pair!r}", field="--cost")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"expected a number after '=', got {value!r}", field=f"--cost {name}") from None
    return out


def render_explanation(run: Any, max_steps: int = 40, rows_symmetry: str = "") -> list[str]:
    """The lines ``collsim explain`` prints for a :class:`~collsim.sim.model.DesRun` (every rank simulated, so
    its steps name real ranks), and ``rows_symmetry``: how scenario rows simulate the same launch."""
    req = run.request
    b = run.breakdown
    lines = [
        f"{req.protocol.name} {req.algorithm} AllReduce, {req.ranks} ranks on {req.topology.name}, "
        f"{format_size(req.size_bytes)} per rank, {req.launch} launch, {run.channels} channel(s), "
        f"{run.costs.generation} costs",
        f"latency {run.latency_us:.3f} us = launch {b['launch']:.3f} + sync {b['sync']:.3f} + "
        f"data {b['data']:.3f} + reduce {b['reduce']:.3f} us ({run.outcome.events} simulation events)",
        "",
        f"Critical path: rank {run.outcome.slowest} finishes last; every interval below is on the chain "
        "of waits that ends there.",
        f"  {'start us':>9} {'end us':>9} {'took us':>8}  {'kind':6}  what happened",
    ]
    steps = [s for s in run.steps if s.duration_us > 5e-4]
    shown = steps
    if len(steps) > max_steps:
        head = max_steps // 2
        shown = steps[:head] + [None] + steps[-(max_steps - head):]
    for step in shown:
        if step is None:
            hidden = len(steps) - max_steps
            lines.append(f"  {'...':>9} {'':>9} {'':>8}  {'':6}  ({hidden} more steps; --max-steps to show them)")
            continue
        lines.append(f"  {step.start_us:9.3f} {step.end_us:9.3f} {step.duration_us:8.3f}  {step.kind:6}  "
                     f"{step.text}")
    totals: "OrderedDict[str, list[float]]" = OrderedDict()
    for step in steps:
        key = _operation_of(step.text)
        entry = totals.setdefault(key, [0.0, 0])
        entry[0] += step.duration_us
        entry[1] += 1
    lines += ["", "Critical-path time by operation (largest first):"]
    for key, (total, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:12]:
        lines.append(f"  {total:9.3f} us  {key} ({count} interval{'s' if count != 1 else ''})")
    for note in run.notes:
        lines.append(f"note: {note}")
    if rows_symmetry:
        lines += ["", f"Scenario rows: {rows_symmetry}."]
    return lines


def _operation_of(text: str) -> str:
    """The operation a step is about, without lane indices: 'barrier.publish.wait' for '... wait[k=2]: ...'."""
    head = text.split(":", 1)[0]
    words = head.split()
    name = words[-1] if words else head
    return name.split("[", 1)[0]


@app.command("explain")
def explain(
    topology: str = typer.Option("hgx-h100", "--topology", "-t", help="Topology preset or file."),
    ranks: int = typer.Option(8, "--ranks", "-n", help="Number of GPUs taking part."),
    algorithm: str = typer.Option("one-shot", "--algorithm", "-a", help="one-shot, two-shot or ring."),
    protocol: str = typer.Option("ll", "--protocol", "-p", help="Protocol name or .py file."),
    size: str = typer.Option("8KiB", "--size", "-s", help="Bytes per rank, e.g. 8, 1KiB, 4MiB."),
    launch: str = typer.Option("graph", "--launch", "-l", help="eager or graph."),
    channels: Optional[int] = typer.Option(None, "--channels", "-c", help="Channels [default: chosen like NCCL]."),
    cost: list[str] = typer.Option([], "--cost", help="Override a cost parameter, NAME=VALUE (repeatable)."),
    max_steps: int = typer.Option(40, "--max-steps", help="Most critical-path steps to print."),
    as_json: bool = typer.Option(False, "--json", help="Print the breakdown and the critical path as JSON."),
) -> None:
    """Explain where the simulated time of one AllReduce goes (des model): breakdown and critical path."""
    from collsim.config import RunConfig  # lazy: start-up
    from collsim.models import checked_request  # lazy: start-up
    from collsim.sim.model import run_des, symmetry_of  # lazy: start-up

    at_least(max_steps, 1, "--max-steps", "step")
    costs = _parse_costs(cost)
    with errors_at_flags():  # the checks and messages of simulate(), located at the flags
        config = RunConfig(topology=topology, protocol=protocol, algorithm=algorithm, launch=launch,
                           ranks=ranks, channels=channels, size_bytes=size)
        _, request = checked_request(config, model="des", costs=costs)
    run = run_des(request)
    why_not = symmetry_of(request)
    # rows simulate one rank when they can; confirm it runs through (a shared link can still call it off)
    rows_symmetry = run_des(request, symmetric=True).symmetry if why_not is None else f"every rank simulated: {why_not}"
    if as_json:
        doc = {"latency_us": run.latency_us, "breakdown": run.breakdown, "channels": run.channels,
               "slowest_rank": run.outcome.slowest, "events": run.outcome.events, "rows": rows_symmetry,
               "critical_path": [{"rank": s.rank, "kind": s.kind, "start_us": s.start_us, "end_us": s.end_us,
                                  "what": s.text} for s in run.steps]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    console = _console()
    for line in render_explanation(run, max_steps=max_steps, rows_symmetry=rows_symmetry):
        console.print(line, soft_wrap=True)
