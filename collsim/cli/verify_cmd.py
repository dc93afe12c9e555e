"""``collsim verify``: check a protocol's synchronization with Z3, or every protocol and mutant (``--all``)."""
from __future__ import annotations

import json
import sys
from typing import Any, List, Optional

import typer

from collsim.cli.app import app
from collsim.cli.feedback import warn, working
from collsim.cli.options import executor_option, scheduler_option, workers_option
from collsim.errors import InputError
from collsim.executors import check_executor_options

__all__ = ["verify_command"]


def _console() -> Any:
    from rich.console import Console

    console = Console(markup=False)
    if not console.is_terminal:
        console = Console(width=200, no_color=True, highlight=False, markup=False)
    return console


def _cell(status: str) -> str:
    return {"holds": "holds", "violated": "VIOLATED", "unknown": "unknown"}.get(status, status)


@app.command("verify")
def verify_command(
    protocol: Optional[str] = typer.Argument(None, help="Protocol name (shipped or mutant) or a .py file."),
    algorithm: Optional[str] = typer.Option(None, "--algorithm", "-a",
                                            help="one-shot, two-shot or ring (default: the protocol's first)."),
    ranks: Optional[int] = typer.Option(None, "--ranks", help="Ranks in the bound (default 3)."),
    iterations: Optional[int] = typer.Option(None, "--iterations", help="Launches in the bound (default 2)."),
    model: str = typer.Option("ptx", "--model", "-m", help="Memory model: ptx or sc."),
    assume: Optional[List[str]] = typer.Option(
        None, "--assume", help="Hardware assumption to prove under (repeatable; default: the declared ones)."),
    flag_bits: Optional[int] = typer.Option(None, "--flag-bits", help="Override the protocol's flag width."),
    timeout: float = typer.Option(60.0, "--timeout", help="Solver time limit per property, in seconds."),
    lines: Optional[int] = typer.Option(None, "--lines", help="Lines per chunk (default 2 where the data path is wider than one line or lane, else 1)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Threads per rank (default 2 where the data path is wider than one line or lane, else 1)."),
    sizes: Optional[str] = typer.Option(
        None, "--sizes", help="Lines per chunk of each launch, comma-separated (one per iteration), for a protocol "
                              "whose size changes between launches (default: every sequence up to --lines)."),
    ctas: Optional[int] = typer.Option(None, "--ctas", help="CTAs per rank, at most the protocol's (default: the protocol's, at most 2)."),
    dependencies: bool = typer.Option(True, "--dependencies/--no-dependencies",
                                      help="Re-check without each assumption and without the data domain."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Use and fill the verdict cache."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    all_: bool = typer.Option(False, "--all", help="Every shipped protocol under every algorithm it has (what emit --all needs; "
                              "--algorithm A: only A) and every mutant, as a summary."),
    executor: str = executor_option("the checks of --all"),
    scheduler: Optional[str] = scheduler_option(),
    workers: Optional[int] = workers_option(),
) -> None:
    """Verify PROTOCOL's synchronization; exit 0 when every property holds at the bound, 1 otherwise.

    Properties: stale read, torn read, early overwrite, data race, hang,
    sentinel collision, postcondition. A verdict holds only at its bound
    (ranks, iterations, model, assumptions), which is always printed.
    With --all, --executor spreads the checks like 'collsim run' does; a
    check that raises twice is listed as an error and the exit status is 1.
    """
    from collsim.verify.verifier import verify, verify_all  # lazy: start-up

    if timeout <= 0:
        raise InputError("the timeout must be positive", field="--timeout")
    if ranks is not None and ranks < 2:
        raise InputError("the bound needs at least 2 ranks", field="--ranks")
    if iterations is not None and iterations < 1:
        raise InputError("the bound needs at least 1 iteration", field="--iterations")
    for flag, value, what in (("--lines", lines, "line per chunk"), ("--threads", threads, "thread per rank"),
                              ("--ctas", ctas, "CTA per rank")):
        if value is not None and value < 1:
            raise InputError(f"the bound needs at least 1 {what}, got {value}", field=flag)
    common = dict(ranks=ranks, iterations=iterations, model=model, timeout=timeout, lines=lines, threads=threads,
                  use_cache=cache)
    per_launch = _parse_sizes(sizes)
    if per_launch is not None:
        if all_:
            raise InputError("applies to one protocol, not --all", field="--sizes")
        if iterations is None:
            common["iterations"] = len(per_launch)
    if not all_:
        given = [name for name, value in (("--executor", executor not in ("auto", "local")),
                                          ("--scheduler", scheduler is not None),
                                          ("--workers", workers is not None)) if value]
        if given:
            raise InputError("only applies with --all; a single protocol is checked in this process",
                             field=given[0])
    check_executor_options(executor, workers=workers, scheduler=scheduler)
    if all_:
        if protocol is not None:
            raise InputError("give a protocol or --all, not both", field="protocol")
        summary = verify_all(algorithm=algorithm, flag_bits=flag_bits, executor=executor, workers=workers,
                             scheduler=scheduler, progress="verify --all", **common)
        if as_json:
            print(json.dumps(summary.to_json(), indent=2))
        else:
            _print_summary(summary)
        if not summary.ok:
            raise SystemExit(1)
        return
    if protocol is None:
        raise InputError("name a protocol (or use --all)", field="protocol")

    options = dict(assume=assume, flag_bits=flag_bits, dependencies=dependencies, sizes=per_launch, **common)
    if ctas is not None:
        options["ctas"] = ctas
    long_run = _warn_if_large(protocol, algorithm, options)
    title = f"verifying {protocol}" + (f" ({algorithm})" if algorithm else "") + f" under {model}"
    with working(title) as update:
        def progress(text: str) -> None:
            update(f"{title}: {text.strip()}")
            if long_run and not sys.stderr.isatty():  # a long run off a terminal: one line per step
                print(f"collsim: {text.strip()}", file=sys.stderr, flush=True)

        result = verify(protocol, algorithm, progress=progress, **options)
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        _console().print(result.render())
    if not result.ok:
        raise SystemExit(1)


def _parse_sizes(text: str | None) -> tuple[int, ...] | None:
    """``"1,2"`` -> ``(1, 2)``: the lines per chunk of each launch (``--sizes``)."""
    if text is None:
        return None
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise InputError(f"expected comma-separated line counts such as 2,1,2, got {text!r}", field="--sizes") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"every launch moves at least 1 line per chunk, got {text!r}", field="--sizes")
    return sizes


