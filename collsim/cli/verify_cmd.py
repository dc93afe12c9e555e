"""``collsim verify``: check a protocol's synchronization with Z3, or every protocol and mutant (``--all``)."""
from __future__ import annotations

import json
from typing import Any, List, Optional

import typer

from collsim.cli.app import app

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
    lines: Optional[int] = typer.Option(None, "--lines", help="Lines per chunk (default 1)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Threads per rank (default 1)."),
    dependencies: bool = typer.Option(True, "--dependencies/--no-dependencies",
                                      help="Re-check without each assumption and without the data domain."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Use and fill the verdict cache."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    all_: bool = typer.Option(False, "--all", help="Every shipped protocol and every mutant, as a summary."),
) -> None:
    """Verify PROTOCOL's synchronization; exit 0 when every property holds at the bound, 1 otherwise.

    Properties: stale read, torn read, early overwrite, data race, hang,
    sentinel collision, postcondition. A verdict holds only at its bound
    (ranks, iterations, model, assumptions), which is always printed.
    """
    from collsim.errors import InputError
    from collsim.verify.verifier import verify, verify_all

    if timeout <= 0:
        raise InputError("the timeout must be positive", field="--timeout")
    if ranks is not None and ranks < 2:
        raise InputError("the bound needs at least 2 ranks", field="--ranks")
    if iterations is not None and iterations < 1:
        raise InputError("the bound needs at least 1 iteration", field="--iterations")
    common = dict(ranks=ranks, iterations=iterations, model=model, timeout=timeout, lines=lines, threads=threads,
                  use_cache=cache)
    if all_:
        if protocol is not None:
            raise InputError("give a protocol or --all, not both", field="protocol")
        summary = verify_all(algorithm=algorithm, flag_bits=flag_bits, **common)
        if as_json:
            print(json.dumps(summary.to_json(), indent=2))
        else:
            _print_summary(summary)
        if not summary.ok:
            raise SystemExit(1)
        return
    if protocol is None:
        raise InputError("name a protocol (or use --all)", field="protocol")
    result = verify(protocol, algorithm, assume=assume, flag_bits=flag_bits, dependencies=dependencies, **common)
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        _console().print(result.render())
    if not result.ok:
        raise SystemExit(1)


def _print_summary(summary) -> None:
    from rich import box
    from rich.table import Table

    from collsim.verify.properties import PROPERTIES, PROPERTY_TITLES

    console = _console()
    if summary.protocols:
        first = summary.protocols[0]
        table = Table(title=f"protocols under {first.model} (bound per row)", box=box.SIMPLE_HEAD,
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
        console.print(table)
    if summary.mutants:
        table = Table(title="mutants", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
        for name in ("mutant", "algorithm", "bound", "expected", "caught", "also violated", "time (s)"):
            table.add_column(name, no_wrap=True, justify="right" if name == "time (s)" else "left")
        for r in summary.mutants:
            others = [PROPERTY_TITLES[p] for p in r.violated if p != r.expected_violation]
            table.add_row(r.protocol, r.algorithm, f"{r.bound.ranks}x{r.bound.iterations}",
                          PROPERTY_TITLES.get(r.expected_violation or "", "-"), "yes" if r.caught else "NO",
                          ", ".join(others) or "-", f"{r.seconds:.1f}")
        console.print(table)
    bad = [r for r in summary.protocols if not r.ok]
    missed = [r for r in summary.mutants if not r.caught]
    for r in bad:
        failing = [f"{PROPERTY_TITLES[p]} ({r.properties[p].status})" for p in r.properties if not r.properties[p].holds]
        console.print(f"{r.protocol}/{r.algorithm}: not verified: {', '.join(failing)} "
                      f"(run 'collsim verify {r.protocol} --algorithm {r.algorithm}' for counterexamples)")
    for r in missed:
        console.print(f"{r.protocol}: expected {r.expected_violation} was not found")
    console.print(f"{len(summary.protocols)} protocol run(s), {len(bad)} not verified; {len(summary.mutants)} mutants, "
                  f"{len(summary.mutants) - len(missed)} caught; {summary.seconds:.1f} s")
