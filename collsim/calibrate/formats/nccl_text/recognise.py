"""What a line of nccl-tests output is: the patterns of banner, rank, header, footer and NCCL log lines,
and the token tests a result row is read with."""
from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "INFO_RE",
    "NCCL_VERSION_RE",
    "COMPILED_WITH_RE",
    "TESTS_VERSION_RE",
    "STARTING_RE",
    "CONCLUDED_RE",
    "NTHREAD_RE",
    "RANK_RE",
    "OOB_RE",
    "AVG_RE",
    "TIME_UNITS",
    "BW_UNITS",
    "UNIT_TO_US",
    "is_int",
    "is_num",
    "is_value",
    "to_float",
    "header_tokens",
    "hashless_meta",
    "row_start",
    "info_split",
    "parse_banner",
]

INFO_RE = re.compile(
    r"(?P<host>[^\s:]*):(?P<pid>\d+):(?P<tid>\d+) \[[^\]]*\] (?:\S+:\d+ )?NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)\b ?(?P<msg>.*)$")
NCCL_VERSION_RE = re.compile(r"\b(NCCL|RCCL) version (\S+)")
COMPILED_WITH_RE = re.compile(r"NCCL Tests compiled with NCCL (\S+)")
TESTS_VERSION_RE = re.compile(
    r"^#\s*nccl-tests version (\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?")
STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
NTHREAD_RE = re.compile(r"^#?\s*nThread\s+\d+")
RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?(?:\s+Pid\s+(?P<pid>\d+))?\s+"
    r"(?:on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)|uses device\s+(?P<dev1>\d+))"
    r"\s*(?:\[(?P<bus>[^\]]*)\])?\s*(?P<name>.*?)\s*$")
OOB_RE = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
AVG_RE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")

_INT_RE = re.compile(r"^[+-]?\d+$")
_NUM_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:inf|nan)$", re.IGNORECASE)
TIME_UNITS = {"(us)": "us", "(usec)": "us", "(µs)": "us", "(ms)": "ms", "(msec)": "ms",
               "(s)": "s", "(sec)": "s", "(ns)": "ns", "(nsec)": "ns"}
BW_UNITS = {"(gb/s)": 1.0, "(mb/s)": 1e-3, "(tb/s)": 1e3}
UNIT_TO_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "ns": 1e-3}


def is_int(tok: str) -> bool:
    return bool(_INT_RE.match(tok))


def is_num(tok: str) -> bool:
    return bool(_NUM_RE.match(tok))


def is_value(tok: str) -> bool:
    return is_num(tok) or tok.upper() == "N/A"


def to_float(tok: str) -> float:
    if tok.upper() == "N/A":
        return math.nan
    return float(tok)



def header_tokens(text: str) -> list[str] | None:
    """Tokens of a result-table column header line, or None."""
    body = text[1:] if text.startswith("#") else text
    tokens = body.split()
    low = [t.lower() for t in tokens]
    if ("time" in low or "cputime" in low) and "algbw" in low and "busbw" in low:
        if low[0] in ("size", "bytes"):
            return tokens
    return None


def hashless_meta(text: str) -> bool:
    """A banner, rank, title, units or column-header line printed without its '#'."""
    if header_tokens(text) is not None or RANK_RE.match("# " + text):
        return True
    low = text.lower()
    if low.startswith("(b)") and "(gb/s)" in low:
        return True
    if low.startswith("out-of-place") or low.startswith("using devices"):
        return True
    return bool(TESTS_VERSION_RE.match("# " + text) or STARTING_RE.match("# " + text)
                or CONCLUDED_RE.match("# " + text))



def row_start(tokens: list[str]) -> bool:
    return len(tokens) >= 3 and is_int(tokens[0]) and is_int(tokens[1]) and not is_value(tokens[2])


def info_split(text: str, hostnames: list[str]) -> tuple[str, str] | None:
    """Split ``text`` around an NCCL INFO/WARN record: (text before it, the record)."""
    m = INFO_RE.search(text)
    if not m:
        return None
    host = m.group("host")
    before = text[: m.start()]
    record = text[m.start():]
    if host:
        for known in sorted(hostnames, key=len, reverse=True):
            if host.endswith(known):
                cut = len(host) - len(known)
                before += host[:cut]
                record = record[cut:]
                break
        else:
            hm = re.match(r"^(.*?)([A-Za-z][\w.-]*)$", host)
            if hm and hm.group(1):
                before += hm.group(1)
                record = record[len(hm.group(1)):]
            elif not hm:
                before += host
                record = record[len(host):]
    return before, record



def parse_banner(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pats = {
        "nThread": r"nThread\s+(\d+)",
        "nGpus": r"nGpus\s+(\d+)",
        "minBytes": r"minBytes\s+(\d+)",
        "maxBytes": r"maxBytes\s+(\d+)",
        "warmup": r"warmup iters:\s*(\d+)",
        "iters": r"(?<!warmup )(?<!agg )\biters:\s*(\d+)",
        "agg": r"agg iters:\s*(\d+)",
        "validation": r"validation:\s*(\d+)",
        "graph": r"graph:\s*(\d+)",
        "unalign": r"unalign:\s*(\d+)",
    }
    for key, pat in pats.items():
        m = re.search(pat, text)
        if m:
            out[key] = int(m.group(1))
    m = re.search(r"step:\s*(\d+)\((\w+)\)", text)
    if m:
        out["step"] = f"{m.group(1)}({m.group(2)})"
    return out
