"""Commands of this group register on collsim.cli.app.app.

``collsim ingest``: parse measured collective benchmarks (nccl-tests text or
JSON output, collsim measurement CSVs, the published-measurements CSV) into
one measurement table.
``collsim compare``: simulated results against measurements, per row and group.
``collsim calibrate``: fit cost parameters to measurements, write a profile.
``collsim validate``: per measured family, the model's error with documented
and calibrated (cross-validated) costs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from collsim.cli.app import app
from collsim.cli.feedback import working
from collsim.userpaths import check_output_file, check_report_path
from collsim.cli.options import at_least
from collsim.errors import InputError

__all__ = ["ingest", "compare_cmd", "calibrate_cmd", "validate_cmd"]


@app.command("ingest")
def ingest(
    logs: list[Path] = typer.Argument(
        ...,
        help="nccl-tests output (text as pasted, or -J JSON), collsim measurement CSVs, "
        "or the published-measurements CSV. The format is detected from the content.",
        show_default=False,
        metavar="LOG",
    ),
    output: str = typer.Option(
        ..., "-o", "--output", help="Measurement CSV to write ('-' for stdout). Written atomically.",
        show_default=False,
    ),
    topology: str = typer.Option(
        None, "--topology", help="collsim topology name to record on rows that have none.",
        show_default=False,
    ),
    collective: str = typer.Option(
        None, "--collective",
        help="Collective of rows whose collective the input does not tell (e.g. allreduce).",
        show_default=False,
    ),
) -> None:
    """Parse measured collective benchmarks into one measurement table.

    Rows whose data check failed (#wrong > 0) are kept but flagged ``wrong``;
    rows of a run that ended early are kept but flagged ``truncated``. Each
    such problem is printed as a warning naming the file and line.
    """
    from collsim.calibrate.ingest import ingest_files  # lazy: start-up
    from collsim.calibrate.measurements import write_measurements  # lazy: start-up

    if output != "-":
        check_output_file(output, field="--output")
    table, logs_read, messages = ingest_files(logs, topology=topology, collective=collective)
    for message in messages:
        typer.echo(f"collsim: warning: {message}", err=True)
    if len(table) == 0:
        names = ", ".join(str(p) for p in logs)
        failures = [lg.meta.get("failure") for lg in logs_read if lg.meta.get("failure")]
        why = f" (the run failed: {failures[0]})" if failures else ""
        raise InputError(f"no result rows found{why}; nothing written", file=names)
    if output == "-":
        table.to_csv(sys.stdout, index=False, lineterminator="\n")
    else:
        write_measurements(table, Path(output))
    wrong = int(table["wrong"].sum())
    truncated = int(table["truncated"].sum())
    extras = []
    if wrong:
        extras.append(f"{wrong} flagged wrong")
    if truncated:
        extras.append(f"{truncated} from truncated runs")
    note = f" ({', '.join(extras)})" if extras else ""
    where = "stdout" if output == "-" else output
    typer.echo(f"collsim: wrote {len(table)} rows from {len(logs_read)} file(s) to {where}{note}", err=True)


# ---------------------------------------------------------------------------
# compare, calibrate, validate


def _console(stderr: bool = False):
    from rich.console import Console

    console = Console(stderr=stderr, markup=False, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=220, no_color=True, highlight=False, markup=False)
    return console


def _read_measured(paths: list[Path], topology: str | None = None, *, single_gpu: bool = False):
    """Every input read into one table (warnings printed), rows flagged wrong or measured on one GPU dropped."""
    import warnings

    import pandas as pd

    from collsim.calibrate.ingest import IngestWarning, read_measurements  # lazy: start-up
    from collsim.calibrate.measurements import normalize, single_gpu_rows, usable  # lazy: start-up

    frames = []
    for path in paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IngestWarning)
            frames.append(read_measurements(path))
        for w in caught:
            if issubclass(w.category, IngestWarning):
                typer.echo(f"collsim: warning: {w.message}", err=True)
    table = normalize(pd.concat([f for f in frames if len(f)], ignore_index=True)) if any(len(f) for f in frames) \
        else frames[0]
    if topology:
        table.loc[(table["topology"] == "") & (table["gpu"] == ""), "topology"] = topology
    kept = usable(table, include_single_gpu=single_gpu).reset_index(drop=True)
    if len(table) and not len(kept) and single_gpu_rows(table) == len(table):
        raise InputError(
            f"all {len(table)} row(s) were measured with every rank on one GPU (gpu_mode single-gpu): they time "
            "on-chip cost, not the interconnect; measure with collsim_bench --mode multi on one GPU per rank",
            file=str(paths[0]),
        )
    return kept


def _pct(value: float) -> str:
    import math

    return "-" if value is None or not math.isfinite(value) else f"{value:+.1f}"


def _abs_pct(value: float) -> str:
    import math

    return "-" if value is None or not math.isfinite(value) else f"{value:.1f}"


@app.command("compare")
def compare_cmd(
    simulated: Path = typer.Argument(..., help="collsim results.csv or results.json (from 'collsim run').",
                                     show_default=False),
    measured: list[Path] = typer.Argument(..., help="Measurements: nccl-tests output, measurement CSVs, the "
                                          "published-measurements CSV (anything 'collsim ingest' reads).",
                                          show_default=False, metavar="MEASURED"),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write an HTML report with the measured points "
                                        "overlaid on the simulated curves."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    topology: Optional[str] = typer.Option(None, "--topology", help="Topology of measured rows that name no GPU."),
    rows_shown: bool = typer.Option(True, "--rows/--no-rows", help="Print the per-row table (default) or only "
                                    "the per-group one."),
    single_gpu: bool = typer.Option(False, "--single-gpu", help="Also join rows an emitted harness measured with "
                                    "every rank on one GPU (gpu_mode single-gpu): their error is then the share of "
                                    "the simulated time that is interconnect, not model error."),
) -> None:
    """Compare simulated latencies with measured ones: per-row and per-group % error.

    Rows join on collective, ranks and size, and on algorithm, protocol,
    launch mode and topology/GPU where the measurement states them. Error is
    100 x (simulated - measured) / measured (signed) and its absolute value.
    """
    from collsim.calibrate.compare import compare, load_simulated  # lazy: start-up

    if html is not None:
        check_report_path(html, field="--html")
    sim, meta = load_simulated(simulated)
    table = _read_measured(measured, topology, single_gpu=single_gpu)
    names = ", ".join(str(p) for p in measured)
    result = compare(sim, table, simulated_source=str(simulated), measured_source=names, topology=topology,
                     single_gpu=single_gpu)
    if html is not None:
        from collsim.report import write_report  # lazy: start-up

        out = write_report(sim, meta, html, measured=result.measured)
        typer.echo(f"collsim: wrote {out}", err=True)
    if as_json:
        doc = {"simulated": str(simulated), "measured": [str(p) for p in measured], **result.to_dict()}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    from rich import box
    from rich.table import Table

    console = _console()
    if rows_shown:
        t = Table(title=f"{len(result.rows)} measured/simulated pairs", box=box.SIMPLE_HEAD, title_justify="left")
        for name, justify in (("family", "left"), ("ranks", "right"), ("size (B)", "right"), ("algorithm", "left"),
                              ("protocol", "left"), ("launch", "left"), ("measured us", "right"),
                              ("simulated us", "right"), ("error %", "right"), ("|error| %", "right")):
            t.add_column(name, justify=justify, no_wrap=name != "family")
        for r in result.rows.to_dict("records"):
            t.add_row(r["family"], str(r["ranks"]), str(r["size_bytes"]), r["algorithm"], r["protocol"], r["launch"],
                      f"{r['measured_us']:.2f}", f"{r['simulated_us']:.2f}", _pct(r["signed_pct"]),
                      _abs_pct(r["abs_pct"]))
        console.print(t)
    g = Table(title="per group", box=box.SIMPLE_HEAD, title_justify="left")
    for name, justify in (("family", "left"), ("topology", "left"), ("ranks", "right"), ("algorithm", "left"),
                          ("protocol", "left"), ("launch", "left"), ("n", "right"), ("median error %", "right"),
                          ("median |error| %", "right"), ("max |error| %", "right")):
        g.add_column(name, justify=justify, no_wrap=name != "family")
    for r in result.groups.to_dict("records"):
        g.add_row(r["family"], r["topology"], str(r["ranks"]), r["algorithm"], r["protocol"], r["launch"], str(r["n"]),
                  _pct(r["median_signed_pct"]), _abs_pct(r["median_abs_pct"]), _abs_pct(r["max_abs_pct"]))
    console.print(g)
    o = result.overall
    console.print(
        f"{result.joined_measured} of {result.measured_rows} measured rows joined ({o['pairs']} pairs): median error "
        f"{_pct(o['median_signed_pct'])} %, median |error| {_abs_pct(o['median_abs_pct'])} %, max |error| "
        f"{_abs_pct(o['max_abs_pct'])} %", soft_wrap=True)


def _factor(value: float | None) -> str:
    """A multiplicative standard error as text: 1.05 -> 'x/ 1.05'."""
    import math

    if value is None or not math.isfinite(value):
        return "unbounded"
    return f"x/ {value:.3g}"


def _split_params(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


@app.command("calibrate")
def calibrate_cmd(
    measured: list[Path] = typer.Argument(..., help="Measurements (anything 'collsim ingest' reads).",
                                          show_default=False, metavar="MEASURED"),
    topology: str = typer.Option(..., "--topology", "-t", help="Topology preset the profile is for; rows measured "
                                 "on other systems are left out (rows naming no GPU are taken as this one).",
                                 show_default=False),
    output: Path = typer.Option(..., "-o", "--output", help="Profile YAML to write (e.g. profiles/my-h100.yaml).",
                                show_default=False),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model whose costs to fit (des, analytic) "
                                        "[default: the default model]."),
    params: Optional[str] = typer.Option(None, "--params", "-p", help="Comma-separated cost parameters to fit: the "
                                         "model's cost keys or aliases (launch, hop_latency, fence, poll, "
                                         "bw_efficiency, ...) [default: collsim validate's set, less what the data cannot identify]."),
    folds: int = typer.Option(5, "--folds", "-k", help="k-fold cross-validation (0 or 1: none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fold assignment."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Worker processes for model evaluations."),
    as_json: bool = typer.Option(False, "--json", help="Print the fit summary as JSON."),
) -> None:
    """Fit cost parameters to measurements; write a profile for 'collsim run --profile'.

    Bounded least squares on log-latency with k-fold cross-validation; prints
    the error before and after on the training folds and the held-out fold.
    Parameters the data cannot identify are refused with the reason.
    """
    from collsim.calibrate.evaluate import Evaluator, configs_of  # lazy: start-up
    from collsim.calibrate.fit import calibrate  # lazy: start-up
    from collsim.calibrate.mapping import map_measurements  # lazy: start-up
    from collsim.calibrate.profile import profile_document, write_profile  # lazy: start-up
    from collsim.calibrate.validate import DEFAULT_PARAMS  # lazy: start-up
    from collsim.models import get_model  # lazy: start-up
    from collsim.calibrate.parameters import resolve_params  # lazy: start-up

    model_name, _ = get_model(model)
    names = _split_params(params) or list(DEFAULT_PARAMS.get(model_name, ()))
    if not names:
        raise InputError("name the parameters to fit", field="--params")
    resolve_params(model_name, names)  # an unknown name is refused before anything is read
    if folds < 0:
        raise InputError(f"must be 0 or more (0 or 1: no cross-validation), got {folds}", field="--folds")
    at_least(jobs, 1, "--jobs", "worker process")
    from collsim.topology import load_topology  # lazy: start-up

    load_topology(topology)  # an unknown preset is reported before anything is read
    check_output_file(output, field="--output")
    table = _read_measured(measured, topology)
    source = ", ".join(str(p) for p in measured)
    if len(table) == 0:
        raise InputError("no usable measured rows", file=source)
    mapped = map_measurements(table, topology=topology)
    err = _console(stderr=True)
    ours = mapped[mapped["mapped"] & (mapped["m_topology"] == topology)].reset_index(drop=True)
    other = mapped[mapped["mapped"] & (mapped["m_topology"] != topology)]
    unmapped = mapped[~mapped["mapped"]]
    if len(ours) == 0:  # the one line says why (the reasons below, counted)
        from collsim.calibrate.validate import unmapped_reasons  # lazy: start-up

        why = unmapped_reasons(mapped) if not len(other) else \
            f" ({len(other)} row(s) measured on {', '.join(sorted(set(other['m_topology'])))}" + \
            (f"; {unmapped_reasons(mapped)[2:]}" if len(unmapped) else ")")
        raise InputError(f"no measured row maps to a configuration on {topology}{why}", file=source)
    if len(other):
        err.print(f"left out {len(other)} row(s) measured on other systems "
                  f"({', '.join(sorted(set(other['m_topology'])))})", soft_wrap=True)
    for (label, reason), g in unmapped.groupby(["family_label", "reason"], sort=True):
        err.print(f"unmapped: {label}: {len(g)} row(s): {reason}", soft_wrap=True)
    with Evaluator(model_name, jobs=jobs) as ev:
        unsupported = ev.unsupported(configs_of(ours))
        if unsupported:
            keep = [(c.topology, c.ranks, c.algorithm, c.protocol) not in unsupported for c in configs_of(ours)]
            for why in sorted(set(unsupported.values())):
                err.print(f"unmapped: {why}", soft_wrap=True)
            ours = ours[keep].reset_index(drop=True)
        if len(ours) == 0:
            raise InputError(f"the {model_name} model cannot cost any mapped row", file=source)
        err.print(f"fitting {', '.join(names)} ({model_name}) to {len(ours)} row(s), {folds}-fold cross-validation",
                  soft_wrap=True)
        # parameters named on the command line must all be identifiable; from the default set, those the
        # data cannot identify are left at their documented values and listed
        with working(f"fitting {len(names)} parameters to {len(ours)} rows") as update:
            cal = calibrate(ours, names, evaluator=ev, folds=folds, seed=seed, strict=bool(_split_params(params)),
                            source=source, progress=update)
        generation = ev.generation(topology, int(ours["m_ranks"].max()))
    counts = {f"{label}: {reason}": int(len(g)) for (label, reason), g in unmapped.groupby(["family_label", "reason"])}
    doc = profile_document(cal, topology=topology, generation=generation, sources=[str(p) for p in measured],
                           folds=folds, seed=seed, unmapped=counts)
    path = write_profile(output, doc)
    if as_json:
        summary = {"profile": str(path), "model": cal.model, "topology": topology, "rows": len(cal.rows),
                   "costs": doc["costs"], "fit": doc["fit"]}
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return
    from rich import box
    from rich.table import Table

    console = _console()
    t = Table(title=f"{cal.model} cost parameters fitted to {len(cal.rows)} rows on {topology}", box=box.SIMPLE_HEAD,
              title_justify="left")
    for name, justify in (("parameter", "left"), ("documented", "right"), ("fitted", "right"),
                          ("std. error", "right"), ("bounds", "left")):
        t.add_column(name, justify=justify)
    for p in cal.params:
        bound = p.at_bound(cal.values[p.name])
        t.add_row(p.name, f"{p.default:g}", f"{cal.values[p.name]:.4g}" + (f" (at {bound} bound)" if bound else ""),
                  _factor(cal.uncertainty.get(p.name)), f"[{p.lower:g}, {p.upper:g}]")
    console.print(t)
    for name, why in cal.refused.items():
        console.print(f"not fitted: {name}: {why}", soft_wrap=True)
    if cal.folds:
        f = Table(title="median |error| %: documented -> fitted values", box=box.SIMPLE_HEAD, title_justify="left")
        for name in ("fold", "train rows", "training folds", "held-out rows", "held-out fold"):
            f.add_column(name, justify="right" if name != "fold" else "left")
        for fr in cal.folds:
            f.add_row(str(fr.fold), str(fr.train_rows),
                      f"{_abs_pct(fr.train_before['median_abs_pct'])} -> {_abs_pct(fr.train_after['median_abs_pct'])}",
                      str(fr.heldout_rows),
                      f"{_abs_pct(fr.heldout_before['median_abs_pct'])} -> {_abs_pct(fr.heldout_after['median_abs_pct'])}")
        console.print(f)
        console.print(f"held out (every row predicted by the fit that did not see it): median |error| "
                      f"{_abs_pct(cal.heldout_default['median_abs_pct'])} % -> "
                      f"{_abs_pct(cal.heldout_fitted['median_abs_pct'])} %", soft_wrap=True)
    console.print(f"all rows: median |error| {_abs_pct(cal.default_errors['median_abs_pct'])} % -> "
                  f"{_abs_pct(cal.fitted_errors['median_abs_pct'])} % (max {_abs_pct(cal.fitted_errors['max_abs_pct'])} %)",
                  soft_wrap=True)
    console.print(f"wrote {path} ({doc['provenance']})", soft_wrap=True)


@app.command("validate")
def validate_cmd(
    measured: Optional[Path] = typer.Option(None, "--measured", help="Measurement table [default: "
                                            "../shared/data/measured/allreduce_measured.csv next to the repository]."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model to validate (des, analytic) "
                                        "[default: the default model]."),
    params: Optional[str] = typer.Option(None, "--params", "-p", help="Parameters to calibrate (comma-separated) "
                                         "[default: a set per model]."),
    folds: int = typer.Option(5, "--folds", "-k", help="Cross-validation folds per GPU generation."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fold assignment."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Worker processes for model evaluations."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the result as the Markdown section of "
                                  "docs/VALIDATION.md."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Per measured family: median |error| of the model with documented and with calibrated (cross-validated) costs.

    Also lists the measured families the model cannot represent, with the reason.
    """
    from collsim.calibrate.validate import GOAL_CALIBRATED_PCT, GOAL_DEFAULT_PCT, to_markdown, validate  # lazy: start-up

    at_least(folds, 2, "--folds", "folds")
    at_least(jobs, 1, "--jobs", "worker process")
    err = _console(stderr=True)
    result = validate(measured, model=model, params=_split_params(params) or None, folds=folds, seed=seed, jobs=jobs,
                      progress=lambda message: err.print(message, soft_wrap=True))
    if markdown:
        sys.stdout.write(to_markdown(result))
        return
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return
    from rich import box
    from rich.table import Table

    console = _console()
    t = Table(title=f"{result.model}: median |error| % per mapped family", box=box.SIMPLE_HEAD, title_justify="left")
    for name, justify in (("family", "left"), ("rows", "right"), ("modelled as", "left"), ("default", "right"),
                          ("calibrated (CV)", "right")):
        t.add_column(name, justify=justify)
    for f in result.families:
        t.add_row(f.label, str(f.rows), f.modelled_as, _abs_pct(f.default_pct), _abs_pct(f.calibrated_pct))
    d, c = result.default["median_abs_pct"], result.calibrated.get("median_abs_pct", float("nan"))
    t.add_row("all mapped rows", str(sum(f.rows for f in result.families)), "", _abs_pct(d), _abs_pct(c))
    console.print(t)
    console.print(f"goals: <= {GOAL_DEFAULT_PCT:.0f} % default ({_abs_pct(d)} %), <= {GOAL_CALIBRATED_PCT:.0f} % "
                  f"calibrated ({_abs_pct(c)} %)", soft_wrap=True)
    for gen, cal in result.fits.items():
        if isinstance(cal, str):
            console.print(f"{gen}: not calibrated: {cal}", soft_wrap=True)
            continue
        values = ", ".join(f"{p.name}={cal.values[p.name]:.4g} (was {p.default:g}"
                           + (f", at {p.at_bound(cal.values[p.name])} bound)" if p.at_bound(cal.values[p.name]) else ")")
                           for p in cal.params)
        console.print(f"{gen}: {values}", soft_wrap=True)
        for name, why in cal.refused.items():
            console.print(f"  not fitted: {name}: {why}", soft_wrap=True)
    u = Table(title="not representable yet (unmapped)", box=box.SIMPLE_HEAD, title_justify="left")
    for name, justify in (("family", "left"), ("rows", "right"), ("reason", "left")):
        u.add_column(name, justify=justify)
    for fam, n, why in result.unmapped:
        u.add_row(fam, str(n), why)
    console.print(u)
