"""benchmarks/gpu/run_all.sh: the one prepared GPU run.

* The dry run (``--dry-run``) emits with verification, builds with nvcc for
  sm_90, plans and has every planned command line parsed by the built harness,
  and writes the output folder, launching nothing. The default run stages two
  programs (two layouts); the whole set is ``slow``. Skipped without nvcc.
* The GPU half (``--from STAGE``) runs here against stand-in programs, a
  stand-in nvidia-smi and compute-sanitizer (shell scripts with the real
  tools' exit statuses and messages): it must keep going past a wrong result,
  a poll timeout and a hang, classify each, honour the deadline, and exit 130
  on Ctrl-C.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from collsim.calibrate.formats.tables import csv_kind
from collsim.calibrate.measurements import MEASUREMENT_COLUMNS
from collsim.emit.toolchain import find_nvcc

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu" / "run_all.sh"
OUTPUT_FILES = {"env.txt", "plan.txt", "checks.csv", "results.csv", "summary.md", "logs.tar.gz"}
NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None or shutil.which("make") is None,
                                reason="nvcc (or make) not found: the dry run builds the programs with the CUDA "
                                       "toolkit (no GPU needed)")


def _load_module():
    spec = importlib.util.spec_from_file_location("collsim_gpu_run_all", REPO / "benchmarks" / "gpu" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run_all = _load_module()


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLLSIM_CACHE_DIR"] = str(tmp / "verify-cache")  # a fresh checkout: nothing verified yet
    env.pop("DRY_RUN", None)
    env.update(extra)
    return env


def _run(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------------
# The dry run: real emit, verification and nvcc builds
# ---------------------------------------------------------------------------
def _check_dry_run(out: Path, stage: Path, programs: set[str]) -> None:
    assert {p.name for p in out.iterdir()} == OUTPUT_FILES  # one folder, well under 8 files
    assert run_all.NAME_OK.match(out.name)

    manifest = json.loads((stage / "stage.json").read_text())
    staged = {p["name"]: p for p in manifest["programs"]}
    assert {n for n, p in staged.items() if p["kind"] == "program"} == programs
    for name, prog in staged.items():
        binary = stage / prog["directory"] / "collsim_bench"
        assert prog["built"], prog["build_note"]
        assert binary.stat().st_size > 0 and os.access(binary, os.X_OK)
        if prog["kind"] == "program":  # gated: only "holds" verdicts are built without --unverified
            assert prog["verification"].startswith("holds") and not prog["unverified"]
        else:
            assert prog["unverified"] and prog["expect"] == 3
        emit = json.loads((stage / prog["directory"] / "emit.json").read_text())
        assert "sm_90" in emit["archs"]
        helped = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
        assert helped.returncode == 0 and "--ranks" in helped.stdout
        if prog["kind"] == "program":  # and the variant whose every IR op traps outside its buffer
            assert prog["bounds"] and (binary.parent / "collsim_bench_bounds").stat().st_size > 0

    # the would-be measurement CSV: the emitted harness's header, a collsim measurement CSV (the
    # rows it will hold are tested in tests/test_emit_host.py), with what collsim compare joins on
    text = (out / "results.csv").read_text()
    assert text.count("\n") == 1 and csv_kind(text) == "collsim"
    header = text.strip().split(",")
    assert header[0] == "source" and [c for c in header if c in MEASUREMENT_COLUMNS] == [
        c for c in MEASUREMENT_COLUMNS if c in header]
    assert {"collective", "algorithm", "protocol", "ranks", "size_bytes", "launch", "topology", "gpu", "time_us",
            "gpu_mode", "ctas", "dtype", "driver_version", "cuda_runtime_version"} <= set(header)

    checks = _rows(out / "checks.csv")
    assert tuple(checks[0].keys()) == run_all.CHECK_COLUMNS
    builds = [r for r in checks if r["phase"] == "build"]
    assert {r["program"] for r in builds} == set(staged) and all(r["status"] == "built" for r in builds)
    planned = [r for r in checks if r["phase"] not in ("build", "emit")]
    assert planned and all(r["status"] == "planned" for r in planned)  # none rejected by the harness
    for phase in ("sweep", "sanitize", "check", "large"):
        assert {r["program"] for r in planned if r["phase"] == phase} == programs, phase
    tools = {r["step"] for r in planned if r["phase"] == "sanitize"}
    assert {"racecheck", "synccheck"} <= tools
    assert {r["step"] for r in planned if r["phase"] == "sweep"} == {"r2", "r4", "r8"}
    assert all("/collsim_bench_bounds " in r["command"] for r in planned if r["phase"] == "check")

    plan = (out / "plan.txt").read_text()
    total = float(plan.split("estimate: ", 1)[1].split(" s", 1)[0])
    assert 0 < total <= 360  # the default budget: well inside 8 minutes of one GPU
    assert "nothing was launched" in plan
    env = (out / "env.txt").read_text()
    assert "nvcc_at_staging=" in env and "dry-run" in env
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert "stage-logs/emit.log" in names and "stage.json" in names
    assert all(f"stage-logs/build_{n}.log" in names for n in staged)


@needs_nvcc
@pytest.mark.cuda
def test_dry_run_emits_verifies_builds_and_plans(tmp_path):
    stage, out = tmp_path / "stage", tmp_path / "dry-1"
    proc = _run(["--dry-run", "--only", "ll:one-shot,ll128:one-shot", "--phases", "sweep,sanitize,check,large",
                 "--stage", str(stage), "--out", str(out), "--no-install"], _env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    _check_dry_run(out, stage, {"ll__one-shot", "ll128__one-shot"})
    assert "estimate:" in proc.stderr  # the plan is printed before anything else runs
    assert "| ll128__one-shot | ok |" in proc.stdout
    emit_log = (stage / "logs" / "emit.log").read_text()
    assert "--verify" in emit_log  # nothing was on record: the verifier ran


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.slow
def test_dry_run_of_every_shipped_program_and_control(tmp_path):
    stage, out = tmp_path / "stage", tmp_path / "dry-all"
    proc = _run(["--dry-run", "--stage", str(stage), "--out", str(out), "--no-install"], _env(tmp_path),
                timeout=3000)
    assert proc.returncode == 0, proc.stderr
    from collsim.ir.registry import list_protocols, load_protocol

    shipped = {f"{n}__{a}" for n in list_protocols() for a in load_protocol(n).algorithms}
    _check_dry_run(out, stage, shipped)
    checks = _rows(out / "checks.csv")
    assert {r["program"] for r in checks if r["phase"] == "controls"} == {
        f"{c['protocol']}__{c['algorithm']}" for c in run_all.CONTROLS}
    # a stage is small enough to travel to a GPU machine with the checkout
    assert sum(f.stat().st_size for f in stage.rglob("*") if f.is_file()) < 48 << 20


def test_environment_variable_selects_the_dry_run(tmp_path):
    args = run_all.parse_args([])
    assert not args.dry_run
    os.environ["DRY_RUN"] = "1"
    try:
        assert run_all.parse_args([]).dry_run
    finally:
        del os.environ["DRY_RUN"]


def test_bad_options_are_one_line_and_exit_2(tmp_path):
    env = _env(tmp_path)
    for args, needle in ((["--out", str(tmp_path / "bad name")], "--out"),
                         (["--phases", "sweep,warp"], "--phases"),
                         (["--sizes", "8:1Q"], "--sizes"),
                         (["--frobnicate"], "--frobnicate"),
                         (["--dry-run", "--from", str(tmp_path / "nowhere")], "stage.json"),
                         (["--dry-run", "--stage", str(REPO / "docs")], "refusing to replace")):
        proc = _run(args, env, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("run_all: error:") and needle in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
    assert (REPO / "docs" / "EMIT.md").exists()  # a folder that is not a stage is never replaced


# ---------------------------------------------------------------------------
# Planning and the budget
# ---------------------------------------------------------------------------
def test_sizes_are_counted_as_the_harness_counts_them():
    sizes = run_all.parse_sizes("8:64M:x2")
    assert len(sizes) == 24 and sizes[0] == 8 and sizes[-1] == 64 << 20  # as tests/test_emit_host.py
    assert run_all.parse_sizes("1K:4K:+1K") == [1024, 2048, 3072, 4096]
    assert run_all.parse_sizes("64,4K,1M") == [64, 4096, 1 << 20]


def _programs(n: int) -> list:
    progs = [run_all.Program(f"p{i}__one-shot", f"p{i}", "one-shot", "program", f"programs/p{i}", "holds",
                             archs=("sm_90",), built=True) for i in range(n)]
    progs.append(run_all.Program("c__one-shot", "c", "one-shot", "control", "controls/c", archs=("sm_90",),
                                 built=True, expect=3, control_args=("--ranks", "8", "--sizes", "64K")))
    return progs


def _settings(*argv: str):
    return run_all.default_settings(run_all.parse_args(list(argv)))


def test_estimates_grow_with_ranks_sizes_and_iterations():
    base = run_all.RunShape(2, "8:1M:x2", 20, 5, 2)
    assert run_all.RunShape(8, "8:1M:x2", 20, 5, 2).estimate_s() > base.estimate_s()
    assert run_all.RunShape(2, "8:64M:x2", 20, 5, 2).estimate_s() > base.estimate_s()
    assert run_all.RunShape(2, "8:1M:x2", 40, 5, 2).estimate_s() > base.estimate_s()
    assert base.estimate_s() > run_all.COSTS.process_s  # the start of a process is only part of it


def test_the_default_plan_fits_its_budget_and_trims_say_what_they_cut():
    progs = _programs(14)  # the shipped set: 6 protocols, 14 programs
    settings = _settings()
    steps = run_all.fit_to_budget(progs, settings, rebuild=False)
    assert run_all.estimate_total(steps, settings, False) <= settings.budget_s
    tight = _settings("--budget", "150")
    steps = run_all.fit_to_budget(progs, tight, rebuild=False)
    assert tight.trims, "a budget below the plan's estimate must trim it"
    assert run_all.estimate_total(steps, tight, False) <= 150
    # never trimmed away: every program's sweep, racecheck and synccheck
    for tool in ("racecheck", "synccheck"):
        assert {s.program.name for s in steps if s.tool == tool} == {p.name for p in progs if p.kind == "program"}
    assert {s.program.name for s in steps if s.phase == "sweep"} == {p.name for p in progs if p.kind == "program"}
    unlimited = _settings("--budget", "none")
    assert not unlimited.trims and len(run_all.fit_to_budget(progs, unlimited, False)) > len(steps)


# ---------------------------------------------------------------------------
# The GPU half against stand-ins
# ---------------------------------------------------------------------------
FAKE_HEADER = "source,gpu,protocol,algorithm,ranks,size_bytes,time_us,ctas,dtype\n"

FAKE_BENCH = r"""#!/usr/bin/env bash
# Stand-in for an emitted collsim_bench: does what the file `behaviour` beside it says.
here="$(cd "$(dirname "$0")" && pwd)"
behaviour="$(cat "$here/behaviour")"
csv=""; ranks=2; prev=""
for a in "$@"; do
  [ "$prev" = --csv ] && csv="$a"
  [ "$prev" = --ranks ] && ranks="$a"
  [ "$a" = --help ] && { echo "usage: collsim_bench --ranks N"; exit 0; }
  prev="$a"
