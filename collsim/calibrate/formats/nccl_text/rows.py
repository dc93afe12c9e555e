"""Result rows from the tokens of a table's lines: rows split over lines (an NCCL log record in between),
rows cut off, a missing empty redop, timestamps, and values that are not numbers."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collsim.calibrate.formats.nccl_text.recognise import is_num, is_value, row_start, to_float
from collsim.calibrate.formats.nccl_text.section import Section

__all__ = ["Warn", "feed_tokens", "flush_pending", "finish_row"]

#: ``warn(line, message)``: record a warning about ``line`` of the file.
Warn = Callable[[int | None, str], None]


def feed_tokens(sec: Section, no: int, tokens: list[str], warn: Warn) -> bool:
    """Feed tokens of a (possibly partial) row; True if they were consumed."""
    cols = sec.columns
    assert cols is not None
    if not tokens:
        return False
    if sec.pending is not None and not row_start(tokens):
        if all(is_value(x) or ":" in x or "-" in x for x in tokens):
            start, have = sec.pending
            have = have + tokens
            if len(have) >= cols.width or (cols.has_timestamp and len(have) >= cols.width - 2):
                sec.pending = None
                finish_row(sec, start, have, warn)
            else:
                sec.pending = (start, have)
            return True
        return False
    if not row_start(tokens):
        return False
    flush_pending(sec, warn)
    if cols.has_redop and len(tokens) == cols.width - 1:
        # nccl-tests < 2.13 alltoall prints an empty redop under its redop header
        at = [name for name, _ in cols.fields].index("redop")
        if at < len(tokens) and is_num(tokens[at]):
            tokens = tokens[:at] + [""] + tokens[at:]
    if len(tokens) == cols.width or (cols.has_timestamp and len(tokens) == cols.width - 2):
        finish_row(sec, no, tokens, warn)
    elif len(tokens) < cols.width:
        sec.pending = (no, tokens)
    else:
        warn(no, f"result row has {len(tokens)} fields, the header at line {cols.line} "
                      f"has {cols.width}: row skipped")
    return True


def flush_pending(sec: Section, warn: Warn) -> None:
    """Finish the row still waiting for its continuation (keep its out-of-place half, else drop it)."""
    if sec.pending is None:
        return
    start, have = sec.pending
    sec.pending = None
    cols = sec.columns
    assert cols is not None
    if len(cols.groups) == 2 and len(have) == cols.width - cols.group_width(1):
        # the in-place half never came: keep the out-of-place numbers
        finish_row(sec, start, have + ["N/A"] * cols.group_width(1), warn, partial=True)
        warn(start, "result row is cut off after its out-of-place columns: "
                         "kept without in-place numbers")
        return
    warn(start, f"incomplete result row ({len(have)} of {cols.width} fields) dropped")


def finish_row(sec: Section, no: int, tokens: list[str], warn: Warn, *, partial: bool = False) -> None:
    """Read one whole row's tokens by the section's columns into a raw row of the section."""
    cols = sec.columns
    assert cols is not None
    fields = cols.fields
    if len(tokens) != len(fields):
        if cols.has_timestamp and len(tokens) == len(fields) - 2:
            tokens = tokens + ["", ""]
        else:
            warn(no, f"result row has {len(tokens)} fields, expected {len(fields)}: row skipped")
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
                if not is_value(tok):
                    raise ValueError(tok)
                # N/A (validation off, or a half never printed) is absent; a printed "nan" time is a value
                row[f"{name}_{place}"] = None if name == "time" and tok.upper() == "N/A" else to_float(tok)
    except ValueError:
        warn(no, f"result row has a non-numeric value where the header at line {cols.line} "
                      "expects a number: row skipped")
        return
    sec.rows.append(row)
