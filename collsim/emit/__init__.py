"""The CUDA emitter: every protocol becomes a runnable, self-checking GPU benchmark.

``emit(protocol, algorithm, out_dir)`` turns ``generate(load_protocol(name),
algorithm)`` into a directory with ``kernel.cu`` (one kernel per program,
one block of code per IR op, inline PTX with the op's semantics and scope),
a host harness (``main.cu``, ``harness_host.h``), a ``Makefile`` and a
README. Emission is refused (:class:`~collsim.errors.VerificationRefused`)
unless the verifier's verdict for the (protocol, algorithm) is "holds";
``unverified=True`` emits anyway and marks every file.

See docs/EMIT.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from collsim.emit import gate
from collsim.emit.gate import VerificationStatus
from collsim.emit.layouts import EmitError
from collsim.emit.package import SUPPORTED_ARCHS, EmittedProgram, build_program, write_program
from collsim.emit.plan import plan_for
from collsim.errors import InputError, VerificationRefused
from collsim.ir.protocol import Protocol
from collsim.ir.registry import list_protocols, load_protocol

__all__ = [
    "EmitError",
    "EmittedProgram",
    "EmitResult",
    "SUPPORTED_ARCHS",
    "VerificationStatus",
    "emit",
    "emit_all",
    "prepare",
    "refusal_message",
]


@dataclass
class EmitResult:
    """What :func:`emit` wrote."""

    protocol: str
    algorithm: str
    directory: Path
    files: list[Path]
    status: VerificationStatus
    unverified: bool


def refusal_message(protocol: str, algorithm: str, status: VerificationStatus) -> str:
    return (f"refusing to emit {protocol}/{algorithm}: its verification verdict (PTX model) is "
            f"'{status.describe()}', not 'holds'. Verify it first (collsim verify), or pass --unverified to emit "
            "code marked UNVERIFIED in every file")


def _load(protocol: Protocol | str) -> Protocol:
    if isinstance(protocol, Protocol):
        return protocol
    return load_protocol(protocol)


def prepare(protocol: Protocol | str, algorithm: str, *, unverified: bool = False,
            arch: str = "sm_90", verify: bool = False) -> EmittedProgram:
    """Check the verdict and generate the files of one (protocol, algorithm) without writing them.

    ``verify=True`` runs the verifier when it has no verdict on record
    (otherwise only its cache is consulted).

    Raises
    ------
    VerificationRefused
        when the verdict is not "holds" and ``unverified`` is false.
    InputError
        when the protocol has no program for ``algorithm``, or ``arch`` is unknown or too old for it.
    EmitError
        when an IR construct has no CUDA translation (an :class:`~collsim.errors.UnsupportedError`).
    """
    proto = _load(protocol)
    if algorithm not in proto.algorithms:
        raise InputError(f"protocol {proto.name!r} has no {algorithm} program", field="--algorithm",
                         choices=proto.algorithms)
    status = gate.verification_status(proto, algorithm, solve=verify)
    if not status.holds and not unverified:
        raise VerificationRefused(refusal_message(proto.name, algorithm, status))
    return build_program(proto, algorithm, status, unverified=not status.holds, arch=arch)


def emit(protocol: Protocol | str, algorithm: str, out_dir: str | Path, *, unverified: bool = False,
         arch: str = "sm_90", verify: bool = False) -> EmitResult:
    """Emit one (protocol, algorithm) into ``out_dir``.

    Files are marked UNVERIFIED only when the verdict is not "holds" (so
    ``unverified=True`` on a verified protocol produces ordinary files).
    """
    emitted = prepare(protocol, algorithm, unverified=unverified, arch=arch, verify=verify)
    directory = Path(out_dir)
    files = write_program(emitted, directory)
    return EmitResult(emitted.protocol.name, algorithm, directory, files, emitted.status, emitted.unverified)


def emit_all(out_dir: str | Path, *, unverified: bool = False, arch: str = "sm_90",
             protocols: list[str] | None = None, verify: bool = False) -> tuple[list[EmitResult], list[str]]:
    """Emit every shipped protocol x supported algorithm into ``out_dir/<protocol>__<algorithm>``.

    Returns (results, refusal messages); refused programs are skipped, the
    rest are written. A top-level Makefile builds every emitted directory.
    """
    root = Path(out_dir)
    results: list[EmitResult] = []
    refusals: list[str] = []
    for name in protocols or list_protocols():
        proto = load_protocol(name)
        for algorithm in proto.algorithms:
            target = root / f"{proto.name}__{algorithm}"
            try:
                why = _needs_sm90(proto, algorithm)
                if arch == "sm_80" and why:
                    refusals.append(f"skipping {proto.name}/{algorithm} for sm_80: it needs sm_90 ({why})")
                    continue
                results.append(emit(proto, algorithm, target, unverified=unverified, arch=arch, verify=verify))
            except VerificationRefused as err:
                refusals.append(str(err))
    if results:
        _write_index(root, results)
    return results, refusals


def _needs_sm90(proto: Protocol, algorithm: str) -> str:
    """What in the program needs sm_90 ("" if nothing does)."""
    plan = plan_for(proto, algorithm)
    return "vector red/atom" if plan.needs_vector_atomics else "multimem" if plan.uses_multicast else \
        "cp.async.bulk" if plan.uses_bulk_copies else ""


def _write_index(root: Path, results: list[EmitResult]) -> None:
    dirs = sorted(r.directory.name for r in results)
    makefile = (
        "# Generated by collsim emit --all: builds every emitted benchmark that can run on ARCH.\n"
        "ARCH ?= sm_90\n"
        f"DIRS := {' '.join(dirs)}\n"
        ".PHONY: all clean\n"
        "all:\n"
        "\t@set -e; for d in $(DIRS); do \\\n"
        "\t  if grep -q '\"$(ARCH)\"' $$d/emit.json; then $(MAKE) -C $$d ARCH=$(ARCH); \\\n"
        "\t  else echo \"skip $$d: it cannot be built for $(ARCH)\"; fi; \\\n"
        "\tdone\n"
        "clean:\n"
        "\tfor d in $(DIRS); do $(MAKE) -C $$d clean; done\n"
    )
    lines = ["# collsim emitted benchmarks", "", "| directory | verification | files |", "|---|---|---|"]
    for r in sorted(results, key=lambda r: r.directory.name):
        mark = "**UNVERIFIED** " if r.unverified else ""
        lines.append(f"| `{r.directory.name}` | {mark}{r.status.describe()} | {len(r.files)} |")
    lines += ["", "Build all: `make ARCH=sm_90`; each directory has its own README.md.", ""]
    (root / "Makefile").write_text(makefile, encoding="utf-8")
    (root / "README.md").write_text("\n".join(lines), encoding="utf-8")
