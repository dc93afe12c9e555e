#!/usr/bin/env python3
"""Emit, build, check, time and sanitize every verified collsim protocol on one GPU.

This is the work behind ``benchmarks/gpu/run_all.sh`` (see README.md beside
it). It needs the Python standard library only, so that it also runs on a GPU
machine where collsim's own dependencies cannot be installed: there it runs
programs staged elsewhere (``--from STAGE``).

Two halves:

* **stage** (needs collsim and nvcc, no GPU): ``collsim emit --verify`` of every
  shipped protocol x algorithm (the verifier is run where no verdict is on
  record; refused programs are recorded, not run), plus a few known-broken
  mutants as positive controls; ``make`` of each for the target architecture;
  ``stage.json`` lists what was built.
* **run** (needs the GPU): every planned step in priority order under one
  deadline (``--budget``): the single-GPU self-check and timing sweep, the
  positive controls, ``compute-sanitizer`` racecheck / synccheck / memcheck,
  extra checks (bf16, int32, odd rank counts, several channels) and large
  messages. A step that fails, hangs or is killed is recorded and the run goes
  on.

Everything lands in ONE output folder of at most six files: ``env.txt``,
``plan.txt``, ``checks.csv``, ``results.csv`` (collsim measurement CSV, as
``collsim ingest`` / ``collsim compare`` read it), ``summary.md`` and
``logs.tar.gz``. ``--dry-run`` stages, validates every planned command line
with the built binaries and writes the same files without launching a kernel.

Exit status: 0 when every step that ran passed (and every control failed as
expected), 1 when something failed, 2 for bad options or a missing tool,
130 on Ctrl-C, 143 on SIGTERM.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as _dt
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NAME_OK = re.compile(r"^[A-Za-z0-9._-]+$")
STAGE_FORMAT = 1
SANITIZER_TOOLS = ("racecheck", "synccheck", "memcheck")
PHASES = ("sweep", "controls", "sanitize", "check", "large")

# Harness exit statuses (collsim/emit/templates/harness_host.h usage text).
HARNESS_STATUS = {0: "pass", 2: "bad options", 3: "wrong result", 4: "timeout", 5: "cuda error", 6: "refused"}
# The line of the harness's stderr that says why, per status.
HARNESS_REASON = {3: "WRONG RESULT", 4: "TIMEOUT", 5: "collsim_bench:", 6: "collsim_bench:", 2: "collsim_bench:"}

#: Positive controls: mutants whose single-GPU run must fail the harness's self-check. Each breaks within
#: one launch (a stale read that no launch boundary hides), so one GPU can show it; whether a race
#: shows on a given run is up to the hardware, so a control that does not trigger is reported, not hidden.
CONTROLS = (
    {"protocol": "mutant-ll-flag-bits1", "algorithm": "one-shot", "expect": 3,
     "why": "1-bit epoch flag: at ITER=1 the awaited flag is 0, which a fresh slot already holds, so a reader "
            "accepts lines nobody has written yet",
     "args": ["--ranks", "8", "--sizes", "4K,64K,1M", "--check-iters", "4", "--iters", "2", "--warmup", "0",
              "--eager"]},
    {"protocol": "mutant-sentinel-no-repoison", "algorithm": "one-shot", "expect": 3,
     "why": "readers never restore the sentinel, so once a slot comes round again (depth 3) the poll passes "
            "on the data of three launches ago",
     "args": ["--ranks", "4", "--sizes", "4K,64K,1M", "--check-iters", "6", "--iters", "2", "--warmup", "0",
              "--eager"]},
)


class ScriptError(Exception):
    """A problem the user must fix (bad option, missing tool): one line, exit 2."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived: stop, finish the record, exit 130 or 143."""


#: Set by the SIGINT/SIGTERM handler. The handler raises nothing: an exception landing inside
#: subprocess.Popen would orphan the child it is starting. Every wait loop checks the flag instead.
STOP = threading.Event()
_STOP_SIGNAL: list[int] = []


def _on_stop_signal(signum, frame):  # noqa: ARG001
    if not STOP.is_set():
        _STOP_SIGNAL.append(signum)
        STOP.set()


def check_stop() -> None:
    if STOP.is_set():
        raise Interrupted()


def stop_reason() -> tuple[str, int]:
    """("Ctrl-C", 130) or ("SIGTERM", 143)."""
    if _STOP_SIGNAL and _STOP_SIGNAL[0] == signal.SIGTERM:
        return "SIGTERM", 143
    return "Ctrl-C", 130


# ---------------------------------------------------------------------------
# Sizes: the harness's --sizes grammar (harness_host.h parse_sizes), to count sizes for the plan
# ---------------------------------------------------------------------------
_UNITS = {"": 1, "B": 1, "b": 1, "K": 1 << 10, "k": 1 << 10, "KB": 1 << 10, "KiB": 1 << 10, "M": 1 << 20,
          "m": 1 << 20, "MB": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "g": 1 << 30, "GB": 1 << 30, "GiB": 1 << 30}


def parse_size(text: str) -> int:
    """``"64"``, ``"4K"``, ``"16M"`` -> bytes (binary multiples), as the harness reads them."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)([A-Za-z]*)", text.strip())
    if not m or m.group(2) not in _UNITS:
        raise ScriptError(f"bad size {text!r} (e.g. 64, 4K, 16M)")
    value = float(m.group(1)) * _UNITS[m.group(2)]
    if value != int(value):
        raise ScriptError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def parse_sizes(spec: str) -> list[int]:
    """``8:1M:x2``, ``1K:8K:+1K``, ``64,4K`` -> the byte sizes the harness will run, in order."""
    out: list[int] = []
    for item in filter(None, spec.split(",")):
        parts = item.split(":")
        if len(parts) > 3:
            raise ScriptError(f"bad size range {item!r} (START[:END[:xF|+STEP]])")
        lo = parse_size(parts[0])
        if len(parts) == 1:
            out.append(lo)
            continue
        hi = parse_size(parts[1])
        step = parts[2] if len(parts) == 3 else "x2"
        if hi < lo or len(step) < 2 or step[0] not in "x*+":
            raise ScriptError(f"bad size range {item!r}")
        s = lo
        while s <= hi:
            out.append(s)
            nxt = s + parse_size(step[1:]) if step[0] == "+" else int(round(s * float(step[1:])))
            s = nxt if nxt > s else s + 1
    if not out:
        raise ScriptError(f"no sizes in {spec!r}")
    return out


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------------
# Planning: how long each step should take (only to size the run; not collsim model constants)
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PlanningCosts:
    """Deliberately pessimistic costs used to estimate and trim the run, never to report a result.

    The deadline is enforced at run time whatever these say; after the first
    steps the runner scales its estimates by the measured/estimated ratio.
    """

    #: process start, CUDA context creation, module load, allocation and the first launches of one run
    process_s: float = 1.5
    #: per message size: buffer reset, graph capture and instantiation, counter check
    size_fixed_s: float = 0.004
    #: per checked launch beyond the collective: input generation, output check, synchronisations
    check_round_s: float = 0.0005
    #: one launch of a tiny message: kernel start and end plus a few on-chip flag round trips
    launch_floor_s: float = 20e-6
    #: bytes per launch one rank's block touches, in units of ranks x message size (one-shot reads n
    #: messages and LL doubles them in flags: 4 covers loads and stores of every shipped program)
    traffic_factor: float = 4.0
    #: bytes per second one block (one SM) moves for the protocol: far under an SM's streaming rate,
    #: because a polling block keeps few loads in flight
    block_gbps: float = 10.0
    #: HBM rate of the harness's own kernels (input generation and output check over every rank's data)
    harness_gbps: float = 1000.0
    #: compute-sanitizer start (tool load, instrumentation of every kernel the program launches)
    sanitizer_start_s: float = 8.0
    #: kernel slowdown under a sanitizer
    sanitizer_slowdown: float = 100.0


COSTS = PlanningCosts()


@dataclasses.dataclass
class RunShape:
    """One harness invocation's settings (everything but the program)."""

    ranks: int
    sizes: str
    iters: int
    warmup: int
    check_iters: int
    ctas: int = 1
    threads: int = 512
    dtype: str = "fp32"
    launch: str = "graph"  # graph | eager
    check_all: bool = False
    timeout_ms: int = 5000

    def args(self) -> list[str]:
        out = ["--mode", "single", "--ranks", str(self.ranks), "--sizes", self.sizes, "--dtype", self.dtype,
               "--iters", str(self.iters), "--warmup", str(self.warmup), "--check-iters", str(self.check_iters),
               "--ctas", str(self.ctas), "--threads", str(self.threads), "--timeout-ms", str(self.timeout_ms),
               "--graph" if self.launch == "graph" else "--eager"]
        if self.check_all:
            out.append("--check-all")
        return out

    def estimate_s(self, costs: PlanningCosts = COSTS, slowdown: float = 1.0) -> float:
        """Pessimistic wall time of this run (see :class:`PlanningCosts`)."""
        total = costs.process_s
        checked = 2 * self.check_iters + (self.iters if self.check_all else 0)
        launches = 2 * self.check_iters + self.warmup + self.iters
        for size in parse_sizes(self.sizes):
            per_block = costs.traffic_factor * self.ranks * size / self.ctas
            launch = costs.launch_floor_s + per_block / (costs.block_gbps * 1e9)
            harness = checked * (costs.check_round_s + 3 * self.ranks * size / (costs.harness_gbps * 1e9))
            total += costs.size_fixed_s + launches * launch * slowdown + harness
        return total


