"""Emitted CUDA compiles with nvcc (warnings as errors) and its PTX holds every synchronization op of the IR.

Needs nvcc (no GPU). The default run compiles one program per layout kind
(LL 16-B lines, LL128 8-lane lines, sentinel float4 lines, plain lines with
counters and credits, vector atomics, barriers) for sm_90, one for sm_80, a
mutant with partial stores, and links the harness once; the full
protocol x algorithm x architecture matrix and every mutant are ``slow``.
Objects and PTX are cached by content hash in pytest's cache directory.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from collsim.emit import prepare
from collsim.emit.package import write_program
from collsim.emit.plan import plan_for
from collsim.emit.ptxcheck import check_ptx
from collsim.emit.toolchain import WERROR, find_nvcc
from collsim.ir.registry import list_mutants, list_protocols, load_protocol

NVCC = find_nvcc()
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, $NVCC or $CUDA_HOME): the CUDA compile and PTX "
                                            "checks need the CUDA toolkit, not a GPU"),
]

SHIPPED = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]
#: one program per layout kind / mechanism, compiled in the default run
DEFAULT = [("ll", "one-shot"), ("ll128", "one-shot"), ("sentinel", "two-shot"), ("simple", "ring"),
           ("atomic-counter", "one-shot"), ("barrier", "two-shot"),
           # multimem ld_reduce/st/red (16-B lines, a multicast barrier), and the LL128-atomic line's count word
           ("nvls", "two-shot"), ("ll128-atomic-nvls", "one-shot")]
DEFAULT_MUTANT = "mutant-ll-split-flag"
GRAPH_MUTANT = "mutant-ll-frozen-epoch"  # kernel arguments frozen at graph capture (ARG_ITER)
HOST_ACTIONS = str(Path(__file__).resolve().parents[1] / "examples/protocols/host_reset_barrier.py")
#: 16-bit words: a packed 16-byte store and load (store-16B-untorn), and the same line polled as 32-bit words
HALF_FLAG = str(Path(__file__).resolve().parents[1] / "examples/protocols/ll_half_flag.py")
HALF_FLAG_WORD_READ = str(Path(__file__).resolve().parents[1] / "examples/protocols/ll_half_flag_word_read.py")


def _nvcc_version() -> str:
    if NVCC is None:
        return ""
    return subprocess.run([NVCC, "--version"], capture_output=True, text=True).stdout


class Compiler:
    """Emits programs and compiles them once per content (cached across runs)."""

    def __init__(self, work: Path, cache: Path) -> None:
        self.work = work
        self.cache = cache
        self.version = _nvcc_version()
        self.jobs = max(1, min(4, os.cpu_count() or 1))

    def emit(self, name: str, algorithm: str, arch: str) -> tuple[Path, object]:
        emitted = prepare(name, algorithm, unverified=True, arch=arch)
        tag = Path(name).stem if name.endswith(".py") else name  # a protocol file: its name, not its path
        directory = self.work / f"{tag}__{algorithm}__{arch}"
        write_program(emitted, directory)
        return directory, emitted

    def _key(self, directory: Path, sources: tuple[str, ...], arch: str) -> str:
        h = hashlib.sha256(self.version.encode())
        h.update(arch.encode())
        h.update(" ".join(WERROR).encode())
        for name in sorted(p.name for p in directory.iterdir() if p.suffix in (".cu", ".cuh", ".h")):
            if name in sources or name.endswith((".h", ".cuh")):
                h.update(name.encode())
                h.update((directory / name).read_bytes())
        return h.hexdigest()[:24]

    def compile(self, directory: Path, source: str, arch: str) -> tuple[Path, Path | None]:
        """nvcc -c SOURCE for ARCH with -Werror; returns (object, ptx) paths (cached)."""
        key = self._key(directory, (source,), arch)
        stem = Path(source).stem
        cached = self.cache / key
        obj, ptx = cached / f"{stem}.o", cached / f"{stem}.ptx"
        if not obj.exists():
            build = directory / f"build-{stem}-{arch}"
            build.mkdir(exist_ok=True)
            cmd = [NVCC, "-O3", "-std=c++17", *WERROR, "-gencode", f"arch=compute_{arch[3:]},code={arch}",
                   "-c", f"../{source}", "-o", f"{stem}.o", "-keep", "-keep-dir", "."]
            proc = subprocess.run(cmd, cwd=build, capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, f"{' '.join(cmd)} in {build}:\n{proc.stdout}{proc.stderr}"
            cached.mkdir(parents=True, exist_ok=True)
            shutil.copy(build / f"{stem}.o", obj)
            ptx_files = list(build.glob(f"{stem}*.ptx"))
            if ptx_files:
                shutil.copy(ptx_files[0], ptx)
        return obj, (ptx if ptx.exists() else None)

    def many(self, jobs: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], tuple[Path, Path | None, object]]:
        emitted = {job: self.emit(*job) for job in jobs}
        with ThreadPoolExecutor(self.jobs) as pool:
            futures = {job: pool.submit(self.compile, emitted[job][0], "kernel.cu", job[2]) for job in jobs}
            return {job: (*futures[job].result(), emitted[job][1]) for job in jobs}


@pytest.fixture(scope="session")
def compiler(request, tmp_path_factory) -> Compiler:
    store = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cache = Path(store.mkdir("collsim-emit-nvcc")) if store is not None else tmp_path_factory.mktemp("nvcc-cache")
    return Compiler(tmp_path_factory.mktemp("emit-cuda"), cache)


@pytest.fixture(scope="session")
def default_build(compiler):
    jobs = [(n, a, "sm_90") for n, a in DEFAULT] + [("ll", "two-shot", "sm_80"), (DEFAULT_MUTANT, "one-shot", "sm_90"),
                                                    (GRAPH_MUTANT, "one-shot", "sm_90"), (HOST_ACTIONS, "one-shot", "sm_90"),
                                                    (HALF_FLAG, "one-shot", "sm_90"),
                                                    (HALF_FLAG_WORD_READ, "one-shot", "sm_90")]
    return compiler.many(jobs)


def _check(job, build) -> None:
    obj, ptx, emitted = build[job]
    assert obj.exists() and obj.stat().st_size > 0
    assert ptx is not None, "nvcc -keep left no PTX"
    report = check_ptx(emitted.plan, ptx.read_text())
    assert report.ok, report.summary()
    assert len(report.entries) == 3 * len(emitted.plan.kernels)  # fp32, bf16, int32 instantiations
    assert not [f for f in report.findings if f.severity == "note"], report.summary()


@pytest.mark.parametrize("name,algorithm", DEFAULT)
def test_kernel_compiles_for_sm90_and_ptx_holds_every_sync_op(name, algorithm, default_build):
    _check((name, algorithm, "sm_90"), default_build)


def test_kernel_compiles_for_sm80(default_build):
    _check(("ll", "two-shot", "sm_80"), default_build)


def test_mutant_with_partial_stores_compiles_and_checks(default_build):
    _check((DEFAULT_MUTANT, "one-shot", "sm_90"), default_build)


def test_kernel_arguments_frozen_at_graph_capture_compile(default_build):
    """ARG_ITER is the kernel argument the host sets per launch (frozen in a captured graph), ITER the counter."""
    _check((GRAPH_MUTANT, "one-shot", "sm_90"), default_build)
    kernel = default_build[(GRAPH_MUTANT, "one-shot", "sm_90")][2].files["kernel.cu"]
    assert "p.arg_iter" in kernel


def test_host_actions_compile_before_the_kernels(compiler, default_build):
    """A host memset is a memset kernel launched before the collective on the rank's stream; a host barrier is
    the harness draining every rank's stream before any launch (and no graph capture)."""
    _check((HOST_ACTIONS, "one-shot", "sm_90"), default_build)
    kernel = default_build[(HOST_ACTIONS, "one-shot", "sm_90")][2].files["kernel.cu"]
    assert "collsim_memset_u32<<<" in kernel and "err = host_actions(p, blocks, stream);" in kernel
    assert kernel.index("host_actions(p, blocks, stream)") < kernel.index("cudaLaunchKernelEx(&cfg")
    directory = compiler.work / "host_reset_barrier__one-shot__sm_90"
    main_obj, _ = compiler.compile(directory, "main.cu", "sm_90")
    assert main_obj.exists()


