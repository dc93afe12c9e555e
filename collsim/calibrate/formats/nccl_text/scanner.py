"""The section state machine: each output stream's lines become sections (a run's banner, rank lines,
result table, footer), several per file, with rows of a table fed to :mod:`.rows`."""
from __future__ import annotations

import re

from collsim.calibrate.formats.common import decode_nccl_version_code
from collsim.calibrate.formats.nccl_text.columns import build_columns, synthetic_columns
from collsim.calibrate.formats.nccl_text.facts import scan_facts
from collsim.calibrate.formats.nccl_text.prefixes import split_prefixes
from collsim.calibrate.formats.nccl_text.recognise import (
    AVG_RE,
    BW_UNITS,
    COMPILED_WITH_RE,
    CONCLUDED_RE,
    NCCL_VERSION_RE,
    NTHREAD_RE,
    OOB_RE,
    RANK_RE,
    STARTING_RE,
    TESTS_VERSION_RE,
    TIME_UNITS,
    hashless_meta,
    header_tokens,
    info_split,
    is_int,
    is_value,
    parse_banner,
    row_start,
)
from collsim.calibrate.formats.nccl_text.rows import feed_tokens, flush_pending
from collsim.calibrate.formats.nccl_text.section import Line, Section
from collsim.errors import InputError

__all__ = ["StreamScanner", "ELISION_RE"]

#: A line that stands for lines left out of a paste: ``...``, ``…``, ``[...]``, ``(... 12 lines ...)``, ``<snip>``.
ELISION_RE = re.compile(
    r"^(?:\.{3,}|…+|[\[(<]\s*(?:\.{3,}|…|snip|snipped|truncated|omitted|elided)[^\])>]*[\])>])\s*$", re.IGNORECASE)


