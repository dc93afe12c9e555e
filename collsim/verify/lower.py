"""Lowering: a protocol program, bound for a tiny instance, becomes the verifier's element events.

The verifier does not reason about ranges or loops. It takes the program an
algorithm generates from a protocol, binds it for a few ranks and launches
(``ITER`` = 0, 1, ...) with a message of one or two lines per chunk, and
expands every operation into *events* (:mod:`collsim.verify.instance`): one
per scalar element accessed, as the PTX memory model sees them (PTX ISA
§8.2.4: a vector access is a set of scalar element accesses, at most 8 bytes
each, in unspecified order).

What the expansion decides
--------------------------
* **Threads.** A rank is ``Bounds.ctas`` CTAs (one unless the protocol
  declares more) on its own GPU, each of ``Bounds.threads`` threads; a thread
  is (rank, CTA, thread), and scopes include exactly: the same CTA for
  ``cta``, the same GPU for ``gpu``, every GPU for ``sys``. Every CTA runs the
  program with its own ``CTA``. ``Issuer.ALL`` operations are strided over a
  CTA's threads by line (line ``j`` of a range goes to thread
  ``j % threads``); ``Issuer.LEADER`` operations run on each CTA's thread 0,
  ``Issuer.GRID_LEADER`` ones on thread 0 of CTA 0 only; ``SyncGroup`` is a
  ``bar.sync`` of one CTA's threads (omitted with one thread). A buffer
  declared ``per_cta`` has one copy per CTA index in every rank.
* **Instructions.** One line handled by one thread is one instruction: its
  element events share a program-order index and are unordered among
  themselves. The lanes of a wide line (LL128: eight 16-byte stores) are
  modelled as one warp-wide access, so its elements are unordered too.
* **Proxy threads.** A program with a ``ProxyThread`` gets one more thread
  per rank, after the ranks' CTA threads: the host proxy, placed in no CTA
  and on no GPU (so only ``sys`` scope includes it). Its body of every
  launch follows the previous launch's in its program order (the proxy
  serves one round per launch); under the host-ordering assumption
  ``host-tso`` (:data:`~collsim.ir.ops.HOST_ORDERING`, x86-TSO or stronger)
  its loads are acquires and its stores releases at ``sys`` scope; without
  it they are relaxed at ``sys`` scope, ordered only by the body's fences.
* **The async proxy.** A ``BulkLoad`` (``cp.async.bulk``) gets a thread of
  its own in the rank's CTA, the copy engine: the leader hands it the copy
  with a relaxed store to a mailbox it polls (relaxed), it reads the source
  lines and releases a completion mailbox every thread of the rank acquires
  (the mbarrier wait). A ``ProxyFence`` (``fence.proxy.async``) is a release
  store to a fence mailbox that the copy engines of the thread's later bulk
  copies acquire: only through it are the generic accesses before the fence
  ordered before the async reads (PTX ISA, memory consistency model,
  proxies). The mailboxes are the verifier's picture of that ordering, no
  memory of the program.
* **Launches.** ``KernelBoundary`` becomes ``fence.sc.sys`` in every thread
  followed by a barrier of the rank's threads (stream order); with several
  CTAs per rank, the CTAs' threads 0 then meet through release/acquire
  mailboxes at gpu scope, the verifier's picture of the next launch starting
  after the whole previous grid finished. A protocol
  replayed from a CUDA graph (``graph_replay``) sees ``ARG_ITER`` = 0, the
  capture launch's index, in every launch; ``ITER`` still counts launches.
* **Atomicity.** A declared hardware assumption joins elements into atomic
  groups (:mod:`collsim.verify.granules`). The reads of one load instruction
  that fall in one granule form a read group, which sees a write group all
  or not at all.
* **Polls.** Only the load that ends a spin is an event (the Dartagnan
  convention: executions in which every thread finishes); the hang check
  adds a "stuck" choice per poll instead.
* **Values.** Every value is a linear term over input elements and read
  events (:class:`~collsim.verify.instance.Lin`).
* **Layout shrink.** A line wider than ``Bounds.max_lanes`` lanes keeps its
  first ``max_lanes - 1`` lanes and its last lane (where LL128 puts the
  flag); the result states the shrink.
"""
from __future__ import annotations

import os
import sys
from dataclasses import replace

import z3
from typing import Any, Iterable, NamedTuple

from collsim.algorithms import generate, transfer_bytes
from collsim.ir.checks import check_protocol_program, cta_scope_findings, host_scope_findings
from collsim.ir.effects import effects
from collsim.ir.origin import shown_path
from collsim.errors import UnsupportedError
from collsim.ir.assumptions import get_assumption
from collsim.ir.buffers import Buffer
from collsim.ir.layout import LineLayout, WordRole
from collsim.ir.ops import (HOST_ORDERING, AtLeast, Atomic, Fence, Fill, HostBarrier, HostMemset, Input, KernelBoundary,
                            Load, Loop, MultimemLoadReduce, MultimemRed, MultimemStore, PollUntil, Predicate,
                            ProxyThread, Reduce, Reg, Store, SyncGroup, When, WriteOutput, BulkLoad, ProxyFence)
from collsim.ir.program import walk
from collsim.ir.protocol import Protocol
from collsim.ir.types import FenceKind, FillPattern, Issuer, RmwOp, Scope, Sem
from collsim.ir.visit import OpVisitor
from collsim.verify.granules import atomic_groups, kept_words
from collsim.verify.events import AtomicGroup, Placement, value_const
from collsim.verify.instance import Bounds, EventKind, InstrKind, Lin, VerifyEvent, VerifyInstance, VerifyInstr

__all__ = ["lower_instance", "message_bytes", "DataPath", "data_path", "REALISTIC_LINES", "op_source",
           "host_ordering_note"]

#: lines per send of the realistic message :func:`data_path` inspects (a chunk of a few KiB)
REALISTIC_LINES = 64


def op_source(op: Any) -> str:
    """Where protocol code emitted ``op``, as counterexamples name it: ``file:line`` of the innermost frame of
    protocol code, and the first frame in another file after it (a mutant's hook calling its base protocol's
    code, or a builder wrapper); ``""`` for an operation collsim's algorithm emitted.

    >>> from collsim.ir.ops import SyncGroup
    >>> from collsim.ir.origin import SourceLocation
    >>> op_source(SyncGroup(origin=SourceLocation((("m.py", 3), ("m.py", 9), ("base.py", 40)))))
    'm.py:3 (from base.py:40)'
    """
    origin = getattr(op, "origin", None)
    if origin is None:
        return ""
    (file, line), rest = origin.frames[0], origin.frames[1:]
    text = f"{_module_path(file)}:{line}"
    other = next(((f, n) for f, n in rest if f != file), None)
    if other is not None:
        text += f" (from {_module_path(other[0])}:{other[1]})"
    return text