@pytest.mark.parametrize("path,load", [(HALF_FLAG, "ld.volatile.global.b128"),
                                       (HALF_FLAG_WORD_READ, "ld.volatile.global.v4.u32")])
def test_narrow_words_compile_and_the_ptx_holds_their_widths(path, load, default_build):
    job = (path, "one-shot", "sm_90")
    _check(job, default_build)
    ptx = default_build[job][1].read_text()
    # the 16-byte line of 16-bit words is one packed store (the assumption joins it); the poll loads it at the
    # writer's packing, or at the declared 32-bit load width
    assert "st.volatile.global.b128" in ptx and load in ptx
    weakened = ptx.replace(load, load.replace("volatile", "relaxed.gpu"))
    assert not check_ptx(default_build[job][2].plan, weakened).ok


def test_weakened_ptx_is_caught(default_build):
    _, ptx, emitted = default_build[("atomic-counter", "one-shot", "sm_90")]
    text = ptx.read_text()
    assert "red.release.sys.global.add.u64" in text
    report = check_ptx(emitted.plan, text.replace("red.release.sys.global.add.u64", "red.relaxed.sys.global.add.u64"))
    assert any("weaker" in str(f) for f in report.errors)
    _, ptx, emitted = default_build[("simple", "ring", "sm_90")]
    text = ptx.read_text()
    report = check_ptx(emitted.plan, re.sub(r"fence\.acq_rel\.sys;", "", text, count=1))
    assert not report.ok


