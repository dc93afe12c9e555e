"""``collsim litmus``: run a litmus suite under a memory model and compare with its expectations."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from collsim.cli.app import app
from collsim.errors import InputError
from collsim.userpaths import read_text
from collsim.cli.options import at_least

__all__ = ["litmus"]


def _console() -> Any:
    from rich.console import Console

    console = Console(markup=False)
    if not console.is_terminal:
        console = Console(width=200, no_color=True, highlight=False, markup=False)
    return console


def _finish(ok: bool) -> None:
    """Exit 1 when some test does not agree (SystemExit passes through the CLI's main)."""
    if not ok:
        raise SystemExit(1)


@app.command("litmus")
def litmus(
    file: Path = typer.Argument(..., help="Litmus suite, one JSON test per line (.jsonl)."),
    model: str = typer.Option("ptx", "--model", "-m", help="Memory model: ptx or sc."),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON instead of a table."),
    timeout: float = typer.Option(30.0, "--timeout", help="Solver time limit per test, in seconds."),
    bound: int = typer.Option(1, "--bound", help="Loop unrolling bound (1: spin loops as 'wait until')."),
    witness: bool = typer.Option(True, "--witness/--no-witness",
                                 help="Show an execution for each disagreement that has one."),
) -> None:
    """Decide every test of FILE under MODEL and compare with each test's 'expected'.

    A test using a construct the model does not cover (another proxy's access or fence, an asynchronous
    copy) is reported 'unsupported: <construct>' and the others still run; a test without an 'expected' has
    its outcome reported and nothing to agree with. Exit status: 0 when every test agrees or has no
    expectation; 1 when some test disagrees, is unknown (solver limit) or unsupported; 2 for a malformed file.
    """
    from collsim.verify.litmus import evaluate, load_jsonl, summary  # lazy: start-up
    from collsim.verify.models import MEMORY_MODELS  # lazy: start-up

    if model not in MEMORY_MODELS:
        raise InputError(f"unknown memory model '{model}'", field="--model", choices=sorted(MEMORY_MODELS))
    if timeout <= 0:
        raise InputError("the timeout must be positive", field="--timeout")
    at_least(bound, 1, "--bound", "unrolling of each loop")
    read_text(file, what="litmus file (JSON lines)")  # missing, a directory, binary: one line each
    start = time.perf_counter()
    tests = load_jsonl(file, bound=bound)
    if not tests:
        raise InputError("holds no tests: a litmus file has one JSON test per line (name, placement, threads, "
                         "condition)", file=str(file))
    results = [evaluate(t, model=model, timeout_s=timeout, want_witness=witness) for t in tests]
    wall = time.perf_counter() - start
    summ = summary(results)
    summ["wall_seconds"] = round(wall, 3)
    ok = all(r.passes for r in results)

    if as_json:
        print(json.dumps({"file": str(file), "model": model, "summary": summ,
                          "results": [r.as_dict() for r in results]}, indent=2))
        _finish(ok)
        return

    from rich import box
    from rich.table import Table

    console = _console()
    table = Table(title=f"{file.name} under {model}", box=box.SIMPLE_HEAD, title_justify="left",
                  pad_edge=False)
    for name, justify in [("test", "left"), ("quantifier", "left"), ("expected", "left"),
                          ("observed", "left"), ("agree", "left"), ("time (s)", "right")]:
        table.add_column(name, justify=justify, no_wrap=True)
    for r in results:
        mark = "-" if r.decided_without_expectation else {True: "yes", False: "NO", None: "?"}[r.agrees]
        table.add_row(r.name, r.quantifier, r.expected or "-", r.observed, mark, f"{r.seconds:.3f}")
    console.print(table)
    for r in results:
        if r.observed == "unsupported":
            console.print(f"- {r.name} (line {r.line}): unsupported: {r.reason}")
    bad = [r for r in results if not r.passes and r.observed != "unsupported"]
    if bad:
        console.print(f"{len(bad)} test(s) do not agree:")
        for r in bad:
            why = f" ({r.reason})" if r.reason else ""
            console.print(f"- {r.name} (line {r.line}): expected {r.expected}, observed {r.observed}{why}; "
                          f"condition: {r.quantifier} {r.expr}")
            for note in r.notes:
                console.print("    note: " + note)
            if r.witness:
                for line in r.witness.splitlines():
                    console.print("    " + line)
    noted = [r for r in results if r.notes and r.passes]
    for r in noted:
        console.print(f"note: {r.name}: " + "; ".join(r.notes))
    console.print(
        f"{summ['tests']} tests: {summ['agree']} agree, {summ['disagree']} disagree, "
        f"{summ['unknown']} unknown, {summ['unsupported']} unsupported"
        + (f", {summ['no_expectation']} without an expectation" if summ["no_expectation"] else "")
        + f"; observed {summ['allowed']} allowed, {summ['forbidden']} forbidden; "
        f"solver {summ['seconds']:.2f} s, total {wall:.2f} s")
    _finish(ok)
