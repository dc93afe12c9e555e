"""The lines of a file and the sections (one run's banner, rank lines, result table and footer) they form."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collsim.calibrate.formats.nccl_text.columns import Columns

__all__ = ["Line", "Section"]


@dataclass
class Line:
    no: int
    text: str  # prefixes removed, stripped
    stream: str



@dataclass
class Section:
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
    columns: Columns | None = None
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
    elided: bool = False  # a "..." line in the table: the paste left rows out
    end: int = 0
    parent: Section | None = None  # the table before, when this one has no banner of its own

    @property
    def has_table(self) -> bool:
        return self.columns is not None
