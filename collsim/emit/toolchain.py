"""Running nvcc on emitted code: PTX for the translation check, objects for compile tests."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from collsim.emit.plan import plan_for
from collsim.emit.ptxcheck import PtxReport, check_ptx
from collsim.errors import CollsimError
from collsim.ir.registry import load_protocol

__all__ = ["find_nvcc", "nvcc_flags", "compile_ptx", "compile_object", "check_directory", "NvccError"]

#: Warnings are errors, in device code (nvcc) and host code (the host compiler).
WERROR = ("-Werror", "all-warnings", "-Xcompiler", "-Wall,-Werror")


class NvccError(CollsimError):
    """nvcc failed; the message holds its output."""


def find_nvcc() -> str | None:
    """Path of nvcc: $NVCC, then PATH, then $CUDA_HOME/bin."""
    env = os.environ.get("NVCC")
    if env and Path(env).is_file():
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").is_file():
        return str(Path(home) / "bin" / "nvcc")
    return None


def nvcc_flags(arch: str) -> list[str]:
    return ["-O3", "-std=c++17", *WERROR, "-gencode", f"arch=compute_{arch[3:]},code={arch}"]


def _run(cmd: list[str], cwd: Path, timeout: float) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise NvccError(f"{' '.join(cmd)} failed in {cwd}:\n{proc.stdout}{proc.stderr}")


def compile_ptx(directory: Path, arch: str = "sm_90", *, nvcc: str | None = None, timeout: float = 600) -> str:
    """``nvcc -ptx kernel.cu`` (warnings as errors); returns the PTX text."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise NvccError("nvcc not found (set NVCC or CUDA_HOME, or put it on PATH)")
    out = directory / "kernel.ptx"
    _run([nvcc, "-O3", "-std=c++17", *WERROR, f"-arch={arch}", "-ptx", "kernel.cu", "-o", out.name], directory, timeout)
    return out.read_text(encoding="utf-8")


def compile_object(directory: Path, source: str, arch: str = "sm_90", *, nvcc: str | None = None,
                   keep_ptx: bool = False, timeout: float = 900) -> Path:
    """``nvcc -c`` one source of an emitted directory (runs ptxas, so illegal instructions fail here)."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise NvccError("nvcc not found")
    obj = Path(source).with_suffix(f".{arch}.o").name
    cmd = [nvcc, *nvcc_flags(arch), "-c", source, "-o", obj]
    if keep_ptx:
        cmd += ["-keep", "-keep-dir", "."]
    _run(cmd, directory, timeout)
    return directory / obj


def check_directory(directory: Path, protocol: str, algorithm: str, *, arch: str = "sm_90") -> PtxReport:
    """Compile an emitted directory's kernel to PTX and run the translation check on it."""
    plan = plan_for(load_protocol(protocol), algorithm)
    return check_ptx(plan, compile_ptx(Path(directory), arch))
