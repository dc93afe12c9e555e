"""Lowering: a protocol program, bound for a tiny instance, becomes memory events.

The verifier does not reason about ranges or loops. It takes the program an
algorithm generates from a protocol, binds it for a few ranks and launches
(``ITER`` = 0, 1, ...) with a message of one or two lines per chunk, and
expands every operation into *events*: one per scalar element accessed, as
the PTX memory model sees them (PTX ISA §8.2.4: a vector access is a set of
scalar element accesses, at most 8 bytes each, in unspecified order).

What the expansion decides
--------------------------
* **Threads.** A rank is one CTA on its own GPU with ``Bounds.threads``
  threads. ``Issuer.ALL`` operations are strided over the threads by line
  (line ``j`` of a range goes to thread ``j % threads``); ``Issuer.LEADER``
  operations run on thread 0; ``SyncGroup`` is a ``bar.sync`` of the rank's
  threads (omitted with one thread).
* **Instructions.** One line handled by one thread is one instruction: its
  element events share a program-order index and are unordered among
  themselves. The lanes of a wide line (LL128: eight 16-byte stores) are
  modelled as one warp-wide access, so its elements are unordered too.
* **Launches.** ``KernelBoundary`` becomes ``fence.sc.sys`` in every thread
  followed by a barrier of the rank's threads (stream order).
* **Atomicity.** A declared hardware assumption joins elements into atomic
  groups: aligned ``granule_bytes`` runs of one store (or of the whole line,
  for ``across_lanes``). The reads of one load instruction that fall in one
  granule form a read group, which sees a write group all or not at all.
* **Polls.** Only the load that ends a spin is an event (the Dartagnan
  convention: executions in which every thread finishes); the hang check
  adds a "stuck" choice per poll instead.
* **Values.** Every value is a linear term over input elements and read
  events (:class:`Lin`). Input element ``e`` of rank ``r`` in launch ``i``
  is a distinct power of 256 above every flag, counter and sentinel value,
  so a sum identifies the multiset of inputs in it and a consumer's value
  names its producer.
* **Layout shrink.** A line wider than ``Bounds.max_lanes`` lanes keeps its
  first ``max_lanes - 1`` lanes and its last lane (where LL128 puts the
  flag); the dropped lanes are symmetric copies of the kept data lanes.
  The result states the shrink.

:func:`reference_run` executes the events once under a fair round-robin
schedule with whole-instruction atomicity (a valid SC execution); its
reads-from and coherence order are the "intended" ones the properties
compare against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from collsim.algorithms import generate, transfer_bytes
from collsim.errors import UnsupportedError
from collsim.ir.assumptions import Assumption, get_assumption
from collsim.ir.buffers import Buffer
from collsim.ir.layout import LineLayout, WordRole
from collsim.ir.ops import (
    AtLeast,
    Atomic,
    Equals,
    Fence,
    Fill,
    Input,
    KernelBoundary,
    Load,
    NotEqual,
    PollUntil,
    Reduce,
    Reg,
    Store,
    SyncGroup,
    WriteOutput,
)
from collsim.ir.program import FlatOp, Program, walk
from collsim.ir.protocol import Protocol
from collsim.ir.types import Issuer, RmwOp

__all__ = [
    "Bounds",
    "Lin",
    "Event",
    "Instr",
    "Lowered",
    "lower",
    "reference_run",
    "RefRun",
    "input_value",
    "message_bytes",
]

#: input element values are BASE ** (OFFSET + k): above every flag/sentinel value
INPUT_BASE = 256
INPUT_OFFSET = 6


@dataclass(frozen=True)
class Bounds:
    """The size of the instance the verifier checks.

    Parameters
    ----------
    ranks, iterations : int
        Ranks and launches (``ITER`` = 0 .. iterations-1).
    lines : int
        Lines per chunk (one-shot: per message).
    threads : int
        Threads per rank.
    max_lanes : int
        Lines wider than this many store lanes are shrunk (see module doc).
    """

    ranks: int = 3
    iterations: int = 2
    lines: int = 1
    threads: int = 1
    max_lanes: int = 2

    def __post_init__(self) -> None:
        if self.ranks < 2:
            raise ValueError("the verifier needs at least 2 ranks")
        if self.iterations < 1 or self.lines < 1 or self.threads < 1 or self.max_lanes < 1:
            raise ValueError("iterations, lines, threads and max_lanes are at least 1")

    def describe(self) -> str:
        return (f"{self.ranks} ranks x {self.iterations} iterations, {self.lines} line(s) per chunk, "
                f"{self.threads} thread(s) per rank")


class Lin:
    """A linear integer term: ``const + sum(coeff * atom)``.

    Atoms are ``("in", rank, iteration, element)`` (an input element),
    ``("rd", event_id)`` (the value a read event returned) and ``("sym",
    name)``.

    >>> (Lin.const(2) + Lin.atom(("rd", 7))).terms
    {('rd', 7): 1}
    """

    __slots__ = ("c", "terms")

    def __init__(self, c: int = 0, terms: Mapping[tuple, int] | None = None) -> None:
        self.c = c
        self.terms = {k: v for k, v in (terms or {}).items() if v}

    @staticmethod
    def const(value: int) -> "Lin":
        return Lin(value)

    @staticmethod
    def atom(key: tuple, coeff: int = 1) -> "Lin":
        return Lin(0, {key: coeff})

    def __add__(self, other: "Lin") -> "Lin":
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0) + v
        return Lin(self.c + other.c, terms)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def reads(self) -> set[int]:
        return {k[1] for k in self.terms if k[0] == "rd"}

    def inputs(self) -> list[tuple]:
        return [k for k in self.terms if k[0] == "in"]

    def evaluate(self, env: Mapping[tuple, int]) -> int:
        return self.c + sum(v * env[k] for k, v in self.terms.items())

    def __repr__(self) -> str:
        parts = [str(self.c)] if self.c or not self.terms else []
        parts += [f"{v}*{k}" if v != 1 else str(k) for k, v in self.terms.items()]
        return " + ".join(parts)


def input_value(rank: int, iteration: int, element: int, bounds: Bounds, elements: int) -> int:
    """The concrete value of an input element: a distinct power of :data:`INPUT_BASE`."""
    index = (iteration * bounds.ranks + rank) * elements + element
    return INPUT_BASE ** (INPUT_OFFSET + index)


@dataclass(eq=False)
class Event:
    """One memory event (or fence / barrier) of the unrolled program."""

    id: int
    kind: str  # "W", "R", "RMW", "F", "BAR"
    thread: int
    rank: int
    instr: int  # program-order index of its instruction within the thread
    loc: tuple | None = None  # (buffer, owner rank, flat line, word)
    sem: str = "weak"  # weak | relaxed | acquire | release | acq_rel | sc (fences)
    scope: str = "sys"
    value: Lin | None = None  # value written (W, RMW)
    rmw_op: str | None = None
    label: str = ""
    iteration: int = 0
    role: str | None = None  # "data" | "flag" for memory events
    slot: int = 0
    region: int = 0
    line: int = 0
    word: int = 0
    wgroup: int | None = None
    rgroup: int | None = None
    poll: int | None = None  # id of the poll instruction (per line) this read belongs to
    polled: bool = False  # a word the poll predicate inspects
    consumer: str | None = None  # register the value goes to
    bar: tuple | None = None  # (rank, k): the k-th barrier of the rank
    fill: str | None = None  # "zero" / "sentinel" for Fill stores
    deps: frozenset[int] = frozenset()  # data dependencies (read events); control ones follow from polls
    returns_value: bool = True  # False for a ``red``: its read is not a read for acquire patterns
    writes_if: Any = None  # z3 Bool over read values: a ``cas`` writes only when it holds (None: always)

    @property
    def is_write(self) -> bool:
        return self.kind in ("W", "RMW")

    @property
    def is_read(self) -> bool:
        return self.kind in ("R", "RMW")

    @property
    def is_mem(self) -> bool:
        return self.kind in ("W", "R", "RMW")

    @property
    def strong(self) -> bool:
        return self.sem != "weak"

    def where(self) -> str:
        if self.loc is None:
            return ""
        buf, owner, _flat, word = self.loc
        return f"{buf}@rank{owner}[slot {self.slot}, region {self.region}, line {self.line}, word {word}]"


@dataclass
class Instr:
    """One instruction of one thread: its events share program order."""

    thread: int
    index: int
    kind: str  # store | load | poll | rmw | fence | bar
    events: list[Event]
    label: str
    iteration: int
    predicate: tuple | None = None  # polls: ("eq"|"ge"|"ne", value)
    id: int = -1


@dataclass
class Lowered:
    """The unrolled, element-level program of every rank."""

    protocol: str
    algorithm: str
    bounds: Bounds
    msg: int
    assumptions: tuple[str, ...]
    events: list[Event]
    threads: list[list[Instr]]
    placement: list[tuple[int, int, int]]  # thread -> (rank, cta, gpu)
    init: dict[tuple, int]
    outputs: dict[tuple, Lin | None]  # (rank, iteration, element) -> value (None: not modelled)
    expected_outputs: dict[tuple, Lin]
    word_bytes: int
    elements: int  # input elements per rank per iteration
    sentinel: int | None
    forbidden_word: int | None
    notes: list[str] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    locs: dict[tuple, list[Event]] = field(default_factory=dict)  # memory events by location
    wgroups: dict[int, list[Event]] = field(default_factory=dict)
    rgroups: dict[int, list[Event]] = field(default_factory=dict)
    flat_signature: str = ""
    #: event id -> z3 Bool over read values (``v<id>``): the event runs iff it holds.
    #: Empty for lowered protocols (every event runs); set for programs converted
    #: from the event interface (:mod:`collsim.verify.bridge`).
    guards: dict[int, Any] = field(default_factory=dict)

    def input_env(self, symbolic: bool = False) -> dict[tuple, int]:
        env = {}
        for r in range(self.bounds.ranks):
            for i in range(self.bounds.iterations):
                for e in range(self.elements):
                    env[("in", r, i, e)] = input_value(r, i, e, self.bounds, self.elements)
        return env

    def writes_at(self, loc: tuple) -> list[Event]:
        return [e for e in self.locs.get(loc, ()) if e.is_write]

    def reads_at(self, loc: tuple) -> list[Event]:
        return [e for e in self.locs.get(loc, ()) if e.is_read]


def message_bytes(protocol: Protocol, algorithm: str, bounds: Bounds) -> int:
    """The tiny message: ``bounds.lines`` lines per send (per chunk for chunked algorithms)."""
    per_line = protocol.data_layout.data_bytes
    want = bounds.lines * per_line
    size = transfer_bytes(protocol, algorithm)
    whole = {"MSG": want, "NRANKS": bounds.ranks, "RANK": 0, "ITER": 0}
    msg = want * bounds.ranks
    if size.evaluate(whole) == want and size.evaluate({**whole, "MSG": msg}) == msg:
        return want  # the algorithm sends the whole message at once
    chunk = size.evaluate({**whole, "MSG": msg})
    if chunk != want:
        raise UnsupportedError(f"cannot size a message of {bounds.lines} line(s) per chunk for {algorithm}")
    return msg


def _sentinel(protocol: Protocol, program: Program) -> int | None:
    """The sentinel pattern: the value ``NotEqual`` polls compare against, else the data domain's word."""
    values = {op.until.value for op in walk(program.ops) if isinstance(op, PollUntil) and isinstance(op.until, NotEqual)}
    if len(values) > 1:
        raise UnsupportedError(f"protocol {protocol.name!r} polls against several sentinels {sorted(values)}")
    if values:
        return values.pop()
    if protocol.data_domain is not None:
        return protocol.data_domain.forbidden_word
    return None


