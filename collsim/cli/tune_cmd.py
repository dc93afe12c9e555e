"""``collsim tune``: an NCCL tuner config and a decision table from simulated or measured winners."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from collsim.cli.app import app
from collsim.errors import CollsimError, InputError
from collsim.units import format_size
from collsim.userpaths import check_output_file

__all__ = ["tune"]

_TABLE_SUFFIXES = (".json", ".md")


def _check_output(path: Path, flag: str | None) -> None:
    """Refuse, before any work, an output path that cannot be written (its directory must exist)."""
    check_output_file(path, field=flag, make_parents=False)


def _run_scenario(path: Path, *, model: str | None, launch: str | None, nodes: int, progress: bool,
                  need_nccl: bool) -> tuple[Any, Any]:
    """Run a scenario as ``collsim run`` does (results written, report left for later); its timings."""
    from collsim.runner.run import run_scenario  # lazy: start-up
    from collsim.models import get_model  # lazy: start-up
    from collsim.scenario import load_scenario  # lazy: start-up
    from collsim.tune.nccl import check_nccl_runnable  # lazy: start-up
    from collsim.tune.source import simulated_timings  # lazy: start-up

    if model is not None:
        get_model(model)  # an unknown --model before the file is read
    scenario = load_scenario(path, model=model)
    if scenario.sweep:
        raise InputError("a scenario with a sweep writes one result set per point: tune one point's results.csv "
                         f"({scenario.output}/POINT/results.csv)", file=str(path), field="sweep")
    if need_nccl:
        check_nccl_runnable([(a, p) for a in scenario.algorithms for p in scenario.protocols], str(path))
    df = run_scenario(scenario, model=model, progress=progress, report=False)
    out_dir = Path(df.attrs["out_dir"])
    if df.attrs.get("failed"):
        raise CollsimError(f"{len(df.attrs['failed'])} configurations failed (listed under 'failed' in "
                           f"{out_dir / 'results.json'}): a tuning decision would miss them; fix them and run again")
    return simulated_timings(out_dir / "results.json", launch=launch, nodes=nodes, source=str(path)), scenario


def _simulated(path: Path, *, model: str | None, launch: str | None, nodes: int, progress: bool,
               need_nccl: bool = False) -> Any:
    """Simulated timings from a scenario (run here) or a results file."""
    from collsim.tune.source import SCENARIO_SUFFIXES, simulated_timings  # lazy: start-up

    if path.suffix.lower() in SCENARIO_SUFFIXES:
        return _run_scenario(path, model=model, launch=launch, nodes=nodes, progress=progress, need_nccl=need_nccl)[0]
    return simulated_timings(path, model=model, launch=launch, nodes=nodes)


def _write_report(sim: Any, tolerance_pct: float) -> Path:
    """report.html beside a scenario's results, as ``collsim run`` writes it, with this tie tolerance."""
    from collsim.report import write_report  # lazy: start-up
    from collsim.report.timelines import timelines_for  # lazy: start-up

    timelines = timelines_for(sim.frame, sim.meta) if sim.timings.model == "des" else None
    return write_report(sim.frame, sim.meta, sim.out_dir / "report.html", timeline=timelines, tolerance_pct=tolerance_pct)


def _say(lines: list[str], err: bool = False) -> None:
    for line in lines:
        typer.echo(line, err=err)