def host_ordering_note(assumed: bool) -> str:
    """The note a verdict on a program with proxy threads carries: how the host's own accesses were ordered.

    >>> host_ordering_note(False)[:40]
    'host ordering not assumed (no host-tso):'
    """
    if assumed:
        return (f"host ordering assumed for the proxy threads ({HOST_ORDERING}): "
                + get_assumption(HOST_ORDERING).statement)
    return (f"host ordering not assumed (no {HOST_ORDERING}): the proxy threads' loads and stores are relaxed at sys "
            "scope, ordered only by the fences their bodies state")


def _op_where(op: Any) -> str:
    """``file:line`` of ``op`` (:func:`op_source`), or its label when collsim's algorithm emitted it."""
    return op_source(op) or getattr(op, "label", type(op).__name__)


def _module_path(file: str) -> str:
    """A protocol file as counterexamples name it, the same in every process and working directory: as the
    import system found it when that was relative (``protocols/ll.py``), relative to the ``sys.path`` entry
    it was imported from, else relative to the working directory when below it, else as it is."""
    if not os.path.isabs(file):
        return file
    for entry in sys.path:
        root = os.path.abspath(entry or os.curdir)
        if file.startswith(root + os.sep) and os.path.isdir(os.path.join(root, file[len(root) + 1:].split(os.sep)[0])):
            return os.path.relpath(file, root)
    return shown_path(file)


class DataPath(NamedTuple):
    """How wide a protocol's data path is at a realistic size, and the default bound it asks for.

    ``lines`` is the most lines one data-carrying operation covers, ``lanes`` the store lanes of the
    data layout's line, ``shared`` whether several threads of a rank split one such operation's lines
    (``Issuer.ALL``). A path with more than one line or lane gets :attr:`default_lines` =
    :attr:`default_threads` = 2: the verifier's threads take lines in turn, so ordering bugs between
    the threads of a block (a flag published before another thread's data) exist only there.
    """

    lines: int
    lanes: int
    shared: bool

    @property
    def wide(self) -> bool:
        return self.lines > 1 or self.lanes > 1

    @property
    def default_lines(self) -> int:
        return 2 if self.wide else 1

    @property
    def default_threads(self) -> int:
        return 2 if self.wide else 1

    def describe(self, threads: bool = True, lines: bool = True) -> str:
        """Why the default bound has the threads and lines it has (printed with the bound).

        ``threads`` and ``lines`` say which of the two the defaults decided (the others were given): the
        note names only those.

        >>> path = DataPath(lines=64, lanes=1, shared=True)
        >>> path.describe(lines=False)[:60]
        'default of 2 threads per rank, since the data path is wider '
        """
        if threads and lines:
            narrow, bound = "1 thread x 1 line", "bound of 2 threads x 2 lines per chunk"
            flags = "--threads/--lines override"
        elif threads:
            narrow, bound, flags = "1 thread per rank", "of 2 threads per rank", "--threads overrides"
        else:
            narrow, bound, flags = "1 line per chunk", "of 2 lines per chunk", "--lines overrides"
        if not self.wide:
            return f"data path of one line and one lane: {narrow} covers it"
        what = []
        if self.lines > 1:
            what.append(f"one operation covers up to {self.lines} lines of a {REALISTIC_LINES}-line send"
                        + (", split among the block's threads" if self.shared else ""))
        if self.lanes > 1:
            what.append(f"a line has {self.lanes} store lanes")
        return f"default {bound}, since the data path is wider than one: " + " and ".join(what) + f" ({flags})"


def data_path(protocol: Protocol, algorithm: str) -> DataPath:
    """The width of ``protocol``'s data path under ``algorithm`` (see :class:`DataPath`).

    The program is bound at 4 ranks with :data:`REALISTIC_LINES` lines per send; every operation that
    moves data (a data source, or data into a register) counts.

    >>> from collsim.ir.registry import load_protocol
    >>> data_path(load_protocol("simple"), "one-shot").default_threads
    2
    """
    per_line = protocol.data_layout.data_bytes
    nranks = 4
    want = REALISTIC_LINES * per_line
    ctas = protocol.ctas
    size = transfer_bytes(protocol, algorithm)
    env = {"MSG": want * ctas, "NRANKS": nranks, "RANK": 0, "ITER": 0}  # a send of each CTA has the lines
    msg = want * ctas if size.evaluate(env) == want else want * ctas * nranks
    program = generate(protocol, algorithm)
    most, shared = 1, False
    for flat in program.flatten(program.cta_env({**env, "MSG": msg}, 0)):
        touch = effects(flat.op)
        if touch.ref is None or not (touch.sources or touch.fills):
            continue
        lines = int(touch.ref.lines)
        if lines > most:
            most = lines
        if lines > 1 and getattr(flat.op, "issuer", Issuer.ALL) is Issuer.ALL:
            shared = True
    return DataPath(most, protocol.data_layout.lanes, shared)


def message_bytes(protocol: Protocol, algorithm: str, bounds: Bounds) -> int:
    """The tiny message: ``bounds.lines`` lines per send (per chunk for chunked algorithms)."""
    per_line = protocol.data_layout.data_bytes
    want = bounds.lines * per_line
    size = transfer_bytes(protocol, algorithm, bounds.ctas)
    every = want * bounds.ctas  # each CTA sends its slice
    whole = {"MSG": every, "NRANKS": bounds.ranks, "RANK": 0, "ITER": 0}
    msg = every * bounds.ranks
    if size.evaluate(whole) == want and size.evaluate({**whole, "MSG": msg}) == want * bounds.ranks:
        return every  # the algorithm sends the whole message at once
    chunk = size.evaluate({**whole, "MSG": msg})
    if chunk != want:
        raise UnsupportedError(f"cannot size a message of {bounds.lines} line(s) per chunk for {algorithm}")
    return msg


#: the buffer name of the host mailboxes by which the verifier pictures a host barrier's ordering
HOST_MAILBOX = "host-barrier"
#: the buffer name of the mailboxes by which it pictures the async proxy's ordering (bulk copies, proxy fences)
ASYNC_MAILBOX = "async-proxy"


