"""How one line of a :class:`~collsim.ir.layout.LineLayout` becomes store/load instructions.

A layout says how wide one instruction is (``store_bytes``), so a line of
``lanes`` instructions is written by ``lanes`` threads, lane ``j`` covering
bytes ``[j*store_bytes, (j+1)*store_bytes)``. This module works out, per
lane, which elements of that instruction are data (and where the data sits
in the packed source) and which are flags or polled words. Nothing here
depends on which protocol uses the layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from collsim.errors import UnsupportedError
from collsim.ir.assumptions import store_is_one_access
from collsim.ir.layout import LineLayout, WordRole

__all__ = ["Element", "LanePattern", "LayoutPlan", "LaneRun", "lane_runs", "plan_layout", "EmitError", "NarrowForm",
           "narrow_form"]


class EmitError(UnsupportedError):
    """The emitter cannot print an IR construct (the message says which and why): a limitation, exit status 1."""


@dataclass(frozen=True)
class Element:
    """One scalar element of a lane's vector instruction."""

    role: str  # "data" or "flag"
    polled: bool
    #: for data elements: byte offset of this element's data within the lane's data run
    data_offset: int = 0


@dataclass(frozen=True)
class LanePattern:
    """Lanes whose instructions have the same element roles."""

    lanes: tuple[int, ...]
    elements: tuple[Element, ...]

    def condition(self, nlanes: int) -> str:
        """A C condition on ``lane`` that selects this pattern."""
        if len(self.lanes) == nlanes:
            return "true"
        mask = sum(1 << lane for lane in self.lanes)
        return f"((0x{mask:x}u >> lane) & 1u)"


@dataclass(frozen=True)
class LaneRun:
    """Consecutive elements of one lane's instruction with one role: a run of data elements (one vector
    reduction of the run's bytes) or one flag element.

    ``first`` is the run's first element, ``count`` its elements, ``byte`` its offset in the lane and
    ``data_offset`` (data runs) where its data sits in the lane's packed data.
    """

    role: str
    first: int
    count: int
    byte: int
    data_offset: int = 0


def lane_runs(pattern: LanePattern, elem_bytes: int) -> tuple[LaneRun, ...]:
    """The runs of ``pattern``'s elements: maximal runs of data elements, every flag element on its own.

    >>> from collsim.ir.layout import LineLayout, Word, WordRole
    >>> line = plan_layout(LineLayout("l", (Word(WordRole.DATA, 8),) * 15 + (Word(WordRole.FLAG, 8),), 16))
    >>> [(r.role, r.count, r.byte) for r in lane_runs(line.patterns[-1], 8)]
    [('data', 1, 0), ('flag', 1, 8)]
    """
    runs: list[LaneRun] = []
    for i, el in enumerate(pattern.elements):
        last = runs[-1] if runs else None
        if el.role == "data" and last is not None and last.role == "data" and last.first + last.count == i:
            runs[-1] = LaneRun("data", last.first, last.count + 1, last.byte, last.data_offset)
        else:
            runs.append(LaneRun(el.role, i, 1, i * elem_bytes, el.data_offset))
    return tuple(runs)


@dataclass(frozen=True)
class LayoutPlan:
    """Everything the emitter needs to know about one layout."""

    layout: LineLayout
    lanes: int
    elem_bytes: int  # 4 or 8: the scalar element width of one instruction
    n_elems: int  # elements per instruction
    lane_data_start: tuple[int, ...]  # data bytes of the line before each lane's data
    lane_data_bytes: tuple[int, ...]
    patterns: tuple[LanePattern, ...]
    #: a narrow layout whose store instruction a hardware assumption makes one access: its full-line stores and
    #: its loads at the word width are printed as one packed access of the whole instruction (PTX has no 16-byte
    #: vector of 8- or 16-bit elements on sm_90), see :func:`narrow_form`
    packed: bool = False

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def line_bytes(self) -> int:
        return self.layout.line_bytes

    @property
    def data_bytes(self) -> int:
        return self.layout.data_bytes

    @property
    def store_bytes(self) -> int:
        return self.layout.store_bytes

    @property
    def narrow(self) -> bool:
        """The layout's words are narrower than 32 bits (each held in a 32-bit C variable, masked)."""
        return self.elem_bytes < 4

    @property
    def ctype(self) -> str:
        return "unsigned int" if self.elem_bytes <= 4 else "unsigned long long"

    @property
    def constraint(self) -> str:
        return "r" if self.elem_bytes <= 4 else "l"

    @property
    def ptx_type(self) -> str:
        """The PTX vector/type suffix of one instruction, e.g. ``.v4.u32`` or ``.v2.u64``."""
        base = ".u32" if self.elem_bytes == 4 else ".u64"
        return base if self.n_elems == 1 else f".v{self.n_elems}{base}"

    def lane_data_start_c(self) -> str:
        """C expression for the data bytes before ``lane``'s data in its line."""
        if self.lanes == 1:
            return "0"
        starts = self.lane_data_start
        step = starts[1] - starts[0]
        if all(starts[j] == j * step for j in range(self.lanes)):
            return f"((long long)lane * {step})" if step else "0"
        expr = str(starts[-1])
        for j in range(self.lanes - 2, -1, -1):
            expr = f"(lane == {j} ? {starts[j]} : {expr})"
        return f"((long long){expr})"

    def has_data(self) -> bool:
        return self.layout.data_bytes > 0


