"""The column model of a result table: which field each whitespace token of a row is, read from the header.

Every era of the table is read by its header, not by fixed columns (NCCL 1.x
with ``res``; nccl-tests v1 ``bytes N type op … res``; 2.0–2.12 ``size
count type [redop] [root] time algbw busbw error``; 2.13+ with ``#wrong``; the
newest with ``cputime`` and timestamps), and rows pasted without their header
get the layout their width implies.
"""
from __future__ import annotations

from dataclasses import dataclass

from collsim.calibrate.formats.nccl_text.recognise import is_int, is_num

__all__ = ["Columns", "build_columns", "synthetic_columns"]


@dataclass
class Columns:
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



def build_columns(tokens: list[str], line: int, titles: list[str]) -> Columns:
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
    return Columns(fields=fields, groups=placements[:max(ngroups, 0)], line=line, width=len(fields),
                    has_redop=has_redop, has_root=has_root, has_timestamp=has_timestamp,
                    cputime=cputime, era=era)


def synthetic_columns(tokens: list[str], line: int) -> Columns | None:
    """Column layout of a row pasted without its header (known layouts only)."""
    n = len(tokens)
    if n == 13 and not is_num(tokens[3]) and is_int(tokens[4]):
        names = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
    elif n == 12 and not is_num(tokens[3]):
        names = "size count type redop time algbw busbw error time algbw busbw error"
    elif n == 12 and is_int(tokens[3]):
        names = "size count type root time algbw busbw error time algbw busbw error"
    elif n == 11:
        names = "size count type time algbw busbw error time algbw busbw error"
    else:
        return None
    cols = build_columns(names.split(), line, [])
    cols.synthetic = True
    return cols
