"""Events: the one language every memory-model question is asked in.

A :class:`Program` is a finite, unrolled set of *events* per thread. Both
front ends lower to it: the protocol verifier (:func:`collsim.verify.lower.lower_instance`
binds a protocol for a tiny instance) and the litmus reader
(:mod:`collsim.verify.litmus`); :mod:`collsim.verify.models` decides which
executions of those events the memory model allows, whatever produced them.

Threads, instructions, events
-----------------------------
A thread is a list of :class:`Instr` in program order; an instruction is a set
of :class:`Event` that share one program-order position and are unordered
among themselves (PTX ISA §8.2.4: a vector access is "a set of equivalent
memory operations with a scalar data type, executed in an unspecified
order"). A litmus instruction has one event.

Event kinds (:class:`EventKind`)
--------------------------------
``R``
    a read of one scalar location (at most 8 bytes). Its value is the z3
    constant :meth:`Program.value_var` of its name.
``W``
    a write of ``value``.
``RMW``
    an atomic read-modify-write (``atom``; with ``returns_value=False`` a
    ``red``): one operation that reads and, unless ``writes_if`` fails (a
    ``cas`` whose comparison fails), writes (PTX ISA §8.4). Its written value
    is ``value`` (a term over its own read value ``("rd", id)``) or, from
    ``rmw_op``, ``operand`` and ``compare``, :func:`rmw_result` of the value it
    read.
``F``
    a fence: ``sem`` is ``acq_rel``, ``sc``, ``acquire`` or ``release`` (PTX
    8.6 split fences), or ``proxy_alias`` for ``fence.proxy.alias``.
``BAR``
    a CTA barrier: ``bar`` is its static identity (the instance), ``bar_id``
    the barrier resource when it differs by thread or is in a register,
    ``bar_quorum`` the thread count, ``bar_arrive`` marks ``bar.arrive``.

Values
------
A value (``value``, ``operand``, ``compare``, ``bar_id``, ``bar_quorum``) is an
``int``, a :class:`~collsim.verify.terms.Lin` (a linear term over input
elements and read values: what a protocol's data is) or a z3 term over
:meth:`Program.value_var` constants (what a litmus register holds). A
``guard`` (z3 Bool) makes an event run only when it holds.

Memory locations
----------------
``loc`` is one physical scalar element; two events access the same element or
disjoint ones (no partial overlap). ``vloc`` is the virtual address used to
reach it (default: ``loc``); two virtual addresses of one location are
aliases, whose accesses causality orders only through an alias proxy fence.

Qualifiers
----------
``sem`` is ``weak`` (plain ``ld``/``st``), ``relaxed``, ``acquire``,
``release``, ``acq_rel`` or ``sc``; ``scope`` is ``cta``, ``gpu`` or ``sys``
and required for every strong access and fence. ``.volatile`` is
``relaxed`` at ``sys`` (PTX ISA §8.4.2, :func:`volatile`).

Dependencies and spin loops
---------------------------
``deps`` names the reads an event depends on (address or data); reads in its
terms count too (:meth:`Program.deps_of`). An instruction's ``ctrl`` names the
reads that decide whether the thread gets there (a branch, a spin loop's
exit): every later event of the thread depends on them, and so does every
event after a barrier they precede in another thread of the barrier (that
thread cannot pass the barrier before this one has left its loop). A poll
(:attr:`InstrKind.POLL`) controls what follows it the same way.

Only executions in which every thread finishes count. A spin loop "wait
until ``x == v``" is one read (the one that exits the loop) plus an
assumption on its value (:attr:`Program.assumptions`) and a control
dependency of everything after it: :meth:`ProgramBuilder.wait_until`.

Single-copy-atomic groups
-------------------------
PTX guarantees atomicity per scalar element only. A hardware assumption such
as "an 8-byte ``st.v2.u32`` is not torn" joins elements of one instruction
into an :class:`AtomicGroup`: a read group sees the locations a write group
writes all from that write group or none from it, and two write groups are
ordered the same way at every location they share.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import z3

from collsim.errors import InputError
from collsim.ir.ops import Predicate
from collsim.ir.types import FillPattern
from collsim.verify.terms import Lin

__all__ = [
    "EventKind",
    "InstrKind",
    "KINDS",
    "SEMS",
    "SCOPES",
    "FENCE_SEMS",
    "RMW_OPS",
    "Event",
    "Instr",
    "AtomicGroup",
    "Placement",
    "Program",
    "ProgramBuilder",
    "rmw_result",
    "volatile",
    "read_vars_in",
    "value_const",
    "VALUE_PREFIX",
    "FINAL_PREFIX",
]


class EventKind(StrEnum):
    """What one :class:`Event` is."""

    WRITE = "W"
    READ = "R"
    RMW = "RMW"
    FENCE = "F"
    BARRIER = "BAR"


class InstrKind(StrEnum):
    """What one :class:`Instr` is."""

    STORE = "store"
    LOAD = "load"
    POLL = "poll"
    RMW = "rmw"
    FENCE = "fence"
    BARRIER = "bar"


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
_INSTR_OF_KIND = {EventKind.WRITE: InstrKind.STORE, EventKind.READ: InstrKind.LOAD, EventKind.RMW: InstrKind.RMW,
                  EventKind.FENCE: InstrKind.FENCE, EventKind.BARRIER: InstrKind.BARRIER}
_WRITES = frozenset({EventKind.WRITE, EventKind.RMW})
_READS = frozenset({EventKind.READ, EventKind.RMW})
_MEMORY = _WRITES | _READS

#: names of the z3 constants of read values and final values
VALUE_PREFIX = "val!"
FINAL_PREFIX = "final!"


@dataclass(eq=False)
class Event:
    """One event of an unrolled program (see the module docstring).

    ``id`` is its index in :attr:`Program.events` and ``name`` its readable,
    unique name (z3 variables are named after it). The fields after ``label``
    annotate events lowered from a protocol (the launch, the buffer word, the
    register a read fills) for properties and counterexamples; the memory
    model does not read them.
    """

    id: int
    kind: EventKind
    thread: int
    instr: int  # program-order index of its instruction within the thread
    name: str = ""
    rank: int = 0  # the protocol rank (litmus: the thread)
    loc: Hashable | None = None
    vloc: Hashable | None = None  # virtual address; None: the location itself
    sem: str = "weak"
    scope: str | None = None
    value: Any = None  # W: value written; RMW: new value over its own read (or None: from rmw_op)
    rmw_op: str | None = None
    operand: Any = None
    compare: Any = None
    returns_value: bool = True  # False for a ``red``: its read is not a read for acquire patterns
    writes_if: Any = None  # RMW: z3 Bool over read values; it writes only when it holds (None: always)
    guard: Any = None  # z3 Bool over read values: the event runs iff it holds (None: always)
    deps: frozenset[int] = frozenset()  # data and address dependencies (read event ids)
    wgroup: int | None = None
    rgroup: int | None = None
    bar: Any = None  # BAR: the static identity of the barrier (its instance)
    bar_id: Any = None  # BAR: the barrier resource (int or term); None: implied by the instance
    bar_quorum: Any = None  # BAR: the thread count (int or term); None: every thread that uses it
    bar_arrive: bool = False
    label: str = ""
    iteration: int = 0
    role: str | None = None  # "data" | "flag" for memory events of a protocol buffer
    slot: int = 0
    region: int = 0
    line: int = 0
    word: int = 0
    poll: int | None = None  # id of the poll instruction this read belongs to
    polled: bool = False  # a word the poll predicate inspects
    consumer: str | None = None  # register the value goes to
    fill: FillPattern | None = None  # the pattern of a Fill store
    #: the element access this event is part of, where accesses of different sizes meet (a layout with words
    #: narrower than 32 bits): two accesses are morally strong only if their elements overlap completely
    #: (PTX ISA, memory consistency model); None everywhere else
    span: Hashable | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"event {self.name or self.id}: unknown kind '{self.kind}'", field="kind", choices=KINDS)
        self.kind = EventKind(self.kind)
        if not self.name:
            self.name = f"e{self.id}"

    # -- classification -----------------------------------------------------
    @property
    def is_write(self) -> bool:
        """W or RMW (a failing ``cas`` writes nothing at run time)."""
        return self.kind in _WRITES

    @property
    def is_read(self) -> bool:
        """R or RMW."""
        return self.kind in _READS

    @property
    def is_mem(self) -> bool:
        return self.kind in _MEMORY

    @property
    def strong(self) -> bool:
        """Fences and every non-weak memory access (PTX ISA §8.4: strong operations)."""
        return self.kind is EventKind.FENCE or (self.is_mem and self.sem != "weak")

    @property
    def virtual_loc(self) -> Hashable | None:
        return self.vloc if self.vloc is not None else self.loc

    def where(self) -> str:
        """Where a protocol event is: ``buf@rankN[slot s, region r, line l, word w]``."""
        if self.loc is None:
            return ""
        if not isinstance(self.loc, tuple) or len(self.loc) != 4:
            return str(self.loc)
        buf, owner, _flat, word = self.loc
        return f"{buf}@rank{owner}[slot {self.slot}, region {self.region}, line {self.line}, word {word}]"

    def text(self) -> str:
        """The label, or a generated one (``st.relaxed.gpu [x], 1``)."""
        if self.label:
            return self.label
        q = "" if self.sem == "weak" and self.kind is not EventKind.FENCE else f".{self.sem}"
        s = f".{self.scope}" if self.scope else ""
        where = self.virtual_loc
        if self.kind is EventKind.READ:
            return f"ld{q}{s} [{where}]"
        if self.kind is EventKind.WRITE:
            return f"st{q}{s} [{where}], {_show(self.value)}"
        if self.kind is EventKind.RMW:
            name = "atom" if self.returns_value else "red"
            if self.rmw_op is None:
                return f"{name}{q}{s}.custom [{where}]"
            extra = f", {_show(self.compare)}" if self.rmw_op == "cas" else ""
            return f"{name}{q}{s}.{self.rmw_op} [{where}]{extra}, {_show(self.operand)}"
        if self.kind is EventKind.FENCE:
            return f"fence.{self.sem}{s}"
        mode = "arrive" if self.bar_arrive else "sync"
        bid = "" if self.bar_id is None else f", id={_show(self.bar_id)}"
        quorum = "" if self.bar_quorum is None else f", n={_show(self.bar_quorum)}"
        return f"bar.cta.{mode} {self.bar}{bid}{quorum}"


def _show(v: Any) -> str:
    if v is None:
        return "?"
    text = str(v)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(eq=False)
class Instr:
    """One instruction of one thread: its events share a program-order position.

    ``ctrl`` are reads that control whether the thread gets here (see the
    module docstring); a poll's own reads control what follows it.
    """

    thread: int
    index: int
    kind: InstrKind
    events: list[Event]
    label: str = ""
    iteration: int = 0
    predicate: Predicate | None = None  # polls: the bound exit condition
    id: int = -1
    ctrl: frozenset[int] = frozenset()
    source: str = ""  # where protocol code emitted the operation ("file:line"), for counterexamples
    #: how many element events the instruction has in the instance (a slice keeps fewer); None: ``len(events)``
    elements: int | None = None

    def __post_init__(self) -> None:
        self.kind = InstrKind(self.kind)

    @property
    def single_element(self) -> bool:
        """Whether the instruction is one element access (a synchronisation from it then orders the access itself;
        the elements of a vector access are unordered, PTX ISA §8.2.4)."""
        return (len(self.events) if self.elements is None else self.elements) == 1


@dataclass(eq=False)
class AtomicGroup:
    """Elements of one instruction that are single-copy atomic together (``kind`` ``"w"`` or ``"r"``).

    ``when`` lists the sets of hardware assumptions under which the group
    exists (``None``: always); the encoding enables it with one literal per
    set (:meth:`collsim.verify.models.Encoding.assuming`).
    """

    id: int
    kind: str
    members: list[Event]
    when: frozenset[frozenset[str]] | None = None


@dataclass(frozen=True)
class Placement:
    """Where a thread runs: CTA ``cta`` of GPU ``gpu`` (CTA ids are per GPU); ``rank`` for protocol threads."""

    cta: int
    gpu: int = 0
    rank: int | None = None

    def includes(self, scope: str | None, other: "Placement") -> bool:
        """Whether ``scope`` seen from this thread includes a thread at ``other``."""
        if scope == "sys":
            return True
        if scope == "gpu":
            return self.gpu == other.gpu
        if scope == "cta":
            return self.gpu == other.gpu and self.cta == other.cta
        return False


def volatile() -> dict[str, str]:
    """Qualifiers of ``.volatile``: ``relaxed`` at ``sys`` scope (PTX ISA §8.4.2)."""
    return {"sem": "relaxed", "scope": "sys"}


def value_const(name: str, sort: z3.SortRef) -> z3.ExprRef:
    """The z3 constant for the value read by event ``name`` (as :meth:`Program.value_var`)."""
    return z3.Const(VALUE_PREFIX + name, sort)


def read_vars_in(term: Any) -> set[str]:
    """Names of the reads whose value constants occur in ``term`` (a z3 term or a :class:`Lin`)."""
    if isinstance(term, Lin):
        return {f"#{i}" for i in term.reads()}
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
            if name.startswith(VALUE_PREFIX):
                found.add(name[len(VALUE_PREFIX):])
        else:
            stack.extend(t.children())
    return found


def rmw_result(op: str, old: z3.ExprRef, operand: z3.ExprRef, compare: z3.ExprRef | None = None):
    """``(new_value, writes)`` of an RMW: the value written and whether it writes.

    ``writes`` is False only for a failing ``cas``. ``inc``/``dec`` follow
    PTX (``inc``: ``old >= operand ? 0 : old + 1``; ``dec``:
    ``old == 0 or old > operand ? operand : old - 1``), unsigned on bit-vectors.
    """
    ctx = old.ctx
    yes = z3.BoolVal(True, ctx)
    bv = z3.is_bv(old)
    if op == "add":
        return old + operand, yes
    if op == "sub":
        return old - operand, yes
    if op == "mul":
        return old * operand, yes
    if op == "div":
        return (z3.UDiv(old, operand) if bv else old / operand), yes
    if op == "exch":
        return operand, yes
    if op == "cas":
        if compare is None:
            raise InputError("cas needs a compare value", field="compare")
        return z3.If(old == compare, operand, old), old == compare
    if op in ("min", "max"):
        less = z3.ULT(old, operand) if bv else old < operand
        return (z3.If(less, old, operand) if op == "min" else z3.If(less, operand, old)), yes
    if op in ("and", "or", "xor"):
        if not bv:
            raise InputError(f"rmw op '{op}' needs bit-vector values (Program(value_bits=...))", field="rmw_op")
        fn = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[op]
        return fn(old, operand), yes
    if op == "inc":
        ge = z3.UGE(old, operand) if bv else old >= operand
        return z3.If(ge, 0, old + 1), yes
    if op == "dec":
        gt = z3.UGT(old, operand) if bv else old > operand
        return z3.If(z3.Or(old == 0, gt), operand, old - 1), yes
    raise InputError(f"unknown rmw op '{op}'", field="rmw_op", choices=RMW_OPS)


#: RMW operations whose written value does not depend on the value read (PTX ISA §8.10.4: no
#: dependency, so no thin-air cycle runs through the operation)
INDEPENDENT_RMW_OPS = frozenset({"exch"})


class Program:
    """An unrolled program: threads of instructions of events, their placement, initial memory.

    Parameters
    ----------
    threads : list of list of Instr
        Instructions per thread in program order (``Instr.index`` and
        ``Event.instr`` are the position; ``Event.id`` the index in
        :attr:`events`, which the program numbers thread by thread).
    placement : list of Placement
        One per thread.
    init : mapping location -> int
        Initial values; locations not listed start at 0.
    assumptions : list of z3 Bool
        Constraints every counted execution satisfies (spin-loop exits,
        termination of unrolled loops).
    value_bits : int, optional
        ``None``: values are mathematical integers (z3 Int). Otherwise
        bit-vectors of this width (needed for and/or/xor).
    name : str
    thread_names : list of str, optional
        Default ``P0, P1, ...``.
    groups : list of AtomicGroup, optional
        Default: from the events' ``wgroup``/``rgroup`` ids (always enabled).
    """

    def __init__(self, threads: list[list[Instr]], placement: list[Placement], init: Mapping[Hashable, int] | None = None,
                 assumptions: Iterable[Any] = (), value_bits: int | None = None, name: str = "",
                 thread_names: list[str] | None = None, groups: list[AtomicGroup] | None = None) -> None:
        self.threads = threads
        self.placement = list(placement)
        self.init: dict[Hashable, int] = dict(init or {})
        self.assumptions = list(assumptions)
        self.value_bits = value_bits
        self.name = name
        self.thread_names = list(thread_names) if thread_names else [f"P{t}" for t in range(len(threads))]
        self.instrs: list[Instr] = [i for thread in threads for i in thread]
        self.events: list[Event] = sorted((e for i in self.instrs for e in i.events), key=lambda e: e.id)
        if any(e.id != n for n, e in enumerate(self.events)):
            raise ValueError("event ids must number the program's events 0, 1, ...")
        for n, instr in enumerate(self.instrs):
            instr.id = n
        self._by_name = {e.name: e for e in self.events}
        self.locs: dict[Hashable, list[Event]] = {}
        for e in self.events:
            if e.loc is not None:
                self.locs.setdefault(e.loc, []).append(e)
        for loc in self.locs:
            self.init.setdefault(loc, 0)
        self.groups = groups if groups is not None else _groups_of(self.events)

    # -- naming ----------------------------------------------------------------
    @property
    def sort(self) -> z3.SortRef:
        return z3.IntSort() if self.value_bits is None else z3.BitVecSort(self.value_bits)

    def value_var(self, name: str) -> z3.ExprRef:
        """The value a read (or an RMW's read) ``name`` returns, as a z3 constant."""
        return value_const(name, self.sort)

    def final_var(self, loc: Hashable) -> z3.ExprRef:
        """The final value of ``loc`` (constrained by the encoding when a condition uses it)."""
        return z3.Const(FINAL_PREFIX + str(loc), self.sort)

    def const(self, v: Any) -> z3.ExprRef:
        """``v`` as a z3 term of the program's value sort."""
        if isinstance(v, z3.ExprRef):
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(f"value {v!r} is not an int or a z3 term")
        return z3.IntVal(v) if self.value_bits is None else z3.BitVecVal(v, self.value_bits)

    # -- queries ---------------------------------------------------------------
    def event(self, name: str) -> Event:
        return self._by_name[name]

    def has_event(self, name: str) -> bool:
        return name in self._by_name

    def events_of(self, thread: int) -> list[Event]:
        return [e for i in self.threads[thread] for e in i.events]

    @property
    def locations(self) -> list[Hashable]:
        return list(self.init)

    def init_value(self, loc: Hashable) -> int:
        return self.init.get(loc, 0)

    def writes_at(self, loc: Hashable) -> list[Event]:
        return [e for e in self.locs.get(loc, ()) if e.is_write]

    def reads_at(self, loc: Hashable) -> list[Event]:
        return [e for e in self.locs.get(loc, ()) if e.is_read]

    def deps_of(self, e: Event) -> set[int]:
        """Declared dependencies plus the reads occurring in the event's terms (ids)."""
        found = set(e.deps)
        for t in (e.value, e.operand, e.compare, e.bar_id, e.bar_quorum, e.guard, e.writes_if):
            if isinstance(t, Lin):
                found |= t.reads()
            else:
                found |= {self._by_name[n].id for n in read_vars_in(t) if n in self._by_name}
        found.discard(e.id)
        return found

    def ctrl_before(self, instr: Instr) -> frozenset[int]:
        """Reads that newly control ``instr``: its declared ``ctrl`` and the reads of a poll right before it."""
        ctrl = set(instr.ctrl)
        if instr.index > 0:
            prev = self.threads[instr.thread][instr.index - 1]
            if prev.kind is InstrKind.POLL:
                ctrl |= {e.id for e in prev.events if e.is_read}
        return frozenset(ctrl)

    #: the hardware assumptions the program is meant under: groups that exist under them are enforced by default
    assumption_set: frozenset[str] = frozenset()

    def groups_under(self, assumptions: frozenset[str] | None = None) -> list[AtomicGroup]:
        """The atomic groups that exist under one set of assumptions (default: :attr:`assumption_set`)."""
        key = self.assumption_set if assumptions is None else frozenset(assumptions)
        return [g for g in self.groups if g.when is None or key in g.when]

    @property
    def wgroups(self) -> dict[int, list[Event]]:
        return {g.id: g.members for g in self.groups_under() if g.kind == "w"}

    @property
    def rgroups(self) -> dict[int, list[Event]]:
        return {g.id: g.members for g in self.groups_under() if g.kind == "r"}

    # -- building from flat events (litmus, hand-written programs) --------------
    @classmethod
    def from_events(cls, events: Iterable[Event], placement: Mapping[str, Placement], init: Mapping[str, int] | None = None,
                    assumptions: Iterable[Any] = (), value_bits: int | None = None, name: str = "",
                    ctrl: Mapping[str, Iterable[str]] | None = None, groups: Mapping[str, str] | None = None) -> "Program":
        """A program of one-event instructions from events numbered per thread by ``instr``.

        ``events`` give ``thread`` as a thread index into ``placement``'s
        order and ``deps`` as ids of the list. ``ctrl`` maps an event name to
        the names of reads that newly control it; ``groups`` maps an event
        name to its atomic group name. The program is validated
        (:meth:`validate`).
        """
        names = list(placement)
        events = list(events)
        by_thread: dict[int, list[Event]] = {}
        for e in events:
            by_thread.setdefault(e.thread, []).append(e)
        for t in by_thread:
            if not 0 <= t < len(names):
                raise InputError(f"event {by_thread[t][0].name}: thread {t} has no placement", field="thread",
                                 choices=names)
        cls._check_positions(events, names)
        threads: list[list[Instr]] = []
        for t in range(len(names)):
            ordered = sorted(by_thread.get(t, []), key=lambda e: e.instr)
            threads.append([Instr(thread=t, index=k, kind=_INSTR_OF_KIND[e.kind], events=[e], label=e.label)
                            for k, e in enumerate(ordered)])
        order = [i.events[0] for th in threads for i in th]
        new_id = {e.id: n for n, e in enumerate(order)}  # the caller's ids (deps refer to them) -> thread-major ids
        for th in threads:
            for instr in th:
                e = instr.events[0]
                e.instr = instr.index
        for e in order:
            e.deps = frozenset(new_id[d] for d in e.deps if d in new_id)
        for e in order:
            e.id = new_id[e.id]
        by_name = {e.name: e for e in order}
        for ename, reads in (ctrl or {}).items():
            if ename in by_name:
                e = by_name[ename]
                instr = threads[e.thread][e.instr]
                instr.ctrl = instr.ctrl | frozenset(by_name[r].id for r in reads if r in by_name)
        group_list: list[AtomicGroup] = []
        if groups:
            keyed: dict[tuple[str, str], list[Event]] = {}
            for ename, gname in groups.items():
                e = by_name.get(ename)
                if e is None or not e.is_mem:
                    continue
                keyed.setdefault(("w" if e.kind is EventKind.WRITE else "r", gname), []).append(e)
                if e.kind is EventKind.RMW:
                    keyed.setdefault(("w", gname), []).append(e)
            for (side, gname), members in keyed.items():
                if len({m.thread for m in members}) > 1:
                    raise InputError(f"atomic_group '{gname}' spans threads "
                                     f"{sorted(names[m.thread] for m in members)}; a group is one instruction of "
                                     f"one thread", field="atomic_group")
                if side == "r":
                    members = [m for m in members if m.returns_value]
                group_list.append(AtomicGroup(len(group_list), side, members))
        placements = [placement[n] for n in names]
        program = cls(threads, placements, init, assumptions, value_bits, name, names, groups=group_list)
        program.validate()
        return program

    @staticmethod
    def _check_positions(events: list[Event], names: list[str]) -> None:
        seen: set[tuple[int, int]] = set()
        for e in events:
            if (e.thread, e.instr) in seen:
                raise InputError(f"event {e.name}: po_index {e.instr} used twice in thread {names[e.thread]}",
                                 field="po_index")
            seen.add((e.thread, e.instr))

    # -- checking --------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`InputError` for an ill-formed program."""
        for e in self.events:
            where = f"event {e.name}"
            if e.is_mem:
                if e.loc is None:
                    raise InputError(f"{where}: a {e.kind.value} event needs a location", field="loc")
                if e.sem not in SEMS:
                    raise InputError(f"{where}: unknown sem '{e.sem}'", field="sem", choices=SEMS)
                if e.sem != "weak" and e.scope not in SCOPES:
                    raise InputError(f"{where}: a {e.sem} access needs a scope", field="scope", choices=SCOPES)
            if e.kind is EventKind.WRITE and e.value is None:
                raise InputError(f"{where}: a write needs a value", field="value")
            if e.kind is EventKind.RMW and e.value is None:
                if e.rmw_op not in RMW_OPS:
                    raise InputError(f"{where}: unknown rmw op '{e.rmw_op}'", field="rmw_op", choices=RMW_OPS)
                if e.operand is None and e.rmw_op not in ("inc", "dec"):
                    raise InputError(f"{where}: an RMW needs an operand", field="operand")
                if e.rmw_op == "cas" and e.compare is None:
                    raise InputError(f"{where}: cas needs a compare value", field="compare")
            if e.kind is EventKind.FENCE:
                if e.sem not in FENCE_SEMS:
                    raise InputError(f"{where}: unknown fence sem '{e.sem}'", field="sem", choices=FENCE_SEMS)
                if e.scope not in SCOPES and e.sem != "proxy_alias":
                    raise InputError(f"{where}: a fence needs a scope", field="scope", choices=SCOPES)
            if e.kind is EventKind.BARRIER and e.bar is None:
                raise InputError(f"{where}: a barrier needs an instance", field="bar_instance")
            for d in self.deps_of(e):
                src = self.events[d] if 0 <= d < len(self.events) else None
                if src is None:
                    raise InputError(f"{where}: depends on an unknown read", field="deps")
                if not src.is_read:
                    raise InputError(f"{where}: depends on '{src.name}', which is not a read", field="deps")
                if src.thread != e.thread or src.instr >= e.instr:
                    raise InputError(f"{where}: depends on '{src.name}', which is not earlier in its thread",
                                     field="deps")


def _groups_of(events: list[Event]) -> list[AtomicGroup]:
    by_id: dict[tuple[str, int], list[Event]] = {}
    for e in events:
        if e.wgroup is not None:
            by_id.setdefault(("w", e.wgroup), []).append(e)
        if e.rgroup is not None:
            by_id.setdefault(("r", e.rgroup), []).append(e)
    return [AtomicGroup(gid, side, members) for (side, gid), members in by_id.items()]


class ProgramBuilder:
    """Writing programs by hand (tests, examples): one event per instruction.

    Examples
    --------
    >>> b = ProgramBuilder()
    >>> b.thread("P0", cta=0); b.thread("P1", cta=1)
    >>> _ = b.st("P0", "x", 1); _ = b.st("P0", "flag", 1, sem="release", scope="gpu")
    >>> r = b.wait_until("P1", "flag", 1, sem="acquire", scope="gpu")
    >>> d = b.ld("P1", "x")
    >>> prog = b.build()
    >>> [prog.events[i].name for i in prog.ctrl_before(prog.threads[1][1])]
    ['P1.0.ld_flag']
    """

    def __init__(self, *, value_bits: int | None = None, name: str = "") -> None:
        self.value_bits = value_bits
        self.name = name
        self.events: list[Event] = []
        self.placement: dict[str, Placement] = {}
        self.init: dict[str, int] = {}
        self.assumptions: list[Any] = []
        self._pending_ctrl: dict[str, set[str]] = {}
        self._ctrl: dict[str, set[str]] = {}
        self._groups: dict[str, str] = {}
        self._next: dict[str, int] = {}

    def thread(self, name: str, cta: int = 0, gpu: int = 0) -> None:
        self.placement[name] = Placement(cta=cta, gpu=gpu)
        self._pending_ctrl.setdefault(name, set())
        self._next.setdefault(name, 0)

    def set_init(self, loc: str, value: int) -> None:
        self.init[loc] = value

    @property
    def sort(self) -> z3.SortRef:
        return z3.IntSort() if self.value_bits is None else z3.BitVecSort(self.value_bits)

    def value(self, name: str) -> z3.ExprRef:
        """The value read by event ``name``."""
        return value_const(name, self.sort)

    def _add(self, thread: str, kind: str, tag: str, **kw: Any) -> str:
        if thread not in self.placement:
            self.thread(thread)
        idx = self._next[thread]
        self._next[thread] = idx + 1
        name = kw.pop("eid", None) or f"{thread}.{idx}.{tag}"
        deps = kw.pop("deps", ()) or ()
        group = kw.pop("atomic_group", None)
        if group is not None:
            self._groups[name] = group
        pending = self._pending_ctrl[thread]
        if pending:
            self._ctrl[name] = set(pending)
            pending.clear()
        self.events.append(Event(id=len(self.events), kind=kind, thread=list(self.placement).index(thread),
                                 instr=idx, name=name, **kw))
        self._deps_by_name = getattr(self, "_deps_by_name", {})
        self._deps_by_name[name] = set(deps)
        return name

    def ld(self, thread: str, loc: str, sem: str = "weak", scope: str | None = None, **kw: Any) -> str:
        return self._add(thread, "R", f"ld_{loc}", loc=loc, sem=sem, scope=scope, **kw)

    def st(self, thread: str, loc: str, value: Any, sem: str = "weak", scope: str | None = None, **kw: Any) -> str:
        return self._add(thread, "W", f"st_{loc}", loc=loc, sem=sem, scope=scope, value=value, **kw)

    def rmw(self, thread: str, loc: str, op: str, operand: Any = None, compare: Any = None, sem: str = "relaxed",
            scope: str | None = "gpu", returns_value: bool = True, **kw: Any) -> str:
        tag = ("atom_" if returns_value else "red_") + f"{op}_{loc}"
        return self._add(thread, "RMW", tag, loc=loc, sem=sem, scope=scope, rmw_op=op, operand=operand,
                         compare=compare, returns_value=returns_value, **kw)

    def rmw_fn(self, thread: str, loc: str, update: Callable[[z3.ExprRef], Any], sem: str = "relaxed",
               scope: str | None = "gpu", returns_value: bool = True, **kw: Any) -> str:
        """An RMW whose new value is ``update(old)`` (or ``(new, writes)``), ``old`` its read value."""
        tag = ("atom_" if returns_value else "red_") + f"fn_{loc}"
        name = f"{thread}.{self._next.get(thread, 0)}.{tag}"
        out = update(self.value(name))
        new, writes = out if isinstance(out, tuple) else (out, None)
        return self._add(thread, "RMW", tag, eid=name, loc=loc, sem=sem, scope=scope, value=new, writes_if=writes,
                         returns_value=returns_value, **kw)

    def red(self, thread: str, loc: str, op: str, operand: Any, sem: str = "relaxed", scope: str | None = "gpu",
            **kw: Any) -> str:
        return self.rmw(thread, loc, op, operand, sem=sem, scope=scope, returns_value=False, **kw)

    def fence(self, thread: str, sem: str = "sc", scope: str = "gpu", **kw: Any) -> str:
        return self._add(thread, "F", f"fence_{sem}_{scope}", sem=sem, scope=scope, **kw)

    def bar(self, thread: str, instance: Any = 0, bar_id: Any = None, quorum: Any = None, arrive: bool = False,
            **kw: Any) -> str:
        return self._add(thread, "BAR", f"bar{instance}", bar=instance, bar_id=bar_id, bar_quorum=quorum,
                         bar_arrive=arrive, scope="cta", **kw)

    def wait_until(self, thread: str, loc: str, expected: Any, sem: str = "relaxed", scope: str | None = "sys",
                   **kw: Any) -> str:
        """A spin loop: one read whose value satisfies the exit condition.

        ``expected`` is a value (exit when equal) or a function of the read
        value returning a z3 Bool. Later events of ``thread`` control-depend
        on the read.
        """
        name = self.ld(thread, loc, sem=sem, scope=scope, **kw)
        v = self.value(name)
        cond = expected(v) if callable(expected) else v == expected
        self.assumptions.append(cond)
        self._pending_ctrl[thread].add(name)
        return name

    def build(self) -> Program:
        by_name = {e.name: e.id for e in self.events}
        for e in self.events:
            names = getattr(self, "_deps_by_name", {}).get(e.name, set())
            unknown = [n for n in names if n not in by_name]
            if unknown:
                raise InputError(f"event {e.name}: depends on unknown read '{unknown[0]}'", field="deps")
            e.deps = frozenset(by_name[n] for n in names)
        events = [Event(**{**e.__dict__}) for e in self.events]
        return Program.from_events(events, dict(self.placement), dict(self.init), list(self.assumptions),
                                   self.value_bits, self.name, ctrl={k: set(v) for k, v in self._ctrl.items()},
                                   groups=dict(self._groups))