done
echo "# driver 13.0, CUDA runtime 13.0"
case "$behaviour" in
  pass)
    if [ -n "$csv" ]; then
      printf '%s' "$FAKE_HEADER" > "$csv"
      echo "collsim-emit,NVIDIA H200,$(basename "$here" | sed 's/__.*//'),one-shot,$ranks,8,4.5,1,float32" >> "$csv"
    fi
    echo "# all results checked: OK"; exit 0 ;;
  wrong) echo "collsim_bench: WRONG RESULT: x/one-shot, 4096 B, pre-timing check 1 (ITER=1), rank 1, element 3" >&2
         exit 3 ;;
  timeout) echo "collsim_bench: TIMEOUT: rank 3 channel 0 waited 5.000 s in IR op #4 poll_lines [PollUntil]" >&2
           exit 4 ;;
  hang) sleep 300 ;;
esac
"""

FAKE_SANITIZER = r"""#!/usr/bin/env bash
# Stand-in for compute-sanitizer: --tool T --error-exitcode N --print-limit N PROGRAM ARGS...
tool="$2"; code="$4"; shift 6
if [ "$tool" = memcheck ]; then echo "========= Error: Device not supported"; exit 1; fi
"$@"; rc=$?
if [ "$tool" = synccheck ] && [ $rc -eq 0 ]; then
  echo "========= Barrier error detected. Divergent thread(s) in block"
  echo "========= ERROR SUMMARY: 1 error"; exit "$code"