class _BULK_ACCESS_OP(NamedTuple):
    """A bulk copy's reads as :meth:`_ElementLowering.read_line` sees them: weak, data words, into its register."""

    op: Any
    sem: Sem = Sem.WEAK
    scope: Scope = Scope.CTA

    @property
    def into(self) -> str:
        return self.op.into

    @property
    def into_offset(self) -> Any:
        return self.op.into_offset
#: ... and of the mailboxes by which it pictures a launch boundary among the CTAs of one rank
LAUNCH_MAILBOX = "launch-boundary"


class _MemsetAccess(NamedTuple):
    """The memory semantics of a memset kernel's stores (what :meth:`_ElementLowering.mem_event` reads)."""

    sem: Sem = Sem.WEAK
    scope: Scope = Scope.SYS


_MEMSET_ACCESS = _MemsetAccess()


class _LoadedTerm(Lin):
    """A wait target's value term that prints as the register word it is (``step[0] + 1``) in counterexamples."""

    __slots__ = ("text",)

    def __init__(self, c: int, terms: dict, text: str) -> None:
        super().__init__(c, terms)
        self.text = text

    def __repr__(self) -> str:
        return f"the loaded {self.text}"


class _Site(NamedTuple):
    """Where a bound operation runs: its name (``label[k=1]``), rank, launch, the rank's registers, the symbols."""

    name: str
    rank: int
    iteration: int
    regs: dict[str, dict[int, Lin]]
    env: dict[str, int]


