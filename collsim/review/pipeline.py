"""The review pipeline: load, check, verify, simulate, emit; one :class:`Review` holds what each stage found.

Every stage reports to an optional ``progress(stage, done, total, text)``
callback (the CLI draws a rich progress display with it); nothing here
prints.
"""
from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from collsim.algorithms import ProgramBuildError, generate
from collsim.config import check_size_fits
from collsim.emit import build_program
from collsim.emit.cuda import describe_op
from collsim.emit.gate import VerificationStatus
from collsim.emit.package import write_program
from collsim.emit.plan import iter_nodes
from collsim.emit.ptxcheck import check_ptx
from collsim.emit.toolchain import compile_ptx, find_nvcc
from collsim.errors import CollsimError, InputError, ProtocolDefinitionError, UnsupportedError, is_interrupt
from collsim.ir.checks import check_protocol_program, protocol_file
from collsim.ir.ops import Loop
from collsim.ir.origin import shown_path
from collsim.ir.program import walk
from collsim.ir.protocol import Protocol
from collsim.ir.registry import list_protocols, load_protocol
from collsim.models import simulate, unsupported_reason
from collsim.topology import load_topology
from collsim.units import parse_ranks, parse_sizes
from collsim.verify.verifier import verify
from collsim.version import __version__

__all__ = [
    "DEFAULT_AGAINST",
    "DEFAULT_RANKS",
    "DEFAULT_SIZES",
    "MODELS",
    "Review",
    "VerifyRun",
    "EmitRun",
    "load_for_review",
    "run_review",
]

#: Comparison protocols when ``--against`` is not given.
DEFAULT_AGAINST = ("ll", "barrier", "simple")
DEFAULT_RANKS = "2,4,8"
DEFAULT_SIZES = "8B..1MiB x4"
#: Memory models every algorithm is verified under.
MODELS = ("sc", "ptx")

Progress = Callable[[str, int, int, str], None]


def _noop(stage: str, done: int, total: int, text: str) -> None:
    return None


# ---------------------------------------------------------------------------
# Loading, with the protocol file's line for every error
# ---------------------------------------------------------------------------


def _shown_path(path: str | None, given: str) -> str:
    """The path the user gave when it is that file, else a path relative to the working directory when possible."""
    if path is None:
        return given
    if given.endswith(".py") and Path(given).resolve() == Path(path).resolve():
        return given
    return shown_path(path)


def load_for_review(spec: str) -> Protocol:
    """Load ``spec`` (a shipped or mutant name, or a ``.py`` file) or raise an error naming the file and line."""
    return load_protocol(spec)


def check_algorithms(proto: Protocol, algorithms: Sequence[str], shown: str) -> dict[str, Any]:
    """Generate and well-formedness-check every algorithm; errors become :class:`ProtocolDefinitionError` with file:line.

    The line is the protocol file's: where its code raised while the program was built, or where
    it emitted the operation that breaks a rule (the protocol's class line for an operation the
    algorithm emitted).
    """
    file = protocol_file(proto)
    out: dict[str, Any] = {}
    for alg in algorithms:
        try:
            program = generate(proto, alg)
        except ProgramBuildError as err:
            line = err.origin.line_in(file) if (file and err.origin is not None) else None
            raise ProtocolDefinitionError(f"{alg}: {err.reason}", file=shown, line=line) from None
        except CollsimError as err:
            msg = getattr(err, "message", str(err))
            raise ProtocolDefinitionError(f"{alg}: {msg}", file=shown) from None
        except Exception as err:  # collsim's own code failed on this protocol: still name the protocol
            if is_interrupt(err):
                raise
            raise ProtocolDefinitionError(f"{alg}: {type(err).__name__}: {err}", file=shown) from None
        check_protocol_program(program, proto, shown)
        out[alg] = {"ops": sum(1 for _ in walk(program.ops)), "buffers": [b.name for b in program.buffers]}
    return out


