"""Compile an emitted program's sources with nvcc, warnings as errors, and check its kernel's PTX."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from collsim.emit import write_program
from collsim.emit.ptxcheck import check_ptx
from collsim.emit.toolchain import WERROR, find_nvcc


def build_and_check(emitted, directory: Path, sources: tuple[str, ...] = ("kernel.cu",)) -> str:
    """Write ``emitted`` to ``directory``, compile ``sources`` for sm_90 with -Werror, check the kernel's PTX
    against the plan (assert) and return the PTX; skip when nvcc is not installed."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (PATH, $NVCC or $CUDA_HOME): the compile check needs the CUDA toolkit")
    write_program(emitted, directory)
    for source in sources:
        cmd = [nvcc, "-O3", "-std=c++17", *WERROR, "-gencode", "arch=compute_90,code=sm_90", "-c", source,
               "-o", source.replace(".cu", ".o"), "-keep", "-keep-dir", str(directory)]
        proc = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    ptx = (directory / "kernel.ptx").read_text()
    report = check_ptx(emitted.plan, ptx)
    assert report.ok, report.summary()
    return ptx
