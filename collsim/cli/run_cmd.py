"""``collsim run`` (a scenario file) and ``collsim simulate`` (one configuration)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from collsim.cli.app import app
from collsim.cli.options import errors_at_flags, executor_option, scheduler_option, workers_option
from collsim.cli.report_cmd import open_or_say
from collsim.errors import CollsimError
from collsim.executors import check_executor_options
from collsim.units import format_size

__all__ = ["run", "simulate_cmd"]


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    console = Console(stderr=stderr, markup=False)
    if not console.is_terminal:
        # Piped or captured: keep wide tables on one line each.
        console = Console(stderr=stderr, width=220, no_color=True, highlight=False, markup=False)
    return console


def _results_table(records: list[dict[str, Any]], title: str, sweep_keys: tuple[str, ...] = ()) -> Any:
    """The results as aligned columns in nccl-tests order, one section per configuration.

    Built as one :class:`rich.text.Text` rather than a :class:`rich.table.Table`: a scenario prints
    thousands of rows, and measuring and wrapping each cell took rich 1.5-2.5 s for 1008 rows, longer
    than simulating them.
    """
    from rich.text import Text

    launches = {r["launch"] for r in records}
    with_notes = any(r["note"] for r in records)
    columns = [("size (B)", "right"), ("count", "right"), ("type", "left"), ("redop", "left"),
               ("algorithm", "left"), ("protocol", "left"), ("ranks", "right")]
    if len(launches) > 1:
        columns.append(("launch", "left"))
    columns += [(key, "right") for key in sweep_keys]
    columns += [("time (us)", "right"), ("algbw (GB/s)", "right"), ("busbw (GB/s)", "right"),
                ("launch us", "right"), ("sync us", "right"), ("data us", "right"), ("reduce us", "right")]
    rows: list[list[str] | None] = []  # None separates configurations
    previous = None
    for r in records:
        group = (*(r.get(k) for k in sweep_keys), r["ranks"], r["algorithm"], r["protocol"], r["launch"])
        if previous is not None and group != previous:
            rows.append(None)
        previous = group
        cells = [str(r["size_bytes"]), str(r["count"]), r["dtype"], r["op"], r["algorithm"], r["protocol"],
                 str(r["ranks"])]
        if len(launches) > 1:
            cells.append(r["launch"])
        cells += [str(r.get(k)) for k in sweep_keys]
        cells += [f"{r[key]:.2f}" for key in ("latency_us", "algbw_gbps", "busbw_gbps", "launch_us", "sync_us",
                                               "data_us", "reduce_us")]
        rows.append(cells)
    widths = [len(name) for name, _ in columns]
    for cells in rows:
        if cells is not None:
            widths = [max(w, len(c)) for w, c in zip(widths, cells)]

    def line(cells: list[str]) -> str:
        return "   ".join(c.rjust(w) if justify == "right" else c.ljust(w)
                          for c, w, (_, justify) in zip(cells, widths, columns))

    notes = [r["note"] for r in records] if with_notes else None
    header = line([name for name, _ in columns]) + ("   note" if with_notes else "")
    text = Text(title + "\n\n")
    text.append(header + "\n", style="bold")
    text.append("─" * len(header) + "\n")
    body, k = [], 0
    for cells in rows:
        if cells is None:
            body.append("")
            continue
        body.append(line(cells) + (f"   {notes[k]}" if notes and notes[k] else ""))
        k += 1
    text.append("\n".join(body))
    text.no_wrap = True
    return text


def _failure_summary(failed: list[Any]) -> list[str]:
    """One line per distinct error: the error, then the configurations it hit (first six)."""
    by_error: dict[str, list[Any]] = {}
    for f in failed:
        by_error.setdefault(f.error, []).append(f)
    lines = []
    for error, which in by_error.items():
        shown = ", ".join(f.label() for f in which[:6]) + (f" and {len(which) - 6} more" if len(which) > 6 else "")
        attempts = max(f.attempts for f in which)
        lines.append(f"failed after {attempts} attempt{'s' if attempts != 1 else ''}: {shown}: {error}")
    return lines


@app.command("run")
def run(
    file: Path = typer.Argument(..., help="Scenario YAML file (see scenarios/).", show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output directory (default: reports/<name>)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Performance model (analytic, des) (default: the scenario's, else the default model)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the results table."),
    executor: str = executor_option("rows"),
    scheduler: Optional[str] = scheduler_option(),
    workers: Optional[int] = workers_option(),
    report: bool = typer.Option(True, "--report/--no-report", help="Also write report.html, the interactive HTML report."),
    open_: bool = typer.Option(False, "--open", help="Open report.html in a browser when done."),
    profile: Optional[Path] = typer.Option(None, "--profile", help="A calibrated cost profile (collsim calibrate -o FILE); the scenario's costs: still win."),
    tolerance: float = typer.Option(1.0, "--tolerance", help="Choices within this percentage of the fastest tie in the "
                                                             "report's summary and winner map and its tuner config."),
    reuse: bool = typer.Option(False, "--reuse", help="Take rows whose inputs (configuration, topology, protocol program and source, collsim's code) are unchanged since an earlier --reuse run from .collsim-cache/results.sqlite instead of simulating them again; the results are the same."),
) -> None:
    """Run every configuration of a scenario; write results.csv, results.json and report.html.

    Prints an nccl-tests-style table (size, count, type, redop, algorithm,
    protocol, ranks, time, algbw, busbw, then the time breakdown in us) and
    writes reports/<name>/results.csv and results.json. A configuration whose
    model fails is tried once more, then reported (and listed under 'failed'
    in results.json) while the others are kept; the exit status is then 1.
    """
    from collsim.runner.run import execute  # lazy: start-up

    from collsim.tune import check_tolerance  # lazy: start-up

    check_executor_options(executor, workers=workers, scheduler=scheduler)
    tolerance_pct = check_tolerance(tolerance)
    result = execute(
        file, out=out, model=model, progress=True, write=True, executor=executor, workers=workers, scheduler=scheduler,
        report=report, profile=profile, reuse=reuse, out_field="--out", tolerance_pct=tolerance_pct,
    )
    scen = result.scenario
    topo = scen.topology
    console = _console()
    sweep_keys = tuple(getattr(scen, "sweep_keys", ()))
    if not quiet:
        title = (
            f"{scen.name}: AllReduce on {topo.name} ({topo.num_gpus} GPUs), model {result.model}, "
            f"{len(result.records)} rows"
        )
        if sweep_keys:
            title += f", {len(scen.sweep_points())} sweep points"
        console.print(_results_table(result.records, title, sweep_keys))
    err = _console(stderr=True)
    if result.skipped:
        combos = {}
        for s in result.skipped:
            combos.setdefault(s.reason, []).append(f"{s.protocol}/{s.algorithm}/{s.ranks}")
        for reason, which in combos.items():
            shown = ", ".join(which[:6]) + (f" and {len(which) - 6} more" if len(which) > 6 else "")
            err.print(f"skipped {shown}: {reason}", soft_wrap=True)
    for line in _failure_summary(result.failed):
        err.print(line, soft_wrap=True)
    sizes = f"{format_size(min(scen.sizes))}..{format_size(max(scen.sizes))}"
    if reuse:
        err.print(f"{result.reused} rows reused from an earlier run, {result.ran} simulated", soft_wrap=True)
    if result.points:
        first = result.out_dir / result.points[0][1]
        console.print(
            f"{len(result.records)} rows ({sizes}), {len(result.points)} sweep points -> {result.out_dir / 'sweep.csv'}"
            f" and one directory per point ({first / 'results.csv'}, ...)",
            soft_wrap=True,
        )
    else:
        console.print(
            f"{len(result.records)} rows ({sizes}) -> {result.out_dir / 'results.csv'}, {result.out_dir / 'results.json'}",
            soft_wrap=True,
        )
    if result.report is not None:
        console.print(f"report -> {result.report}", soft_wrap=True)
        if open_:
            open_or_say(result.report)
    elif open_:
        err.print("collsim: warning: --open: no report.html was written ("
                  + ("--no-report" if not report else "a sweep writes one result set per point: "
                     "'collsim report POINT/results.json --open'" if result.points else "no rows") + ")", soft_wrap=True)
    if result.failed:
        total = len(result.records) + len(result.failed)
        where = "each point's results.json" if result.points else str(result.out_dir / "results.json")
        raise CollsimError(
            f"{len(result.failed)} of {total} configurations failed (listed above and under 'failed' in "
            f"{where}); the other {len(result.records)} rows were written"
        )


@app.command("simulate")
def simulate_cmd(
    topology: str = typer.Option("hgx-h100", "--topology", "-t", help="Topology preset or file (collsim topologies lists presets)."),
    ranks: int = typer.Option(8, "--ranks", "-n", help="Number of GPUs taking part."),
    algorithm: str = typer.Option("one-shot", "--algorithm", "-a", help="one-shot, two-shot or ring."),
    protocol: str = typer.Option("ll", "--protocol", "-p", help="Protocol name (barrier, simple, ll, ll128, ...)."),
    size: str = typer.Option("8KiB", "--size", "-s", help="Bytes per rank, e.g. 8, 8KiB, 1MB."),
    launch: str = typer.Option("graph", "--launch", "-l", help="eager (with kernel-launch overhead) or graph (CUDA-graph steady state)."),
    channels: Optional[int] = typer.Option(None, "--channels", "-c", help="Channels (default: chosen like NCCL)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Performance model (analytic, des) (default: the default model)."),
    dtype: str = typer.Option("float32", "--dtype", help="Element type."),
    op: str = typer.Option("sum", "--op", help="Reduction operator."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Cost one AllReduce configuration and print the result.

    An algorithm or rank count the protocol cannot run is an error that lists
    what it can run.
    """
    from collsim.config import RunConfig  # lazy: start-up
    from collsim.models import checked_request  # lazy: start-up

    with errors_at_flags():
        config = RunConfig(topology=topology, protocol=protocol, algorithm=algorithm, launch=launch, dtype=dtype,
                           op=op, ranks=ranks, channels=channels, size_bytes=size)
        entry, request = checked_request(config, model=model)
    result = entry.fn(request)
    nbytes = request.size_bytes
    if as_json:
        doc = {
            "topology": topology,
            "ranks": ranks,
            "algorithm": algorithm,
            "protocol": protocol,
            "size_bytes": nbytes,
            "launch": launch,
            "dtype": dtype,
            "op": op,
            **{k: v for k, v in result.to_dict().items() if k != "timeline"},
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    console = _console()
    b = result.breakdown
    console.print(
        f"{protocol} {algorithm} AllReduce, {ranks} ranks on {topology}, {format_size(nbytes)} {dtype} {op}, "
        f"{launch} launch, model {result.model}"
        + (f", {result.channels} channels" if result.channels else ""),
        soft_wrap=True,
    )
    console.print(
        f"  time {result.latency_us:.2f} us   algbw {result.algbw_gbps:.2f} GB/s   busbw {result.busbw_gbps:.2f} GB/s",
        soft_wrap=True,
    )
    console.print(
        f"  launch {b['launch']:.2f} us   sync {b['sync']:.2f} us   data {b['data']:.2f} us   reduce {b['reduce']:.2f} us"
        + (f"   ({result.events} events)" if result.events else ""),
        soft_wrap=True,
    )
    for note in result.notes:
        console.print(f"  note: {note}", soft_wrap=True)