def _config_summary(config: Any) -> list[str]:
    rows = [("nNodes", "nRanks", "bytes", "", "NCCL choice", "channels", "slower than fastest")]
    for r in config.rows:
        rows.append((str(r.nodes), str(r.ranks), f"{r.min_bytes} ..", str(r.max_bytes), f"{r.algorithm}/{r.protocol}",
                     str(r.channels), "-" if r.excess_pct <= 0 else f"<= {max(r.excess_pct, 0.01):.2f}%"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [c.rjust(w) if i < 4 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _disagreement_lines(comparison: Any, sim_source: str, meas_source: str) -> list[str]:
    lines = [f"simulated ({sim_source}) against measured ({meas_source}): {comparison.compared} points compared, "
             f"{len(comparison.disagreements)} where the simulated choice is not within "
             f"{comparison.tolerance_pct:g}% of the measured fastest"]
    if comparison.disagreements:
        header = ("nNodes", "nRanks", "size", "simulated choice", "measured choice", "measured us (sim / best)", "penalty")
        rows = [header]
        for d in comparison.disagreements:
            sa, sp = d.simulated
            ma, mp = d.measured
            rows.append((str(d.nodes), str(d.ranks), format_size(d.size), f"{sa}/{sp}", f"{ma}/{mp}",
                         f"{d.measured_us[d.simulated]:.2f} / {d.measured_us[d.measured]:.2f}", f"+{d.penalty_pct:.1f}%"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for r in rows:
            lines.append("  " + "  ".join(c.rjust(w) if i in (0, 1, 2, 6) else c.ljust(w)
                                          for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return lines


@app.command("tune")
def tune(
    source: Optional[Path] = typer.Argument(
        None, help="A scenario YAML to run (its results are written as 'collsim run' writes them), "
                   "or a results.csv/results.json to read.", show_default=False),
    measured: Optional[Path] = typer.Option(
        None, "--measured", help="Tune from measurements instead: collsim ingest output, or nccl-tests logs "
                                 "run with NCCL_ALGO and NCCL_PROTO set."),
    against: Optional[Path] = typer.Option(
        None, "--against", help="The other side to compare with: measurements when tuning a scenario or results, "
                                "a scenario or results file with --measured. Prints the sizes where the choices disagree."),
    nccl_config: Optional[Path] = typer.Option(
        None, "--nccl-config", help="Where to write the NCCL tuner config (NCCL_TUNER_CONFIG_FILE)."),
    table: Optional[Path] = typer.Option(
        None, "--table", help="Where to write the decision table: FILE.json or FILE.md. Without --nccl-config and "
                              "--table, nccl_tuner.conf, decision_table.md and decision_table.json go beside the results."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Performance model (analytic, des) to run the scenario with."),
    tolerance: float = typer.Option(1.0, "--tolerance", help="Choices within this percentage of the fastest tie."),
    launch: Optional[str] = typer.Option(None, "--launch", "-l", help="Launch mode to tune for (eager, graph) when the results hold both (default: graph)."),
    nodes: int = typer.Option(1, "--nodes", help="nNodes of every rule: the node count NCCL will see (-1: any; "
                                                 "measurements that name theirs keep it)."),
    channels: Optional[int] = typer.Option(None, "--channels", "-c", help="Channel count to write in every rule "
                                                                          "(default: the scenario's channels, else -1, NCCL's choice)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only where the files went (and disagreements)."),
) -> None:
    """Turn the winners into deployable configuration: an NCCL tuner config and a decision table.

    The config holds, per rank count, the fastest pair NCCL can run and collsim
    models (ring with ll, ll128 or simple) as contiguous byte ranges from 0 to
    the largest size; the decision table, for custom kernels, the size ranges
    where each protocol · algorithm wins, its margin over the runner-up, and
    ties (choices within --tolerance of the fastest). Nothing is said above
    the largest size run or measured.
    """
    from collsim.tune import build_config, build_table, check_tolerance, compare  # lazy: start-up
    from collsim.tune.files import default_names, write_files  # lazy: start-up
    from collsim.tune.source import SCENARIO_SUFFIXES, measured_timings  # lazy: start-up

    tol = check_tolerance(tolerance)
    if (source is None) == (measured is None):
        raise InputError("give a scenario or results file, or --measured FILE (one of them; --against compares with the other)",
                         field="SOURCE")
    if nodes < 1 and nodes != -1:
        raise InputError(f"must be a positive node count or -1 (any), not {nodes}", field="--nodes")
    if channels is not None and channels < 1 and channels != -1:
        raise InputError(f"must be a positive channel count or -1 (NCCL's choice), not {channels}", field="--channels")
    if measured is not None and model is not None and against is None:
        raise InputError("a model runs a scenario; measurements have none (use --against SCENARIO to compare)", field="--model")
    if table is not None and table.suffix.lower() not in _TABLE_SUFFIXES:
        raise InputError(f"unknown decision-table format {table.suffix or '(no suffix)'!r}", file=str(table),
                         field="--table", choices=_TABLE_SUFFIXES)
    explicit = nccl_config is not None or table is not None
    if nccl_config is not None:
        _check_output(nccl_config, "--nccl-config")
    if table is not None:
        _check_output(table, "--table")
    want_config = nccl_config is not None or not explicit
    progress = not quiet

    notes: list[str] = []
    meas_t = None
    if against is not None and measured is None:  # read the measurements before a scenario runs
        meas_t, warns = measured_timings(against, launch=launch, nodes=nodes, field="--against")
        notes += warns + list(meas_t.notes)
    sim = None
    ran = False
    if measured is not None:
        timings, warns = measured_timings(measured, launch=launch, nodes=nodes)
        notes += warns
        out_dir, prefix = measured.parent, f"{measured.stem}."
        several = False
    else:
        sim = _simulated(source, model=model, launch=launch, nodes=nodes, progress=progress,  # type: ignore[arg-type]
                         need_nccl=want_config)
        ran = source.suffix.lower() in SCENARIO_SUFFIXES  # type: ignore[union-attr]
        timings = sim.timings
        out_dir, prefix = sim.out_dir, ""
        several = len(set(sim.frame["launch"])) > 1
    notes += list(timings.notes)
    names = default_names(timings.launch if several else "", prefix)
    outputs: dict[str, Path] = {}
    if explicit:
        if nccl_config is not None:
            outputs["config"] = nccl_config
        if table is not None:
            outputs["json" if table.suffix.lower() == ".json" else "markdown"] = table
    else:
        outputs = {key: out_dir / name for key, name in names.items()}
        for path in outputs.values():
            _check_output(path, None)

    comparison = None
    if against is not None:
        if measured is not None:
            other = _simulated(against, model=model, launch=launch, nodes=nodes, progress=progress)
            sim_t, meas_t = other.timings, timings
        else:
            sim_t = timings
        comparison = compare(sim_t, meas_t, tol)
        notes += comparison.notes

    config = build_config(timings, tol, channels) if "config" in outputs else None
    decision = build_table(timings, tol) if {"json", "markdown"} & set(outputs) else None
    files: dict[Path, str] = {}
    if config is not None:
        files[outputs["config"]] = config.text()
    if decision is not None:
        if "markdown" in outputs:
            files[outputs["markdown"]] = decision.to_markdown()
        if "json" in outputs:
            files[outputs["json"]] = decision.to_json()
    written = write_files(files)

    if ran:
        written.append(_write_report(sim, tol))
    _say([f"note: {n}" for n in notes], err=True)
    if not quiet:
        what = f"{timings.kind} on {timings.topology or 'an unnamed machine'}, model {timings.model}"
        if timings.launch:
            what += f", {timings.launch} launch"
        if config is not None:
            _say([f"NCCL tuner config ({what}; ties within {tol:g}%):"] + _config_summary(config))
            for nodes_, ranks_ in config.uncovered:
                _say([f"  nNodes {nodes_}, nRanks {ranks_}: nothing NCCL can run; left to NCCL"])
        if decision is not None:
            ties = sum(1 for r in decision.ranges if r.tie)
            _say([f"decision table: {len(decision.placements())} rank counts, {len(decision.ranges)} ranges"
                  f" ({ties} ties within {tol:g}%)"])
    if comparison is not None:
        _say(_disagreement_lines(comparison, sim_t.source, meas_t.source))
    _say(["-> " + ", ".join(str(p) for p in written)])
    sys.stdout.flush()
