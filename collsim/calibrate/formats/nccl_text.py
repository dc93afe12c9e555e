"""nccl-tests text output, as people paste it.

Handles every era of the result table (NCCL 1.x in-tree tests with time in
ms and a ``res`` column; nccl-tests v1 ``bytes N type op … res``; 2.0–2.12
``size count type [redop] [root] time algbw busbw error``; 2.13+ with
``redop root … #wrong``; the newest with ``cputime``, per-iteration and
timestamp columns), read by header, not by fixed columns, plus the noise
around it: ``NCCL INFO``/``WARN`` lines (also when they split a row in two),
mpirun ``--tag-output`` / srun / pdsh / kubectl prefixes, indentation, ssh and
OpenMPI banners, shell prompts, several tables per file, and runs that crash
(rows kept, marked ``truncated``, with a warning naming the line).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from collsim.calibrate.formats.common import (
    REDUCTION_OPS,
    collective_candidates,
    collective_from_filename,
    decode_nccl_version_code,
    implied_time_unit,
    program_mentions,
    tolerance,
)
from collsim.calibrate.measurements import (
    canonical_algorithm,
    canonical_dtype,
    canonical_protocol,
)
from collsim.errors import InputError

__all__ = ["parse_text"]

# --------------------------------------------------------------------------
# line prefixes

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TAG_RE = re.compile(r"^\[(\d+),(\d+)\]<(?:stdout|stderr|stddiag)>:")
_TIMESTAMP_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+")
_POD_RE = re.compile(r"^\[pod/([^\]]*)\]\s?")
_COMPOSE_RE = re.compile(r"^([\w.-]+)\s+\|\s?")
_SRUN_RE = re.compile(r"^\s*(\d+):\s")
_PDSH_RE = re.compile(r"^([A-Za-z][\w.-]*):\s+(?=#|\d)")
_QUOTE_RE = re.compile(r"^>\s?")

# --------------------------------------------------------------------------
# recognisers

_INFO_RE = re.compile(
    r"(?P<host>[^\s:]*):(?P<pid>\d+):(?P<tid>\d+) \[[^\]]*\] (?:\S+:\d+ )?NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)\b ?(?P<msg>.*)$")
_NCCL_VERSION_RE = re.compile(r"\b(NCCL|RCCL) version (\S+)")
_COMPILED_WITH_RE = re.compile(r"NCCL Tests compiled with NCCL (\S+)")
_TESTS_VERSION_RE = re.compile(
    r"^#\s*nccl-tests version (\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?")
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_NTHREAD_RE = re.compile(r"^#?\s*nThread\s+\d+")
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?(?:\s+Pid\s+(?P<pid>\d+))?\s+"
    r"(?:on\s+(?P<host>\S+)\s+device\s+(?P<dev>\d+)|uses device\s+(?P<dev1>\d+))"
    r"\s*(?:\[(?P<bus>[^\]]*)\])?\s*(?P<name>.*?)\s*$")
_OOB_RE = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_AVG_RE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w*)")
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

_INT_RE = re.compile(r"^[+-]?\d+$")
_NUM_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:inf|nan)$", re.IGNORECASE)
_TIME_UNITS = {"(us)": "us", "(usec)": "us", "(µs)": "us", "(ms)": "ms", "(msec)": "ms",
               "(s)": "s", "(sec)": "s", "(ns)": "ns", "(nsec)": "ns"}
_BW_UNITS = {"(gb/s)": 1.0, "(mb/s)": 1e-3, "(tb/s)": 1e3}
_UNIT_TO_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "ns": 1e-3}


def _is_int(tok: str) -> bool:
    return bool(_INT_RE.match(tok))


def _is_num(tok: str) -> bool:
    return bool(_NUM_RE.match(tok))


def _is_value(tok: str) -> bool:
    return _is_num(tok) or tok.upper() == "N/A"


def _float(tok: str) -> float:
    if tok.upper() == "N/A":
        return math.nan
    return float(tok)


# --------------------------------------------------------------------------
# data structures


@dataclass
class _Line:
    no: int
    text: str  # prefixes removed, stripped
    stream: str


@dataclass
class _Columns:
    fields: list[tuple[str, int | None]]  # (field, group) in token order
    groups: list[str]  # placement of group i: "oop" | "ip"
    line: int
    width: int  # number of whitespace tokens of a full row
    has_redop: bool
    has_root: bool
    has_timestamp: bool
    cputime: bool
    era: str  # nccl1 | nccl-tests-v1 | nccl-tests-2.0-2.12 | nccl-tests-2.13+
    synthetic: bool = False

    def group_width(self, group: int) -> int:
        return sum(1 for _, g in self.fields if g == group)


@dataclass
class _Section:
    stream: str
    start: int
    banner: dict[str, Any] = field(default_factory=dict)
    banner_line: int | None = None
    ranks: list[dict[str, Any]] = field(default_factory=list)
    ranks_cut: bool = False
    nccl1_ranks: bool = False
    program: str = ""
    tests_version: str = ""
    library: str = ""
    library_version: str = ""
    library_code_version: str = ""
    columns: _Columns | None = None
    units: list[tuple[str, int]] = field(default_factory=list)  # (unit, line)
    bw_scale: float = 1.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    pending: tuple[int, list[str]] | None = None
    oob: int | None = None
    oob_failed: bool = False
    avg: float | None = None
    avg_failed: bool = False
    footer_line: int | None = None
    concluded: bool = False
    end: int = 0
    parent: _Section | None = None  # the table before, when this one has no banner of its own

    @property
    def has_table(self) -> bool:
        return self.columns is not None


# --------------------------------------------------------------------------


def _split_prefixes(raw: str) -> tuple[str, str]:
    """Remove launcher prefixes; return (text, stream key)."""
    text = _ANSI_RE.sub("", raw).replace("\r", "")
    stream = ""
    for _ in range(4):
        m = _TIMESTAMP_RE.match(text)
        if m:
            text = text[m.end():]
            continue
        m = _TAG_RE.match(text)
        if m:
            stream = f"rank{m.group(2)}"
            text = text[m.end():]
            continue
        m = _POD_RE.match(text)
        if m:
            stream = f"pod:{m.group(1)}"
            text = text[m.end():]
            continue
        m = _COMPOSE_RE.match(text)
        if m:
            stream = f"service:{m.group(1)}"
            text = text[m.end():]
            continue
        m = _QUOTE_RE.match(text)
        if m:
            text = text[m.end():]
            continue
        break
    m = _SRUN_RE.match(text)
    if m:
        stream = stream or f"task{m.group(1)}"
        text = text[m.end():]
    else:
        m = _PDSH_RE.match(text)
        if m and not text.lstrip().startswith("#"):
            stream = stream or f"host:{m.group(1)}"
            text = text[m.end():]
    return text.strip(), stream


def _header_tokens(text: str) -> list[str] | None:
    """Tokens of a result-table column header line, or None."""
    body = text[1:] if text.startswith("#") else text
    tokens = body.split()
    low = [t.lower() for t in tokens]
    if ("time" in low or "cputime" in low) and "algbw" in low and "busbw" in low:
        if low[0] in ("size", "bytes"):
            return tokens
    return None


def _hashless_meta(text: str) -> bool:
    """A banner, rank, title, units or column-header line printed without its '#'."""
    if _header_tokens(text) is not None or _RANK_RE.match("# " + text):
        return True
    low = text.lower()
    if low.startswith("(b)") and "(gb/s)" in low:
        return True
    if low.startswith("out-of-place") or low.startswith("using devices"):
        return True
    return bool(_TESTS_VERSION_RE.match("# " + text) or _STARTING_RE.match("# " + text)
                or _CONCLUDED_RE.match("# " + text))


def _build_columns(tokens: list[str], line: int, titles: list[str]) -> _Columns:
    fields: list[tuple[str, int | None]] = []
    group = -1
    has_redop = has_root = has_timestamp = cputime = False
    low = [t.lower() for t in tokens]
    for t in low:
        if t in ("size", "bytes"):
            fields.append(("size", None))
        elif t in ("count", "n", "elements"):
            fields.append(("count", None))
        elif t == "type":
            fields.append(("type", None))
        elif t in ("redop", "op"):
            fields.append(("redop", None))
            has_redop = True
        elif t == "root":
            fields.append(("root", None))
            has_root = True
        elif t in ("time", "cputime"):
            group += 1
            cputime = cputime or t == "cputime"
            fields.append(("time", group))
        elif t == "algbw":
            fields.append(("algbw", max(group, 0)))
        elif t == "busbw":
            fields.append(("busbw", max(group, 0)))
        elif t in ("#wrong", "wrong", "#wrongs", "nwrong"):
            fields.append(("nwrong", max(group, 0)))
        elif t in ("error", "res", "err", "errors"):
            fields.append(("error", max(group, 0)))
        elif t == "timestamp":
            fields.append(("timestamp", None))
            fields.append(("timestamp2", None))
            has_timestamp = True
        else:
            fields.append((f"extra:{t}", None if group < 0 else group))
    ngroups = group + 1
    placements: list[str] = []
    for title in titles:
        placements.append(title)
    if len(placements) < ngroups:
        default = ["oop", "ip"]
        placements = (placements + [p for p in default if p not in placements])[:ngroups]
    while len(placements) < ngroups:
        placements.append(f"extra{len(placements)}")
    if "res" in low or ("bytes" in low and "n" in low):
        era = "nccl-tests-v1"
    elif "#wrong" in low or "nwrong" in low:
        era = "nccl-tests-2.13+"
    else:
        era = "nccl-tests-2.0-2.12"
    return _Columns(fields=fields, groups=placements[:max(ngroups, 0)], line=line, width=len(fields),
                    has_redop=has_redop, has_root=has_root, has_timestamp=has_timestamp,
                    cputime=cputime, era=era)


def _synthetic_columns(tokens: list[str], line: int) -> _Columns | None:
    """Column layout of a row pasted without its header (known layouts only)."""
    n = len(tokens)
    if n == 13 and not _is_num(tokens[3]) and _is_int(tokens[4]):
        names = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
    elif n == 12 and not _is_num(tokens[3]):
        names = "size count type redop time algbw busbw error time algbw busbw error"
    elif n == 12 and _is_int(tokens[3]):
        names = "size count type root time algbw busbw error time algbw busbw error"
    elif n == 11:
        names = "size count type time algbw busbw error time algbw busbw error"
    else:
        return None
    cols = _build_columns(names.split(), line, [])
    cols.synthetic = True
    return cols


def _row_start(tokens: list[str]) -> bool:
    return len(tokens) >= 3 and _is_int(tokens[0]) and _is_int(tokens[1]) and not _is_value(tokens[2])


def _info_split(text: str, hostnames: list[str]) -> tuple[str, str] | None:
    """Split ``text`` around an NCCL INFO/WARN record: (text before it, the record)."""
    m = _INFO_RE.search(text)
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


# --------------------------------------------------------------------------


class _TextParser:
    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        self.lines: list[_Line] = []
        for no, raw in enumerate(text.split("\n"), start=1):
            body, stream = _split_prefixes(raw)
            self.lines.append(_Line(no, body, stream))
        self.sections: list[_Section] = []
        self.info: dict[str, Any] = {"protocol": [], "algorithm": [], "nranks": [], "nnodes": [],
                                     "nccl_version": [], "failures": [], "mentions": []}
        self.first_text_line = next((ln.no for ln in self.lines if ln.text), 1)

    def warn(self, line: int | None, message: str) -> None:
        where = f"{self.path}:{line}" if line else self.path
        self.warnings.append(f"{where}: {message}")

    # ---------------------------------------------------------- global scan
    def scan_global(self) -> None:
        hosts: list[str] = []
        for ln in self.lines:
            t = ln.text
            if not t:
                continue
            m = _RANK_RE.match(t)
            if m and m.group("host") and m.group("host") not in hosts:
                hosts.append(m.group("host"))
            im = _INFO_RE.match(t)
            if im and im.group("host") and im.group("host") not in hosts:
                hosts.append(im.group("host"))
        self.hostnames = hosts
        for ln in self.lines:
            t = ln.text
            if not t:
                continue
            for rx in (_ENV_RE, _SET_BY_ENV_RE, _OFI_SET_RE):
                for m in rx.finditer(t):
                    key = "protocol" if m.group(1) == "PROTO" else "algorithm"
                    self.info[key].append((ln.no, m.group(2)))
            if "NCCL INFO" in t or "NCCL WARN" in t:
                for m in _NRANKS_RE.finditer(t):
                    self.info["nranks"].append(int(m.group(1)))
                for m in _NNODES_RE.finditer(t):
                    self.info["nnodes"].append(int(m.group(1)))
            vm = _NCCL_VERSION_RE.search(t)
            if vm:
                self.info["nccl_version"].append((ln.no, ln.stream, vm.group(1), vm.group(2)))
            for name in program_mentions(t):
                self.info["mentions"].append((ln.no, name))
            for rx in _FAILURE_RES:
                if rx.search(t):
                    self.info["failures"].append((ln.no, ln.stream, t))
                    break

    # ---------------------------------------------------------- per stream
    def parse_streams(self) -> None:
        order: list[str] = []
        for ln in self.lines:
            if ln.stream not in order:
                order.append(ln.stream)
        for stream in order:
            self._parse_stream(stream, [ln for ln in self.lines if ln.stream == stream])

    def _new_section(self, stream: str, line: int, current: _Section | None) -> _Section:
        sec = _Section(stream=stream, start=line)
        if current is not None and current.stream == stream:
            current.end = max(current.end, line - 1)
        self.sections.append(sec)
        return sec

    def _parse_stream(self, stream: str, lines: list[_Line]) -> None:
        sec: _Section | None = None
        titles: list[str] = []
        last_no = lines[-1].no if lines else 0

        def need_section(no: int, *, banner: bool = False) -> _Section:
            nonlocal sec
            if sec is None or sec.concluded or sec.footer_line is not None or (
                    banner and (sec.has_table or sec.banner_line is not None)) or (
                    not banner and sec.has_table and sec.rows):
                sec = self._new_section(stream, no, sec)
            return sec

        for ln in lines:
            t = ln.text
            if not t:
                continue
            if not t.startswith("#") and _hashless_meta(t):
                # a '#' line whose '#' was lost (e.g. rendered as a Markdown heading)
                t = "# " + t
            # an NCCL INFO/WARN record, possibly glued to a partial result row
            split = _info_split(t, self.hostnames)
            if split is not None:
                before, _record = split
                before = before.strip()
                if before and sec is not None and sec.has_table and sec.footer_line is None:
                    self._row_tokens(sec, ln.no, before.split())
                continue
            if t.startswith("#") or _NTHREAD_RE.match(t) or _OOB_RE.match(t) or _AVG_RE.match(t):
                m = _TESTS_VERSION_RE.match(t)
                if m:
                    s = need_section(ln.no, banner=True)
                    s.banner_line = s.banner_line or ln.no
                    s.tests_version = m.group(1)
                    if m.group(3):
                        s.library_code_version = decode_nccl_version_code(int(m.group(3)))
                    continue
                m = _STARTING_RE.match(t)
                if m:
                    s = sec if (sec is not None and sec.tests_version and not sec.has_table
                                and not sec.program and sec.footer_line is None) else need_section(ln.no, banner=True)
                    s.banner_line = s.banner_line or ln.no
                    s.program = m.group(1)
                    continue
                m = _CONCLUDED_RE.match(t)
                if m:
                    if sec is not None:
                        sec.program = sec.program or m.group(1)
                        sec.concluded = True
                        sec.end = ln.no
                    continue
                if _NTHREAD_RE.match(t):
                    if sec is not None and not sec.has_table and sec.footer_line is None and not sec.banner:
                        s = sec
                    else:
                        s = need_section(ln.no, banner=True)
                    s.banner_line = s.banner_line or ln.no
                    s.banner = _parse_banner(t)
                    continue
                m = _RANK_RE.match(t)
                if m:
                    if sec is None or sec.has_table or sec.footer_line is not None:
                        sec = self._new_section(stream, ln.no, sec)
                    rank = {
                        "rank": int(m.group("rank")),
                        "host": m.group("host") or "",
                        "device": int(m.group("dev") or m.group("dev1") or 0),
                        "name": m.group("name").strip(),
                    }
                    if rank["name"].endswith("..."):
                        sec.ranks_cut = True
                        rank["name"] = rank["name"][:-3].strip()
                    if m.group("dev1") is not None:
                        sec.nccl1_ranks = True
                    sec.ranks.append(rank)
                    continue
                m = _COMPILED_WITH_RE.search(t)
                if m:
                    s = need_section(ln.no, banner=True) if sec is None else sec
                    s.library, s.library_version = "NCCL", s.library_version or m.group(1)
                    continue
                m = _OOB_RE.match(t)
                if m:
                    if sec is not None and sec.has_table:
                        sec.oob = int(m.group(1))
                        sec.oob_failed = m.group(2).upper() == "FAILED" or sec.oob > 0
                        sec.footer_line = sec.footer_line or ln.no
                        sec.end = ln.no
                        self._flush_pending(sec)
                    continue
                m = _AVG_RE.match(t)
                if m:
                    if sec is not None and sec.has_table:
                        try:
                            sec.avg = float(m.group(1))
                        except ValueError:
                            sec.avg = None
                        sec.avg_failed = m.group(2).upper() == "FAILED"
                        sec.footer_line = sec.footer_line or ln.no
                        sec.end = ln.no
                        self._flush_pending(sec)
                    continue
                low = t.lower()
                if "out-of-place" in low or ("in-place" in low and "algbw" not in low):
                    titles = []
                    for mm in re.finditer(r"out-of-place|in-place", low):
                        titles.append("oop" if mm.group(0) == "out-of-place" else "ip")
                    continue
                tokens = _header_tokens(t)
                if tokens is not None:
                    s = sec
                    if s is None or s.has_table or s.footer_line is not None:
                        prev = s
                        s = sec = self._new_section(stream, ln.no, s)
                        if prev is not None and prev.stream == stream and not s.ranks:
                            # a further table of the same run: inherit the run's facts
                            s.parent = prev
                    s.columns = _build_columns(tokens, ln.no, titles)
                    titles = []
                    continue
                if sec is not None and sec.has_table and not sec.rows and (
                        "(b)" in low or "(us)" in low or "(ms)" in low or "(gb/s)" in low):
                    for tok in t[1:].split():
                        unit = _TIME_UNITS.get(tok.lower())
                        if unit:
                            sec.units.append((unit, ln.no))
                        elif tok.lower() in _BW_UNITS:
                            sec.bw_scale = _BW_UNITS[tok.lower()]
                        elif tok.startswith("(") and tok.endswith("/s)"):
                            raise InputError(f"unsupported bandwidth unit {tok}", file=self.path, line=ln.no)
                    continue
                continue
            # not a comment line
            m = _NCCL_VERSION_RE.search(t)
            if m and not _is_int(t.split()[0]):
                s = sec if sec is not None and not sec.has_table else None
                if s is not None:
                    s.library, s.library_version = m.group(1), m.group(2)
                continue
            tokens = t.split()
            if sec is not None and sec.has_table and sec.footer_line is None:
                self._row_tokens(sec, ln.no, tokens)
            elif _row_start(tokens):
                cols = _synthetic_columns(tokens, ln.no)
                if cols is not None and all(_is_value(x) for x in tokens[5:]):
                    s = sec if (sec is not None and not sec.has_table and sec.footer_line is None) else None
                    if s is None:
                        s = sec = self._new_section(stream, ln.no, sec)
                    s.columns = cols
                    self.warn(ln.no, "result rows without a column header: assumed the "
                              f"{cols.era} layout ({cols.width} columns)")
                    self._row_tokens(s, ln.no, tokens)
        if sec is not None:
            self._flush_pending(sec)
            sec.end = max(sec.end, last_no)

    # ---------------------------------------------------------- rows
    def _row_tokens(self, sec: _Section, no: int, tokens: list[str]) -> bool:
        """Feed tokens of a (possibly partial) row; True if they were consumed."""
        cols = sec.columns
        assert cols is not None
        if not tokens:
            return False
        if sec.pending is not None and not _row_start(tokens):
            if all(_is_value(x) or ":" in x or "-" in x for x in tokens):
                start, have = sec.pending
                have = have + tokens
                if len(have) >= cols.width or (cols.has_timestamp and len(have) >= cols.width - 2):
                    sec.pending = None
                    self._finish_row(sec, start, have)
                else:
                    sec.pending = (start, have)
                return True
            return False
        if not _row_start(tokens):
            return False
        self._flush_pending(sec)
        if cols.has_redop and len(tokens) == cols.width - 1:
            # nccl-tests < 2.13 alltoall prints an empty redop under its redop header
            at = [name for name, _ in cols.fields].index("redop")
            if at < len(tokens) and _is_num(tokens[at]):
                tokens = tokens[:at] + [""] + tokens[at:]
        if len(tokens) == cols.width or (cols.has_timestamp and len(tokens) == cols.width - 2):
            self._finish_row(sec, no, tokens)
        elif len(tokens) < cols.width:
            sec.pending = (no, tokens)
        else:
            self.warn(no, f"result row has {len(tokens)} fields, the header at line {cols.line} "
                          f"has {cols.width}: row skipped")
        return True

    def _flush_pending(self, sec: _Section) -> None:
        if sec.pending is None:
            return
        start, have = sec.pending
        sec.pending = None
        cols = sec.columns
        assert cols is not None
        if len(cols.groups) == 2 and len(have) == cols.width - cols.group_width(1):
            # the in-place half never came: keep the out-of-place numbers
            self._finish_row(sec, start, have + ["N/A"] * cols.group_width(1), partial=True)
            self.warn(start, "result row is cut off after its out-of-place columns: "
                             "kept without in-place numbers")
            return
        self.warn(start, f"incomplete result row ({len(have)} of {cols.width} fields) dropped")

    def _finish_row(self, sec: _Section, no: int, tokens: list[str], *, partial: bool = False) -> None:
        cols = sec.columns
        assert cols is not None
        fields = cols.fields
        if len(tokens) != len(fields):
            if cols.has_timestamp and len(tokens) == len(fields) - 2:
                tokens = tokens + ["", ""]
            else:
                self.warn(no, f"result row has {len(tokens)} fields, expected {len(fields)}: row skipped")
                return
        row: dict[str, Any] = {"_line": no, "_partial": partial}
        try:
            for (name, group), tok in zip(fields, tokens):
                place = cols.groups[group] if group is not None and group < len(cols.groups) else None
                if name == "size":
                    row["size_bytes"] = int(tok)
                elif name == "count":
                    row["count"] = int(tok)
                elif name == "type":
                    row["dtype_raw"] = tok
                elif name == "redop":
                    row["redop_raw"] = tok
                elif name == "root":
                    row["root"] = int(tok)
                elif name in ("time", "algbw", "busbw", "nwrong", "error") and place in ("oop", "ip"):
                    if not _is_value(tok):
                        raise ValueError(tok)
                    row[f"{name}_{place}"] = _float(tok)
        except ValueError:
            self.warn(no, f"result row has a non-numeric value where the header at line {cols.line} "
                          "expects a number: row skipped")
            return
        sec.rows.append(row)

    # ---------------------------------------------------------- assembly
    def finish(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        # rank lines printed by other processes (old nccl-tests printed them from
        # every rank; with --tag-output they land on other streams) join the
        # first table that follows them
        tables = [s for s in self.sections if s.has_table]
        for orphan in [s for s in self.sections if s.ranks and not s.has_table and not s.banner
                       and not s.tests_version and tables]:
            host = next((t for t in tables if t.stream != orphan.stream and t.columns and t.columns.line > orphan.start),
                        None)
            if host is None:
                continue
            have = {r["rank"] for r in host.ranks}
            host.ranks.extend(r for r in orphan.ranks if r["rank"] not in have)
            host.ranks.sort(key=lambda r: r["rank"])
            orphan.ranks = []
        sections = [s for s in self.sections if s.has_table or s.banner or s.ranks or s.tests_version]
        if not sections:
            raise InputError(
                "not nccl-tests output: no result table header (# size count type … time algbw busbw) "
                "and no nccl-tests banner (# nThread …) found",
                file=self.path, line=self.first_text_line)
        out_rows: list[dict[str, Any]] = []
        sec_metas: list[dict[str, Any]] = []
        single = len([s for s in sections if s.has_table]) <= 1
        self.protocol = self._pick(self.info["protocol"], "protocol")
        self.algorithm = self._pick(self.info["algorithm"], "algorithm")
        for index, sec in enumerate(sections):
            meta = self._section_meta(sec, index, single)
            rows = self._section_rows(sec, meta, index)
            meta["rows"] = len(rows)
            out_rows.extend(rows)
            sec_metas.append(meta)
        # file-level meta: the first section with rows, else the first
        main = next((m for m in sec_metas if m["rows"]), sec_metas[0])
        meta = dict(main)
        meta["sections"] = sec_metas
        meta["rows"] = len(out_rows)
        meta["truncated"] = any(m["truncated"] for m in sec_metas)
        meta["wrong_rows"] = sum(1 for r in out_rows if r["wrong"])
        failures = [m["failure"] for m in sec_metas if m.get("failure")]
        meta["failure"] = failures[0] if failures else None
        return out_rows, meta

    def _pick(self, values: list[tuple[int, str]], kind: str) -> str:
        if not values:
            return ""
        canon = [(no, canonical_protocol(v) if kind == "protocol" else canonical_algorithm(v)) for no, v in values]
        distinct = sorted({v for _, v in canon})
        if len(distinct) > 1:
            self.warn(canon[-1][0], f"NCCL_{'PROTO' if kind == 'protocol' else 'ALGO'} is set more than once "
                                    f"({', '.join(distinct)}); using the last, {canon[-1][1]!r}")
        return canon[-1][1]

    def _section_meta(self, sec: _Section, index: int, single: bool) -> dict[str, Any]:
        parent = sec.parent
        cols = sec.columns
        banner = sec.banner or (parent.banner if parent is not None else {})
        ranks_list = sec.ranks or (parent.ranks if parent is not None else [])
        era = cols.era if cols else ("nccl-tests-2.13+" if banner.get("graph") is not None else "")
        if sec.nccl1_ranks or (parent is not None and parent.nccl1_ranks):
            era = "nccl1"
        elif era == "nccl-tests-v1" and not banner and not ranks_list:
            era = "nccl1"
        if sec.tests_version:
            era = "nccl-tests-" + sec.tests_version
        # ranks, GPUs, hosts
        ranks: int | None = None
        if ranks_list:
            ids = {r["rank"] for r in ranks_list}
            ranks = max(len(ids), max(ids) + 1)
            if sec.ranks_cut:
                expected = banner.get("nThread", 1) * banner.get("nGpus", 1)
                ranks = max(ranks, expected)
                self.warn(sec.start, "the rank list is cut off ('...'): rank count may be low")
        elif self.info["nranks"]:
            ranks = max(self.info["nranks"])
        elif banner.get("nGpus") is not None:
            # nThread × nGpus per process; processes as mpirun --tag-output numbers them
            procs = len({ln.stream for ln in self.lines if ln.stream.startswith("rank")}) or 1
            ranks = banner.get("nThread", 1) * banner["nGpus"] * procs
            self.warn(sec.banner_line, f"no rank lines: ranks = nThread×nGpus×processes = {ranks}"
                                       + ("" if procs > 1 else " (assumes one process)"))
        gpus: list[str] = []
        hosts: list[str] = []
        for r in ranks_list:
            if r["name"] and r["name"] not in gpus:
                gpus.append(r["name"])
            if r["host"] and r["host"] not in hosts:
                hosts.append(r["host"])
        if hosts:
            nodes: int | None = len(hosts)
        elif era == "nccl1" and ranks_list:
            nodes = 1  # NCCL 1.x tests are single-process
        elif self.info["nnodes"]:
            nodes = max(self.info["nnodes"])
        else:
            nodes = None
        # versions
        lib, lib_version = sec.library, sec.library_version
        if not lib_version and self.info["nccl_version"]:
            # the last version line before this table (same stream first), else the first one at all
            limit = cols.line if cols else sec.end
            versions = self.info["nccl_version"]
            before = [v for v in versions if v[0] <= limit]
            same = [v for v in before if v[1] == sec.stream]
            _, _, lib, lib_version = (same or before)[-1] if (same or before) else versions[0]
        if not lib_version and sec.library_code_version:
            lib_version = sec.library_code_version
        if not lib and parent is not None:
            lib, lib_version = parent.library, parent.library_version
        lib = lib or "NCCL"
        # collective
        collective, how = self._collective(sec, single)
        graph = banner.get("graph")
        if graph is not None:
            launch = "graph" if graph > 0 else "eager"
        elif banner or era in ("nccl1", "nccl-tests-v1"):
            launch, graph = "eager", 0
        else:
            launch = ""
        validation = banner.get("validation")
        failure = self._failure(sec)
        # a run is cut off when its footer never came; NCCL 1.x tests and rows
        # pasted without a header have no footer to wait for, so only a
        # failure line or a cut-off row marks them
        footerless = era == "nccl1" or (cols is not None and cols.synthetic)
        truncated = (sec.footer_line is None and not sec.concluded and not footerless) or (
            footerless and failure is not None)
        return {
            "section": index,
            "stream": sec.stream,
            "format": "nccl-tests-text",
            "era": era,
            "program": sec.program,
            "collective": collective,
            "collective_from": how,
            "gpus": gpus,
            "gpu": ", ".join(gpus),
            "gpu_count": len(ranks_list) or None,
            "ranks": ranks,
            "nodes": nodes,
            "hostnames": hosts,
            "library": lib,
            "nccl_version": lib_version,
            "nccl_tests_version": sec.tests_version or (parent.tests_version if parent is not None else ""),
            "protocol": self.protocol,
            "algorithm": self.algorithm,
            "graph": graph,
            "launch": launch,
            "validation": None if validation is None else validation > 0,
            "cputime": bool(cols and cols.cputime),
            "nthreads": banner.get("nThread"),
            "ngpus": banner.get("nGpus"),
            "min_bytes": banner.get("minBytes"),
            "max_bytes": banner.get("maxBytes"),
            "step": banner.get("step"),
            "warmup_iters": banner.get("warmup"),
            "iters": banner.get("iters"),
            "agg_iters": banner.get("agg"),
            "avg_busbw": sec.avg,
            "out_of_bounds": sec.oob,
            "header_line": cols.line if cols else None,
            "footer_line": sec.footer_line,
            "truncated": truncated,
            "failure": failure[1] if failure else None,
            "failure_line": failure[0] if failure else None,
        }

    def _failure(self, sec: _Section) -> tuple[int, str] | None:
        lo = sec.start
        hi = sec.end if sec.footer_line is None else sec.footer_line
        found = [(no, text) for no, stream, text in self.info["failures"] if lo <= no and (sec.footer_line is None or no <= hi)]
        if sec.footer_line is None:
            # a crash may print on another stream (stderr of another rank, mpirun)
            found = [(no, text) for no, stream, text in self.info["failures"] if no >= lo]
        if not found:
            return None
        tests = [f for f in found if "Test" in f[1] and "failure" in f[1]]
        return (tests or found)[0]

    def _collective(self, sec: _Section, single: bool) -> tuple[str, str]:
        if sec.program:
            name = program_mentions(sec.program + "_perf") or program_mentions(sec.program)
            if name:
                return name[0], "program"
        mentions = self.info["mentions"]
        end = sec.end if sec.end else 10**12
        top = sec.columns.line if sec.columns else end
        # the nearest mention before this table that no other table of the
        # same stream started after (the command line of this run) ...
        starts = [s.start for s in self.sections if s is not sec and s.stream == sec.stream and s.start < sec.start]
        floor = max(starts) if starts else 0
        before = [name for no, name in mentions if floor < no <= top]
        if before:
            return before[-1], "command line"
        # ... else one inside it (a failure backtrace names its source file)
        inside = [name for no, name in mentions if sec.start <= no <= end]
        if inside:
            return inside[0], "command line"
        if single and mentions:
            return mentions[0][1], "command line"
        name = collective_from_filename(self.path)
        if name:
            return name, "file name"
        return "", ""

    def _section_rows(self, sec: _Section, meta: dict[str, Any], index: int) -> list[dict[str, Any]]:
        cols = sec.columns
        if cols is None:
            if meta["truncated"]:
                msg = "the run ended before its result table"
                if meta["failure"]:
                    msg += f" (line {meta['failure_line']}: {meta['failure']})"
                self.warn(sec.start, msg + ": no rows")
            return []
        raw = sec.rows
        # time unit
        unit = self._time_unit(sec, meta)
        to_us = _UNIT_TO_US[unit]
        meta["time_unit"] = unit
        ranks = meta["ranks"]
        nccl1 = meta["era"] == "nccl1"
        rows_out: list[dict[str, Any]] = []
        for r in raw:
            dtype = canonical_dtype(r.get("dtype_raw", ""))
            redop_raw = (r.get("redop_raw") or "").lower()
            redop = "" if redop_raw in ("none", "-", "") else redop_raw
            row: dict[str, Any] = {
                "source": self.path,
                "source_line": r["_line"],
                "source_format": "nccl-tests-text",
                "section": index,
                "gpu": meta["gpu"],
                "ranks": ranks,
                "nodes": meta["nodes"],
                "collective": meta["collective"],
                "algorithm": meta["algorithm"],
                "protocol": meta["protocol"],
                "library": meta["library"],
                "library_version": meta["nccl_version"],
                "nccl_tests_version": meta["nccl_tests_version"],
                "dtype": dtype,
                "redop": redop,
                "root": r.get("root"),
                "size_bytes": r.get("size_bytes"),
                "count": r.get("count"),
                "launch": meta["launch"],
                "graph_launches": meta["graph"],
                "truncated": meta["truncated"] or r.get("_partial", False),
                "notes": "cputime" if meta["cputime"] else "",
            }
            reduction = redop in REDUCTION_OPS
            wrong_bits = []
            any_checked = False
            for place, suffix in (("oop", ""), ("ip", "_inplace")):
                t = r.get(f"time_{place}")
                row[f"time_us{suffix}"] = None if t is None or math.isnan(t) else (
                    round(t * to_us, 6) if to_us != 1.0 else t)
                alg, bus = r.get(f"algbw_{place}"), r.get(f"busbw_{place}")
                row[f"algbw_gbps{suffix}"] = None if alg is None else alg * sec.bw_scale
                row[f"busbw_gbps{suffix}"] = None if bus is None else bus * sec.bw_scale
                nw = r.get(f"nwrong_{place}")
                row[f"nwrong{suffix}"] = None if nw is None or math.isnan(nw) else int(round(nw))
                err = r.get(f"error_{place}")
                row[f"max_error{suffix}"] = None if err is None or math.isnan(err) else err
                if row[f"nwrong{suffix}"] is not None:
                    any_checked = True
                    if row[f"nwrong{suffix}"] > 0:
                        wrong_bits.append(f"#wrong={row[f'nwrong{suffix}']} ({'out-of-place' if place == 'oop' else 'in-place'})")
                if row[f"max_error{suffix}"] is not None:
                    any_checked = True
                    tol = tolerance(dtype, ranks, reduction=reduction, nccl1=nccl1)
                    if err is not None and err > tol:
                        wrong_bits.append(f"error={err:g} > {tol:g} ({'out-of-place' if place == 'oop' else 'in-place'})")
            validation = meta["validation"]
            row["validation"] = validation if validation is not None else (True if any_checked else None)
            row["wrong"] = bool(wrong_bits)
            if wrong_bits:
                row["notes"] = "; ".join(x for x in (row["notes"], *wrong_bits) if x)
                self.warn(r["_line"], f"size {row['size_bytes']}: {', '.join(wrong_bits)}: "
                                      "row flagged wrong (excluded by default)")
            rows_out.append(row)
        self._check_collective(sec, meta, rows_out)
        for row in rows_out:
            row["collective"] = meta["collective"]
        if meta["truncated"]:
            msg = f"the run ended before its footer after {len(rows_out)} row(s)"
            if meta["failure"]:
                msg += f" (line {meta['failure_line']}: {meta['failure']})"
            last = raw[-1]["_line"] if raw else cols.line
            self.warn(last, msg + ("; rows kept and marked truncated" if rows_out else ": no rows"))
        elif meta["failure"]:
            self.warn(meta["failure_line"], f"failure reported: {meta['failure']}")
        if sec.oob_failed:
            self.warn(sec.footer_line, f"nccl-tests reports {sec.oob} out-of-bounds (wrong) result(s)")
        if sec.avg_failed:
            self.warn(sec.footer_line, "nccl-tests reports the average bus bandwidth check FAILED")
        return rows_out

    def _time_unit(self, sec: _Section, meta: dict[str, Any]) -> str:
        cols = sec.columns
        assert cols is not None
        declared = {u for u, _ in sec.units}
        if len(declared) > 1:
            line = sec.units[0][1]
            raise InputError("inconsistent units: the column header gives times in "
                             + " and ".join(sorted(declared)), file=self.path, line=line)
        if declared:
            assumed = next(iter(declared))
        elif cols.era == "nccl-tests-v1" or meta["era"] == "nccl1":
            assumed = "ms"
        else:
            assumed = "us"
        fits: dict[str, str | None] = {}
        for place in ("oop", "ip"):
            points = [(r.get("size_bytes") or 0, r.get(f"time_{place}"),
                       None if r.get(f"algbw_{place}") is None else r[f"algbw_{place}"] * sec.bw_scale)
                      for r in sec.rows]
            fit, ratio = implied_time_unit(points)
            if ratio is None:
                continue
            fits[place] = fit
            if fit is None:
                self.warn(cols.line, f"algbw disagrees with size/time by a factor of {ratio:.3g} "
                                     f"({'out-of-place' if place == 'oop' else 'in-place'}); times kept as {assumed}")
        found = {f for f in fits.values() if f is not None}
        if len(found) > 1:
            raise InputError("inconsistent units: out-of-place times fit " + str(fits.get("oop"))
                             + " but in-place times fit " + str(fits.get("ip")),
                             file=self.path, line=sec.rows[0]["_line"] if sec.rows else cols.line)
        if found:
            data_unit = next(iter(found))
            if data_unit != assumed:
                if declared:
                    raise InputError(
                        f"inconsistent units: the header gives times in {assumed} but size/time "
                        f"matches algbw only with times in {data_unit}",
                        file=self.path, line=sec.units[0][1])
                self.warn(cols.line, f"times read as {data_unit} (size/time matches algbw), not {assumed}")
                return data_unit
        return assumed

    def _check_collective(self, sec: _Section, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        cols = sec.columns
        assert cols is not None
        empty = cols.has_redop and all(not r.get("redop_raw") for r in sec.rows)
        cands = collective_candidates(rows, meta["ranks"], has_redop=cols.has_redop, has_root=cols.has_root,
                                      empty_redop=empty)
        name = meta["collective"]
        line = cols.line
        if name:
            if cands is not None and name not in cands and cands:
                self.warn(line, f"the table looks like {' or '.join(sorted(cands))} (redop/root/size/busbw), "
                                f"not {name} (from the {meta['collective_from']}); kept {name}")
            return
        if cands and len(cands) == 1:
            meta["collective"] = next(iter(cands))
            meta["collective_from"] = "table shape"
            return
        choices = " or ".join(sorted(cands)) if cands else "unknown"
        self.warn(line, f"cannot tell which collective this table measures ({choices}); "
                        "collective left empty (name it with --collective)")


def _parse_banner(text: str) -> dict[str, Any]:
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


def parse_text(text: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Parse nccl-tests text output; see the module docstring."""
    parser = _TextParser(text, path)
    parser.scan_global()
    parser.parse_streams()
    rows, meta = parser.finish()
    return rows, meta, parser.warnings