# ---------------------------------------------------------------------------
# Results of the stages
# ---------------------------------------------------------------------------


@dataclass
class VerifyRun:
    algorithm: str
    model: str
    result: Any  # VerifyResult

    @property
    def ok(self) -> bool:
        return bool(self.result.ok)


@dataclass
class EmitRun:
    algorithm: str
    kernel: str = ""
    ir_ops: dict[int, dict[str, str]] = field(default_factory=dict)
    compiled: bool = False
    skipped: str | None = None
    error: str | None = None
    ptx_summary: str = ""
    seconds: float = 0.0


@dataclass
class Review:
    """Everything ``collsim review`` found about one protocol."""

    spec: str
    protocol: Protocol
    shown_path: str
    algorithms: list[str]
    against: list[str]
    topology: str
    ranks: list[int]
    sizes: list[int]
    checks: dict[str, Any] = field(default_factory=dict)
    verifications: list[VerifyRun] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    sim_skipped: list[str] = field(default_factory=list)
    emits: list[EmitRun] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)

    # -- verdicts --------------------------------------------------------
    @property
    def name(self) -> str:
        return self.protocol.name

    @property
    def ok(self) -> bool:
        """Every property holds under the declared assumptions, in every model and algorithm verified."""
        return bool(self.verifications) and all(v.ok for v in self.verifications)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def depends_on(self) -> list[str]:
        out: list[str] = []
        for v in self.verifications:
            for d in v.result.depends_on:
                if d not in out:
                    out.append(d)
        return out

    @property
    def not_needed(self) -> list[str]:
        """Declared assumptions no property needed in any run."""
        return [a for a in self.protocol.assumptions if a not in self.depends_on]

    def counterexamples(self) -> list[dict[str, Any]]:
        """Every counterexample: under the declared assumptions first, then without each one."""
        out = []
        for v in self.verifications:
            for p, r in v.result.properties.items():
                if r.counterexample is not None:
                    out.append({"algorithm": v.algorithm, "model": v.model, "property": p, "title": r.title,
                                "without": None, "bound": r.bound.describe(), "cex": r.counterexample,
                                "declared": True})
            for d in v.result.dependencies:
                for p, r in d.results.items():
                    if r.counterexample is not None:
                        out.append({"algorithm": v.algorithm, "model": v.model, "property": p, "title": r.title,
                                    "without": d.name, "bound": r.bound.describe(), "cex": r.counterexample,
                                    "declared": False})
                        break
        return out

    def wins(self) -> dict[str, Any]:
        """Per (ranks, size): the fastest configuration overall and the reviewed protocol's best."""
        best: dict[tuple[int, int], dict[str, Any]] = {}
        mine: dict[tuple[int, int], dict[str, Any]] = {}
        for rec in self.records:
            if rec.get("latency_us") is None:
                continue
            key = (int(rec["ranks"]), int(rec["size_bytes"]))
            if key not in best or rec["latency_us"] < best[key]["latency_us"]:
                best[key] = rec
            if rec["protocol"] == self.name and (key not in mine or rec["latency_us"] < mine[key]["latency_us"]):
                mine[key] = rec
        won, lost = [], []
        for key in sorted(best):
            b = best[key]
            m = mine.get(key)
            if m is None:
                continue
            if b["protocol"] == self.name:
                won.append({"ranks": key[0], "size_bytes": key[1], "algorithm": b["algorithm"],
                            "latency_us": b["latency_us"]})
            else:
                lost.append({"ranks": key[0], "size_bytes": key[1], "to": f"{b['protocol']} · {b['algorithm']}",
                             "latency_us": m["latency_us"], "best_us": b["latency_us"],
                             "slower_pct": 100.0 * (m["latency_us"] / b["latency_us"] - 1.0)})
        return {"won": won, "lost": lost, "cells": len(mine)}

    # -- reproduction ----------------------------------------------------
    def _bound_flags(self, v: VerifyRun) -> str:
        b = v.result.bound
        return f" --ranks {b.ranks} --iterations {b.iterations}"

    def commands(self) -> list[tuple[str, str]]:
        p = shlex.quote(self.spec)
        out = [("this review", "collsim review " + " ".join(shlex.quote(a) for a in self.argv))]
        for v in self.verifications:
            out.append((f"verify {v.algorithm} under {v.model}",
                        f"collsim verify {p} --algorithm {v.algorithm} --model {v.model}"
                        f"{self._bound_flags(v)}"))
        for e in self.emits:
            out.append((f"emit + compile {e.algorithm}",
                        f"collsim emit {p} --algorithm {e.algorithm} --out emitted/{self.name}__{e.algorithm}"
                        f"{'' if self.ok and not self.spec.endswith('.py') else ' --unverified'} --check-ptx"))
        out.append(("one simulated point (Python)",
                   "python -c \"import collsim; from collsim.ir.registry import load_protocol; "
                   f"print(collsim.simulate('{self.topology}', ranks={self.ranks[-1]}, algorithm='{self.algorithms[0]}', "
                   f"protocol=load_protocol('{self.spec}'), size_bytes={self.sizes[0]}, model='des').latency_us)\""))
        return out

    def to_json(self) -> dict[str, Any]:
        wins = self.wins()
        return {
            "collsim_version": __version__,
            "protocol": self.name,
            "source": self.shown_path,
            "description": self.protocol.describe(),
            "assumptions": list(self.protocol.assumptions),
            "data_domain": self.protocol.data_domain.statement if self.protocol.data_domain else None,
            "algorithms": self.algorithms,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "depends_on": self.depends_on,
            "declared_but_not_needed": self.not_needed,
            "checks": self.checks,
            "verification": [{"algorithm": v.algorithm, "model": v.model, **v.result.to_json()}
                             for v in self.verifications],
            "simulation": {"topology": self.topology, "ranks": self.ranks, "sizes": self.sizes,
                           "against": self.against, "model": "des", "rows": self.records,
                           "skipped": self.sim_skipped, "won": wins["won"], "lost": wins["lost"]},
            "emit": [{"algorithm": e.algorithm, "compiled": e.compiled, "skipped": e.skipped, "error": e.error,
                      "ptx_check": e.ptx_summary, "sync_ops": {str(k): v for k, v in e.ir_ops.items()}}
                     for e in self.emits],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "commands": [{"what": w, "command": c} for w, c in self.commands()],
        }


