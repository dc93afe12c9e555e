"""``collsim emit``: print a protocol as a runnable, self-checking CUDA benchmark.

Commands of this group register on collsim.cli.app.app.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from collsim.cli.app import app
from collsim.cli.feedback import working
from collsim.userpaths import check_output_dir, removed_unless_done
from collsim.errors import CollsimError, InputError, VerificationRefused

__all__ = ["emit_cmd"]


@app.command("emit")
def emit_cmd(
    protocol: Optional[str] = typer.Argument(
        None, help="Protocol name (shipped or mutant) or a protocol .py file. Omit with --all.", show_default=False,
    ),
    algorithm: str = typer.Option("one-shot", "--algorithm", "-a", help="one-shot, two-shot or ring."),
    out: Path = typer.Option(..., "--out", "-o", help="Output directory (created).", show_default=False),
    all_: bool = typer.Option(False, "--all", help="Every shipped protocol x supported algorithm, one "
                              "subdirectory each (OUT/<protocol>__<algorithm>), plus a Makefile that builds them."),
    unverified: bool = typer.Option(False, "--unverified", help="Emit even when the verification verdict is not "
                                    "'holds'; every generated file then starts with an UNVERIFIED banner."),
    arch: str = typer.Option("sm_90", "--arch", help="Default architecture of the generated Makefile "
                             "(sm_80, sm_90, sm_100). Vector red/atom need sm_90."),
    verify: bool = typer.Option(False, "--verify", help="Run the verifier when it has no verdict on record "
                                "(can take minutes); by default only recorded verdicts count."),
    check_ptx: bool = typer.Option(False, "--check-ptx", help="Compile kernel.cu to PTX with nvcc and check that "
                                   "every synchronization op of the IR is there with its semantics and scope."),
) -> None:
    """Emit CUDA (kernel.cu, main.cu, Makefile, README) for PROTOCOL under --algorithm.

    Refused (exit 1) unless the verifier's verdict for the protocol and
    algorithm is "holds"; --unverified emits anyway, marked in every file.
    """
    if all_ and protocol:
        raise InputError("give a protocol or --all, not both", field="PROTOCOL")
    if not all_ and not protocol:
        raise InputError("missing PROTOCOL (or use --all)", field="PROTOCOL")
    check_output_dir(out, field="--out")
    with removed_unless_done(out):  # interrupted or refused halfway: no half-written tree
        _emit(protocol, algorithm, out, all_, unverified, arch, verify, check_ptx)


def _emit(protocol: str | None, algorithm: str, out: Path, all_: bool, unverified: bool, arch: str, verify: bool,
          check_ptx: bool) -> None:
    from collsim.emit import emit, emit_all  # lazy: start-up

    if all_:
        with working("emitting every protocol and algorithm, verifying those without a verdict on record"
                     if verify else "emitting every protocol and algorithm"):
            results, refusals = emit_all(out, unverified=unverified, arch=arch, verify=verify)
        for r in results:
            mark = " [UNVERIFIED]" if r.unverified else ""
            typer.echo(f"collsim: emitted {r.protocol}/{r.algorithm} -> {r.directory}{mark}", err=True)
            if check_ptx:
                _check(r.protocol, r.algorithm, r.directory, arch)
        for message in refusals:
            typer.echo(f"collsim: {message}", err=True)
        refused = [m for m in refusals if m.startswith("refusing")]
        if refused:
            raise VerificationRefused(f"{len(refused)} of {len(refused) + len(results)} programs refused "
                                      "(not verified): run 'collsim verify --all' first or pass --verify; "
                                      "--unverified emits them marked")
        return
    with working(f"emitting {protocol}/{algorithm}" + (", verifying it if it has no verdict on record"
                                                       if verify else "")):
        result = emit(protocol, algorithm, out, unverified=unverified, arch=arch, verify=verify)
    mark = " [UNVERIFIED]" if result.unverified else ""
    typer.echo(f"collsim: emitted {result.protocol}/{result.algorithm} -> {result.directory} "
               f"({len(result.files)} files){mark}", err=True)
    if check_ptx:
        _check(result.protocol, algorithm, result.directory, arch, source=protocol)


def _check(protocol: str, algorithm: str, directory: Path, arch: str, source: str | None = None) -> None:
    """The PTX check of an emitted directory; ``source`` is what names the protocol to load (its name, or the
    protocol file it was emitted from)."""
    from collsim.emit.toolchain import check_directory  # lazy: start-up

    report = check_directory(directory, source or protocol, algorithm, arch=arch)
    for finding in report.findings:
        typer.echo(f"collsim: ptx check: {finding}", err=True)
    if not report.ok:
        raise CollsimError(f"PTX translation check failed for {protocol}/{algorithm}: {len(report.errors)} error(s)")
    typer.echo(f"collsim: ptx check {protocol}/{algorithm}: {report.summary().splitlines()[0]}", err=True)