fi
echo "========= ERROR SUMMARY: 0 errors"; exit $rc
"""

FAKE_SMI = r"""#!/usr/bin/env bash
case "$*" in
  *--query-gpu=name,driver_version,compute_cap*) echo "NVIDIA H200, 580.00.01, 9.0" ;;
  *--query-gpu*) echo "name, clocks.sm [MHz]"; echo "NVIDIA H200, 1980 MHz" ;;
  *CLOCK*) echo "Clocks"; echo "    SM : 1980 MHz" ;;
  *) echo "nvidia-smi stand-in" ;;
esac
"""


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _fake_stage(root: Path, behaviours: dict[str, str], controls: dict[str, str]) -> Path:
    stage = root / "stage"
    (stage / "tools").mkdir(parents=True)
    (stage / "logs").mkdir()
    _script(stage / "tools" / "csv_header", f"#!/bin/sh\nprintf '%s' '{FAKE_HEADER}'\n")
    programs = []
    for kind, table in (("program", behaviours), ("control", controls)):
        for name, behaviour in table.items():
            d = stage / ("programs" if kind == "program" else "controls") / name
            d.mkdir(parents=True)
            _script(d / "collsim_bench", FAKE_BENCH)
            (d / "behaviour").write_text(behaviour)
            programs.append({"name": name, "protocol": name.split("__")[0], "algorithm": "one-shot", "kind": kind,
                             "directory": str(d.relative_to(stage)), "verification": "holds" if kind == "program"
                             else "violated", "unverified": kind == "control", "archs": ["sm_90"], "built": True,
                             "build_note": "", "expect": 3 if kind == "control" else 0, "why": "",
                             "control_args": ["--ranks", "8", "--sizes", "64K", "--eager"] if kind == "control"
                             else []})
    (stage / "stage.json").write_text(json.dumps({"format": run_all.STAGE_FORMAT, "arch": "sm_90",
                                                  "collsim_commit": "test", "refused": [], "programs": programs}))
    bindir = root / "bin"
    bindir.mkdir()
    _script(bindir / "nvidia-smi", FAKE_SMI)
    _script(bindir / "compute-sanitizer", FAKE_SANITIZER)
    return stage


def _fake_env(tmp: Path) -> dict[str, str]:
    return _env(tmp, PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}", FAKE_HEADER=FAKE_HEADER,
                NVCC="no-such-nvcc")


def test_gpu_half_keeps_going_past_failures_and_hangs_and_records_why(tmp_path):
    stage = _fake_stage(tmp_path, {"good__one-shot": "pass", "bad__one-shot": "wrong", "slow__one-shot": "timeout",
                                   "stuck__one-shot": "hang"},
                        {"ctl-hit__one-shot": "wrong", "ctl-miss__one-shot": "pass"})
    out = tmp_path / "h200-test"
    t0 = time.monotonic()
    proc = _run(["--from", str(stage), "--out", str(out), "--budget", "none", "--phases", "sweep,controls,sanitize",
                 "--ranks", "2,8", "--step-limit", "3", "--sanitizer-jobs", "3"], _fake_env(tmp_path), timeout=600)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr  # something failed, and the run went to the end
    assert {p.name for p in out.iterdir()} == OUTPUT_FILES
    checks = _rows(out / "checks.csv")
    by = {(r["program"], r["phase"], r["step"]): r for r in checks}

    for r in ("r2", "r8"):
        assert by["good__one-shot", "sweep", r]["status"] == "pass" and by["good__one-shot", "sweep", r]["ok"] == "true"
        bad = by["bad__one-shot", "sweep", r]
        assert bad["status"] == "wrong result" and "rank 1, element 3" in bad["detail"] and bad["exit_code"] == "3"
        slow = by["slow__one-shot", "sweep", r]
        assert slow["status"] == "timeout" and "rank 3" in slow["detail"] and "IR op #4" in slow["detail"]
        stuck = by["stuck__one-shot", "sweep", r]
        assert stuck["status"] == "killed" and "3 s" in stuck["detail"] and stuck["ok"] == "false"
    assert elapsed < 120  # each hang cost its step limit, not the 300 s it would have slept

    hit, miss = by["ctl-hit__one-shot", "controls", "control"], by["ctl-miss__one-shot", "controls", "control"]
    assert hit["ok"] == "true" and "triggered as expected" in hit["detail"]
    assert miss["ok"] == "false" and "NOT TRIGGERED" in miss["detail"]

    good = {t: by["good__one-shot", "sanitize", t] for t in ("racecheck", "synccheck", "memcheck")}
    assert good["racecheck"]["status"] == "clean" and good["racecheck"]["ok"] == "true"
    assert good["synccheck"]["status"] == "errors" and "Barrier error" in good["synccheck"]["detail"]
    assert good["memcheck"]["status"] == "unavailable" and good["memcheck"]["ok"] == ""
    assert by["bad__one-shot", "sanitize", "racecheck"]["status"] == "program wrong result"

    rows = _rows(out / "results.csv")  # only passing runs' rows, under the staged header
    assert (out / "results.csv").read_text().startswith(FAKE_HEADER)
    assert {(r["protocol"], r["ranks"]) for r in rows} == {("good", "2"), ("good", "8")}
    summary = (out / "summary.md").read_text()
    assert "## Failures" in summary and "bad__one-shot" in summary and "| good/one-shot |" in summary
    assert "| ctl-hit__one-shot (control) | ok |  | triggered |" in summary and "NOT TRIGGERED |" in summary
    assert summary.strip().splitlines()[-1] in proc.stdout  # printed last, where a short output tail shows it
    env = (out / "env.txt").read_text()
    assert "gpu=NVIDIA H200" in env and "driver=580.00.01" in env and "cuda_runtime=13.0" in env
    assert "SM : 1980 MHz" in env and "after the runs" in env
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert "logs/sweep_stuck__one-shot_r2.log" in names and "logs/sanitize_good__one-shot_synccheck.log" in names


def test_gpu_half_skips_what_the_budget_cannot_hold(tmp_path):
    stage = _fake_stage(tmp_path, {"good__one-shot": "pass"}, {})
    out = tmp_path / "tight"
    proc = _run(["--from", str(stage), "--out", str(out), "--budget", "10.5", "--phases", "sweep,sanitize"],
                _fake_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr  # nothing failed: it did not fit
    checks = [r for r in _rows(out / "checks.csv") if r["phase"] != "build"]
    assert checks and all(r["status"] == "skipped" and r["detail"].startswith("budget") for r in checks)
    assert "trimmed to fit" in (out / "plan.txt").read_text()


@pytest.mark.parametrize("sig, status, reason", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_gpu_half_stops_on_ctrl_c_or_sigterm_with_one_line(tmp_path, sig, status, reason):
    stage = _fake_stage(tmp_path, {"stuck__one-shot": "hang", "good__one-shot": "pass"}, {})
    out = tmp_path / "interrupted"
    proc = subprocess.Popen([str(SCRIPT), "--from", str(stage), "--out", str(out), "--budget", "none",
                             "--phases", "sweep", "--ranks", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_fake_env(tmp_path), cwd=REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "checks.csv").exists():
        time.sleep(0.2)
    time.sleep(1.0)  # the hanging step is running now
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"run_all: interrupted ({reason})") and "Traceback" not in stderr
    statuses = {r["program"]: r["status"] for r in _rows(out / "checks.csv") if r["phase"] == "sweep"}
    assert statuses["stuck__one-shot"] == "interrupted" and statuses["good__one-shot"] == "interrupted"
    assert (out / "summary.md").read_text().count("Interrupted") == 1
    assert not _processes_mentioning(str(stage)), "a program outlived the interrupted run"


def _processes_mentioning(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (Linux /proc; empty elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


# ---------------------------------------------------------------------------
# Comparing single-GPU rows with the simulator, term by term
# ---------------------------------------------------------------------------
def _load_sim_terms():
    spec = importlib.util.spec_from_file_location("collsim_gpu_sim_terms", REPO / "benchmarks" / "gpu" / "sim_terms.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sim_terms_splits_the_simulated_path_and_reads_the_measured_floor_and_slope(tmp_path):
    sim_terms = _load_sim_terms()
    header = list(MEASUREMENT_COLUMNS) + ["gpu_mode", "ctas"]
    path = tmp_path / "results.csv"
    sizes = [8, 64, 4096, 1 << 20, 4 << 20]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, header, restval="")
        w.writeheader()
        for size in sizes:  # a floor of 3 us and 0.5 us per MiB; one wrong row and one multi-block row ignored
            common = dict(protocol="ll", algorithm="one-shot", ranks=2, size_bytes=size, gpu_mode="single-gpu",
                          launch="graph", dtype="float32", collective="allreduce", wrong="false")
            w.writerow({**common, "ctas": 1, "time_us": 3.0 + 0.5 * size / (1 << 20)})
            w.writerow({**common, "ctas": 2, "time_us": 99.0})
        w.writerow({**common, "ctas": 1, "size_bytes": 16, "time_us": 0.1, "wrong": "true"})
    groups = sim_terms.measured_groups(path)
    assert list(groups) == [("ll", "one-shot", 2)] and [s for s, _ in groups["ll", "one-shot", 2]] == sizes
    (row,) = sim_terms.compare(groups, "hgx-h200")
    assert row["meas_us"] == pytest.approx(3.0, abs=1e-4)
    assert row["meas_slope_us_per_MiB"] == pytest.approx(0.5, rel=1e-3)
    explained = sim_terms._explain("ll", "one-shot", 2, 8, "hgx-h200")
    assert row["sim_us"] == pytest.approx(explained["latency_us"])
    # every simulated microsecond lands in exactly one term, and the launch term is kernel start + end
    parts = sum(row[f"sim_{t}_us"] for t in sim_terms.TERMS)
    assert parts == pytest.approx(row["sim_us"], rel=1e-6)
    assert row["sim_onchip_us"] == pytest.approx(row["sim_us"] - row["sim_link_us"])
    assert row["sim_launch_us"] == pytest.approx(explained["breakdown"]["launch"])
    assert row["sim_link_us"] > 0 and row["hops"] >= 1  # two GPUs on NVLink: the path crosses a link
    assert row["per_hop_us"] == pytest.approx((row["meas_us"] - row["sim_onchip_us"]) / row["hops"])
    assert row["sim_slope_us_per_MiB"] > 0