@dataclasses.dataclass
class Program:
    """One staged (protocol, algorithm) benchmark."""

    name: str
    protocol: str
    algorithm: str
    kind: str                   # "program" or "control"
    directory: str              # relative to the stage
    verification: str = ""
    unverified: bool = False
    archs: tuple[str, ...] = ()
    built: bool = False
    bounds: bool = False        # collsim_bench_bounds (make check-bounds) was built too
    build_note: str = ""
    expect: int = 0             # controls: the harness exit status the run must end with
    why: str = ""
    control_args: tuple[str, ...] = ()

    def binary(self, stage: Path, bounds: bool = False) -> Path:
        return stage / self.directory / ("collsim_bench_bounds" if bounds else "collsim_bench")


@dataclasses.dataclass
class Step:
    """One planned command: a harness run, a control or a sanitizer run."""

    phase: str
    program: Program
    label: str                  # e.g. "r8", "bf16 r3 x2ch", "racecheck"
    args: list[str]
    est_s: float
    tool: str = ""              # sanitizer name, or "" for a plain run
    bounds: bool = False        # run the bounds-checked build
    csv: bool = False           # the run writes measurement rows into results.csv
    expect: int = 0
    shape: Optional[RunShape] = None
    # outcome
    status: str = "planned"
    ok: Optional[bool] = None
    detail: str = ""
    exit_code: Optional[int] = None
    seconds: Optional[float] = None
    log: str = ""

    @property
    def key(self) -> str:
        return f"{self.phase}_{self.program.name}_{self.label}".replace(" ", "_")


@dataclasses.dataclass
class Settings:
    budget_s: Optional[float]
    phases: tuple[str, ...]
    sanitizers: tuple[str, ...]
    sanitizer_jobs: int
    step_limit_s: Optional[float]
    sweep: RunShape
    sweep_ranks: tuple[int, ...]
    large: RunShape
    trims: list[str] = dataclasses.field(default_factory=list)


def default_settings(args: argparse.Namespace) -> Settings:
    sweep = RunShape(ranks=0, sizes=args.sizes, iters=args.iters, warmup=5, check_iters=2,
                     timeout_ms=args.poll_timeout_ms)
    large = RunShape(ranks=8, sizes=args.large_sizes, iters=5, warmup=1, check_iters=1,
                     timeout_ms=args.poll_timeout_ms)
    return Settings(budget_s=args.budget, phases=tuple(args.phases), sanitizers=tuple(args.sanitizers),
                    sanitizer_jobs=args.sanitizer_jobs, step_limit_s=args.step_limit, sweep=sweep,
                    sweep_ranks=tuple(args.ranks), large=large)


def check_shapes() -> list[tuple[str, RunShape]]:
    """Code paths the fp32 sweep does not reach: other element types, odd rank counts, several channels.
    Every launch is checked (--check-all). 61444 B ends inside a line of every layout (8 B of data per LL
    line, 16 per plain line, 120 per LL128 line) and is a whole number of elements of every type."""
    sizes = "8,1K,61444,1M"
    return [
        ("bf16 r3 x2ch", RunShape(3, sizes, 3, 1, 1, ctas=2, dtype="bf16", launch="eager", check_all=True)),
        ("int32 r3 x2ch", RunShape(3, sizes, 3, 1, 1, ctas=2, dtype="int32", launch="eager", check_all=True)),
        ("fp32 r5 x3ch", RunShape(5, sizes, 3, 1, 1, ctas=3, launch="eager", check_all=True)),
    ]


#: The short case each sanitizer runs: 3 ranks x 2 channels, a tail, a strided loop, every launch checked.
SANITIZER_SHAPE = RunShape(3, "8,4K,64K", 2, 1, 1, ctas=2, launch="eager", check_all=True, timeout_ms=20000)


def plan_steps(programs: list[Program], settings: Settings) -> list[Step]:
    """Every step, in the order they run (most important first: a deadline cuts the tail)."""
    runnable = [p for p in programs if p.kind == "program" and p.built]
    controls = [p for p in programs if p.kind == "control" and p.built]
    steps: list[Step] = []
    if "sweep" in settings.phases:
        for prog in runnable:
            for r in settings.sweep_ranks:
                shape = dataclasses.replace(settings.sweep, ranks=r)
                steps.append(Step("sweep", prog, f"r{r}", shape.args(), shape.estimate_s(), csv=True, shape=shape))
    if "controls" in settings.phases:
        for prog in controls:
            args = ["--mode", "single", "--timeout-ms", "5000", *prog.control_args]
            steps.append(Step("controls", prog, "control", args, _estimate_from_args(args), expect=prog.expect))
    if "sanitize" in settings.phases:
        for tool in settings.sanitizers:
            for prog in runnable:
                shape = SANITIZER_SHAPE
                est = COSTS.sanitizer_start_s + shape.estimate_s(slowdown=COSTS.sanitizer_slowdown)
                steps.append(Step("sanitize", prog, tool, shape.args(), est, tool=tool, shape=shape))
    if "check" in settings.phases:
        for prog in runnable:
            for label, shape in check_shapes():  # correctness only: bounds checks cost time, so no CSV rows
                steps.append(Step("check", prog, label, shape.args(), shape.estimate_s(), shape=shape,
                                  bounds=prog.bounds))
    if "large" in settings.phases:
        for prog in runnable:
            shape = settings.large
            steps.append(Step("large", prog, f"r{shape.ranks}", shape.args(), shape.estimate_s(), csv=True,
                              shape=shape))
    return steps


def _estimate_from_args(args: list[str]) -> float:
    values = dict(zip(args[::2], args[1::2]))
    shape = RunShape(int(values.get("--ranks", 2)), values.get("--sizes", "8"), int(values.get("--iters", 20)),
                     int(values.get("--warmup", 5)), int(values.get("--check-iters", 4)))
    return shape.estimate_s()


def fixed_overhead_s(settings: Settings, rebuild: bool) -> float:
    """Time outside the steps: environment record, binary checks (or a rebuild), packing."""
    return 15.0 + (60.0 if rebuild else 0.0)


def estimate_total(steps: list[Step], settings: Settings, rebuild: bool) -> float:
    plain = sum(s.est_s for s in steps if not s.tool)
    sanitizer = sum(s.est_s for s in steps if s.tool) / max(1, settings.sanitizer_jobs)
    return fixed_overhead_s(settings, rebuild) + plain + sanitizer


