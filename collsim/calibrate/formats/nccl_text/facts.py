"""Facts a whole file states, wherever they are printed: host names, ``NCCL_PROTO``/``NCCL_ALGO`` settings,
rank and node counts from NCCL's log, library versions, the programs run and failure messages."""
from __future__ import annotations

import re
from typing import Any

from collsim.calibrate.formats.common import program_mentions
from collsim.calibrate.formats.nccl_text.recognise import INFO_RE, NCCL_VERSION_RE, RANK_RE
from collsim.calibrate.formats.nccl_text.section import Line

__all__ = ["scan_facts"]

_ENV_RE = re.compile(r"\bNCCL_(PROTO|ALGO)\s*=\s*[\"']?([\w^,;:.+-]+)")
_SET_BY_ENV_RE = re.compile(r"\bNCCL_(PROTO|ALGO) set by environment to\s+[\"']?([\w^,;:.+-]+)")
_OFI_SET_RE = re.compile(r"Setting NCCL_(PROTO|ALGO) to\s+[\"']?([\w^,;:.+-]+)")
_NRANKS_RE = re.compile(r"\bn[Rr]anks\s+(\d+)")
_NNODES_RE = re.compile(r"\bnNodes\s+(\d+)")
_FAILURE_RES = (
    re.compile(r"Test (?:NCCL |CUDA |MPI )?failure"),
    re.compile(r"\bSegmentation fault\b|\bBus error\b|core dumped|\bAborted\b|terminate called"),
    re.compile(r"mpirun noticed that process|Primary job\s+terminated|exited on signal|srun: error"),
    re.compile(r"NCCL (?:WARN|ERROR).*(?:[Ff]ailure|[Ee]rror|[Tt]imeout|[Aa]bort)"),
    re.compile(r"^#\s*error:"),
    re.compile(r"\bCUDA error\b|\bNCCL error\b|out of memory", re.IGNORECASE),
)


def scan_facts(lines: list[Line]) -> tuple[list[str], dict[str, Any]]:
    """``(host names, facts)`` of every line: facts maps ``protocol``/``algorithm`` to ``(line, value)``
    settings, ``nranks``/``nnodes`` to counts, ``nccl_version`` to ``(line, stream, library, version)``,
    ``mentions`` to ``(line, collective)`` and ``failures`` to ``(line, stream, text)``."""
    info: dict[str, Any] = {"protocol": [], "algorithm": [], "nranks": [], "nnodes": [],
                            "nccl_version": [], "failures": [], "mentions": []}
    hosts: list[str] = []
    for ln in lines:
        t = ln.text
        if not t:
            continue
        m = RANK_RE.match(t)
        if m and m.group("host") and m.group("host") not in hosts:
            hosts.append(m.group("host"))
        im = INFO_RE.match(t)
        if im and im.group("host") and im.group("host") not in hosts:
            hosts.append(im.group("host"))

    for ln in lines:
        t = ln.text
        if not t:
            continue
        for rx in (_ENV_RE, _SET_BY_ENV_RE, _OFI_SET_RE):
            for m in rx.finditer(t):
                key = "protocol" if m.group(1) == "PROTO" else "algorithm"
                info[key].append((ln.no, m.group(2)))
        if "NCCL INFO" in t or "NCCL WARN" in t:
            for m in _NRANKS_RE.finditer(t):
                info["nranks"].append(int(m.group(1)))
            for m in _NNODES_RE.finditer(t):
                info["nnodes"].append(int(m.group(1)))
        vm = NCCL_VERSION_RE.search(t)
        if vm:
            info["nccl_version"].append((ln.no, ln.stream, vm.group(1), vm.group(2)))
        for name in program_mentions(t):
            info["mentions"].append((ln.no, name))
        for rx in _FAILURE_RES:
            if rx.search(t):
                info["failures"].append((ln.no, ln.stream, t))
                break
    return hosts, info