def test_harness_links_and_prints_usage_without_a_gpu(compiler, default_build):
    directory = compiler.work / "ll__one-shot__sm_90"
    kernel_obj = default_build[("ll", "one-shot", "sm_90")][0]
    main_obj, _ = compiler.compile(directory, "main.cu", "sm_90")
    exe = directory / "collsim_bench"
    proc = subprocess.run([NVCC, "-gencode", "arch=compute_90,code=sm_90", str(kernel_obj), str(main_obj), "-o",
                           str(exe)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    usage = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and "--ranks" in usage.stdout and "--timeout-ms" in usage.stdout
    bad = subprocess.run([str(exe), "--threads", "33"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "multiple of 32" in bad.stderr


def test_multimem_ptx_is_what_the_isa_allows_and_weakening_it_is_caught(default_build):
    _, ptx, emitted = default_build[("nvls", "two-shot", "sm_90")]
    text = ptx.read_text()
    for instruction in ("multimem.ld_reduce.global.add.v4.f32", "multimem.ld_reduce.global.add.acc::f32.v4.bf16x2",
                        "multimem.st.global.v4.f32", "multimem.red.release.sys.global.add.u32"):
        assert instruction in text, instruction
    report = check_ptx(emitted.plan, text.replace("multimem.red.release.sys", "multimem.red.relaxed.sys"))
    assert any("weaker" in str(f) for f in report.errors)
    _, ptx, emitted = default_build[("ll128-atomic-nvls", "one-shot", "sm_90")]
    text = ptx.read_text()
    assert "multimem.red.relaxed.sys.global.add.v2.f32" in text and "multimem.red.relaxed.sys.global.add.u64" in text
    report = check_ptx(emitted.plan, text.replace("add.v2.f32", "add.v4.f32", 1))
    assert any("lane shapes" in str(f) for f in report.errors)


def test_multicast_harness_links_and_creates_multicast_objects(compiler, default_build):
    directory = compiler.work / "nvls__two-shot__sm_90"
    main = (directory / "main.cu").read_text()
    for call in ("cuMulticastCreate", "cuMulticastAddDevice", "cuMulticastBindMem", "cuMulticastGetGranularity",
                 "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED", "not supported on this device"):
        assert call in main, call
    kernel_obj = default_build[("nvls", "two-shot", "sm_90")][0]
    main_obj, _ = compiler.compile(directory, "main.cu", "sm_90")
    exe = directory / "collsim_bench"
    proc = subprocess.run([NVCC, "-gencode", "arch=compute_90,code=sm_90", str(kernel_obj), str(main_obj), "-o",
                           str(exe)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr  # the driver API is looked up at run time: no -lcuda
    usage = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and "--ranks" in usage.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")
def test_makefile_refuses_an_arch_the_program_cannot_use(compiler):
    directory, _ = compiler.emit("atomic-counter", "one-shot", "sm_90")
    proc = subprocess.run(["make", "-n", "ARCH=sm_80"], cwd=directory, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "cannot be built for sm_80" in proc.stderr
    ok = subprocess.run(["make", "-n"], cwd=directory, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "-Werror all-warnings" in ok.stdout and "code=sm_90" in ok.stdout


# ---------------------------------------------------------------------------
# The full matrix (slow)
# ---------------------------------------------------------------------------
def _full_jobs() -> list[tuple[str, str, str]]:
    """Every shipped program for sm_90 and sm_80, every mutant for sm_90 (sm_80 jobs that need sm_90 skip)."""
    jobs = [(name, algorithm, arch) for name, algorithm in SHIPPED for arch in ("sm_90", "sm_80")]
    for mutant in list_mutants():
        for algorithm in load_protocol(mutant).algorithms:
            jobs.append((mutant, algorithm, "sm_90"))
    return jobs


def _buildable(job: tuple[str, str, str]) -> bool:
    return not (job[2] == "sm_80" and plan_for(load_protocol(job[0]), job[1]).min_sm >= 90)


@pytest.fixture(scope="session")
def full_build(compiler):
    return compiler.many([job for job in _full_jobs() if _buildable(job)])


@pytest.mark.slow
@pytest.mark.parametrize("job", _full_jobs(), ids=lambda j: "-".join(j))
def test_full_matrix_compiles_and_checks(job, full_build):
    if not _buildable(job):
        pytest.skip(f"{job[0]}/{job[1]} uses vector red/atom or multimem, which need sm_90")
    _check(job, full_build)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")
def test_generated_makefile_builds(compiler):
    directory, _ = compiler.emit("simple", "one-shot", "sm_90")
    proc = subprocess.run(["make", "-j2", "all", "ptx"], cwd=directory, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (directory / "collsim_bench").exists() and (directory / "kernel.ptx").exists()