class _ElementLowering(OpVisitor):
    """Expands the bound operations of every rank and launch into element events (see the module doc)."""

    consumer = "the verifier's lowering"

    def __init__(self, protocol: Protocol, algorithm: str, bounds: Bounds, assumptions: tuple[str, ...],
                 recheck: bool = False) -> None:
        self.protocol = protocol
        self.algorithm = algorithm
        self.bounds = bounds
        self.assumptions = assumptions
        self.active = [get_assumption(a) for a in assumptions]
        full = frozenset(assumptions)
        #: the assumption sets whose atomic groups the instance carries: the declared ones, and for the
        #: verifier's re-checks each of them without one assumption
        self.group_sets = [full] + ([full - {a} for a in assumptions] if recheck else [])
        self.groups: list[AtomicGroup] = []
        self.program = generate(protocol, algorithm, ctas=bounds.ctas)
        # an ill-formed program (a poll that inspects nothing, a poll on a word nobody writes) would make
        # properties hold vacuously: it is refused as bad input, as collsim review refuses it
        check_protocol_program(self.program, protocol)
        self.buffers = {b.name: b for b in self.program.buffers}
        self.msg = message_bytes(protocol, algorithm, bounds)  # the largest launch's: what buffers are sized for
        #: each launch's message bytes and input elements (they differ with ``Bounds.sizes``)
        self.launch_msg = [self.msg if bounds.sizes is None else
                           message_bytes(protocol, algorithm, replace(bounds, lines=bounds.launch_lines(i), sizes=None))
                           for i in range(bounds.iterations)]
        self.word_bytes = protocol.data_layout.data_word_bytes
        self.elements = self.msg // self.word_bytes
        self.sentinel = self.program.sentinel_word
        self.events: list[VerifyEvent] = []
        self.T = bounds.threads
        self.C = bounds.ctas
        self.cta = 0  # the CTA whose operations are being lowered
        nthreads = bounds.ranks * self.C * self.T
        if self.C == 1:
            self.placement = [Placement(cta=t // self.T, gpu=t // self.T, rank=t // self.T) for t in range(nthreads)]
        else:  # CTA ids are per GPU
            per_rank = self.C * self.T
            self.placement = [Placement(cta=(t % per_rank) // self.T, gpu=t // per_rank, rank=t // per_rank)
                              for t in range(nthreads)]
        #: rank -> the thread of its host proxy (a program with a ProxyThread): in no CTA and on no GPU, so only
        #: sys scope includes it
        self.proxy_threads: dict[int, int] = {}
        if any(isinstance(op, ProxyThread) for op in walk(self.program.ops)):
            for rank in range(bounds.ranks):
                self.proxy_threads[rank] = len(self.placement)
                self.placement.append(Placement(cta=0, gpu=-1 - rank, rank=rank))
        #: the copy engines of the bulk copies (cp.async.bulk), each a thread in its rank's CTA (added as met)
        self.bulk_engines: set[int] = set()
        self.proxy_fences: dict[int, tuple] = {}  # issuing thread -> the mailbox of its last fence.proxy.async
        self.mailboxes = 0
        self.threads: list[list[VerifyInstr]] = [[] for _ in self.placement]
        self.on_proxy = False  # lowering a proxy thread's body
        self.init: dict[tuple, int] = {}
        self.arbitrary: dict[tuple, int] = {}  # location -> bits of a word that starts as any pattern
        self.outputs: dict[tuple, Lin | None] = {}
        self.expected: dict[tuple, Lin] = {}
        self.notes: list[str] = [f"warning: {finding}" for finding in cta_scope_findings(self.program, _op_where)]
        self.kept: dict[str, tuple[int, ...]] = {}
        self.bar_count: dict[tuple[int, int], int] = {}  # (rank, CTA) -> barriers so far
        self.launch_count: dict[tuple[int, int], int] = {}  # (rank, CTA) -> launch boundaries so far
        self.next_group = 0
        self.host_barriers: dict[int, int] = {}  # rank -> host barriers lowered so far
        self.source = ""  # op_source of the operation being lowered
        #: the branch the ops being lowered are in: (z3 condition, the reads it tests), None outside any
        self.branch: tuple[Any, frozenset[int]] | None = None
        self.signature: list[str] = []
        self._flat: Any = None  # the flat op being lowered (a proxy thread's body is its FlatOp.body)
        for op, why in host_scope_findings(self.program):
            where = op_source(op)
            self.notes.append(f"{where + ': ' if where else ''}{why}")
        #: the host orders the proxy's accesses as x86-TSO does (the host-tso assumption is active)
        self.host_tso = HOST_ORDERING in assumptions
        if self.proxy_threads:
            self.notes.append(host_ordering_note(self.host_tso))
            # the cache key tells the two host orderings apart (inert for a program without a proxy thread)
            self.signature.append(f"host-ordering:{'tso' if self.host_tso else 'relaxed'}")
        elif self.host_tso:
            self.notes.append(f"{HOST_ORDERING} is assumed, but the program has no proxy thread: it orders nothing")
        for buf in self.program.buffers:
            words, note = kept_words(buf.layout, bounds.max_lanes)
            self.kept[buf.name] = words
            if note and note not in self.notes:
                self.notes.append(note)
        if self.elements * self.word_bytes != self.msg:
            raise UnsupportedError("message is not a whole number of data words")

    # -- helpers -----------------------------------------------------------
    def env(self, rank: int, iteration: int) -> dict[str, int]:
        # graph replay: every launch reuses the kernel arguments of the capture launch (launch 0)
        arg_iter = 0 if self.protocol.graph_replay else iteration
        return {"RANK": rank, "NRANKS": self.bounds.ranks, "ITER": iteration, "ARG_ITER": arg_iter,
                "MSG": self.launch_msg[iteration]}

    def thread_of(self, rank: int, t: int) -> int:
        """Thread ``t`` of the CTA being lowered (:attr:`cta`) of ``rank``; its host proxy while lowering one."""
        if self.on_proxy:
            return self.proxy_threads[rank]  # the host proxy is one thread: every line in program order
        return (rank * self.C + self.cta) * self.T + t

    def new_instr(self, thread: int, kind: InstrKind, label: str, iteration: int,
                  predicate: Predicate | None = None) -> VerifyInstr:
        instr = VerifyInstr(thread, len(self.threads[thread]), kind, [], label, iteration, predicate,
                            source=self.source, ctrl=self.branch[1] if self.branch else frozenset())
        self.threads[thread].append(instr)
        return instr

    def add_event(self, instr: VerifyInstr, **kw: Any) -> VerifyEvent:
        if self.branch is not None:  # an op of a When: its events exist only where the condition holds
            if kw.get("kind") is EventKind.BARRIER:
                raise UnsupportedError(f"{self.where(instr.label)}: a group barrier inside a branch is not modelled")
            kw["guard"] = self.branch[0]
        ev = VerifyEvent(id=len(self.events), thread=instr.thread, rank=self.placement[instr.thread].rank,
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
        # a buffer is allocated once, for the largest message, whatever this launch's size
        sized = {**env, "MSG": self.msg}
        flat = buf.line_index(ref.slot, ref.region, ref.line + j, sized)
        if buf.per_cta:  # the accessing CTA's own copy, after the copies of the CTAs before it
            flat += self.cta * buf.total_lines(sized)
        loc = (ref.buffer, ref.rank, flat, word)
        if loc not in self.init:
            layout = buf.layout
            if buf.init is FillPattern.ARBITRARY:
                # allocation reuse: any bit pattern of the word's width (the reference run reads 0)
                self.arbitrary[loc] = 8 * layout.words[word].nbytes
            if buf.init is FillPattern.SENTINEL and layout.words[word].role is WordRole.DATA:
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
            if not 0 <= element < self.launch_msg[iteration] // self.word_bytes:
                return Lin.const(0)  # padding beyond the message
            return Lin.atom(("in", rank, iteration, element))
        if isinstance(src, Fill):
            if src.pattern is FillPattern.ZERO:
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

    def groups_for(self, ev_by_word: dict[int, VerifyEvent], layout: LineLayout, attr: str,
                   write_kind: str | None) -> None:
        """Join the events of one line access into the atomic groups each assumption set declares: a write under
        the assumptions that join writes of ``write_kind``, a read (``write_kind`` None) under all of them (the
        events keep the groups of the first set)."""
        found: dict[tuple[int, ...], tuple[list[int], set[frozenset[str]]]] = {}
        for sset in self.group_sets:
            active = [get_assumption(a) for a in self.assumptions if a in sset]
            if write_kind is not None:
                active = [a for a in active if a.joins(write_kind)]
            for chunk in atomic_groups(layout, ev_by_word, active):
                key = tuple(ev_by_word[w].id for w in chunk)
                found.setdefault(key, (chunk, set()))[1].add(sset)
        for chunk, sets in found.values():
            gid = self.group_id()
            members = [ev_by_word[w] for w in chunk]
            self.groups.append(AtomicGroup(gid, "w" if attr == "wgroup" else "r", members, frozenset(sets)))
            if self.group_sets[0] in sets:
                for m in members:
                    setattr(m, attr, gid)

    def output(self, rank: int, iteration: int, byte: int, value: Lin | None) -> None:
        element = byte // self.word_bytes
        if 0 <= element < self.launch_msg[iteration] // self.word_bytes:
            self.outputs[(rank, iteration, element)] = value

    def barrier(self, rank: int, name: str, iteration: int) -> None:
        if self.T == 1:
            return
        k = self.bar_count.get((rank, self.cta), 0)
        self.bar_count[(rank, self.cta)] = k + 1
        bar = (rank, k) if self.C == 1 else (rank, self.cta, k)
        for t in range(self.T):
            instr = self.new_instr(self.thread_of(rank, t), InstrKind.BARRIER, name, iteration)
            self.add_event(instr, kind=EventKind.BARRIER, bar=bar, sem="acq_rel", scope="cta")

    def fences(self, threads: Iterable[int], site: _Site, sem: str, scope: str) -> None:
        for t in threads:
            instr = self.new_instr(self.thread_of(site.rank, t), InstrKind.FENCE, site.name, site.iteration)
            self.add_event(instr, kind=EventKind.FENCE, sem=sem, scope=scope)

    def mem_event(self, instr: VerifyInstr, kind: EventKind, op, ref, j: int, word: int, env, **kw) -> VerifyEvent:
        buf = self.buffers[ref.buffer]
        layout = buf.layout
        loc = self.loc(ref, j, word, env)
        if layout.narrow_words or layout.load_bytes is not None:
            # accesses of different sizes meet here: each event names its element access (a load element of
            # load_bytes, else the word), and only events of the same element are morally strong
            offset, nbytes = (layout.load_element(word) if kind is EventKind.READ
                              else (layout.word_offset(word), layout.words[word].nbytes))
            kw["span"] = (loc[:3], offset, nbytes)
        value = kw.get("value")
        deps = frozenset(value.reads()) if value is not None else frozenset()
        sem, scope = op.sem.model_sem, op.sem.model_scope(op.scope).value
        if self.on_proxy:  # the host's own order: x86-TSO (host-tso) or, without it, relaxed
            if self.host_tso:  # loads acquire, stores release
                sem = "acquire" if kind is EventKind.READ else "release"
            else:  # only the body's fences order them
                sem = "relaxed"
            scope = "sys"
        return self.add_event(
            instr, kind=kind, loc=loc, sem=sem, scope=scope,
            role=buf.layout.words[word].role.value, slot=ref.slot, region=ref.region, line=ref.line + j, word=word,
            deps=deps, **kw)

    def read(self, op: Load | PollUntil, site: _Site, until: Predicate | None) -> None:
        """A load, or (``until`` given) the exiting load of a poll: one instruction per line."""
        src = op.src
        poll = until is not None
        waits_for: frozenset[int] = frozenset()
        if poll and until.loaded:
            until, waits_for = self.resolve_loaded(until, site)
        for j, thread in self.line_items(src, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.POLL if poll else InstrKind.LOAD, site.name, site.iteration,
                                   until)
            values = self.read_line(instr, op, src, j, site, poll)
            for ev in instr.events:  # the exit compares against the loaded word: it depends on that read
                ev.deps = ev.deps | waits_for
            if op.into is not None:
                site.regs.setdefault(op.into, {}).update(values)

    def where(self, name: str) -> str:
        """An op's name and, for a refusal, where protocol code emitted it (``label (protocols/x.py:12)``)."""
        return f"{name} ({self.source})" if self.source else name

    def resolve_loaded(self, until: Predicate, site: _Site) -> tuple[Predicate, frozenset[int]]:
        """A predicate whose value is a loaded register word, with the read's value term in its place (a
        :class:`Lin` the encoding translates), and the reads that term names."""
        loaded = until.value
        value = site.regs.get(loaded.register, {}).get(loaded.offset)
        if value is None:
            raise UnsupportedError(f"{self.where(site.name)} waits for register {loaded.register!r} byte "
                                   f"{loaded.offset}, which no earlier load of rank {site.rank} filled in the "
                                   "verifier's instance")
        term = value + Lin.const(loaded.add)
        resolved = until.with_value(_LoadedTerm(term.c, term.terms, repr(loaded)))
        return resolved, frozenset(resolved.value.reads())

    def read_line(self, instr: VerifyInstr, op: Any, src: Any, j: int, site: _Site, poll: bool) -> dict[int, Lin]:
        """The read events of line ``j`` of ``src`` in ``instr`` (every modelled word for a poll, the data
        words otherwise), grouped under the assumptions; returns the register bytes they fill."""
        buf = self.buffers[src.buffer]
        layout = buf.layout
        into = op.into
        polled_words = set(layout.poll_words)
        data = {w: k for w, k in self.data_words(buf)}
        by_word: dict[int, VerifyEvent] = {}
        values: dict[int, Lin] = {}
        words = self.kept[buf.name] if poll or not data else [w for w in self.kept[buf.name] if w in data]
        for w in words:
            ev = self.mem_event(instr, EventKind.READ, op, src, j, w, site.env)
            if poll:
                ev.polled = w in polled_words
            if into is not None and w in data:
                ev.consumer = into
                offset = op.into_offset + j * layout.data_bytes + data[w] * layout.words[w].nbytes
                values[offset] = Lin.atom(("rd", ev.id))
            elif into is not None and not data:
                values[self.counter_offset(op, layout, j, w)] = Lin.atom(("rd", ev.id))
            by_word[w] = ev
        self.groups_for(by_word, layout, "rgroup", None)
        return values

    @staticmethod
    def counter_offset(op: Any, layout: LineLayout, j: int, w: int) -> int:
        """The register byte a counter word (a layout without data words) lands in: the word's place in the
        line, lines one after another (what a poll's :class:`~collsim.ir.expr.Loaded` target names)."""
        return int(op.into_offset) + j * layout.line_bytes + layout.word_offset(w)

    def write_line(self, instr: VerifyInstr, op: Any, dst: Any, j: int, site: _Site, src: Any, flag: Any,
                   kind: str) -> None:
        """The write events of line ``j`` of ``dst`` in ``instr``: data words from ``src``, flag words ``flag``,
        grouped under the assumptions that join writes of ``kind``."""
        buf = self.buffers[dst.buffer]
        layout = buf.layout
        by_word: dict[int, VerifyEvent] = {}
        if src is not None:
            for w, k in self.data_words(buf):
                value = self.source_value(src, site.regs, site.rank, site.iteration,
                                          j * layout.data_bytes + k * layout.words[w].nbytes)
                if value is None:
                    continue  # an element of a shrunk lane
                by_word[w] = self.mem_event(instr, EventKind.WRITE, op, dst, j, w, site.env, value=value,
                                            fill=src.pattern if isinstance(src, Fill) else None)
        if flag is not None:
            for w in self.flag_words(buf):
                by_word[w] = self.mem_event(instr, EventKind.WRITE, op, dst, j, w, site.env, value=Lin.const(flag))
        self.groups_for(by_word, layout, "wgroup", kind)

    def rmw_line(self, instr: VerifyInstr, op: Any, dst: Any, j: int, site: _Site, kind: str,
                 returns_value: bool = True) -> None:
        """The read-modify-write events of line ``j`` of ``dst`` in ``instr``: the data operand on the data
        words and ``op.flag`` on the flag words, or a counter operand on every word; grouped under the
        assumptions that join writes of ``kind``."""
        buf = self.buffers[dst.buffer]
        layout = buf.layout
        if op.op not in (RmwOp.ADD, RmwOp.EXCH, RmwOp.CAS):
            raise UnsupportedError(f"atomic {op.op.value} is not modelled (add, exch and cas are)")
        data = {w: k for w, k in self.data_words(buf)}
        flagged = getattr(op, "flag", None)
        by_word: dict[int, VerifyEvent] = {}
        for w in self.kept[buf.name]:
            if isinstance(op.operand, (Input, Reg, Fill)):
                if w in data:
                    operand = self.source_value(op.operand, site.regs, site.rank, site.iteration,
                                                j * layout.data_bytes + data[w] * layout.words[w].nbytes)
                    if operand is None:
                        continue
                elif flagged is not None:
                    operand = Lin.const(int(flagged))
                else:
                    continue
            else:
                operand = Lin.const(int(op.operand))  # type: ignore[arg-type]
            ev = self.mem_event(instr, EventKind.RMW, op, dst, j, w, site.env, rmw_op=op.op.value)
            if op.op is RmwOp.CAS:  # the encoding derives the value and whether it writes (rmw_result)
                ev.operand, ev.compare = operand, Lin.const(int(op.compare))
            else:
                ev.value = (Lin.atom(("rd", ev.id)) + operand) if op.op is RmwOp.ADD else operand
            ev.deps = ev.deps | frozenset(operand.reads())
            ev.returns_value = returns_value
            into = getattr(op, "into", None)
            if into is not None and w in data:
                ev.consumer = into
                offset = op.into_offset + j * layout.data_bytes + data[w] * layout.words[w].nbytes
                site.regs.setdefault(into, {})[offset] = Lin.atom(("rd", ev.id))
            elif into is not None and not data:
                site.regs.setdefault(into, {})[self.counter_offset(op, layout, j, w)] = Lin.atom(("rd", ev.id))
            by_word[w] = ev
        self.groups_for(by_word, layout, "wgroup", kind)

    def copies(self, ref: Any) -> list[Any]:
        """Every rank's copy of a multicast range."""
        return [ref.copy(rank) for rank in range(self.bounds.ranks)]

    # -- operations ----------------------------------------------------------
    def visit_store(self, op: Store, site: _Site) -> None:
        for j, thread in self.line_items(op.dst, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.STORE, site.name, site.iteration)
            self.write_line(instr, op, op.dst, j, site, op.src, op.flag, "store")

    def visit_load(self, op: Load, site: _Site) -> None:
        self.read(op, site, None)

    def visit_poll_until(self, op: PollUntil, site: _Site) -> None:
        if op.cas:
            self.cas_loop(op, site)
        else:
            self.read(op, site, op.until)

    def cas_loop(self, op: PollUntil, site: _Site) -> None:
        """A CAS loop: only its exiting sample is an event (as for a poll), one ``cas`` per modelled word of each
        line, whose read the predicate inspects; in an execution where it stays stuck its samples fail and
        write nothing (the encoding's ``rmw_result``), so a failed CAS is a read."""
        until = op.until
        waits_for: frozenset[int] = frozenset()
        if until.loaded:
            until, waits_for = self.resolve_loaded(until, site)
        compare = until.value if isinstance(until.value, Lin) else Lin.const(int(until.value))
        buf = self.buffers[op.src.buffer]
        layout = buf.layout
        if layout.data_words:
            raise UnsupportedError(f"{self.where(site.name)}: a CAS loop compares flag or counter words; "
                                   f"{buf.name}'s layout {layout.name} has data words")
        polled = set(layout.poll_words)
        for j, thread in self.line_items(op.src, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.POLL, site.name, site.iteration, until)
            by_word: dict[int, VerifyEvent] = {}
            for w in self.kept[buf.name]:
                ev = self.mem_event(instr, EventKind.RMW, op, op.src, j, w, site.env, rmw_op="cas",
                                    operand=Lin.const(int(op.swap)), compare=compare)
                ev.polled = w in polled
                ev.deps = ev.deps | waits_for
                by_word[w] = ev
            self.groups_for(by_word, layout, "wgroup", "red")

    def visit_fence(self, op: Fence, site: _Site) -> None:
        threads = range(self.T) if op.issuer is Issuer.ALL and not self.on_proxy else (0,)
        self.fences(threads, site, "sc" if op.kind is FenceKind.SC else "acq_rel", op.scope.value)

    def visit_atomic(self, op: Atomic, site: _Site) -> None:
        for j, thread in self.line_items(op.dst, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.RMW, site.name, site.iteration)
            self.rmw_line(instr, op, op.dst, j, site, "red")

    # A multimem op is one instruction per line whose events are every copy's elements, unordered among
    # themselves (PTX defines no order among the copies); an assumption joins the elements of one copy only.

    def visit_multimem_load_reduce(self, op: MultimemLoadReduce, site: _Site) -> None:
        if op.op is not RmwOp.ADD:
            raise UnsupportedError(f"multimem.ld_reduce {op.op.value} is not modelled (add is)")
        for j, thread in self.line_items(op.src, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.LOAD, site.name, site.iteration)
            total: dict[int, Lin] = {}
            for copy in self.copies(op.src):
                for offset, value in self.read_line(instr, op, copy, j, site, False).items():
                    total[offset] = total[offset] + value if offset in total else value
            site.regs.setdefault(op.into, {}).update(total)

    def visit_multimem_store(self, op: MultimemStore, site: _Site) -> None:
        for j, thread in self.line_items(op.dst, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.STORE, site.name, site.iteration)
            for copy in self.copies(op.dst):
                self.write_line(instr, op, copy, j, site, op.src, op.flag, "multimem.st")

    def visit_multimem_red(self, op: MultimemRed, site: _Site) -> None:
        for j, thread in self.line_items(op.dst, op.issuer, site.rank):
            instr = self.new_instr(thread, InstrKind.RMW, site.name, site.iteration)
            for copy in self.copies(op.dst):
                # a red returns nothing: its read is not the read of an acquire pattern (PTX ISA 8.8)
                self.rmw_line(instr, op, copy, j, site, "multimem.red", returns_value=False)

    def visit_reduce(self, op: Reduce, site: _Site) -> None:
        if op.op != "sum":
            raise UnsupportedError(f"reduce op {op.op!r} is not modelled (only 'sum')")
        regs = site.regs
        result = {}
        for byte in range(0, op.nbytes, self.word_bytes):
            total: Lin | None = Lin.const(0)
            for src in op.srcs:
                for piece in self.reg_slices(src):
                    v = self.source_value(piece, regs, site.rank, site.iteration, byte)
                    total = None if (v is None or total is None) else total + v
            result[byte] = total
            if op.output_offset is not None:
                self.output(site.rank, site.iteration, op.output_offset + byte, total)
        regs.setdefault(op.into, {}).update({b: v for b, v in result.items() if v is not None})
        for b, v in result.items():
            if v is None:
                regs[op.into].pop(b, None)

    def visit_write_output(self, op: WriteOutput, site: _Site) -> None:
        for byte in range(0, op.nbytes, self.word_bytes):
            self.output(site.rank, site.iteration, op.offset + byte,
                        self.source_value(op.src, site.regs, site.rank, site.iteration, byte))

    def visit_sync_group(self, op: SyncGroup, site: _Site) -> None:
        self.barrier(site.rank, site.name, site.iteration)

    def visit_kernel_boundary(self, op: KernelBoundary, site: _Site) -> None:
        self.fences(range(self.T), site, "sc", "sys")
        self.barrier(site.rank, site.name, site.iteration)
        if self.C > 1:
            self.grid_finished(site)

    def grid_finished(self, site: _Site) -> None:
        """The next launch starts after every CTA of the rank finished this one (stream order): thread 0 of
        each CTA stores its k-th arrival into its own mailbox with release and polls every other CTA's with
        acquire (gpu scope), then the CTA's threads sync. (No memory of the program; the verifier's picture.)"""
        key = (site.rank, self.cta)
        k = self.launch_count[key] = self.launch_count.get(key, 0) + 1
        thread = self.thread_of(site.rank, 0)
        instr = self.new_instr(thread, InstrKind.STORE, site.name, site.iteration)
        self.host_event(instr, EventKind.WRITE, (LAUNCH_MAILBOX, site.rank, self.cta, 0), self.cta, "release",
                        value=Lin.const(k), scope="gpu")
        until = AtLeast(k).bind({})
        for other in (c for c in range(self.C) if c != self.cta):
            instr = self.new_instr(thread, InstrKind.POLL, site.name, site.iteration, until)
            ev = self.host_event(instr, EventKind.READ, (LAUNCH_MAILBOX, site.rank, other, 0), other, "acquire",
                                 scope="gpu")
            ev.polled = True
        self.barrier(site.rank, site.name, site.iteration)

    def visit_loop(self, op: Loop, site: _Site) -> None:
        raise TypeError("the verifier lowers flattened programs: Program.flatten unrolls every Loop")

    def visit_when(self, op: When, site: _Site) -> None:
        """A branch on a register word: its ops' events get the condition over the read's value as their
        ``guard`` (they exist only in executions where it holds) and its reads as control dependencies."""
        value = site.regs.get(op.register, {}).get(op.offset)
        if value is None:
            raise UnsupportedError(f"{self.where(site.name)} branches on register {op.register!r} byte {op.offset}, "
                                   f"which no earlier operation of rank {site.rank} filled in the verifier's instance")
        if value.inputs():
            raise UnsupportedError(f"{self.where(site.name)} branches on user data ({op.register!r}): only values of "
                                   "flag and counter words are modelled as conditions")
        if self.branch is not None:
            raise UnsupportedError(f"{self.where(site.name)}: a branch inside a branch is not modelled")
        sort = z3.IntSort()
        reads = [coeff * value_const(f"e{key[1]}", sort) for key, coeff in value.terms.items()]
        term = z3.IntVal(value.c) + z3.Sum(reads) if reads else z3.IntVal(value.c)
        self.branch = (z3.simplify(op.cond.holds(term)), frozenset(value.reads()))
        try:
            for inner in op.body:
                self.source = op_source(inner) or self.source
                self.visit(inner, site._replace(name=f"{site.name}/{inner.label}"))
        finally:
            self.branch = None

    # -- host actions (between launches) ----------------------------------------
    def launch_starts(self, site: _Site) -> None:
        """The kernel starts after the host action completed: stream order, as at a launch boundary."""
        self.fences(range(self.T), site, "sc", "sys")
        self.barrier(site.rank, site.name, site.iteration)

    def visit_host_memset(self, op: HostMemset, site: _Site) -> None:
        """Plain stores of the pattern into every modelled word of the range, by the rank's thread 0 (the
        memset kernel runs alone on the stream, after the previous launch's boundary), then the launch starts."""
        buf = self.buffers[op.dst.buffer]
        layout = buf.layout
        sentinel = op.pattern is FillPattern.SENTINEL
        if sentinel and self.sentinel is None:
            raise UnsupportedError(f"{site.name} memsets {buf.name} to the sentinel, but the protocol names none")
        thread = self.thread_of(site.rank, 0)
        for j in range(op.dst.lines):
            instr = self.new_instr(thread, InstrKind.STORE, site.name, site.iteration)
            for w in self.kept[buf.name]:  # word by word: no assumption makes a memset's words one unit
                value = self.sentinel if sentinel and layout.words[w].role is WordRole.DATA else 0
                self.mem_event(instr, EventKind.WRITE, _MEMSET_ACCESS, op.dst, j, w, site.env,
                               value=Lin.const(value), fill=op.pattern)
        self.launch_starts(site)

    def visit_host_barrier(self, op: HostBarrier, site: _Site) -> None:
        """Every rank's host meets every other's: thread 0 drains (``fence.sc.sys``), stores the k-th arrival
        into each peer's host mailbox with release and waits with acquire for every peer's, then the launch
        starts. (A host collective is no GPU memory; the mailbox is the verifier's picture of its ordering.)"""
        rank, n = site.rank, self.bounds.ranks
        k = self.host_barriers[rank] = self.host_barriers.get(rank, 0) + 1
        thread = self.thread_of(rank, 0)
        self.fences([0], site, "sc", "sys")
        for peer in [(rank + 1 + i) % n for i in range(n - 1)]:
            instr = self.new_instr(thread, InstrKind.STORE, site.name, site.iteration)
            self.host_event(instr, EventKind.WRITE, (HOST_MAILBOX, peer, rank, 0), rank, "release",
                            value=Lin.const(k))
        until = AtLeast(k).bind({})
        for peer in [(rank + 1 + i) % n for i in range(n - 1)]:
            instr = self.new_instr(thread, InstrKind.POLL, site.name, site.iteration, until)
            ev = self.host_event(instr, EventKind.READ, (HOST_MAILBOX, rank, peer, 0), peer, "acquire")
            ev.polled = True
        self.launch_starts(site)

    def host_event(self, instr: VerifyInstr, kind: EventKind, loc: tuple, region: int, sem: str,
                   scope: str = "sys", **kw: Any) -> VerifyEvent:
        self.init.setdefault(loc, 0)
        return self.add_event(instr, kind=kind, loc=loc, sem=sem, scope=scope, role=WordRole.FLAG.value, slot=0,
                              region=region, line=0, word=0, **kw)

    # -- the async proxy: bulk copies and proxy fences ------------------------------
    def mailbox(self, thread: int, kind: EventKind, site: _Site, sem: str, what: str, until: Predicate | None = None,
                loc: tuple | None = None) -> tuple:
        """One access of ``thread`` to a mailbox of the async-proxy picture (a new one unless ``loc`` names it)."""
        if loc is None:
            self.mailboxes += 1
            loc = (ASYNC_MAILBOX, site.rank, self.mailboxes, 0)
        instr = self.new_instr(thread, InstrKind.POLL if until is not None else InstrKind.STORE, site.name,
                               site.iteration, until)
        if kind is EventKind.WRITE:
            ev = self.host_event(instr, kind, loc, site.rank, sem, "cta", value=Lin.const(1))
        else:
            ev = self.host_event(instr, kind, loc, site.rank, sem, "cta")
        if until is not None:
            ev.polled = True
        return loc

    def visit_proxy_fence(self, op: ProxyFence, site: _Site) -> None:
        """A release store to a fence mailbox, which the copy engines of this thread's later bulk copies acquire."""
        threads = range(self.T) if op.issuer is Issuer.ALL else (0,)
        for t in threads:
            thread = self.thread_of(site.rank, t)
            self.proxy_fences[thread] = self.mailbox(thread, EventKind.WRITE, site, "release", "fence.proxy.async")

    def visit_bulk_load(self, op: BulkLoad, site: _Site) -> None:
        """The leader hands the copy to a copy engine of its own (relaxed), which acquires the leader's last proxy
        fence, reads the lines and releases the completion every thread of the rank acquires."""
        leader = self.thread_of(site.rank, 0)
        engine = len(self.placement)
        self.placement.append(Placement(cta=site.rank, gpu=site.rank, rank=site.rank))
        self.threads.append([])
        self.bulk_engines.add(engine)
        issued = self.mailbox(leader, EventKind.WRITE, site, "relaxed", "cp.async.bulk")
        at_least = AtLeast(1).bind({})
        self.mailbox(engine, EventKind.READ, site, "relaxed", "cp.async.bulk", at_least, loc=issued)
        fence = self.proxy_fences.get(leader)
        if fence is not None:
            self.mailbox(engine, EventKind.READ, site, "acquire", "fence.proxy.async", at_least, loc=fence)
        values: dict[int, Lin] = {}
        for j in range(op.src.lines):
            instr = self.new_instr(engine, InstrKind.LOAD, site.name, site.iteration)
            values.update(self.read_line(instr, _BULK_ACCESS_OP(op), op.src, j, site, False))
        site.regs.setdefault(op.into, {}).update(values)
        done = self.mailbox(engine, EventKind.WRITE, site, "release", "mbarrier complete_tx")
        for t in range(self.T):
            self.mailbox(self.thread_of(site.rank, t), EventKind.READ, site, "acquire", "mbarrier wait", at_least,
                         loc=done)

    # -- the host proxy thread (concurrent with the kernel) ------------------------
    def visit_proxy_thread(self, op: ProxyThread, site: _Site) -> None:
        """This launch's round of the rank's proxy thread: its body on the rank's proxy thread, after the previous
        round's (the kernel's ops are not ordered with it except through memory)."""
        if self.on_proxy:
            raise UnsupportedError(f"{site.name}: a proxy thread inside a proxy thread ({op_source(op)})")
        self.on_proxy = True
        try:
            for inner in self._flat.body:
                self.source = op_source(inner.op) or self.source
                self.signature.append(f"{site.rank}/{site.iteration}/proxy/{inner.name}:{inner.op!r}")
                self.visit(inner.op, site._replace(name=inner.name))
        finally:
            self.on_proxy = False

    # -- driver --------------------------------------------------------------
    def run(self) -> VerifyInstance:
        for iteration in range(self.bounds.iterations):
            for e in range(self.launch_msg[iteration] // self.word_bytes):
                self.expected_sum(iteration, e)
        for rank in range(self.bounds.ranks):
            regs_of: list[dict[str, dict[int, Lin]]] = [{} for _ in range(self.C)]  # a CTA's registers
            for iteration in range(self.bounds.iterations):
                for cta in range(self.C):
                    self.cta = cta
                    env = self.program.cta_env(self.env(rank, iteration), cta)
                    where = f"{rank}/{iteration}/" if self.C == 1 else f"{rank}/{iteration}/cta{cta}/"
                    for flat in self.program.flatten(env):
                        self.signature.append(f"{where}{flat.name}:{flat.op!r}")
                        self.source = op_source(flat.op)
                        self._flat = flat
                        if getattr(flat.op, "issuer", None) is Issuer.GRID_LEADER and cta != 0:
                            continue  # thread 0 of CTA 0 alone
                        self.visit(flat.op, _Site(flat.name, rank, iteration, regs_of[cta], env))
        for buf in self.program.buffers:
            if buf.init is FillPattern.ARBITRARY:  # what the words start as is part of the instance
                self.signature.append(f"buffer {buf.name}: init {buf.init.value}")
            if buf.layout.narrow_words or buf.layout.load_bytes is not None:  # ... and the access sizes
                self.signature.append(f"buffer {buf.name}: words {[w.nbytes for w in buf.layout.words]}, "
                                      f"loads of {buf.layout.load_bytes or 'one word'}")
        for instr in (i for thread in self.threads for i in thread):
            if instr.kind == InstrKind.POLL:
                for ev in instr.events:
                    ev.poll = -1  # set to the instruction's id once the program numbers them
        low = VerifyInstance(
            protocol=self.protocol.name, algorithm=self.algorithm, bounds=self.bounds, msg=self.msg,
            assumptions=self.assumptions, threads=self.threads, placement=self.placement, init=self.init,
            outputs=self.outputs, expected_outputs=self.expected, word_bytes=self.word_bytes, elements=self.elements,
            sentinel=self.sentinel, forbidden_word=self.program.forbidden_word, notes=self.notes,
            flat_signature="\n".join(self.signature), groups=self.groups, word_encoding=self.program.word_encoding,
            arbitrary_init=self.arbitrary,
        )
        for instr in low.instrs:
            for ev in instr.events:
                if instr.kind == InstrKind.POLL:
                    ev.poll = instr.id
        low.roles.update({t: "proxy" for t in self.proxy_threads.values()})
        low.roles.update({t: "bulk" for t in self.bulk_engines})
        for t, role in low.roles.items():  # one proxy thread per rank; bulk copy engines by thread index
            low.thread_names[t] = f"rank{self.placement[t].rank}.{role}" + (str(t) if role == "bulk" else "")
        return low

    def expected_sum(self, iteration: int, element: int) -> None:
        total = Lin.const(0)
        for r in range(self.bounds.ranks):
            total = total + Lin.atom(("in", r, iteration, element))
        for r in range(self.bounds.ranks):
            self.expected[(r, iteration, element)] = total


def lower_instance(protocol: Protocol, algorithm: str, bounds: Bounds | None = None,
                   assumptions: Iterable[str] | None = None, *, recheck: bool = False) -> VerifyInstance:
    """Unroll ``protocol`` under ``algorithm`` into the element events of a tiny instance.

    ``assumptions`` defaults to the protocol's declared ones. With
    ``recheck``, the instance also carries the atomic groups of every set of
    them that lacks one assumption (:class:`~collsim.verify.events.AtomicGroup`
    ``when``), so one encoding answers the verifier's re-checks.
    """
    bounds = bounds or Bounds()
    active = tuple(protocol.assumptions if assumptions is None else assumptions)
    return _ElementLowering(protocol, algorithm, bounds, active, recheck).run()