# ---------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------


def _verify(review: Review, progress: Progress, timeout: float, use_cache: bool, ranks: int | None,
            iterations: int | None) -> None:
    jobs = [(a, m) for a in review.algorithms for m in MODELS]
    for i, (alg, model) in enumerate(jobs):
        progress("verify", i, len(jobs), f"{alg} under {model}")
        result = verify(review.protocol, alg, model=model, timeout=timeout, use_cache=use_cache, ranks=ranks,
                        iterations=iterations)
        review.verifications.append(VerifyRun(alg, model, result))
    progress("verify", len(jobs), len(jobs), "done")


def _simulate(review: Review, progress: Progress, comparators: list[Protocol]) -> None:
    topo = load_topology(review.topology)
    jobs = []
    for proto in [review.protocol, *comparators]:
        algs = review.algorithms if proto is review.protocol else list(proto.algorithms)
        for alg in algs:
            for n in review.ranks:
                why = unsupported_reason(proto, alg, n, topo)
                if why:
                    review.sim_skipped.append(f"{proto.name} · {alg} on {n} ranks: {why}")
                    continue
                for size in review.sizes:
                    jobs.append((proto, alg, n, size))
    gpu = getattr(topo, "gpu_model", None) or ""
    for i, (proto, alg, n, size) in enumerate(jobs):
        if i % 4 == 0:
            progress("simulate", i, len(jobs), f"{proto.name} · {alg} · {n} ranks")
        base = {"topology": topo.name, "gpu": str(gpu), "ranks": n, "algorithm": alg, "protocol": proto.name,
                "launch": "graph", "size_bytes": size, "count": size // 4, "dtype": "float32", "op": "sum"}
        try:
            r = simulate(topo, n, alg, proto, size, model="des")
        except UnsupportedError as err:
            review.sim_skipped.append(f"{proto.name} · {alg} · {n} ranks · {size} B: {err.message}")
            continue
        except CollsimError as err:  # a simulated launch that hangs: the verdicts above say why; keep reviewing
            if isinstance(err, InputError):
                raise
            review.sim_skipped.append(f"{proto.name} · {alg} · {n} ranks · {size} B: {err.message}")
            continue
        review.records.append({**base, "latency_us": r.latency_us, "algbw_gbps": r.algbw_gbps,
                               "busbw_gbps": r.busbw_gbps, "launch_us": r.breakdown["launch"],
                               "sync_us": r.breakdown["sync"], "data_us": r.breakdown["data"],
                               "reduce_us": r.breakdown["reduce"], "model": r.model, "events": int(r.events),
                               "note": "; ".join(r.notes)})
    progress("simulate", len(jobs), len(jobs), "done")


def _sync_ops(plan) -> dict[int, dict[str, str]]:
    out = {}
    for node in iter_nodes(plan.nodes):
        if isinstance(node.op, Loop):
            continue
        out[node.id] = {"label": getattr(node.op, "label", type(node.op).__name__),
                        "op": type(node.op).__name__, "describe": describe_op(node.op)}
    return out


def _emit(review: Review, progress: Progress, out_dir: Path, compile_: bool) -> None:
    nvcc = find_nvcc() if compile_ else None
    for i, alg in enumerate(review.algorithms):
        progress("emit", i, len(review.algorithms), alg)
        run = EmitRun(alg)
        start = time.perf_counter()
        ptx_runs = [v for v in review.verifications if v.algorithm == alg and v.model == "ptx"]
        holds = bool(ptx_runs) and all(v.ok for v in ptx_runs)
        status = VerificationStatus("holds" if holds else "violated",
                                    "collsim review, PTX model" if holds else "see review.html")
        try:
            emitted = build_program(review.protocol, alg, status, unverified=not holds, arch="sm_90")
        except CollsimError as err:
            run.error = f"emission failed: {err}"
            review.emits.append(run)
            continue
        run.kernel = emitted.files["kernel.cu"]
        run.ir_ops = _sync_ops(emitted.plan)
        directory = out_dir / "emitted" / f"{review.name}__{alg}"
        write_program(emitted, directory)
        if not compile_:
            run.skipped = "compilation not requested (--no-compile)"
        elif nvcc is None:
            run.skipped = "nvcc not found (set NVCC or CUDA_HOME, or put it on PATH): the code was emitted, not compiled"
        else:
            progress("emit", i, len(review.algorithms), f"{alg}: nvcc")
            try:
                ptx = compile_ptx(directory, "sm_90", nvcc=nvcc)
                report = check_ptx(emitted.plan, ptx)
                run.compiled = True
                run.ptx_summary = report.summary().splitlines()[0]
                if not report.ok:
                    run.error = "PTX translation check: " + "; ".join(str(f) for f in report.errors)[:2000]
            except CollsimError as err:
                run.error = str(err)[:4000]
            except Exception as err:  # e.g. a timeout: reported, not fatal
                if is_interrupt(err):
                    raise
                run.error = f"{type(err).__name__}: {err}"[:4000]
        run.seconds = time.perf_counter() - start
        review.emits.append(run)
    progress("emit", len(review.algorithms), len(review.algorithms), "done")


@contextmanager
def _at_flag(flag: str) -> Iterator[None]:
    """An :class:`InputError` about an option's value, located at its flag (unless it names a file)."""
    try:
        yield
    except InputError as err:
        if err.file:
            raise
        raise InputError(err.message, field=flag, choices=err.choices) from None


def run_review(
    spec: str,
    *,
    against: Sequence[str] | None = None,
    topology: str = "hgx-h100",
    ranks: str | Sequence[int] = DEFAULT_RANKS,
    sizes: str | Sequence[int] = DEFAULT_SIZES,
    algorithm: str | None = None,
    out_dir: str | Path = "review",
    timeout: float = 60.0,
    use_cache: bool = True,
    compile: bool = True,
    verify_ranks: int | None = None,
    verify_iterations: int | None = None,
    progress: Progress | None = None,
    argv: Sequence[str] | None = None,
) -> Review:
    """Run every stage of a review (no files but the emitted code are written; see :func:`write_review`).

    Raises
    ------
    ProtocolDefinitionError
        (exit status 2) when the protocol does not load, or one of its
        programs breaks a well-formedness rule; the message names the
        protocol file and line.
    InputError
        for bad options (unknown comparison protocol, algorithm, topology, sizes).
    """
    progress = progress or _noop
    t0 = time.perf_counter()
    progress("load", 0, 1, spec)
    proto = load_for_review(spec)
    shown = _shown_path(protocol_file(proto), spec)
    with _at_flag("--ranks"):
        rank_list = sorted(set(parse_ranks(ranks) if isinstance(ranks, str) else [int(r) for r in ranks]))
    with _at_flag("--sizes"):
        if isinstance(sizes, str):
            size_list = sorted({n for part in sizes.split(",") if part.strip() for n in parse_sizes(part.strip())})
        else:
            size_list = sorted({int(s) for s in sizes})
    if not size_list:
        raise InputError("no sizes given", field="--sizes")
    if not rank_list or rank_list[0] < 2:
        raise InputError("an AllReduce needs at least 2 ranks", field="--ranks")
    if algorithm is not None:
        if algorithm not in proto.algorithms:
            raise InputError(f"protocol {proto.name!r} has no {algorithm} program", field="--algorithm",
                             choices=proto.algorithms)
        algorithms = [algorithm]
    else:
        algorithms = list(proto.algorithms)
    names = list(DEFAULT_AGAINST if against is None else against)
    comparators = []
    for name in dict.fromkeys(n.strip() for n in names if n.strip()):
        if name == proto.name:
            continue
        try:
            comparators.append(load_protocol(name))
        except InputError as err:
            raise InputError(err.message, field="--against", choices=list_protocols()) from None

    with _at_flag("--topology"):
        topo = load_topology(topology)
    with _at_flag("--sizes"):
        check_size_fits(size_list[-1], topo)
    if rank_list[-1] > topo.num_gpus:
        raise InputError(f"{rank_list[-1]} ranks requested but topology {topo.name!r} has {topo.num_gpus} GPUs",
                         field="--ranks")
    review = Review(spec, proto, shown, algorithms, [c.name for c in comparators], topo.name, rank_list, size_list,
                    argv=list(argv) if argv is not None else [spec])
    review.seconds["load"] = time.perf_counter() - t0
    progress("load", 1, 1, proto.name)

    t = time.perf_counter()
    progress("checks", 0, 1, "well-formedness")
    review.checks = check_algorithms(proto, list(proto.algorithms), shown)
    review.seconds["checks"] = time.perf_counter() - t
    progress("checks", 1, 1, "done")

    t = time.perf_counter()
    _verify(review, progress, timeout, use_cache, verify_ranks, verify_iterations)
    review.seconds["verify"] = time.perf_counter() - t

    t = time.perf_counter()
    _simulate(review, progress, comparators)
    review.seconds["simulate"] = time.perf_counter() - t

    t = time.perf_counter()
    _emit(review, progress, Path(out_dir), compile)
    review.seconds["emit"] = time.perf_counter() - t
    return review