class StreamScanner:
    """Reads a file's lines, stream by stream, into :class:`Section` s of banner, rank lines, table and footer.

    ``warnings`` collects one line per problem, naming the file and line.
    """

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        self.lines: list[Line] = []
        for no, raw in enumerate(text.split("\n"), start=1):
            body, stream = split_prefixes(raw)
            self.lines.append(Line(no, body, stream))
        self.sections: list[Section] = []
        self.hostnames, self.info = scan_facts(self.lines)
        self.first_text_line = next((ln.no for ln in self.lines if ln.text), 1)

    def warn(self, line: int | None, message: str) -> None:
        where = f"{self.path}:{line}" if line else self.path
        self.warnings.append(f"{where}: {message}")

    def parse_streams(self) -> None:
        """Scan every output stream (in order of first appearance) into sections."""
        order: list[str] = []
        for ln in self.lines:
            if ln.stream not in order:
                order.append(ln.stream)
        for stream in order:
            self._parse_stream(stream, [ln for ln in self.lines if ln.stream == stream])

    def _new_section(self, stream: str, line: int, current: Section | None) -> Section:
        sec = Section(stream=stream, start=line)
        if current is not None and current.stream == stream:
            current.end = max(current.end, line - 1)
        self.sections.append(sec)
        return sec

    def _parse_stream(self, stream: str, lines: list[Line]) -> None:
        sec: Section | None = None
        titles: list[str] = []
        last_no = lines[-1].no if lines else 0

        def need_section(no: int, *, banner: bool = False) -> Section:
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
            if not t.startswith("#") and hashless_meta(t):
                # a '#' line whose '#' was lost (e.g. rendered as a Markdown heading)
                t = "# " + t
            # an NCCL INFO/WARN record, possibly glued to a partial result row
            split = info_split(t, self.hostnames)
            if split is not None:
                before, _record = split
                before = before.strip()
                if before and sec is not None and sec.has_table and sec.footer_line is None:
                    feed_tokens(sec, ln.no, before.split(), self.warn)
                continue
            if t.startswith("#") or NTHREAD_RE.match(t) or OOB_RE.match(t) or AVG_RE.match(t):
                m = TESTS_VERSION_RE.match(t)
                if m:
                    s = need_section(ln.no, banner=True)
                    s.banner_line = s.banner_line or ln.no
                    s.tests_version = m.group(1)
                    if m.group(3):
                        s.library_code_version = decode_nccl_version_code(int(m.group(3)))
                    continue
                m = STARTING_RE.match(t)
                if m:
                    s = sec if (sec is not None and sec.tests_version and not sec.has_table
                                and not sec.program and sec.footer_line is None) else need_section(ln.no, banner=True)
                    s.banner_line = s.banner_line or ln.no
                    s.program = m.group(1)
                    continue
                m = CONCLUDED_RE.match(t)
                if m:
                    if sec is not None:
                        sec.program = sec.program or m.group(1)
                        sec.concluded = True
                        sec.end = ln.no
                    continue
                if NTHREAD_RE.match(t):
                    if sec is not None and not sec.has_table and sec.footer_line is None and not sec.banner:
                        s = sec
                    else:
                        s = need_section(ln.no, banner=True)
                    s.banner_line = s.banner_line or ln.no
                    s.banner = parse_banner(t)
                    continue
                m = RANK_RE.match(t)
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
                m = COMPILED_WITH_RE.search(t)
                if m:
                    s = need_section(ln.no, banner=True) if sec is None else sec
                    s.library, s.library_version = "NCCL", s.library_version or m.group(1)
                    continue
                m = OOB_RE.match(t)
                if m:
                    if sec is not None and sec.has_table:
                        sec.oob = int(m.group(1))
                        sec.oob_failed = m.group(2).upper() == "FAILED" or sec.oob > 0
                        sec.footer_line = sec.footer_line or ln.no
                        sec.end = ln.no
                        flush_pending(sec, self.warn)
                    continue
                m = AVG_RE.match(t)
                if m:
                    if sec is not None and sec.has_table:
                        try:
                            sec.avg = float(m.group(1))
                        except ValueError:
                            sec.avg = None
                        sec.avg_failed = m.group(2).upper() == "FAILED"
                        sec.footer_line = sec.footer_line or ln.no
                        sec.end = ln.no
                        flush_pending(sec, self.warn)
                    continue
                low = t.lower()
                if "out-of-place" in low or ("in-place" in low and "algbw" not in low):
                    titles = []
                    for mm in re.finditer(r"out-of-place|in-place", low):
                        titles.append("oop" if mm.group(0) == "out-of-place" else "ip")
                    continue
                tokens = header_tokens(t)
                if tokens is not None:
                    s = sec
                    if s is None or s.has_table or s.footer_line is not None:
                        prev = s
                        s = sec = self._new_section(stream, ln.no, s)
                        if prev is not None and prev.stream == stream and not s.ranks:
                            # a further table of the same run: inherit the run's facts
                            s.parent = prev
                    s.columns = build_columns(tokens, ln.no, titles)
                    titles = []
                    continue
                if sec is not None and sec.has_table and not sec.rows and (
                        "(b)" in low or "(us)" in low or "(ms)" in low or "(gb/s)" in low):
                    for tok in t[1:].split():
                        unit = TIME_UNITS.get(tok.lower())
                        if unit:
                            sec.units.append((unit, ln.no))
                        elif tok.lower() in BW_UNITS:
                            sec.bw_scale = BW_UNITS[tok.lower()]
                        elif tok.startswith("(") and tok.endswith("/s)"):
                            raise InputError(f"unsupported bandwidth unit {tok}", file=self.path, line=ln.no)
                    continue
                continue
            # not a comment line
            if ELISION_RE.match(t):  # "...", "[...]", "<snip>": the paste left rows out
                if sec is not None and sec.has_table and sec.footer_line is None and not sec.elided:
                    sec.elided = True
                    self.warn(ln.no, f"{t!r} elides rows of the table: only the rows shown are read")
                continue
            m = NCCL_VERSION_RE.search(t)
            if m and not is_int(t.split()[0]):
                s = sec if sec is not None and not sec.has_table else None
                if s is not None:
                    s.library, s.library_version = m.group(1), m.group(2)
                continue
            tokens = t.split()
            if sec is not None and sec.has_table and sec.footer_line is None:
                feed_tokens(sec, ln.no, tokens, self.warn)
            elif row_start(tokens):
                cols = synthetic_columns(tokens, ln.no)
                if cols is not None and all(is_value(x) for x in tokens[5:]):
                    s = sec if (sec is not None and not sec.has_table and sec.footer_line is None) else None
                    if s is None:
                        s = sec = self._new_section(stream, ln.no, sec)
                    s.columns = cols
                    self.warn(ln.no, "result rows without a column header: assumed the "
                              f"{cols.era} layout ({cols.width} columns)")
                    feed_tokens(s, ln.no, tokens, self.warn)
        if sec is not None:
            flush_pending(sec, self.warn)
            sec.end = max(sec.end, last_no)