def _kept_words(layout: LineLayout, max_lanes: int) -> tuple[tuple[int, ...], str | None]:
    """Word indices modelled for ``layout`` and a note when lanes were dropped."""
    lanes = layout.lanes
    if lanes <= max_lanes:
        return tuple(range(len(layout.words))), None
    kept_lanes = set(range(max_lanes - 1)) | {lanes - 1}
    words = tuple(i for i in range(len(layout.words)) if layout.lane_of(i) in kept_lanes)
    note = (f"layout {layout.name}: {max_lanes} of {lanes} lanes modelled (lanes "
            f"{', '.join(str(l) for l in sorted(kept_lanes))}); the dropped lanes carry data only and are "
            f"symmetric to the kept data lanes, and the flag stays in the last lane")
    return words, note


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        self.parent[self.find(a)] = self.find(b)


def _chunks(layout: LineLayout, words: Iterable[int], assumptions: list[Assumption]) -> list[list[int]]:
    """Partition ``words`` (of one line access) into the atomic granules the assumptions declare."""
    words = list(words)
    uf = _UnionFind()
    for w in words:
        uf.find(w)
    for a in assumptions:
        by_key: dict[Any, int] = {}
        for w in words:
            offset = layout.word_offset(w)
            if a.across_lanes:
                key = offset // a.granule_bytes
            else:
                # one store instruction: granules never cross a lane's store
                key = (layout.lane_of(w), (offset % layout.store_bytes) // a.granule_bytes)
            if key in by_key:
                uf.union(w, by_key[key])
            else:
                by_key[key] = w
    groups: dict[Any, list[int]] = {}
    for w in words:
        groups.setdefault(uf.find(w), []).append(w)
    return [g for g in groups.values() if len(g) > 1]


class _Lowerer:
    def __init__(self, protocol: Protocol, algorithm: str, bounds: Bounds, assumptions: tuple[str, ...]) -> None:
        self.protocol = protocol
        self.algorithm = algorithm
        self.bounds = bounds
        self.assumptions = assumptions
        self.active = [get_assumption(a) for a in assumptions]
        self.program = generate(protocol, algorithm)
        self.buffers = {b.name: b for b in self.program.buffers}
        self.msg = message_bytes(protocol, algorithm, bounds)
        self.word_bytes = protocol.data_layout.data_word_bytes
        self.elements = self.msg // self.word_bytes
        self.sentinel = _sentinel(protocol, self.program)
        self.events: list[Event] = []
        self.T = bounds.threads
        nthreads = bounds.ranks * self.T
        self.threads: list[list[Instr]] = [[] for _ in range(nthreads)]
        self.placement = [(t // self.T, t // self.T, t // self.T) for t in range(nthreads)]
        self.init: dict[tuple, int] = {}
        self.outputs: dict[tuple, Lin | None] = {}
        self.expected: dict[tuple, Lin] = {}
        self.notes: list[str] = []
        self.kept: dict[str, tuple[int, ...]] = {}
        self.bar_count = [0] * bounds.ranks
        self.next_group = 0
        self.signature: list[str] = []
        for buf in self.program.buffers:
            words, note = _kept_words(buf.layout, bounds.max_lanes)
            self.kept[buf.name] = words
            if note and note not in self.notes:
                self.notes.append(note)
        if self.elements * self.word_bytes != self.msg:
            raise UnsupportedError("message is not a whole number of data words")

    # -- helpers -----------------------------------------------------------
    def env(self, rank: int, iteration: int) -> dict[str, int]:
        return {"RANK": rank, "NRANKS": self.bounds.ranks, "ITER": iteration, "MSG": self.msg}

    def thread_of(self, rank: int, t: int) -> int:
        return rank * self.T + t

    def new_instr(self, thread: int, kind: str, label: str, iteration: int, predicate=None) -> Instr:
        instr = Instr(thread, len(self.threads[thread]), kind, [], label, iteration, predicate)
        self.threads[thread].append(instr)
        return instr

    def add_event(self, instr: Instr, **kw: Any) -> Event:
        ev = Event(id=len(self.events), thread=instr.thread, rank=self.placement[instr.thread][0],
                   instr=instr.index, label=instr.label, iteration=instr.iteration, **kw)
        self.events.append(ev)
        instr.events.append(ev)
        return ev

    def group_id(self) -> int:
        self.next_group += 1
        return self.next_group

    def line_items(self, ref, issuer: Issuer, rank: int) -> list[tuple[int, int]]:
        """(relative line j, thread) for each line of ``ref``."""
        items = []
        for j in range(ref.lines):
            t = j % self.T if issuer is Issuer.ALL else 0
            items.append((j, self.thread_of(rank, t)))
        return items

    def loc(self, ref, j: int, word: int, env) -> tuple:
        buf = self.buffers[ref.buffer]
        flat = buf.line_index(ref.slot, ref.region, ref.line + j, env)
        loc = (ref.buffer, ref.rank, flat, word)
        if loc not in self.init:
            layout = buf.layout
            if buf.init == "sentinel" and layout.words[word].role is WordRole.DATA:
                if self.sentinel is None:
                    raise UnsupportedError(f"buffer {buf.name} starts as the sentinel, but the protocol names none")
                self.init[loc] = self.sentinel
            else:
                self.init[loc] = 0
        return loc

    def data_words(self, buf: Buffer) -> list[tuple[int, int]]:
        """(word index, data ordinal) for the modelled data words of a line."""
        layout = buf.layout
        kept = set(self.kept[buf.name])
        return [(w, k) for k, w in enumerate(layout.data_words) if w in kept]

    def flag_words(self, buf: Buffer) -> list[int]:
        kept = set(self.kept[buf.name])
        return [w for w in buf.layout.flag_words if w in kept]

    def source_value(self, src, regs, rank: int, iteration: int, byte: int) -> Lin | None:
        if isinstance(src, Input):
            element = (src.offset + byte) // self.word_bytes
            if not 0 <= element < self.elements:
                return Lin.const(0)  # padding beyond the message
            return Lin.atom(("in", rank, iteration, element))
        if isinstance(src, Fill):
            if src.pattern == "zero":
                return Lin.const(0)
            if self.sentinel is None:
                raise UnsupportedError("a Fill('sentinel') needs a sentinel value")
            return Lin.const(self.sentinel)
        if isinstance(src, Reg):
            return regs.get(src.name, {}).get(int(src.offset) + byte)
        if isinstance(src, tuple) and src[0] == "reg":  # one slice of a multi-operand Reg
            return regs.get(src[1], {}).get(src[2] + byte)
        raise UnsupportedError(f"unknown data source {src!r}")

    def reg_slices(self, src) -> list:
        if isinstance(src, Reg):
            return [("reg", src.name, int(src.offset) + k * int(src.stride)) for k in range(int(src.count))]
        return [src]

    def groups_for(self, ev_by_word: dict[int, Event], layout: LineLayout, attr: str) -> None:
        for chunk in _chunks(layout, ev_by_word, self.active):
            gid = self.group_id()
            for w in chunk:
                setattr(ev_by_word[w], attr, gid)

    # -- operations ----------------------------------------------------------
    def lower_op(self, flat: FlatOp, rank: int, iteration: int, regs: dict, env) -> None:
        op = flat.op
        name = flat.name
        if isinstance(op, Store):
            self.store(op, name, rank, iteration, regs, env)
        elif isinstance(op, (Load, PollUntil)):
            self.load(op, name, rank, iteration, regs, env)
        elif isinstance(op, Atomic):
            self.atomic(op, name, rank, iteration, regs, env)
        elif isinstance(op, Fence):
            threads = range(self.T) if op.issuer is Issuer.ALL else (0,)
            for t in threads:
                instr = self.new_instr(self.thread_of(rank, t), "fence", name, iteration)
                self.add_event(instr, kind="F", sem=op.kind.value if op.kind.value == "sc" else "acq_rel",
                               scope=op.scope.value)
        elif isinstance(op, SyncGroup):
            self.barrier(rank, name, iteration)
        elif isinstance(op, KernelBoundary):
            for t in range(self.T):
                instr = self.new_instr(self.thread_of(rank, t), "fence", name, iteration)
                self.add_event(instr, kind="F", sem="sc", scope="sys")
            self.barrier(rank, name, iteration)
        elif isinstance(op, Reduce):
            if op.op != "sum":
                raise UnsupportedError(f"reduce op {op.op!r} is not modelled (only 'sum')")
            result = {}
            for byte in range(0, op.nbytes, self.word_bytes):
                total: Lin | None = Lin.const(0)
                for src in op.srcs:
                    for piece in self.reg_slices(src):
                        v = self.source_value(piece, regs, rank, iteration, byte)
                        total = None if (v is None or total is None) else total + v
                result[byte] = total
                if op.output_offset is not None:
                    self.output(rank, iteration, op.output_offset + byte, total)
            regs.setdefault(op.into, {}).update({b: v for b, v in result.items() if v is not None})
            for b, v in result.items():
                if v is None:
                    regs[op.into].pop(b, None)
        elif isinstance(op, WriteOutput):
            for byte in range(0, op.nbytes, self.word_bytes):
                self.output(rank, iteration, op.offset + byte, self.source_value(op.src, regs, rank, iteration, byte))
        else:
            raise UnsupportedError(f"operation {type(op).__name__} is not modelled by the verifier")

    def output(self, rank: int, iteration: int, byte: int, value: Lin | None) -> None:
        element = byte // self.word_bytes
        if 0 <= element < self.elements:
            self.outputs[(rank, iteration, element)] = value

    def barrier(self, rank: int, name: str, iteration: int) -> None:
        if self.T == 1:
            return
        k = self.bar_count[rank]
        self.bar_count[rank] += 1
        for t in range(self.T):
            instr = self.new_instr(self.thread_of(rank, t), "bar", name, iteration)
            self.add_event(instr, kind="BAR", bar=(rank, k), sem="acq_rel", scope="cta")

    def store(self, op: Store, name: str, rank: int, iteration: int, regs, env) -> None:
        buf = self.buffers[op.dst.buffer]
        layout = buf.layout
        for j, thread in self.line_items(op.dst, op.issuer, rank):
            instr = self.new_instr(thread, "store", name, iteration)
            by_word: dict[int, Event] = {}
            if op.src is not None:
                for w, k in self.data_words(buf):
                    value = self.source_value(op.src, regs, rank, iteration, j * layout.data_bytes + k * layout.words[w].nbytes)
                    if value is None:
                        continue  # an element of a shrunk lane
                    by_word[w] = self.mem_event(instr, "W", op, op.dst, j, w, env, value=value,
                                                fill=op.src.pattern if isinstance(op.src, Fill) else None)
            if op.flag is not None:
                for w in self.flag_words(buf):
                    by_word[w] = self.mem_event(instr, "W", op, op.dst, j, w, env, value=Lin.const(op.flag))
            self.groups_for(by_word, layout, "wgroup")

    def mem_event(self, instr: Instr, kind: str, op, ref, j: int, word: int, env, **kw) -> Event:
        buf = self.buffers[ref.buffer]
        value = kw.get("value")
        deps = frozenset(value.reads()) if value is not None else frozenset()
        return self.add_event(
            instr, kind=kind, loc=self.loc(ref, j, word, env), sem=op.sem.model_sem, scope=op.scope.value,
            role=buf.layout.words[word].role.value, slot=ref.slot, region=ref.region, line=ref.line + j, word=word,
            deps=deps, **kw)

    def load(self, op, name: str, rank: int, iteration: int, regs, env) -> None:
        src = op.src
        buf = self.buffers[src.buffer]
        layout = buf.layout
        into = op.into
        poll = isinstance(op, PollUntil)
        predicate = None
        if poll:
            until = op.until
            if isinstance(until, Equals):
                predicate = ("eq", until.value)
            elif isinstance(until, AtLeast):
                predicate = ("ge", until.value)
            elif isinstance(until, NotEqual):
                predicate = ("ne", until.value)
            else:
                raise UnsupportedError(f"poll predicate {until!r} is not modelled")
            polled_words = set(layout.poll_words)
        data = {w: k for w, k in self.data_words(buf)}
        for j, thread in self.line_items(src, op.issuer, rank):
            instr = self.new_instr(thread, "poll" if poll else "load", name, iteration, predicate)
            by_word: dict[int, Event] = {}
            words = self.kept[buf.name] if poll else [w for w in self.kept[buf.name] if w in data]
            for w in words:
                ev = self.mem_event(instr, "R", op, src, j, w, env)
                if poll:
                    ev.polled = w in polled_words
                if into is not None and w in data:
                    ev.consumer = into
                    offset = op.into_offset + j * layout.data_bytes + data[w] * layout.words[w].nbytes
                    regs.setdefault(into, {})[offset] = Lin.atom(("rd", ev.id))
                by_word[w] = ev
            self.groups_for(by_word, layout, "rgroup")

    def atomic(self, op: Atomic, name: str, rank: int, iteration: int, regs, env) -> None:
        buf = self.buffers[op.dst.buffer]
        layout = buf.layout
        if op.op not in (RmwOp.ADD, RmwOp.EXCH):
            raise UnsupportedError(f"atomic {op.op.value} is not modelled (add and exch are)")
        data = {w: k for w, k in self.data_words(buf)}
        for j, thread in self.line_items(op.dst, op.issuer, rank):
            instr = self.new_instr(thread, "rmw", name, iteration)
            for w in self.kept[buf.name]:
                if isinstance(op.operand, (Input, Reg, Fill)):
                    if w not in data:
                        continue
                    operand = self.source_value(op.operand, regs, rank, iteration,
                                                j * layout.data_bytes + data[w] * layout.words[w].nbytes)
                    if operand is None:
                        continue
                else:
                    operand = Lin.const(int(op.operand))  # type: ignore[arg-type]
                ev = self.mem_event(instr, "RMW", op, op.dst, j, w, env, rmw_op=op.op.value)
                ev.value = (Lin.atom(("rd", ev.id)) + operand) if op.op is RmwOp.ADD else operand
                ev.deps = ev.deps | frozenset(operand.reads())
                if op.into is not None and w in data:
                    ev.consumer = op.into
                    offset = op.into_offset + j * layout.data_bytes + data[w] * layout.words[w].nbytes
                    regs.setdefault(op.into, {})[offset] = Lin.atom(("rd", ev.id))

    # -- driver --------------------------------------------------------------
    def run(self) -> Lowered:
        for iteration in range(self.bounds.iterations):
            for e in range(self.elements):
                self.expected_sum(iteration, e)
        for rank in range(self.bounds.ranks):
            regs: dict[str, dict[int, Lin]] = {}
            for iteration in range(self.bounds.iterations):
                env = self.env(rank, iteration)
                for flat in self.program.flatten(env):
                    self.signature.append(f"{rank}/{iteration}/{flat.name}:{flat.op!r}")
                    self.lower_op(flat, rank, iteration, regs, env)
        instrs = [i for thread in self.threads for i in thread]
        for n, instr in enumerate(instrs):
            instr.id = n
            for ev in instr.events:
                if instr.kind == "poll":
                    ev.poll = n
        locs: dict[tuple, list[Event]] = {}
        wgroups: dict[int, list[Event]] = {}
        rgroups: dict[int, list[Event]] = {}
        for ev in self.events:
            if ev.loc is not None:
                locs.setdefault(ev.loc, []).append(ev)
            if ev.wgroup is not None:
                wgroups.setdefault(ev.wgroup, []).append(ev)
            if ev.rgroup is not None:
                rgroups.setdefault(ev.rgroup, []).append(ev)
        return Lowered(
            protocol=self.protocol.name, algorithm=self.algorithm, bounds=self.bounds, msg=self.msg,
            assumptions=self.assumptions, events=self.events, threads=self.threads, placement=self.placement,
            init=self.init, outputs=self.outputs, expected_outputs=self.expected, word_bytes=self.word_bytes,
            elements=self.elements, sentinel=self.sentinel,
            forbidden_word=self.protocol.data_domain.forbidden_word if self.protocol.data_domain else None,
            notes=self.notes, instrs=instrs, locs=locs, wgroups=wgroups, rgroups=rgroups,
            flat_signature="\n".join(self.signature),
        )

    def expected_sum(self, iteration: int, element: int) -> None:
        total = Lin.const(0)
        for r in range(self.bounds.ranks):
            total = total + Lin.atom(("in", r, iteration, element))
        for r in range(self.bounds.ranks):
            self.expected[(r, iteration, element)] = total


def lower(protocol: Protocol, algorithm: str, bounds: Bounds | None = None,
          assumptions: Iterable[str] | None = None) -> Lowered:
    """Unroll ``protocol`` under ``algorithm`` into element-level events.

    ``assumptions`` defaults to the protocol's declared ones; the verifier
    passes a subset to re-check without one.
    """
    bounds = bounds or Bounds()
    active = tuple(protocol.assumptions if assumptions is None else assumptions)
    return _Lowerer(protocol, algorithm, bounds, active).run()


# ---------------------------------------------------------------------------
# The reference execution
# ---------------------------------------------------------------------------


@dataclass
class RefRun:
    """One fair SC execution: the "intended" behaviour the properties compare against."""

    completed: bool
    rf: dict[int, int | None]  # read event -> write event (None: the initial value)
    read_values: dict[int, int]
    co: dict[tuple, list[int | None]]  # location -> writes in coherence order (None first: init)
    stuck: list[tuple[int, str]]  # (thread, instruction label) where the run stopped
    steps: int = 0

    def position(self, loc: tuple, write: int | None) -> int:
        order = self.co.get(loc, [None])
        return order.index(write) if write in order else -1


def _holds(predicate: tuple, value: int) -> bool:
    kind, target = predicate
    if kind == "eq":
        return value == target
    if kind == "ge":
        return value >= target
    return value != target


def reference_run(low: Lowered, max_rounds: int = 100000) -> RefRun:
    """Execute ``low`` under a round-robin schedule, one whole instruction at a time."""
    env: dict[tuple, int] = dict(low.input_env())
    memory: dict[tuple, tuple[int, int | None]] = {loc: (v, None) for loc, v in low.init.items()}
    co: dict[tuple, list[int | None]] = {loc: [None] for loc in low.init}
    rf: dict[int, int | None] = {}
    values: dict[int, int] = {}
    pcs = [0] * len(low.threads)
    # barrier arrivals: (rank, k) -> set of threads waiting
    steps = 0
    rounds = 0
    while True:
        progressed = False
        for t, thread in enumerate(low.threads):
            if pcs[t] >= len(thread):
                continue
            instr = thread[pcs[t]]
            if instr.kind == "bar":
                key = instr.events[0].bar
                waiting = [u for u, th in enumerate(low.threads)
                           if pcs[u] < len(th) and th[pcs[u]].kind == "bar" and th[pcs[u]].events[0].bar == key]
                members = sum(1 for p in low.placement if p[0] == key[0])
                if len(waiting) == members:
                    for u in waiting:
                        pcs[u] += 1
                    progressed = True
                continue
            if instr.kind == "poll":
                ok = all(_holds(instr.predicate, memory[e.loc][0]) for e in instr.events if e.polled)
                if not ok:
                    continue
            for ev in instr.events:
                if ev.is_read:
                    value, source = memory[ev.loc]
                    rf[ev.id] = source
                    values[ev.id] = value
                    env[("rd", ev.id)] = value
            for ev in instr.events:
                if ev.is_write:
                    memory[ev.loc] = (ev.value.evaluate(env), ev.id)
                    co[ev.loc].append(ev.id)
            pcs[t] += 1
            steps += 1
            progressed = True
        rounds += 1
        if all(pcs[t] >= len(th) for t, th in enumerate(low.threads)):
            return RefRun(True, rf, values, co, [], steps)
        if not progressed or rounds > max_rounds:
            stuck = [(t, th[pcs[t]].label) for t, th in enumerate(low.threads) if pcs[t] < len(th)]
            return RefRun(False, rf, values, co, stuck, steps)


# ---------------------------------------------------------------------------
# The model layer's event language
# ---------------------------------------------------------------------------


def to_event_program(low: Lowered, symbolic_inputs: bool = False):
    """The same events as a :class:`collsim.verify.events.Program`, for the model layer's encodings.

    Elements of one instruction get consecutive ``po_index`` values (the
    event interface orders every event of a thread); polls become one read
    per word with the exit predicate as an assumption and a control
    dependency of everything after them; data dependencies are kept within
    a thread. Returns ``(program, eid_of)`` where ``eid_of`` maps event ids
    to the program's event names.
    """
    import z3

    from collsim.verify.events import Event as MEvent
    from collsim.verify.events import Placement, Program

    eid_of = {e.id: f"e{e.id}.{e.label}" + (f".w{e.word}" if e.loc is not None else "") for e in low.events}
    inputs = {k: (z3.Int("in_%d_%d_%d" % k[1:]) if symbolic_inputs else z3.IntVal(v))
              for k, v in low.input_env().items()}

    def term(value: Lin):
        parts = [z3.IntVal(value.c)] if value.c or not value.terms else []
        for key, coeff in value.terms.items():
            atom = inputs[key] if key[0] == "in" else z3.Int("val!" + eid_of[key[1]])
            parts.append(atom if coeff == 1 else coeff * atom)
        return parts[0] if len(parts) == 1 else z3.Sum(parts)

    events = []
    assumptions = []
    placement = {f"t{t}": Placement(cta=0, gpu=low.placement[t][0]) for t in range(len(low.threads))}
    for t, thread in enumerate(low.threads):
        po = 0
        ctrl: set[str] = set()
        for instr in thread:
            for e in instr.events:
                deps = frozenset(eid_of[d] for d in e.deps if low.events[d].thread == t) | frozenset(ctrl)
                kw: dict[str, Any] = dict(eid=eid_of[e.id], thread=f"t{t}", kind=e.kind, po_index=po, deps=deps,
                                          label=f"{e.label} {e.where()}".strip())
                po += 1
                if e.is_mem:
                    kw.update(loc=repr(e.loc), sem=e.sem, scope=e.scope)
                    group = e.wgroup if e.is_write else e.rgroup
                    if group is not None:
                        kw["atomic_group"] = f"g{group}"
                    if e.kind == "W":
                        kw["value"] = term(e.value)
                    elif e.kind == "RMW":
                        if e.rmw_op == "add":
                            kw.update(rmw_op="add", operand=term(e.value + Lin.atom(("rd", e.id), -1)))
                        else:
                            kw.update(rmw_op="exch", operand=term(e.value))
                elif e.kind == "F":
                    kw.update(sem=e.sem, scope=e.scope)
                else:
                    kw.update(bar_instance=f"{e.bar[0]}:{e.bar[1]}", scope="cta")
                events.append(MEvent(**kw))
            if instr.kind == "poll":
                kind, target = instr.predicate
                for e in instr.events:
                    if e.polled:
                        v = z3.Int("val!" + eid_of[e.id])
                        assumptions.append(v == target if kind == "eq" else v >= target if kind == "ge" else v != target)
                ctrl |= {eid_of[e.id] for e in instr.events}
    init = {repr(loc): v for loc, v in low.init.items()}
    program = Program(events, placement, init, assumptions, name=f"{low.protocol}/{low.algorithm}")
    return program, eid_of