def fit_to_budget(programs: list[Program], settings: Settings, rebuild: bool, spent_s: float = 0.0) -> list[Step]:
    """Trim the plan (largest sizes, iterations, optional phases) until its estimate fits the budget.

    Each trim is recorded in ``settings.trims``. racecheck and synccheck and the
    sweep's smallest sizes are never trimmed away: past the last trim the
    deadline decides what runs.
    """
    steps = plan_steps(programs, settings)
    if settings.budget_s is None:
        return steps
    target = 0.9 * (settings.budget_s - spent_s)

    def trim_sizes(shape: RunShape, fewest: int, drop_n: int, what: str) -> Callable[[], Optional[str]]:
        """Drop the ``drop_n`` largest sizes of ``shape`` while more than ``fewest`` remain."""
        def run() -> Optional[str]:
            sizes = parse_sizes(shape.sizes)
            if len(sizes) <= fewest:
                return None
            shape.sizes = ",".join(str(s) for s in sizes[:-drop_n])
            return f"{what} up to {human_bytes(sizes[-drop_n - 1])}"
        return run

    def drop(field: str, name: str, what: str) -> Callable[[], Optional[str]]:
        """Remove ``name`` from the tuple ``settings.<field>`` (a phase, a sanitizer)."""
        def run() -> Optional[str]:
            kept = getattr(settings, field)
            if name not in kept:
                return None
            setattr(settings, field, tuple(x for x in kept if x != name))
            return f"{what} '{name}' dropped"
        return run

    def set_iters(shape: RunShape, n: int, what: str) -> Callable[[], Optional[str]]:
        def run() -> Optional[str]:
            if shape.iters <= n:
                return None
            shape.iters, shape.warmup = n, min(shape.warmup, max(1, n // 4))
            return f"{what}: {n} timed launches per size"
        return run

    def fewer_ranks() -> Optional[str]:
        if len(settings.sweep_ranks) <= 2:
            return None
        settings.sweep_ranks = (settings.sweep_ranks[0], settings.sweep_ranks[-1])
        return "sweep ranks " + " ".join(map(str, settings.sweep_ranks))

    trim_large = trim_sizes(settings.large, 2, 1, "large messages")
    ladder: list[Callable[[], Optional[str]]] = [
        set_iters(settings.large, 3, "large"), trim_large, trim_large,
        drop("sanitizers", "memcheck", "sanitizer"), set_iters(settings.sweep, 10, "sweep"), trim_large,
        drop("phases", "check", "phase"), drop("phases", "large", "phase"),
        fewer_ranks, set_iters(settings.sweep, 5, "sweep"),
        *[trim_sizes(settings.sweep, 8, 2, "sweep")] * 6,
    ]
    for trim in ladder:
        if estimate_total(steps, settings, rebuild) <= target:
            break
        note = trim()
        if note:
            settings.trims.append(note)
            steps = plan_steps(programs, settings)
    return steps


# ---------------------------------------------------------------------------
# Small utilities
# ---------------------------------------------------------------------------
START = time.monotonic()


def log(msg: str) -> None:
    print(f"[run_all {time.monotonic() - START:6.1f}s] {msg}", file=sys.stderr, flush=True)


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def find_tool(name: str, env_var: str = "") -> Optional[str]:
    """A CUDA tool from $ENV_VAR, PATH, $CUDA_HOME/bin, nvcc's folder or /usr/local/cuda/bin."""
    if env_var and os.environ.get(env_var):
        return shutil.which(os.environ[env_var]) or None
    found = shutil.which(name)
    if found:
        return found
    dirs = [Path(os.environ["CUDA_HOME"]) / "bin"] if os.environ.get("CUDA_HOME") else []
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.append(Path(os.path.realpath(nvcc)).parent)
    dirs.append(Path("/usr/local/cuda/bin"))
    for d in dirs:
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return str(d / name)
    return None


def capture(cmd: list[str], timeout: float = 60, cwd: Optional[Path] = None,
            env: Optional[dict] = None) -> tuple[int, str]:
    """Run a short command; (exit status, stdout+stderr). 124 when it timed out, 127 when missing."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
                              errors="replace")
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"") if isinstance(err.stdout, bytes) else (err.stdout or "")
        return 124, str(out) + f"\n(timed out after {timeout:.0f} s)"
    except OSError as err:
        return 127, str(err)
    return proc.returncode, proc.stdout + proc.stderr


_CHILDREN: set[subprocess.Popen] = set()
_CHILDREN_LOCK = threading.Lock()


def run_logged(cmd: list[str], log_path: Path, timeout: float, cwd: Optional[Path] = None,
               env: Optional[dict] = None) -> tuple[int, float, bool]:
    """Run ``cmd`` in its own process group with stdout+stderr into ``log_path``.

    Returns (exit status, seconds, killed). At ``timeout`` the group gets
    SIGTERM, then SIGKILL 5 s later; a killed run reports status 124. When
    :data:`STOP` is set the group is killed the same way and
    :class:`Interrupted` raised.
    """
    check_stop()
    t0 = time.monotonic()
    with open(log_path, "ab") as out:
        out.write(("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n").encode())
        out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                    start_new_session=True)
        except OSError as err:
            out.write(f"cannot start: {err}\n".encode())
            return 127, 0.0, False
        with _CHILDREN_LOCK:
            _CHILDREN.add(proc)
        killed = stopped = False
        deadline = t0 + max(1.0, timeout)
        try:
            while True:
                try:
                    proc.wait(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    stopped = STOP.is_set()
                    killed = time.monotonic() > deadline
                    if stopped or killed:
                        _kill_group(proc)
                        break
        finally:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)
        rc = 124 if killed else proc.returncode
        elapsed = time.monotonic() - t0
        if stopped:
            out.write(f"\nrun_all: stopped after {elapsed:.0f} s ({stop_reason()[0]})\n".encode())
            raise Interrupted()
        if killed:
            out.write(f"\nrun_all: killed after {elapsed:.0f} s (step time limit {timeout:.0f} s)\n".encode())
    return rc, elapsed, killed


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def kill_children() -> None:
    with _CHILDREN_LOCK:
        procs = list(_CHILDREN)
    for proc in procs:
        _kill_group(proc)


def first_line(text: str, marker: str) -> str:
    for line in text.splitlines():
        if marker in line:
            return line.strip()[:400]
    return ""


# ---------------------------------------------------------------------------
# Stage: emit (with verification), build, csv header tool
# ---------------------------------------------------------------------------
def collsim_python(logs: Path, allow_install: bool) -> str:
    """A Python that imports this checkout's collsim with its dependencies; installs them if needed.

    Tried in order: this interpreter, ``.venv`` of the checkout; then a new
    ``.venv`` with ``pip install -e .`` (falling back to ``pip install --user -e .``).
    """
    probe = "import collsim.cli, collsim.emit, collsim.verify, z3, simpy"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    venv_py = REPO / ".venv" / "bin" / "python"
    candidates = [sys.executable] + ([str(venv_py)] if venv_py.exists() else [])
    for py in candidates:
        if capture([py, "-c", probe], timeout=120, env=env)[0] == 0:
            return py
    if not allow_install:
        raise ScriptError("collsim's dependencies are not installed here and --no-install was given "
                          "(install with `pip install -e .`, or stage elsewhere and use --from STAGE)")
    log("collsim's dependencies are missing: installing (pip install -e .), log in logs/install.log")
    install_log = logs / "install.log"
    rc, _, _ = run_logged([sys.executable, "-m", "venv", str(REPO / ".venv")], install_log, 300)
    if rc == 0:
        rc, _, _ = run_logged([str(venv_py), "-m", "pip", "install", "-q", "-e", str(REPO)], install_log, 1200)
        if rc == 0 and capture([str(venv_py), "-c", probe], timeout=120, env=env)[0] == 0:
            return str(venv_py)
    rc, _, _ = run_logged([sys.executable, "-m", "pip", "install", "-q", "--user", "-e", str(REPO)],
                          install_log, 1200)
    if rc == 0 and capture([sys.executable, "-c", probe], timeout=120, env=env)[0] == 0:
        return sys.executable
    raise ScriptError(f"cannot install collsim's dependencies (see {install_log}); on a machine without "
                      "network, stage on another machine (run_all.sh --dry-run --stage DIR) and run here "
                      "with --from DIR")


def collsim_cmd(py: str, *args: str) -> list[str]:
    return [py, "-c", "import sys; sys.argv[0] = 'collsim'; from collsim.cli import console; console()", *args]


def list_shipped(py: str, env: dict) -> list[tuple[str, str]]:
    code = ("import json; from collsim.ir.registry import list_protocols, load_protocol; "
            "print(json.dumps([[n, a] for n in list_protocols() for a in load_protocol(n).algorithms]))")
    rc, out = capture([py, "-c", code], timeout=120, env=env)
    if rc != 0:
        raise ScriptError(f"cannot list collsim's protocols: {out.strip().splitlines()[-1:]}")
    return [tuple(x) for x in json.loads(out.strip().splitlines()[-1])]


def select(shipped: list[tuple[str, str]], only: Optional[list[str]]) -> list[tuple[str, str]]:
    """``--only ll,simple:ring``: whole protocols or protocol:algorithm pairs, in shipped order."""
    if not only:
        return list(shipped)
    keep = []
    for item in only:
        proto, _, alg = item.partition(":")
        hits = [(p, a) for p, a in shipped if p == proto and (not alg or a == alg)]
        if not hits:
            choices = ", ".join(sorted({p for p, _ in shipped} | {f"{p}:{a}" for p, a in shipped}))
            raise ScriptError(f"--only: {item!r} names no shipped program (valid: {choices})")
        keep += [h for h in hits if h not in keep]
    return [s for s in shipped if s in keep]


def stage_programs(stage: Path, args: argparse.Namespace) -> dict:
    """Emit, verify and build into ``stage``; write and return stage.json's content."""
    if stage.exists() and any(stage.iterdir()) and not (stage / "stage.json").exists() \
            and not (stage / "logs" / "emit.log").exists():
        raise ScriptError(f"--stage: {stage} is not empty and holds no stage (no stage.json): refusing to replace it")
    nvcc = find_tool("nvcc", "NVCC")
    if nvcc is None:
        raise ScriptError("nvcc not found (set NVCC or CUDA_HOME): building the benchmarks needs the CUDA toolkit")
    if not shutil.which("make"):
        raise ScriptError("make not found: the emitted benchmarks build with make")
    if stage.exists():
        shutil.rmtree(stage)
    logs = stage / "logs"
    logs.mkdir(parents=True)
    py = collsim_python(logs, allow_install=not args.no_install)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    shipped = list_shipped(py, env)
    chosen = select(shipped, args.only)
    log(f"stage {stage}: emit {len(chosen)} program(s) with verification (collsim emit --verify)")
    emit_log = logs / "emit.log"
    programs: list[Program] = []
    refused: list[str] = []
    unverified = ["--unverified"] if args.unverified else []
    if chosen == shipped:
        rc, _, _ = run_logged(collsim_cmd(py, "emit", "--all", "--verify", "--arch", args.arch, "--out",
                                          str(stage / "programs"), *unverified), emit_log, 1800, cwd=REPO, env=env)
        text = emit_log.read_text(errors="replace")
        refused = [line.split("collsim: ", 1)[-1].strip() for line in text.splitlines() if "refusing to emit" in line]
        if rc not in (0, 1) or (rc == 1 and not refused):
            raise ScriptError(f"collsim emit --all failed (exit {rc}); see {emit_log}")
    else:
        for proto, alg in chosen:
            rc, _, _ = run_logged(collsim_cmd(py, "emit", proto, "-a", alg, "--verify", "--arch", args.arch,
                                              "--out", str(stage / "programs" / f"{proto}__{alg}"), *unverified),
                                  emit_log, 1800, cwd=REPO, env=env)
            if rc == 1:
                text = emit_log.read_text(errors="replace")
                refused.append(first_line(text.split("$ ")[-1], "refusing") or f"{proto}/{alg}: refused")
            elif rc != 0:
                raise ScriptError(f"collsim emit {proto} -a {alg} failed (exit {rc}); see {emit_log}")
    for proto, alg in chosen:
        d = stage / "programs" / f"{proto}__{alg}"
        if (d / "emit.json").exists():
            programs.append(_program_from(d, stage, "program"))
    if "controls" in args.phases:
        for c in CONTROLS:
            d = stage / "controls" / f"{c['protocol']}__{c['algorithm']}"
            rc, _, _ = run_logged(collsim_cmd(py, "emit", c["protocol"], "-a", c["algorithm"], "--unverified",
                                              "--arch", args.arch, "--out", str(d)), emit_log, 600, cwd=REPO, env=env)
            if rc != 0:
                raise ScriptError(f"collsim emit {c['protocol']} failed (exit {rc}); see {emit_log}")
            prog = _program_from(d, stage, "control")
            prog.expect, prog.why, prog.control_args = c["expect"], c["why"], tuple(c["args"])
            programs.append(prog)
    if not programs:
        raise ScriptError(f"nothing was emitted (every program refused?); see {emit_log}")
    build_all(stage, programs, nvcc, args.arch, logs)
    header_tool(stage, programs, logs)
    manifest = {
        "format": STAGE_FORMAT,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "collsim_commit": git_commit(),
        "arch": args.arch,
        "nvcc": nvcc_version(nvcc),
        "unverified_allowed": bool(args.unverified),
        "refused": refused,
        "programs": [dataclasses.asdict(p) for p in programs],
    }
    atomic_write(stage / "stage.json", json.dumps(manifest, indent=2) + "\n")
    built = sum(p.built for p in programs)
    log(f"staged {built} of {len(programs)} program(s) in {stage} ({len(refused)} refused)")
    return manifest


def _program_from(d: Path, stage: Path, kind: str) -> Program:
    meta = json.loads((d / "emit.json").read_text())
    verdict = meta.get("verification", "")
    if meta.get("verification_detail"):
        verdict += f" ({meta['verification_detail']})"
    return Program(name=d.name, protocol=meta["protocol"], algorithm=meta["algorithm"], kind=kind,
                   directory=str(d.relative_to(stage)), verification=verdict,
                   unverified=bool(meta.get("unverified")), archs=tuple(meta.get("archs", ())))


def build_all(stage: Path, programs: list[Program], nvcc: str, arch: str, logs: Path,
              jobs: Optional[int] = None) -> None:
    """``make`` every program (two files each, so two make jobs per program), and for verified
    programs also the bounds-checked variant (``make check-bounds``: every IR op traps when it
    addresses outside its buffer) as ``collsim_bench_bounds``."""
    cpus = os.cpu_count() or 2
    workers = jobs or max(1, cpus // 2)

    def build(prog: Program) -> None:
        d = stage / prog.directory
        if arch not in prog.archs:
            prog.built, prog.build_note = False, f"cannot run on {arch} (archs: {', '.join(prog.archs)})"
            return
        blog = logs / f"build_{prog.name}.log"
        make = ["make", "-C", str(d), "-j2", f"ARCH={arch}", f"NVCC={nvcc}"]
        rc, secs, killed = run_logged(make, blog, 900)
        prog.built = rc == 0 and prog.binary(stage).exists()
        if not prog.built:
            why = "killed after 900 s" if killed else f"make exit {rc}"
            prog.build_note = f"build failed ({why}; logs/{blog.name})"
            return
        prog.build_note = f"built for {arch} in {secs:.0f} s"
        if prog.kind == "program":
            plain = d / "collsim_bench.plain"
            prog.binary(stage).rename(plain)
            (d / "kernel.o").unlink()
            # main.o is shared with the plain build where only kernel.cu's headers read the switch
            if any("COLLSIM_CHECK_BOUNDS" in (d / f).read_text() for f in ("main.cu", "harness_host.h", "program.h")):
                (d / "main.o").unlink()
            rc, more, _ = run_logged(make + ["EXTRA=-DCOLLSIM_CHECK_BOUNDS"], blog, 900)
            if rc == 0 and prog.binary(stage).exists():
                prog.binary(stage).rename(prog.binary(stage, bounds=True))
                prog.bounds = True
                prog.build_note += f", bounds-checked variant in {more:.0f} s"
            else:
                prog.build_note += f"; the bounds-checked variant failed (make exit {rc}; logs/{blog.name})"
            plain.rename(prog.binary(stage))
        for obj in d.glob("*.o"):  # the binaries are all a run needs; keeps a carried stage small
            obj.unlink()

    log(f"build {len(programs)} program(s) for {arch} ({workers} at a time)")
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(build, programs))
    for prog in programs:
        if not prog.built:
            log(f"  {prog.name}: {prog.build_note}")


HEADER_SOURCE = """#include "harness_host.h"
#include <cstdio>
int main() { std::fputs(collsim_host::csv_header().c_str(), stdout); return 0; }
"""


def header_tool(stage: Path, programs: list[Program], logs: Path) -> None:
    """Build ``tools/csv_header``: the measurement CSV header exactly as the emitted harness writes it."""
    tools = stage / "tools"
    tools.mkdir(exist_ok=True)
    src = tools / "csv_header.cc"
    src.write_text(HEADER_SOURCE)
    include = stage / programs[0].directory
    cxx = shutil.which("c++") or shutil.which("g++")
    cmd = ([cxx, "-std=c++17", "-O0", f"-I{include}", str(src), "-o", str(tools / "csv_header")] if cxx else
           [find_tool("nvcc", "NVCC") or "nvcc", "-std=c++17", "-x", "c++", f"-I{include}", str(src), "-o",
            str(tools / "csv_header")])
    rc, out = capture(cmd, timeout=300)
    (logs / "csv_header.log").write_text(" ".join(cmd) + "\n" + out)
    if rc != 0:
        raise ScriptError(f"cannot compile the CSV header tool (see {logs / 'csv_header.log'})")


def git_commit() -> str:
    rc, out = capture(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], timeout=30)
    if rc != 0:
        return "unknown"
    dirty = capture(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], timeout=30)[1]
    return out.strip() + ("+changes" if dirty.strip() else "")


