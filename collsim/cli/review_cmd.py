"""``collsim review PROTOCOL``: check, verify, simulate and emit one protocol; write review.html and review.json."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from collsim.cli.app import app
from collsim.errors import InputError
from collsim.userpaths import check_output_dir, removed_unless_done

__all__ = ["review_command"]

_STAGES = (("load", "load"), ("checks", "well-formedness"), ("verify", "verify (sc, ptx)"),
           ("simulate", "simulate (des)"), ("emit", "emit + nvcc"))


class _Display:
    """One rich progress display with a bar per stage (plain lines when stderr is not a terminal)."""

    def __init__(self, enabled: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, markup=False, highlight=False)
        self.enabled = enabled
        self.progress = None
        self.tasks: dict[str, Any] = {}
        self.last: dict[str, str] = {}

    def __enter__(self) -> "_Display":
        if self.enabled and self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TextColumn("{task.fields[detail]}"),
                                     console=self.console, transient=False)
            self.progress.__enter__()
            for key, title in _STAGES:
                self.tasks[key] = self.progress.add_task(title, total=None, detail="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.tasks[stage], completed=done, total=total, detail=text)
        elif self.enabled and stage == "load":
            # said once the protocol loaded: bad input stays the one error line
            if done == total:
                print(f"collsim review: {stage}: {text}", file=sys.stderr)
        elif self.enabled and done == 0 and self.last.get(stage) != text:
            self.last[stage] = text
            print(f"collsim review: {stage}: {text}", file=sys.stderr)


@app.command("review")
def review_command(
    protocol: str = typer.Argument(..., help="Protocol name (shipped or mutant) or a path to a .py file."),
    against: str = typer.Option("ll,barrier,simple", "--against",
                                help="Comma-separated protocols to compare with in the simulation."),
    topology: str = typer.Option("hgx-h100", "--topology", help="Topology preset or file for the simulation."),
    ranks: str = typer.Option("2,4,8", "--ranks", help="Rank counts to simulate: '2..8', '2,4,8', '2..8 x2'."),
    sizes: str = typer.Option("8B..1MiB x4", "--sizes", help="Sizes per rank to simulate: '8B..1MiB x4', '8,4KiB'."),
    algorithm: Optional[str] = typer.Option(None, "--algorithm", "-a",
                                            help="Review only this algorithm (default: every one the protocol has)."),
    out: Path = typer.Option(Path("review"), "--out", "-o", help="Output directory (created)."),
    timeout: float = typer.Option(60.0, "--timeout", help="Solver time limit per property, in seconds."),
    verify_ranks: Optional[int] = typer.Option(None, "--verify-ranks", help="Ranks in the verification bound (default 3)."),
    verify_iterations: Optional[int] = typer.Option(None, "--verify-iterations",
                                                    help="Launches in the verification bound (default 2)."),
    compile_: bool = typer.Option(True, "--compile/--no-compile", help="Compile the emitted CUDA with nvcc."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Use and fill the verdict cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Review PROTOCOL: well-formedness, verification (sc, ptx; with and without each assumption),
    simulation against other protocols, CUDA emission and compilation. Writes OUT/review.html and
    OUT/review.json.

    Exit status: 0 when the protocol holds under its declared assumptions, 1 when a property is violated
    (the review is still written), 2 for bad input (a protocol file that does not load or is not
    well-formed: one line naming the file and line).
    """
    from collsim.review import run_review, write_review  # lazy: start-up

    check_output_dir(out, field="--out")
    if timeout <= 0:
        raise InputError("the timeout must be positive", field="--timeout")
    if verify_ranks is not None and verify_ranks < 2:
        raise InputError("the bound needs at least 2 ranks", field="--verify-ranks")
    if verify_iterations is not None and verify_iterations < 1:
        raise InputError("the bound needs at least 1 iteration", field="--verify-iterations")
    argv = [protocol, "--against", against, "--topology", topology, "--ranks", ranks, "--sizes", sizes]
    if algorithm:
        argv += ["--algorithm", algorithm]
    if verify_ranks is not None:
        argv += ["--verify-ranks", str(verify_ranks)]
    if verify_iterations is not None:
        argv += ["--verify-iterations", str(verify_iterations)]
    if not compile_:
        argv.append("--no-compile")
    argv += ["--out", str(out)]
    with removed_unless_done(out):  # interrupted: no half-written review
        with _Display(not quiet) as display:
            result = run_review(protocol, against=[a for a in against.split(",") if a.strip()], topology=topology,
                                ranks=ranks, sizes=sizes, algorithm=algorithm, out_dir=out, timeout=timeout,
                                use_cache=cache, compile=compile_, verify_ranks=verify_ranks,
                                verify_iterations=verify_iterations, progress=display, argv=argv)
        page, doc = write_review(result, out)
    from collsim.review.page import verdict_lines  # lazy: start-up

    headline, _ = verdict_lines(result)
    typer.echo(f"{headline}; depends on: {', '.join(result.depends_on) or 'nothing'}")
    for v in result.verifications:
        if not v.ok:
            bad = ", ".join(f"{p} ({'vacuous' if r.vacuous else r.status})" for p, r in v.result.properties.items()
                            if not r.holds)
            typer.echo(f"  {v.algorithm} / {v.model}: {bad}")
    typer.echo(f"wrote {page} and {doc}")
    if result.exit_code:
        raise SystemExit(result.exit_code)