def plan_layout(layout: LineLayout, assumptions: tuple[str, ...] = ()) -> LayoutPlan:
    """Work out the instruction-level shape of ``layout`` under the program's hardware ``assumptions``.

    >>> from collsim.ir.layout import LineLayout, Word, WordRole
    >>> pairs = LineLayout("pairs-16B", (Word(WordRole.DATA, 4), Word(WordRole.FLAG, 4)) * 2, 16)
    >>> plan = plan_layout(pairs)
    >>> plan.ptx_type, plan.lanes, [e.role for e in plan.patterns[0].elements]
    ('.v4.u32', 1, ['data', 'flag', 'data', 'flag'])
    """
    widths = {word.nbytes for word in layout.words}
    if len(widths) != 1:
        raise EmitError(
            f"layout {layout.name} mixes {sorted(widths)}-byte words; one instruction would split a word "
            "into halves, which changes its atomicity. Use one word width per layout."
        )
    elem_bytes = widths.pop()
    if layout.store_bytes % elem_bytes:
        raise EmitError(f"layout {layout.name}: {layout.store_bytes}-byte stores do not hold whole {elem_bytes}-byte words")
    n_elems = layout.store_bytes // elem_bytes
    lanes = layout.lanes
    if lanes > 32 or 32 % lanes:
        raise EmitError(f"layout {layout.name}: {lanes} lanes per line do not divide a warp of 32 threads")
    polled = set(layout.poll_words)
    per_lane: list[tuple[Element, ...]] = []
    starts: list[int] = []
    lane_bytes: list[int] = []
    data_before = 0
    for lane in range(lanes):
        elements = []
        starts.append(data_before)
        in_lane = 0
        for e in range(n_elems):
            index = lane * n_elems + e
            word = layout.words[index]
            if word.role is WordRole.DATA:
                elements.append(Element("data", index in polled, in_lane))
                in_lane += word.nbytes
            else:
                elements.append(Element("flag", index in polled))
        data_before += in_lane
        lane_bytes.append(in_lane)
        per_lane.append(tuple(elements))
    groups: dict[tuple[Element, ...], list[int]] = {}
    for lane, elements in enumerate(per_lane):
        groups.setdefault(elements, []).append(lane)
    patterns = tuple(LanePattern(tuple(ls), els) for els, ls in groups.items())
    packed = bool(layout.narrow_words) and store_is_one_access(layout.store_bytes, assumptions)
    return LayoutPlan(layout, lanes, elem_bytes, n_elems, tuple(starts), tuple(lane_bytes), patterns, packed)


@dataclass(frozen=True)
class NarrowForm:
    """How one lane's instruction over a narrow layout is printed: ``containers`` registers of
    ``container_bytes`` each hold its elements (element ``i`` at bits ``8 * (i * elem_bytes %
    container_bytes)`` of container ``i * elem_bytes // container_bytes``), moved by ``instructions``:
    ``(PTX type suffix, byte offset in the lane, first container, containers)``.

    ``kind`` is ``packed`` (one ``.b128``/``.b64``/``.b32`` access of the whole instruction, where an assumption
    makes it one access: the verifier joins its elements into one unit), ``wide`` (a load at the layout's
    ``load_bytes``, e.g. ``.v4.u32``) or ``native`` (vectors of the words' own width, ``.v4.b16``/``.v4.b8``, at
    most four elements each: nothing joins the elements, so nothing is lost by splitting them).
    """

    kind: str
    container_bytes: int
    containers: int
    instructions: tuple[tuple[str, int, int, int], ...]

    def place(self, index: int, elem_bytes: int) -> tuple[int, int]:
        """(container, bit shift) of element ``index``."""
        byte = index * elem_bytes
        return byte // self.container_bytes, 8 * (byte % self.container_bytes)


def narrow_form(lp: LayoutPlan, load: bool) -> NarrowForm:
    """The printed form of a full-lane store (``load=False``) or a load/poll of narrow layout ``lp``.

    >>> from collsim.ir.layout import LineLayout, Word, WordRole
    >>> half = LineLayout("h", (Word(WordRole.DATA, 2),) * 7 + (Word(WordRole.FLAG, 2),), 16)
    >>> narrow_form(plan_layout(half, ("store-16B-untorn",)), load=False).instructions
    (('.b128', 0, 0, 2),)
    >>> narrow_form(plan_layout(half), load=True).instructions
    (('.v4.b16', 0, 0, 4), ('.v4.b16', 8, 4, 4))
    """
    store = lp.store_bytes
    if load and lp.layout.load_bytes is not None:
        width = lp.layout.load_bytes
        count = store // width
        vec = f".v{count}" if count > 1 else ""
        return NarrowForm("wide", width, count, ((f"{vec}.u{width * 8}", 0, 0, count),))
    if lp.packed:
        width = min(store, 8)
        return NarrowForm("packed", width, store // width, ((f".b{store * 8}", 0, 0, store // width),))
    per = min(4, lp.n_elems)
    return NarrowForm("native", lp.elem_bytes, lp.n_elems,
                      tuple((f".v{per}.b{lp.elem_bytes * 8}" if per > 1 else f".b{lp.elem_bytes * 8}",
                             first * lp.elem_bytes, first, per) for first in range(0, lp.n_elems, per)))


def lcm(a: int, b: int) -> int:
    return a * b // gcd(a, b) if a and b else max(a, b)
