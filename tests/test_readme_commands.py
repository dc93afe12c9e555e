"""The README's commands, on a fresh clone, in the order written: each exits 0.

The commands are read from the last column ("try it") of the README's command
table, so the README and this test cannot drift apart. They run in a copy of
the repository's tracked files (what a clone holds: no reports, no caches),
with that copy's code (``python -m collsim``), one after the other: later
rows read what earlier ones wrote (``emit --all`` the verdicts of
``verify --all``, ``compare`` the results of ``run`` and the table of
``ingest``).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collsim.ir.registry import list_protocols, load_protocol

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.timeout(900)


def readme_commands(text: str) -> list[str]:
    """The commands of the "try it" column of the README's command table, in order."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| command |") and "try it" in line)
    commands = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
        commands += [c.replace("\\|", "|") for c in re.findall(r"`([^`]+)`", cells[-1])]
    return commands


def test_the_table_has_a_command_per_row():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert len(commands) >= 18 and all(c.startswith("collsim ") for c in commands), commands
    assert commands[0].startswith("collsim run scenarios/8gpu.yaml")


def _fresh_clone(target: Path) -> None:
    """The tracked files of this checkout, copied to ``target`` (what ``git clone`` would give)."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout (or no git): cannot tell which files a clone holds")
    for name in listed.stdout.decode().split("\0"):
        if not name:
            continue
        source = ROOT / name
        if source.is_file():  # a file deleted in the work tree but not yet in git is not in a clone either
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.mark.slow  # 100-160 s, verify --all most of it: in make test-slow, so make test stays under 10 minutes
def test_readme_commands_run_on_a_fresh_clone(tmp_path):
    clone = tmp_path / "collsim"
    _fresh_clone(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLSIM_")}
    env["PYTHONPATH"] = str(clone)
    timings = []
    for command in readme_commands((clone / "README.md").read_text(encoding="utf-8")):
        argv = [sys.executable, "-m", "collsim", *shlex.split(command)[1:]]
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        timings.append((command, time.perf_counter() - start))
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, f"{command}:\n{proc.stderr[-3000:]}"
    print("\n".join(f"{seconds:6.1f} s  {command}" for command, seconds in timings))
    # what the sequence promises: the files it wrote
    for written in ("reports/8gpu/report.html", "reports/measured.csv", "reports/my-h100.yaml",
                    "build/cuda/Makefile", "reports/review-ll/review.html", "reports/8gpu/nccl_tuner.conf"):
        assert (clone / written).is_file(), written
    emitted = sorted(p.name for p in (clone / "build" / "cuda").iterdir() if p.is_dir())
    # every program: verify --all verified what emit --all needs
    assert emitted == sorted(f"{name}__{algorithm}" for name in list_protocols()
                             for algorithm in load_protocol(name).algorithms), emitted