def nvcc_version(nvcc: Optional[str]) -> str:
    if not nvcc:
        return "none"
    rc, out = capture([nvcc, "--version"], timeout=60)
    m = re.search(r"release ([0-9.]+), (V[0-9.]+)", out)
    if m:
        return f"{m.group(1)} ({m.group(2)})"
    return out.strip().splitlines()[-1] if out.strip() else f"unknown (exit {rc})"


def load_stage(stage: Path) -> tuple[dict, list[Program]]:
    path = stage / "stage.json"
    if not path.exists():
        raise ScriptError(f"{path} not found: stage first (run_all.sh --dry-run --stage {stage})")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ScriptError(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from None
    if manifest.get("format") != STAGE_FORMAT:
        raise ScriptError(f"{path}: field 'format' is {manifest.get('format')!r}; this script reads {STAGE_FORMAT} "
                          "(stage again)")
    programs = []
    for p in manifest["programs"]:
        p = dict(p)
        p["archs"] = tuple(p.get("archs", ()))
        p["control_args"] = tuple(p.get("control_args", ()))
        programs.append(Program(**p))
    return manifest, programs


# ---------------------------------------------------------------------------
# The GPU side
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class Gpu:
    name: str = "none"
    driver: str = ""
    compute_cap: str = ""
    arch: str = ""


def query_gpu() -> Gpu:
    smi = find_tool("nvidia-smi")
    if smi is None:
        raise ScriptError("nvidia-smi not found: no NVIDIA driver here (--dry-run builds and plans without a GPU)")
    rc, out = capture([smi, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"], timeout=60)
    lines = [line for line in out.splitlines() if line.strip()]
    if rc != 0 or not lines:
        raise ScriptError(f"nvidia-smi lists no GPU ({out.strip()[:200]})")
    name, driver, cc = [x.strip() for x in (lines[0].split(",") + ["", "", ""])[:3]]
    return Gpu(name=name, driver=driver, compute_cap=cc, arch="sm_" + cc.replace(".", "") if cc else "")


def gpu_slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-")
    return slug or "gpu"


def environment_text(gpu: Optional[Gpu], stage_manifest: dict, settings: Settings, dry_run: bool,
                     logs: Path, when: str) -> str:
    """The environment record: GPU, driver, clocks, CUDA versions, collsim commit, settings."""
    lines = [f"# collsim single-GPU run: environment ({when})",
             f"date_utc={_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}",
             f"mode={'dry-run (nothing launched)' if dry_run else 'single-gpu (all ranks as block groups on one GPU)'}",
             f"collsim_commit_here={git_commit()}",
             f"collsim_commit_staged={stage_manifest.get('collsim_commit', 'unknown')}",
             f"staged_utc={stage_manifest.get('created_utc', '')}",
             f"staged_arch={stage_manifest.get('arch', '')}",
             f"nvcc_at_staging={stage_manifest.get('nvcc', '')}",
             f"nvcc_here={nvcc_version(find_tool('nvcc', 'NVCC'))}",
             f"python={sys.version.split()[0]}"]
    san = find_tool("compute-sanitizer")
    if san:
        rc, out = capture([san, "--version"], timeout=60)
        ver = re.search(r"Version ([^\s]+)", out)
        lines.append(f"compute_sanitizer={ver.group(1) if ver else f'unknown (exit {rc})'}")
    else:
        lines.append("compute_sanitizer=not found")
    if gpu is not None:
        lines += [f"gpu={gpu.name}", f"driver={gpu.driver}", f"compute_capability={gpu.compute_cap}",
                  f"arch={gpu.arch}"]
        smi = find_tool("nvidia-smi")
        fields = ("name,pci.bus_id,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,"
                  "clocks.applications.graphics,power.draw,power.limit,temperature.gpu,persistence_mode,"
                  "compute_mode,ecc.mode.current,mig.mode.current")
        rc, out = capture([smi, f"--query-gpu={fields}", "--format=csv"], timeout=60)
        lines += ["", "## nvidia-smi --query-gpu", out.strip()]
        rc, out = capture([smi, "-q", "-d", "CLOCK"], timeout=60)
        lines += ["", "## nvidia-smi -q -d CLOCK", out.strip()]
        rc, out = capture([smi, "-q"], timeout=120)
        (logs / f"nvidia-smi-q_{when.split()[0]}.txt").write_text(out)
        rc, out = capture([smi, "topo", "-m"], timeout=60)
        (logs / "nvidia-smi-topo.txt").write_text(out)
    lines += ["", "## settings",
              f"budget_s={settings.budget_s}", f"phases={' '.join(settings.phases)}",
              f"sanitizers={' '.join(settings.sanitizers)} (jobs {settings.sanitizer_jobs})",
              f"sweep: ranks {' '.join(map(str, settings.sweep_ranks))}, {' '.join(settings.sweep.args()[4:])}",
              f"large: {' '.join(settings.large.args()[2:])}",
              f"trims={'; '.join(settings.trims) or 'none'}"]
    return "\n".join(lines) + "\n"


def harness_versions(log_text: str) -> str:
    m = re.search(r"# driver ([0-9.]+), CUDA runtime ([0-9.]+)", log_text)
    return f"cuda_driver_api={m.group(1)}\ncuda_runtime={m.group(2)}\n" if m else ""


def check_binaries(stage: Path, programs: list[Program], gpu_arch: str, staged_arch: str, logs: Path) -> None:
    """Every staged binary must start here (``--help`` needs no GPU); rebuild it here if not.

    A binary built on another machine may miss a system library here, or be built for another
    architecture than this GPU's: then it is rebuilt with this machine's nvcc, when there is one.
    """
    nvcc = find_tool("nvcc", "NVCC")
    need: list[Program] = []
    for prog in programs:
        if not prog.built:
            continue
        if gpu_arch and gpu_arch != staged_arch:
            prog.build_note = f"staged for {staged_arch}, this GPU is {gpu_arch}"
            need.append(prog)
            continue
        for bounds in (False, True) if prog.bounds else (False,):
            rc, out = capture([str(prog.binary(stage, bounds)), "--help"], timeout=60)
            if rc != 0:
                prog.build_note = f"staged binary does not start here (exit {rc}: {out.strip()[:160]})"
                need.append(prog)
                break
    if not need:
        return
    if nvcc is None or not shutil.which("make"):
        for prog in need:
            prog.built, prog.build_note = False, prog.build_note + "; no nvcc/make here to rebuild"
        return
    arch = gpu_arch or staged_arch
    log(f"rebuilding {len(need)} program(s) here for {arch}: {need[0].build_note}")
    for prog in need:
        capture(["make", "-C", str(stage / prog.directory), "clean"], timeout=60)
    build_all(stage, need, nvcc, arch, logs, jobs=max(1, (os.cpu_count() or 2) // 2))
    for prog in need:
        if prog.built:
            prog.build_note = f"rebuilt here for {arch}"


def validate_args(stage: Path, steps: list[Step]) -> list[str]:
    """Each planned command line, parsed by the built harness (``--help`` after it: no CUDA call)."""
    problems = []
    seen = set()
    for step in steps:
        check_stop()
        key = (step.program.name, step.bounds, tuple(step.args))
        if key in seen:
            continue
        seen.add(key)
        rc, out = capture([str(step.program.binary(stage, step.bounds)), *step.args, "--csv", os.devnull, "--help"],
                          timeout=60)
        if rc != 0:
            problems.append(f"{step.key}: the harness rejects the planned options (exit {rc}): "
                            f"{out.strip().splitlines()[0] if out.strip() else ''}")
    return problems


def classify_run(step: Step, rc: int, text: str, killed: bool, limit: float) -> None:
    if killed:
        step.status, step.detail = "killed", f"no exit within the step's {limit:.0f} s limit (hang?)"
    elif rc in HARNESS_STATUS:
        step.status = HARNESS_STATUS[rc]
        step.detail = first_line(text, HARNESS_REASON.get(rc, "\x00")) if rc else ""
        trapped = first_line(text, "collsim: IR op #")  # the bounds-checked build's report before its trap
        if rc == 5 and trapped:
            step.status, step.detail = "out of bounds", f"{trapped}; {step.detail}"
    elif rc < 0:
        step.status, step.detail = "crashed", f"killed by signal {-rc}"
    else:
        last = text.strip().splitlines()[-1][:300] if text.strip() else ""
        step.status, step.detail = "failed", f"exit {rc}: {last}"
    if step.phase == "controls":
        triggered = rc == step.expect and not killed
        step.ok = triggered
        want = HARNESS_STATUS.get(step.expect, str(step.expect))
        step.detail = (f"control triggered as expected ({want}): " if triggered else
                       f"CONTROL NOT TRIGGERED: expected {want}, got {step.status}: ") + step.detail
    else:
        step.ok = rc == 0 and not killed


def classify_sanitizer(step: Step, rc: int, text: str, killed: bool, limit: float) -> None:
    summary = first_line(text, "ERROR SUMMARY")
    hazards = first_line(text, "RACECHECK SUMMARY")
    if killed:
        step.status, step.ok, step.detail = "killed", False, f"no exit within {limit:.0f} s under {step.tool}"
    elif re.search(r"^=+.*\bnot supported|Device not supported", text, re.M | re.I) and "ERROR SUMMARY" not in text:
        step.status, step.ok = "unavailable", None
        step.detail = first_line(text, "upported") or f"{step.tool} cannot run on this machine"
    elif rc == 9 or re.search(r"ERROR SUMMARY: [1-9]", text):
        step.status, step.ok = "errors", False
        step.detail = "; ".join(x for x in (summary, hazards, first_line(text, "========= Error"),
                                            first_line(text, "========= Invalid"),
                                            first_line(text, "========= Barrier"),
                                            first_line(text, "Race reported")) if x)
    elif rc == 0 and summary:
        step.status, step.ok, step.detail = "clean", True, "; ".join(x for x in (summary, hazards) if x)
    else:
        classify_run(step, rc, text, killed, limit)
        step.status = f"program {step.status}"
        step.detail = f"under {step.tool}: {step.detail or f'exit {rc}'}"


class Runner:
    """Runs the plan under one deadline and keeps the output folder up to date after every step."""

    def __init__(self, stage: Path, out: Path, work: Path, steps: list[Step], settings: Settings,
                 header: str, sanitizer: Optional[str], on_update: Callable[[], None], t0: float) -> None:
        self.stage, self.out, self.work, self.steps, self.settings = stage, out, work, steps, settings
        self.header = header
        self.sanitizer = sanitizer
        self.on_update = on_update
        self.deadline = None if settings.budget_s is None else t0 + settings.budget_s
        self.reserve_s = 10.0  # summary and packing after the last step
        self.ratios: dict[bool, list[float]] = {False: [], True: []}
        self.lock = threading.Lock()
        self.results_rows = 0
        self.versions = ""

    def scale(self, sanitizer: bool) -> float:
        r = self.ratios[sanitizer]
        return statistics.median(r) if r else 1.0

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic() - self.reserve_s

    def run(self, on_phase_end: Callable[[], None]) -> None:
        for phase in PHASES:
            check_stop()
            steps = [s for s in self.steps if s.phase == phase]
            if not steps:
                continue
            log(f"phase {phase}: {len(steps)} step(s)")
            if phase == "sanitize":
                self.run_sanitizers(steps)
            else:
                for step in steps:
                    check_stop()
                    self.run_step(step)
            on_phase_end()

    def run_sanitizers(self, steps: list[Step]) -> None:
        """Sanitizer runs share the GPU a few at a time (each is a short run; none of them is timed)."""
        if self.sanitizer is None:
            for s in steps:
                s.status, s.ok, s.detail = "unavailable", None, "compute-sanitizer not found"
            self.on_update()
            return
        pool = ThreadPoolExecutor(self.settings.sanitizer_jobs)
        try:
            for future in [pool.submit(self.run_step, s) for s in steps]:
                future.result()
        except BaseException:
            kill_children()  # before waiting for the workers, whose children would otherwise run on
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()

    def run_step(self, step: Step) -> None:
        est = step.est_s * self.scale(bool(step.tool))
        left = self.left()
        if est > left:
            step.status, step.ok = "skipped", None
            step.detail = f"budget: needs about {est:.0f} s, {max(0.0, left):.0f} s left"
            log(f"skip {step.key}: {step.detail}")
            self.on_update()
            return
        limit = max(30.0, 4 * est + 20.0) if not step.tool else max(90.0, 4 * est + 30.0)
        if self.settings.step_limit_s is not None:
            limit = self.settings.step_limit_s
        limit = min(limit, max(5.0, left))
        log_path = self.work / "logs" / f"{step.key}.log"
        step.log = f"logs/{log_path.name}"
        csv_path = self.work / "csv" / f"{step.key}.csv"
        cmd = [str(step.program.binary(self.stage, step.bounds)), *step.args]
        if step.csv:
            cmd += ["--csv", str(csv_path)]
        if step.tool:
            cmd = [self.sanitizer, "--tool", step.tool, "--error-exitcode", "9", "--print-limit", "20", *cmd]
        step.status = "running"
        try:
            rc, secs, killed = run_logged(cmd, log_path, limit, cwd=self.work)
        except Interrupted:
            step.status, step.ok, step.detail = "interrupted", None, f"stopped by {stop_reason()[0]}"
            raise
        text = log_path.read_text(errors="replace")
        step.exit_code, step.seconds = rc, round(secs, 2)
        (classify_sanitizer if step.tool else classify_run)(step, rc, text, killed, limit)
        with self.lock:
            if step.ok and step.est_s > 0:
                self.ratios[bool(step.tool)].append(secs / step.est_s)
            if not self.versions:
                self.versions = harness_versions(text)
            if step.csv and csv_path.exists():
                self.append_results(step, csv_path)
        log(f"{step.key}: {step.status} in {secs:.1f} s (est {step.est_s:.1f} s)"
            + (f" - {step.detail}" if step.detail and not step.ok else ""))
        self.on_update()

    def append_results(self, step: Step, csv_path: Path) -> None:
        lines = csv_path.read_text().splitlines(keepends=True)
        if not lines:
            return
        if lines[0] != self.header:
            step.ok = False
            step.detail = (step.detail + "; " if step.detail else "") + "CSV header differs from the staged harness's"
            return
        with open(self.out / "results.csv", "a", encoding="utf-8") as f:
            f.writelines(lines[1:])
        self.results_rows += len(lines) - 1


# ---------------------------------------------------------------------------
# Output folder
# ---------------------------------------------------------------------------
CHECK_COLUMNS = ("program", "protocol", "algorithm", "kind", "verification", "phase", "step", "status", "ok",
                 "detail", "exit_code", "seconds", "est_seconds", "command", "log")


def checks_csv(programs: list[Program], steps: list[Step], refused: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CHECK_COLUMNS)
    for prog in programs:
        w.writerow([prog.name, prog.protocol, prog.algorithm, prog.kind, prog.verification, "build", "build",
                    "built" if prog.built else "not built", "true" if prog.built else "false", prog.build_note,
                    "", "", "", f"make -C {prog.directory}", ""])
    for msg in refused:
        m = re.search(r"emit ([^/\s]+)/(\S+?):", msg)
        proto, alg = (m.group(1), m.group(2)) if m else ("", "")
        w.writerow([f"{proto}__{alg}", proto, alg, "program", "", "emit", "verification gate", "refused", "false",
                    msg, "", "", "", "", ""])
    for s in steps:
        ok = "" if s.ok is None else ("true" if s.ok else "false")
        command = " ".join(([f"compute-sanitizer --tool {s.tool}"] if s.tool else []) +
                           [f"{s.program.directory}/{s.program.binary(Path(), s.bounds).name}",
                            *map(shlex.quote, s.args)])
        w.writerow([s.program.name, s.program.protocol, s.program.algorithm, s.program.kind,
                    s.program.verification, s.phase, s.label, s.status, ok, s.detail,
                    "" if s.exit_code is None else s.exit_code, "" if s.seconds is None else s.seconds,
                    f"{s.est_s:.1f}", command, s.log])
    return buf.getvalue()


def plan_text(steps: list[Step], settings: Settings, programs: list[Program], refused: list[str],
              rebuild: bool, dry_run: bool, staging_s: Optional[float] = None) -> str:
    total = estimate_total(steps, settings, rebuild)
    lines = ["# collsim single-GPU run: plan and estimate", ""]
    built = [p for p in programs if p.built]
    lines.append(f"programs: {sum(p.kind == 'program' for p in built)} verified program(s) and "
                 f"{sum(p.kind == 'control' for p in built)} positive control(s) built; {len(refused)} refused by "
                 "the verification gate")
    for p in programs:
        lines.append(f"  {p.name:32s} {p.kind:8s} {'built' if p.built else 'NOT BUILT: ' + p.build_note}"
                     f"  [{p.verification[:60]}]")
    for msg in refused:
        lines.append(f"  refused: {msg}")
    lines += ["", "phases (in this order; a deadline skips the tail):"]
    for phase in PHASES:
        ph = [s for s in steps if s.phase == phase]
        if not ph:
            continue
        if phase == "sanitize":
            wall = sum(s.est_s for s in ph) / max(1, settings.sanitizer_jobs)
            lines.append(f"  {phase:9s} {len(ph):3d} run(s), {settings.sanitizer_jobs} at a time, est {wall:6.1f} s: "
                         f"{' '.join(settings.sanitizers)} on {' '.join(SANITIZER_SHAPE.args()[2:])}")
        else:
            labels = sorted({s.label for s in ph})
            note = " (bounds-checked build, every launch checked)" if any(s.bounds for s in ph) else ""
            lines.append(f"  {phase:9s} {len(ph):3d} run(s), est {sum(s.est_s for s in ph):6.1f} s: "
                         f"{', '.join(labels)}{note}")
            shapes = {(" ".join(s.args)) for s in ph if s.phase != 'controls'}
            for sh in sorted(shapes)[:3]:
                lines.append(f"            {sh}")
    launches = 0
    for s in steps:
        if s.shape is not None and s.shape.sizes:
            n = len(parse_sizes(s.shape.sizes))
            launches += n * (2 * s.shape.check_iters + s.shape.warmup + s.shape.iters)
    lines += ["",
              f"estimate: {total:.0f} s = {fixed_overhead_s(settings, rebuild):.0f} s fixed (environment, "
              f"binary check{', rebuild' if rebuild else ''}, packing) + "
              f"{sum(s.est_s for s in steps if not s.tool):.0f} s of runs + "
              f"{sum(s.est_s for s in steps if s.tool) / max(1, settings.sanitizer_jobs):.0f} s of sanitizers "
              f"({len(steps)} steps, about {launches} collective launches)",
              "budget: " + ("none" if settings.budget_s is None
                            else f"{settings.budget_s:.0f} s (a hard deadline from the end of staging)")
              + (f"; trimmed to fit: {'; '.join(settings.trims)}" if settings.trims else ""),
              "planning costs (pessimistic, used only to size the run): "
              + ", ".join(f"{f.name}={getattr(COSTS, f.name)}" for f in dataclasses.fields(COSTS)),
              ""]
    if staging_s is not None:
        lines.append(f"staging (install, emit with verification, build) took {staging_s:.0f} s before the budget "
                     "started")
    if dry_run:
        lines.append("dry run: nothing was launched; every command line above was parsed by its built harness.")
    return "\n".join(lines) + "\n"


def summary_md(programs: list[Program], steps: list[Step], refused: list[str], gpu: Optional[Gpu],
               dry_run: bool, runner: Optional[Runner], settings: Settings, interrupted: str = "") -> str:
    """Failures first, then timings, then the status of every program: printed last, where a short
    output tail still shows it."""
    title = "dry run (no kernel launched)" if dry_run else f"single-GPU run on {gpu.name if gpu else '?'}"
    lines = [f"# collsim emitted programs: {title}", ""]
    if interrupted:
        lines += [f"**Interrupted ({interrupted}): steps not run are marked so.**", ""]
    bad = [s for s in steps if s.ok is False]
    if bad:
        lines += ["## Failures", ""]
        lines += [f"* `{s.key}`: {s.status}: {s.detail} ({s.log})" for s in bad[:MAX_LISTED]]
        if len(bad) > MAX_LISTED:
            lines.append(f"* ... and {len(bad) - MAX_LISTED} more: see checks.csv")
        lines.append("")
    if runner is not None:
        lines += ["## Timing (µs per collective, graph replay; single-gpu: on-chip cost, not NVLink)", ""]
        lines += timing_table(runner.out / "results.csv")
        scale = runner.ratios[False]
        if scale:
            lines += ["", f"Measured/estimated time of passed runs: median {statistics.median(scale):.2f} "
                          f"(min {min(scale):.2f}, max {max(scale):.2f}); results.csv has {runner.results_rows} rows."]
        lines.append("")
    cols = ["build"] + [p for p in ("sweep", "controls") if any(s.phase == p for s in steps)]
    cols += [t for t in settings.sanitizers if any(s.tool == t for s in steps)]
    cols += [p for p in ("check", "large") if any(s.phase == p for s in steps)]
    lines += ["## Status", "", "| program | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for prog in programs:
        cells = ["ok" if prog.built else "FAILED"]
        for c in cols[1:]:
            mine = [s for s in steps if s.program is prog and (s.phase == c or s.tool == c)]
            cells.append(_cell(mine))
        lines.append(f"| {prog.name}{' (control)' if prog.kind == 'control' else ''} | " + " | ".join(cells) + " |")
    for msg in refused:
        lines.append(f"| refused: {msg[:120]} |" + " |" * len(cols))
    lines += ["", f"{sum(1 for s in steps if s.ok)} step(s) passed, {len(bad)} failed, "
                  f"{sum(1 for s in steps if s.status == 'skipped')} skipped, "
                  f"{sum(1 for s in steps if s.status == 'unavailable')} unavailable, "
                  f"{sum(1 for s in steps if s.status in ('planned', 'running', 'interrupted'))} not run."]
    return "\n".join(lines) + "\n"


MAX_LISTED = 25


def _cell(steps: list[Step]) -> str:
    if not steps:
        return ""
    if steps[0].phase == "controls":
        return {True: "triggered", False: "NOT TRIGGERED", None: steps[0].status}[steps[0].ok]
    if all(s.ok for s in steps):
        return "ok" if len(steps) == 1 else f"ok ({len(steps)})"
    parts = []
    for s in steps:
        mark = {True: "ok", False: s.status.upper(), None: s.status}[s.ok]
        parts.append(f"{s.label}: {mark}" if len(steps) > 1 else mark)
    return ", ".join(parts)


def timing_table(results: Path) -> list[str]:
    """A few columns of results.csv: the sweep's smallest and largest size at each rank count."""
    if not results.exists():
        return ["(no results)"]
    with open(results, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("ctas") == "1" and r.get("dtype") == "float32"]
    if not rows:
        return ["(no results)"]
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    pick = [s for s in (8, 4096, 65536, 1 << 20, 64 << 20) if s in sizes] or sizes[:1]
    ranks = sorted({int(r["ranks"]) for r in rows})
    head = ["program"] + [f"r{n} {human_bytes(s)}" for n in ranks for s in pick]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---|" * (len(head) - 1)]
    table: dict[str, dict[tuple[int, int], str]] = {}
    for r in rows:
        name = f"{r['protocol']}/{r['algorithm']}"
        table.setdefault(name, {})[(int(r["ranks"]), int(r["size_bytes"]))] = r["time_us"]
    for name in sorted(table):
        out.append("| " + " | ".join([name] + [table[name].get((n, s), "") for n in ranks for s in pick]) + " |")
    return out


def pack_logs(out: Path, dirs: Iterable[tuple[Path, str]]) -> None:
    tmp = out / ".logs.tar.gz.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for path, arcname in dirs:
            if path.exists():
                tar.add(str(path), arcname=arcname)
    os.replace(tmp, out / "logs.tar.gz")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (not argparse's usage block)
        raise ScriptError(f"{message} (see run_all.sh --help)")


def parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ
    p = _Parser(
        prog="run_all.sh", description=__doc__.split("\n\n")[0],
        epilog="Environment: DRY_RUN=1 (= --dry-run), ONLY, UNVERIFIED=1, OUT, STAGE, BUDGET_S, NVCC, CUDA_HOME.")
    p.add_argument("--dry-run", action="store_true", default=env.get("DRY_RUN", "0") == "1",
                   help="stage (emit, verify, build with nvcc), plan, validate every command line with the built "
                        "binaries and write the output files; launch nothing (no GPU needed)")
    p.add_argument("--out", default=env.get("OUT", ""),
                   help="output folder (its name: letters, digits, '.', '_', '-'); default "
                        "benchmarks/gpu/results/<date>-<gpu> (dry run: build/gpu-dry-run)")
    p.add_argument("--stage", default=env.get("STAGE", str(REPO / "build" / "gpu-stage")),
                   help="where emitted and built programs go (default build/gpu-stage)")
    p.add_argument("--from", dest="from_stage", default="",
                   help="run programs staged earlier (by --dry-run --stage DIR, possibly on another machine): "
                        "needs no collsim dependencies here, only the GPU driver (and nvcc to rebuild)")
    p.add_argument("--only", default=env.get("ONLY", ""),
                   help="comma-separated protocols or protocol:algorithm pairs (default: every shipped program)")
    p.add_argument("--unverified", action="store_true", default=env.get("UNVERIFIED", "0") == "1",
                   help="also emit and run programs whose verdict is not 'holds' (marked UNVERIFIED)")
    p.add_argument("--budget", default=env.get("BUDGET_S", "360"),
                   help="seconds for the whole run, a hard deadline; the plan is trimmed to fit its estimate "
                        "(default 360; 'none' for no limit)")
    p.add_argument("--phases", default=",".join(PHASES), help=f"phases to run, of: {', '.join(PHASES)}")
    p.add_argument("--sanitizers", default=",".join(SANITIZER_TOOLS),
                   help="compute-sanitizer tools (default racecheck,synccheck,memcheck; '' for none)")
    p.add_argument("--sanitizer-jobs", type=int, default=4, help="sanitizer runs at a time (default 4)")
    p.add_argument("--ranks", default="2,4,8", help="rank counts of the sweep (default 2,4,8)")
    p.add_argument("--sizes", default="8:1M:x2", help="message sizes of the sweep (default 8:1M:x2)")
    p.add_argument("--large-sizes", default="2M:64M:x2", help="sizes of the large phase, 8 ranks (default 2M:64M:x2)")
    p.add_argument("--iters", type=int, default=20, help="timed launches per size in the sweep (default 20)")
    p.add_argument("--poll-timeout-ms", type=int, default=5000,
                   help="a poll waiting longer aborts the run naming rank and IR op (default 5000)")
    p.add_argument("--step-limit", type=float, default=None,
                   help="seconds one step may run before it is killed (default: 4 x its estimate + 20, at least "
                        "30; sanitizer runs at least 90)")
    p.add_argument("--arch", default=env.get("ARCH", "sm_90"), help="architecture to stage for (default sm_90)")
    p.add_argument("--no-install", action="store_true", help="never pip-install collsim's dependencies")
    a = p.parse_args(argv)
    try:
        a.budget = None if str(a.budget).lower() in ("none", "0", "") else float(a.budget)
    except ValueError:
        raise ScriptError(f"--budget: {a.budget!r} is not a number of seconds (or 'none')") from None
    a.phases = [x for x in a.phases.split(",") if x]
    bad = [x for x in a.phases if x not in PHASES]
    if bad:
        raise ScriptError(f"--phases: unknown {', '.join(bad)} (valid: {', '.join(PHASES)})")
    a.sanitizers = [x for x in a.sanitizers.split(",") if x]
    bad = [x for x in a.sanitizers if x not in SANITIZER_TOOLS]
    if bad:
        raise ScriptError(f"--sanitizers: unknown {', '.join(bad)} (valid: {', '.join(SANITIZER_TOOLS)})")
    try:
        a.ranks = [int(x) for x in re.split(r"[ ,]+", a.ranks.strip()) if x]
    except ValueError:
        raise ScriptError(f"--ranks: {a.ranks!r} is not a list of integers") from None
    if not a.ranks or any(not 2 <= r <= 16 for r in a.ranks):
        raise ScriptError("--ranks: every rank count must be from 2 to 16")
    for flag, spec in (("--sizes", a.sizes), ("--large-sizes", a.large_sizes)):
        try:
            parse_sizes(spec)
        except ScriptError as err:
            raise ScriptError(f"{flag}: {err}") from None
    if a.sanitizer_jobs < 1:
        raise ScriptError("--sanitizer-jobs must be at least 1")
    if a.step_limit is not None and a.step_limit <= 0:
        raise ScriptError("--step-limit must be a positive number of seconds")
    if a.iters < 1:
        raise ScriptError("--iters must be at least 1")
    a.only = [x.strip() for x in re.split(r"[ ,]+", a.only) if x.strip()] or None
    return a


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    stage = Path(args.from_stage or args.stage).resolve()
    if args.out and not NAME_OK.match(Path(args.out).resolve().name):
        raise ScriptError(f"--out: folder name {Path(args.out).name!r} may use only letters, digits, '.', '_' and '-'")
    gpu = None if args.dry_run else query_gpu()
    if args.out:
        out = Path(args.out)
    elif args.dry_run:
        out = REPO / "build" / "gpu-dry-run"
    else:
        out = HERE / "results" / f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%d}-{gpu_slug(gpu.name)}"
    if not NAME_OK.match(out.resolve().name):
        raise ScriptError(f"--out: folder name {out.name!r} may use only letters, digits, '.', '_' and '-'")
    out = out.resolve()
    if stage == out or out in stage.parents:
        raise ScriptError("--out must not contain the stage folder")

    # 1. stage (here) or load a stage made elsewhere
    if args.from_stage:
        manifest, programs = load_stage(stage)
        if args.only:
            names = {f"{p.protocol}:{p.algorithm}" for p in programs} | {p.protocol for p in programs}
            unknown = [o for o in args.only if o not in names]
            if unknown:
                raise ScriptError(f"--only: {', '.join(unknown)} not in the stage (has: "
                                  f"{', '.join(sorted(p.name for p in programs))})")
            programs = [p for p in programs if p.kind == "control" or p.protocol in args.only
                        or f"{p.protocol}:{p.algorithm}" in args.only]
    else:
        manifest = stage_programs(stage, args)
        manifest, programs = load_stage(stage)
    refused = list(manifest.get("refused", []))
    # The budget is the GPU machine's time: it starts here, after staging (which may happen elsewhere).
    run_t0 = time.monotonic()
    staging_s = run_t0 - START

    # 2. plan
    rebuild_expected = bool(gpu and gpu.arch and gpu.arch != manifest.get("arch"))
    settings = default_settings(args)
    steps = fit_to_budget(programs, settings, rebuild_expected)
    plan = plan_text(steps, settings, programs, refused, rebuild_expected, args.dry_run,
                     staging_s if not args.from_stage else None)
    sys.stderr.write(plan)

    out.mkdir(parents=True, exist_ok=True)
    for stale in ("env.txt", "plan.txt", "checks.csv", "results.csv", "summary.md", "logs.tar.gz"):
        (out / stale).unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="collsim-gpu-run-"))
    (work / "logs").mkdir()
    (work / "csv").mkdir()
    header = capture([str(stage / "tools" / "csv_header")], timeout=60)
    if header[0] != 0 or not header[1].startswith("source,"):
        raise ScriptError(f"{stage / 'tools' / 'csv_header'} does not run here: stage again")
    header_line = header[1].splitlines(keepends=True)[0]
    atomic_write(out / "plan.txt", plan)
    atomic_write(out / "results.csv", header_line)
    pack_dirs = [(stage / "logs", "stage-logs"), (work / "logs", "logs"), (stage / "stage.json", "stage.json")]

    if args.dry_run:
        problems = validate_args(stage, steps)
        for prob in problems:
            log(prob)
        for s in steps:
            s.status, s.detail = "planned", "dry run: not launched"
        for prob in problems:
            key = prob.split(":", 1)[0]
            for s in steps:
                if s.key == key:
                    s.ok, s.status, s.detail = False, "rejected", prob.split(": ", 1)[1]
        atomic_write(out / "env.txt", environment_text(None, manifest, settings, True, work / "logs", "dry run"))
        atomic_write(out / "checks.csv", checks_csv(programs, steps, refused))
        summary = summary_md(programs, steps, refused, None, True, None, settings)
        atomic_write(out / "summary.md", summary)
        pack_logs(out, pack_dirs)
        shutil.rmtree(work, ignore_errors=True)
        print(summary)
        failed = problems or any(not p.built for p in programs)
        log(f"dry run written to {out}")
        return 1 if failed else 0

    # 3. run on the GPU
    atomic_write(out / "env.txt", environment_text(gpu, manifest, settings, False, work / "logs", "before runs"))
    check_binaries(stage, programs, gpu.arch, manifest.get("arch", ""), work / "logs")
    steps = fit_to_budget(programs, settings, False, time.monotonic() - run_t0)  # a failed rebuild drops programs
    sanitizer = find_tool("compute-sanitizer")
    lock = threading.Lock()
    runner: Optional[Runner] = None

    def update() -> None:
        with lock:
            atomic_write(out / "checks.csv", checks_csv(programs, steps, refused))

    runner = Runner(stage, out, work, steps, settings, header_line, sanitizer, update, run_t0)
    update()  # every step listed as planned before the first one starts
    interrupted = ""
    code = 0

    def phase_end() -> None:
        pack_logs(out, pack_dirs + [(work / "csv", "csv")])

    try:
        runner.run(phase_end)
    except Interrupted:
        interrupted, code = stop_reason()
    finally:
        kill_children()
        for s in steps:
            if s.status in ("planned", "running"):
                s.status, s.ok = ("interrupted", None) if interrupted else (s.status, s.ok)
        update()
        env_after = environment_text(gpu, manifest, settings, False, work / "logs", "after runs")
        clocks_after = env_after.split("## nvidia-smi -q -d CLOCK", 1)[-1].split("## settings", 1)[0]
        atomic_write(out / "env.txt", (out / "env.txt").read_text() + runner.versions
                     + "\n## nvidia-smi -q -d CLOCK (after the runs)" + clocks_after)
        summary = summary_md(programs, steps, refused, gpu, False, runner, settings, interrupted)
        atomic_write(out / "summary.md", summary)
        pack_logs(out, pack_dirs + [(work / "csv", "csv")])
        shutil.rmtree(work, ignore_errors=True)
    if code:
        print(f"run_all: interrupted ({interrupted}); what finished is in {out}", file=sys.stderr)
        return code
    print(summary)
    log(f"results in {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    return 1 if any(s.ok is False for s in steps) or any(not p.built for p in programs) else code


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _on_stop_signal)
    signal.signal(signal.SIGTERM, _on_stop_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    except ScriptError as err:
        print(f"run_all: error: {err}", file=sys.stderr)
        sys.exit(2)
    except Interrupted:
        kill_children()
        reason, status = stop_reason()
        print(f"run_all: interrupted ({reason})", file=sys.stderr)
        sys.exit(status)