def _warn_if_large(protocol: str, algorithm: str | None, options: dict[str, Any]) -> bool:
    """Warn before a verification whose problem no measured run of its size finished within minutes, from the
    size of its lowered instance (:func:`collsim.verify.verifier.estimate`: no solving); return whether it is
    a long run (its progress then goes to stderr line by line when stderr is not a terminal)."""
    from collsim.verify.verifier import (LONG_COUNTED, LONG_UNKNOWNS, SLOW_COUNTED, SLOW_UNKNOWNS,  # lazy: start-up
                                         estimate)

    if all(options.get(k) is None for k in ("ranks", "iterations", "lines", "threads", "ctas")):
        return False  # the default bound: seconds
    size = estimate(protocol, algorithm, **options)
    if size.unknowns > SLOW_UNKNOWNS:
        warn(f"{size}: instances of this size took from minutes to more than an hour of CPU (docs/PERFORMANCE.md); "
             "a protocol's bugs show at small bounds; --timeout limits each property")
    elif size.counted > SLOW_COUNTED:
        warn(f"{size}: its polls wait on counters, and proving which of {size.counted} increments precede each "
             "wait took minutes or did not finish at this count (docs/PERFORMANCE.md); a protocol's bugs show at "
             "small bounds; --timeout limits each property")
    return size.unknowns > LONG_UNKNOWNS or size.counted > LONG_COUNTED


def _print_summary(summary) -> None:
    from rich import box
    from rich.table import Table

    from collsim.verify.properties import PROPERTIES, PROPERTY_TITLES  # lazy: start-up

    console = _console()
    errors = {kind: [f for f in summary.failed if f.kind == kind] for kind in ("protocol", "mutant")}
    if summary.protocols or errors["protocol"]:
        model = summary.protocols[0].model if summary.protocols else "-"
        table = Table(title=f"protocols under {model} (bound per row)", box=box.SIMPLE_HEAD,
                      title_justify="left", pad_edge=False)
        table.add_column("protocol", no_wrap=True)
        table.add_column("algorithm", no_wrap=True)
        table.add_column("bound", no_wrap=True)
        for p in PROPERTIES:
            table.add_column(PROPERTY_TITLES[p], no_wrap=True)
        table.add_column("depends on", no_wrap=True)
        table.add_column("time (s)", justify="right")
        for r in summary.protocols:
            assumed = ", ".join(r.bound.assumptions) or "-"
            table.add_row(r.protocol, r.algorithm, f"{r.bound.ranks}x{r.bound.iterations} [{assumed}]",
                          *[_cell(r.properties[p].status) if p in r.properties else "-" for p in PROPERTIES],
                          ", ".join(r.depends_on) or "none", f"{r.seconds:.1f}")
        for f in errors["protocol"]:
            table.add_row(f.protocol, f.algorithm, "-", *["ERROR"] * len(PROPERTIES), "-", "-")
        console.print(table)
    if summary.mutants or errors["mutant"]:
        table = Table(title="mutants", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
        for name in ("mutant", "algorithm", "bound", "expected", "caught", "also violated", "time (s)"):
            table.add_column(name, no_wrap=True, justify="right" if name == "time (s)" else "left")
        for r in summary.mutants:
            others = [PROPERTY_TITLES[p] for p in r.violated if p != r.expected_violation]
            table.add_row(r.protocol, r.algorithm, f"{r.bound.ranks}x{r.bound.iterations}",
                          PROPERTY_TITLES.get(r.expected_violation or "", "-"), "yes" if r.caught else "NO",
                          ", ".join(others) or "-", f"{r.seconds:.1f}")
        for f in errors["mutant"]:
            table.add_row(f.protocol, f.algorithm, "-", "-", "ERROR", "-", "-")
        console.print(table)
    bad = [r for r in summary.protocols if not r.ok]
    missed = [r for r in summary.mutants if not r.caught]
    for r in bad:
        failing = [f"{PROPERTY_TITLES[p]} ({r.properties[p].status})" for p in r.properties if not r.properties[p].holds]
        console.print(f"{r.protocol}/{r.algorithm}: not verified: {', '.join(failing)} "
                      f"(run 'collsim verify {r.protocol} --algorithm {r.algorithm}' for counterexamples)")
    for r in missed:
        console.print(f"{r.protocol}: expected {r.expected_violation} was not found")
    for f in summary.failed:
        attempts = f"after {f.attempts} attempt{'s' if f.attempts != 1 else ''}"
        console.print(f"{f.protocol}/{f.algorithm}: ERROR {attempts}: {f.error}", soft_wrap=True)
    line = (f"{len(summary.protocols)} protocol run(s), {len(bad)} not verified; {len(summary.mutants)} mutants, "
            f"{len(summary.mutants) - len(missed)} caught")
    if summary.failed:
        line += f"; {len(summary.failed)} run(s) failed with an error"
    console.print(f"{line}; {summary.seconds:.1f} s")
