"""Events: the language every memory-model query is asked in.

A *program* is a finite set of *events* per thread, already unrolled: no loops,
no registers, no instructions. Front ends (the litmus reader in
:mod:`collsim.verify.litmus`, the protocol verifier) lower their own programs
to events; the models in :mod:`collsim.verify.models` decide which executions
of those events are allowed.

Event kinds
-----------
``R``
    a read of one scalar location. Its value is the z3 constant
    :meth:`Program.value_var` ``(eid)``; later events may use that constant in
    their values and guards (that is how data and control flow are written).
``W``
    a write of ``value`` (an int or a z3 term over earlier reads' values).
``RMW``
    an atomic read-modify-write (``atom``; with ``returns_value=False`` a
    ``red``). It reads like ``R`` (its read value is ``value_var(eid)``) and
    writes :func:`rmw_result` of the read value. A ``cas`` that fails writes
    nothing and behaves as a plain read.
``F``
    a fence: ``sem`` is ``"acq_rel"`` or ``"sc"`` (``"acquire"`` and
    ``"release"`` are accepted for the PTX 8.6 split fences; ``"proxy_alias"``
    is ``fence.proxy.alias``).
``BAR``
    a CTA barrier (``bar.sync``; ``bar.arrive`` with ``bar_arrive=True``).

Memory locations
----------------
``loc`` names one scalar element of at most 8 bytes; two events either access
the same element or disjoint ones (no partial overlap). A vector access is
several events, one per element, in the same thread with consecutive
``po_index`` values (PTX ISA §8.2.4: vector accesses are "a set of equivalent
memory operations with a scalar data type, executed in an unspecified order").
``vloc`` is the virtual address used to reach ``loc``; it defaults to ``loc``
and only differs for generic-proxy aliases (two virtual addresses mapped to one
physical location, whose accesses are not ordered by causality without a proxy
fence).

Qualifiers
----------
``sem`` is ``"weak"`` (plain ``ld``/``st``), ``"relaxed"``, ``"acquire"``,
``"release"``, ``"acq_rel"`` or ``"sc"``. ``scope`` is ``"cta"``, ``"gpu"`` or
``"sys"`` and is required for every strong access and fence. ``.volatile`` is
``sem="relaxed", scope="sys"`` (PTX ISA §8.4.2); :func:`volatile` spells that.

Control flow, dependencies and spin loops
-----------------------------------------
``guard`` is a z3 Bool over earlier reads' values: the event executes exactly
when it is true (default: always). ``deps`` names the reads the event depends
on (address, data or control dependency); reads that occur in ``value``,
``operand``, ``compare``, ``bar_id`` or ``guard`` are added automatically. The
PTX model uses dependencies only for No-Thin-Air (``acyclic(rf | dep)``).

Only executions in which every thread finishes count. A spin loop
"wait until ``x == v``" is lowered to *one* read ``R`` of ``x`` (the read that
exits the loop) plus the assumption ``value_var(R) == v`` in
:attr:`Program.assumptions`; every later event of that thread lists ``R`` in
``deps`` (a control dependency: it runs only once the loop has exited), so
load-buffering cycles through polls are thin-air and forbidden.
:meth:`ProgramBuilder.wait_until` does all three.

Single-copy-atomic groups
-------------------------
PTX guarantees atomicity per scalar element only. A hardware assumption such
as "an 8-byte ``st.v2.u32`` is not torn" is stated with ``atomic_group``:

* writes with the same ``atomic_group`` (same thread, one instruction) form a
  *write group*;
* reads with the same ``atomic_group`` (the element reads of one load
  instruction) form a *read group*.

For every read group and write group, the reads of the read group that access
locations the write group writes either all read from that write group or none
does: a load never sees the group half old, half new. Without the group the
elements are independent and a torn observation is allowed.

Barriers
--------
Barrier events of one CTA match when they have the same ``bar_instance`` (the
static identity of the barrier call, e.g. its number along the program) and,
if both give one, the same ``bar_id`` (the hardware barrier resource, an int or
a z3 term). Without ``bar_quorum`` a barrier completes once every matching
barrier event of its CTA has been reached; with ``bar_quorum=q`` it completes
once at least ``q`` have been reached, and a set of at least ``q`` of them
(chosen by the solver) synchronises with every participant. A thread stuck at
a barrier that never completes does not finish, so that execution does not
count. ``bar.arrive`` synchronises with later ``bar.sync`` but does not wait.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Union

import z3

from collsim.errors import InputError

__all__ = [
    "Kind",
    "Sem",
    "Scope",
    "KINDS",
    "SEMS",
    "SCOPES",
    "RMW_OPS",
    "Value",
    "Event",
    "Placement",
    "Program",
    "ProgramBuilder",
    "rmw_result",
    "volatile",
    "read_vars_in",
    "value_const",
]

Kind = Literal["R", "W", "RMW", "F", "BAR"]
Sem = Literal["weak", "relaxed", "acquire", "release", "acq_rel", "sc"]
Scope = Literal["cta", "gpu", "sys"]

KINDS: tuple[str, ...] = ("R", "W", "RMW", "F", "BAR")
SEMS: tuple[str, ...] = ("weak", "relaxed", "acquire", "release", "acq_rel", "sc")
SCOPES: tuple[str, ...] = ("cta", "gpu", "sys")
#: Fence semantics; ``proxy_alias`` is ``fence.proxy.alias`` (orders accesses
#: made through different virtual aliases of one location; not a memory fence).
FENCE_SEMS: tuple[str, ...] = ("acquire", "release", "acq_rel", "sc", "proxy_alias")
#: Operations of an RMW event (``cas`` also takes ``compare``).
RMW_OPS: tuple[str, ...] = (
    "add", "sub", "mul", "div", "exch", "cas", "min", "max", "and", "or", "xor", "inc", "dec",
)

#: A value: a Python int or a z3 arithmetic term (Int, or BitVec of the
#: program's width) over read values.
Value = Union[int, z3.ExprRef]

_VALUE_PREFIX = "val!"
_FINAL_PREFIX = "final!"


@dataclass(frozen=True)
class Event:
    """One event of an unrolled program. See the module docstring.

    Parameters
    ----------
    eid : str
        Unique, readable name (``"r0.t0.i1.st_flag[2]"``); z3 variables are
        named after it.
    thread : str
        Thread id; must have a :class:`Placement` in the program.
    kind : ``"R" | "W" | "RMW" | "F" | "BAR"``
    po_index : int
        Position in the thread's program order (unique per thread).
    loc : str, optional
        Physical location (one scalar element) of R, W and RMW events.
    sem, scope
        Qualifiers (see module docstring). Fences: ``sem`` in
        ``acq_rel | sc`` (or ``acquire | release``).
    value : int or z3 term
        W: the value written.
    rmw_op, operand, compare
        RMW: the operation (one of :data:`RMW_OPS`), its operand and, for
        ``cas``, the compare value. The written value is
        ``rmw_result(rmw_op, old, operand, compare)``. Alternatively ``value``
        may be a function of the read value returning the new value, or a
        pair ``(new value, z3 Bool: whether it writes)``; list any other reads
        it uses in ``deps``.
    returns_value : bool
        RMW: False for ``red`` (no result register; its read is not a read
        for acquire patterns).
    guard : z3 Bool or bool
        The event executes iff ``guard`` holds.
    deps : frozenset of str
        Eids of reads this event depends on (address/data/control).
    atomic_group : str, optional
        Read or write group id for single-copy atomicity (module docstring).
    vloc : str, optional
        Virtual address (generic-proxy alias); defaults to ``loc``.
    bar_instance, bar_id, bar_quorum, bar_arrive
        BAR: static barrier identity, resource id (int or z3 term), thread
        count, and whether this is ``bar.arrive``.
    label : str
        Human-readable text for counterexamples (e.g. ``"st.relaxed.sys [flag], 1"``).
    """

    eid: str
    thread: str
    kind: str
    po_index: int
    loc: str | None = None
    sem: str = "weak"
    scope: str | None = None
    value: Any = None
    rmw_op: str | None = None
    operand: Any = None
    compare: Any = None
    returns_value: bool = True
    guard: Any = True
    deps: frozenset[str] = frozenset()
    atomic_group: str | None = None
    vloc: str | None = None
    bar_instance: Any = None
    bar_id: Any = None
    bar_quorum: Any = None
    bar_arrive: bool = False
    label: str = ""

    # -- classification -----------------------------------------------------
    @property
    def is_read(self) -> bool:
        """R or RMW."""
        return self.kind in ("R", "RMW")

    @property
    def is_write(self) -> bool:
        """W or RMW (a failing ``cas`` writes nothing at run time)."""
        return self.kind in ("W", "RMW")

    @property
    def is_memory(self) -> bool:
        return self.kind in ("R", "W", "RMW")

    @property
    def is_strong(self) -> bool:
        """Fences and every non-weak memory access (PTX ISA: strong operations)."""
        if self.kind == "F":
            return True
        return self.is_memory and self.sem != "weak"

    @property
    def virtual_loc(self) -> str | None:
        return self.vloc if self.vloc is not None else self.loc

    def text(self) -> str:
        """The label, or a generated one."""
        if self.label:
            return self.label
        q = "" if self.sem == "weak" and self.kind != "F" else f".{self.sem}"
        s = f".{self.scope}" if self.scope else ""
        if self.kind == "R":
            return f"ld{q}{s} [{self.virtual_loc}]"
        if self.kind == "W":
            return f"st{q}{s} [{self.virtual_loc}], {_show(self.value)}"
        if self.kind == "RMW" and callable(self.value):
            return f"{'atom' if self.returns_value else 'red'}{q}{s}.custom [{self.virtual_loc}]"
        if self.kind == "RMW":
            name = "atom" if self.returns_value else "red"
            extra = f", {_show(self.compare)}" if self.rmw_op == "cas" else ""
            return f"{name}{q}{s}.{self.rmw_op} [{self.virtual_loc}]{extra}, {_show(self.operand)}"
        if self.kind == "F":
            return f"fence.{self.sem}{s}"
        mode = "arrive" if self.bar_arrive else "sync"
        bid = "" if self.bar_id is None else f", id={_show(self.bar_id)}"
        quorum = "" if self.bar_quorum is None else f", n={_show(self.bar_quorum)}"
        return f"bar.cta.{mode} {self.bar_instance}{bid}{quorum}"


def _show(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, z3.ExprRef):
        text = str(v)
        return text if len(text) <= 40 else text[:37] + "..."
    return str(v)


def volatile() -> dict[str, str]:
    """Qualifiers of ``.volatile``: ``relaxed`` at ``sys`` scope (PTX ISA §8.4.2)."""
    return {"sem": "relaxed", "scope": "sys"}


@dataclass(frozen=True)
class Placement:
    """Where a thread runs: CTA ``cta`` of GPU ``gpu`` (CTA ids are per GPU)."""

    cta: int
    gpu: int = 0

    def includes(self, scope: str | None, other: "Placement") -> bool:
        """Whether ``scope`` seen from this thread includes a thread at ``other``."""
        if scope == "sys":
            return True
        if scope == "gpu":
            return self.gpu == other.gpu
        if scope == "cta":
            return self.gpu == other.gpu and self.cta == other.cta
        return False


def value_const(eid: str, sort: z3.SortRef) -> z3.ExprRef:
    """The z3 constant for the value read by ``eid`` (same as :meth:`Program.value_var`)."""
    return z3.Const(_VALUE_PREFIX + eid, sort)


def read_vars_in(term: Any) -> set[str]:
    """Eids of the reads whose value variables occur in ``term``."""
    if not isinstance(term, z3.ExprRef):
        return set()
    found: set[str] = set()
    seen: set[int] = set()
    stack = [term]
    while stack:
        t = stack.pop()
        key = t.get_id()
        if key in seen:
            continue
        seen.add(key)
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = t.decl().name()
            if name.startswith(_VALUE_PREFIX):
                found.add(name[len(_VALUE_PREFIX):])
        else:
            stack.extend(t.children())
    return found


def rmw_result(op: str, old: z3.ExprRef, operand: z3.ExprRef, compare: z3.ExprRef | None = None):
    """``(new_value, writes)`` of an RMW: the value written and whether it writes.

    ``writes`` is False only for a failing ``cas``. ``inc``/``dec`` follow
    PTX (``inc``: ``old >= operand ? 0 : old + 1``; ``dec``:
    ``old == 0 or old > operand ? operand : old - 1``), unsigned on bit-vectors.
    """
    bv = z3.is_bv(old)
    if op == "add":
        return old + operand, z3.BoolVal(True)
    if op == "sub":
        return old - operand, z3.BoolVal(True)
    if op == "mul":
        return old * operand, z3.BoolVal(True)
    if op == "div":
        return (z3.UDiv(old, operand) if bv else old / operand), z3.BoolVal(True)
    if op == "exch":
        return operand, z3.BoolVal(True)
    if op == "cas":
        if compare is None:
            raise InputError("cas needs a compare value", field="compare")
        return z3.If(old == compare, operand, old), old == compare
    if op in ("min", "max"):
        less = z3.ULT(old, operand) if bv else old < operand
        return (z3.If(less, old, operand) if op == "min" else z3.If(less, operand, old)), z3.BoolVal(True)
    if op in ("and", "or", "xor"):
        if not bv:
            raise InputError(f"rmw op '{op}' needs bit-vector values (Program(value_bits=...))",
                             field="rmw_op")
        fn = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[op]
        return fn(old, operand), z3.BoolVal(True)
    if op == "inc":
        ge = z3.UGE(old, operand) if bv else old >= operand
        return z3.If(ge, 0, old + 1), z3.BoolVal(True)
    if op == "dec":
        gt = z3.UGT(old, operand) if bv else old > operand
        return z3.If(z3.Or(old == 0, gt), operand, old - 1), z3.BoolVal(True)
    raise InputError(f"unknown rmw op '{op}'", field="rmw_op", choices=RMW_OPS)


@dataclass
class Program:
    """An unrolled program: events, thread placement, initial memory.

    Parameters
    ----------
    events : list of Event
    placement : mapping thread -> Placement
    init : mapping location -> int
        Initial values; locations not listed start at 0.
    assumptions : list of z3 Bool
        Constraints every counted execution satisfies (spin-loop exits,
        termination of unrolled loops).
    value_bits : int, optional
        ``None``: values are mathematical integers (z3 Int). Otherwise
        bit-vectors of this width (needed for and/or/xor).
    name : str
    """

    events: list[Event]
    placement: dict[str, Placement]
    init: dict[str, int] = field(default_factory=dict)
    assumptions: list[Any] = field(default_factory=list)
    value_bits: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        self.events = sorted(self.events, key=lambda e: (self.thread_order(e.thread), e.po_index))
        self._by_eid = {e.eid: e for e in self.events}
        self.validate()

    # -- naming helpers -----------------------------------------------------
    @property
    def sort(self) -> z3.SortRef:
        return z3.IntSort() if self.value_bits is None else z3.BitVecSort(self.value_bits)

    def value_var(self, eid: str) -> z3.ExprRef:
        """The value a read (or an RMW's read) returns, as a z3 constant."""
        return z3.Const(_VALUE_PREFIX + eid, self.sort)

    def final_var(self, loc: str) -> z3.ExprRef:
        """The final value of ``loc`` (constrained by :meth:`Encoding.final_value`)."""
        return z3.Const(_FINAL_PREFIX + loc, self.sort)

    def const(self, v: Value) -> z3.ExprRef:
        """``v`` as a z3 term of the program's value sort."""
        if isinstance(v, z3.ExprRef):
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(f"value {v!r} is not an int or a z3 term")
        return z3.IntVal(v) if self.value_bits is None else z3.BitVecVal(v, self.value_bits)

    # -- queries ------------------------------------------------------------
    def thread_order(self, thread: str) -> int:
        names = list(self.placement)
        return names.index(thread) if thread in names else len(names)

    @property
    def threads(self) -> list[str]:
        return list(self.placement)

    def event(self, eid: str) -> Event:
        return self._by_eid[eid]

    def has_event(self, eid: str) -> bool:
        return eid in self._by_eid

    def events_of(self, thread: str) -> list[Event]:
        return [e for e in self.events if e.thread == thread]

    @property
    def locations(self) -> list[str]:
        locs = dict.fromkeys(self.init)
        for e in self.events:
            if e.loc is not None:
                locs[e.loc] = None
        return list(locs)

    def init_value(self, loc: str) -> int:
        return self.init.get(loc, 0)

    def deps_of(self, e: Event) -> set[str]:
        """Declared dependencies plus the reads occurring in the event's terms."""
        found = set(e.deps)
        for t in (e.value, e.operand, e.compare, e.bar_id, e.bar_quorum, e.guard):
            found |= read_vars_in(t)
        found.discard(e.eid)
        return found

    # -- checking -----------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`InputError` for an ill-formed program."""
        seen_po: set[tuple[str, int]] = set()
        for e in self.events:
            where = f"event {e.eid}"
            if e.kind not in KINDS:
                raise InputError(f"{where}: unknown kind '{e.kind}'", field="kind", choices=KINDS)
            if e.thread not in self.placement:
                raise InputError(f"{where}: thread '{e.thread}' has no placement", field="thread",
                                 choices=sorted(self.placement))
            if (e.thread, e.po_index) in seen_po:
                raise InputError(f"{where}: po_index {e.po_index} used twice in thread {e.thread}",
                                 field="po_index")
            seen_po.add((e.thread, e.po_index))
            if e.is_memory:
                if not e.loc:
                    raise InputError(f"{where}: a {e.kind} event needs a location", field="loc")
                if e.sem not in SEMS:
                    raise InputError(f"{where}: unknown sem '{e.sem}'", field="sem", choices=SEMS)
                if e.sem != "weak" and e.scope not in SCOPES:
                    raise InputError(f"{where}: a {e.sem} access needs a scope", field="scope",
                                     choices=SCOPES)
            if e.kind == "W" and e.value is None:
                raise InputError(f"{where}: a write needs a value", field="value")
            if e.kind == "RMW" and callable(e.value):
                pass  # custom update: value(old) -> new or (new, writes)
            elif e.kind == "RMW":
                if e.rmw_op not in RMW_OPS:
                    raise InputError(f"{where}: unknown rmw op '{e.rmw_op}'", field="rmw_op",
                                     choices=RMW_OPS)
                if e.operand is None and e.rmw_op not in ("inc", "dec"):
                    raise InputError(f"{where}: an RMW needs an operand", field="operand")
                if e.rmw_op == "cas" and e.compare is None:
                    raise InputError(f"{where}: cas needs a compare value", field="compare")
            if e.kind == "F":
                if e.sem not in FENCE_SEMS:
                    raise InputError(f"{where}: unknown fence sem '{e.sem}'", field="sem",
                                     choices=FENCE_SEMS)
                if e.scope not in SCOPES and e.sem != "proxy_alias":
                    raise InputError(f"{where}: a fence needs a scope", field="scope", choices=SCOPES)
            if e.kind == "BAR" and e.bar_instance is None:
                raise InputError(f"{where}: a barrier needs bar_instance", field="bar_instance")
            for d in self.deps_of(e):
                if d not in self._by_eid:
                    raise InputError(f"{where}: depends on unknown read '{d}'", field="deps")
                src = self._by_eid[d]
                if not src.is_read:
                    raise InputError(f"{where}: depends on '{d}', which is not a read", field="deps")
                if src.thread != e.thread or src.po_index >= e.po_index:
                    raise InputError(f"{where}: depends on '{d}', which is not earlier in its thread",
                                     field="deps")
        groups: dict[tuple[str, str], set[str]] = {}
        for e in self.events:
            if e.atomic_group is not None and e.is_memory:
                side = "W" if e.kind == "W" else "R"
                groups.setdefault((side, e.atomic_group), set()).add(e.thread)
        for (side, name), threads in groups.items():
            if len(threads) > 1:
                raise InputError(f"atomic_group '{name}' spans threads {sorted(threads)}; "
                                 "a group is one instruction of one thread", field="atomic_group")


class ProgramBuilder:
    """Convenience for writing programs by hand (tests, protocol lowering).

    Examples
    --------
    >>> b = ProgramBuilder()
    >>> b.thread("P0", cta=0); b.thread("P1", cta=1)
    >>> _ = b.st("P0", "x", 1); _ = b.st("P0", "flag", 1, sem="release", scope="gpu")
    >>> r = b.wait_until("P1", "flag", 1, sem="acquire", scope="gpu")
    >>> d = b.ld("P1", "x")
    >>> prog = b.build()
    >>> sorted(prog.deps_of(prog.event(d)))
    ['P1.0.ld_flag']
    """

    def __init__(self, *, value_bits: int | None = None, name: str = "") -> None:
        self.value_bits = value_bits
        self.name = name
        self.events: list[Event] = []
        self.placement: dict[str, Placement] = {}
        self.init: dict[str, int] = {}
        self.assumptions: list[Any] = []
        self._ctrl: dict[str, set[str]] = {}
        self._next: dict[str, int] = {}

    # helpers ---------------------------------------------------------------
    def thread(self, name: str, cta: int = 0, gpu: int = 0) -> None:
        self.placement[name] = Placement(cta=cta, gpu=gpu)
        self._ctrl.setdefault(name, set())
        self._next.setdefault(name, 0)

    def set_init(self, loc: str, value: int) -> None:
        self.init[loc] = value

    @property
    def sort(self) -> z3.SortRef:
        return z3.IntSort() if self.value_bits is None else z3.BitVecSort(self.value_bits)

    def value(self, eid: str) -> z3.ExprRef:
        """The value read by event ``eid``."""
        return z3.Const(_VALUE_PREFIX + eid, self.sort)

    def _add(self, thread: str, kind: str, tag: str, **kw: Any) -> str:
        if thread not in self.placement:
            self.thread(thread)
        idx = self._next[thread]
        self._next[thread] = idx + 1
        eid = kw.pop("eid", None) or f"{thread}.{idx}.{tag}"
        deps = frozenset(kw.pop("deps", ()) or ()) | frozenset(self._ctrl[thread])
        self.events.append(Event(eid=eid, thread=thread, kind=kind, po_index=idx, deps=deps, **kw))
        return eid

    def _term(self, v: Value) -> Any:
        return v

    # events ------------------------------------------------------------------
    def ld(self, thread: str, loc: str, sem: str = "weak", scope: str | None = None, **kw: Any) -> str:
        return self._add(thread, "R", f"ld_{loc}", loc=loc, sem=sem, scope=scope, **kw)

    def st(self, thread: str, loc: str, value: Value, sem: str = "weak", scope: str | None = None,
           **kw: Any) -> str:
        return self._add(thread, "W", f"st_{loc}", loc=loc, sem=sem, scope=scope, value=value, **kw)

    def rmw(self, thread: str, loc: str, op: str, operand: Value = None, compare: Value = None,
            sem: str = "relaxed", scope: str | None = "gpu", returns_value: bool = True,
            **kw: Any) -> str:
        tag = ("atom_" if returns_value else "red_") + f"{op}_{loc}"
        return self._add(thread, "RMW", tag, loc=loc, sem=sem, scope=scope, rmw_op=op,
                         operand=operand, compare=compare, returns_value=returns_value, **kw)

    def rmw_fn(self, thread: str, loc: str, update: Callable[[z3.ExprRef], Any], sem: str = "relaxed",
               scope: str | None = "gpu", returns_value: bool = True, **kw: Any) -> str:
        """An RMW whose new value is ``update(old)`` (or ``(new, writes)``)."""
        tag = ("atom_" if returns_value else "red_") + f"fn_{loc}"
        return self._add(thread, "RMW", tag, loc=loc, sem=sem, scope=scope, value=update,
                         returns_value=returns_value, **kw)

    def red(self, thread: str, loc: str, op: str, operand: Value, sem: str = "relaxed",
            scope: str | None = "gpu", **kw: Any) -> str:
        return self.rmw(thread, loc, op, operand, sem=sem, scope=scope, returns_value=False, **kw)

    def fence(self, thread: str, sem: str = "sc", scope: str = "gpu", **kw: Any) -> str:
        return self._add(thread, "F", f"fence_{sem}_{scope}", sem=sem, scope=scope, **kw)

    def bar(self, thread: str, instance: Any = 0, bar_id: Any = None, quorum: Any = None,
            arrive: bool = False, **kw: Any) -> str:
        return self._add(thread, "BAR", f"bar{instance}", bar_instance=instance, bar_id=bar_id,
                         bar_quorum=quorum, bar_arrive=arrive, scope="cta", **kw)

    def wait_until(self, thread: str, loc: str, expected: Value | Callable[[z3.ExprRef], Any],
                   sem: str = "relaxed", scope: str | None = "sys", **kw: Any) -> str:
        """A spin loop: one read whose value satisfies the exit condition.

        ``expected`` is a value (exit when equal) or a function of the read
        value returning a z3 Bool. Later events of ``thread`` get a control
        dependency on the read.
        """
        eid = self.ld(thread, loc, sem=sem, scope=scope, **kw)
        v = self.value(eid)
        cond = expected(v) if callable(expected) else v == expected
        self.assumptions.append(cond)
        self._ctrl[thread].add(eid)
        return eid

    def build(self) -> Program:
        return Program(events=list(self.events), placement=dict(self.placement), init=dict(self.init),
                       assumptions=list(self.assumptions), value_bits=self.value_bits, name=self.name)


def _safe_name(text: str) -> str:
    """A z3-friendly fragment of ``text``."""
    return re.sub(r"[^A-Za-z0-9_.:\[\]@#>-]", "_", text)


def replace_event(e: Event, **changes: Any) -> Event:
    """A copy of ``e`` with ``changes`` (events are frozen)."""
    return replace(e, **changes)


def placements(mapping: Mapping[str, tuple[int, int]] | Iterable[tuple[str, int, int]]) -> dict[str, Placement]:
    """``{thread: Placement}`` from ``{thread: (cta, gpu)}`` or ``[(thread, cta, gpu)]``."""
    if isinstance(mapping, Mapping):
        return {t: Placement(cta=c, gpu=g) for t, (c, g) in mapping.items()}
    return {t: Placement(cta=c, gpu=g) for t, c, g in mapping}
