"""Lower a symbolic :class:`~collsim.ir.program.Program` for the simulator and bind it to each rank, fast.

:meth:`Program.flatten` is the reference binding; this module computes the
same values (a test checks it op by op) about ten times faster, by compiling
every expression of an operation into one Python function once per program,
and it keeps the loop structure, which the simulator needs:

* a :class:`Block` is one loop instance. Its iterations are **lanes** when
  the loop body contains no :class:`~collsim.ir.ops.SyncGroup`: a kernel
  spreads such a loop over threads (one per peer), so the iterations run
  concurrently. A body with a ``SyncGroup`` makes every thread take part in
  every iteration, so the iterations run one after another.
* a :class:`SimOp` is one operation with every expression replaced by its
  integer value, its buffer's layout attached; its ``kind`` is a
  :class:`SimKind`, the position of the IR class in
  :data:`collsim.ir.ops.OP_TYPES`.

The compilation is one walk over the op set (:class:`_Compiler`, an
:class:`~collsim.ir.visit.OpVisitor`): an operation class without a rule here
fails when this module is imported.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Callable

from collsim.ir.expr import BinOp, Const, Expr, LaunchArgument, Var
from collsim.ir.layout import WordRole
from collsim.ir.ops import (
    OP_TYPES, Atomic, Fence, Fill, HostBarrier, HostMemset, Input, KernelBoundary, Load, Loop, MulticastRef,
    MultimemLoadReduce, MultimemRed, MultimemStore, PollUntil, ProxyThread, Reduce, Reg, Store, SyncGroup, When,
    WriteOutput, BulkLoad, ProxyFence,
)
from collsim.ir.program import Program
from collsim.ir.types import Issuer, Sem
from collsim.ir.visit import OpVisitor

__all__ = ["SimKind", "SimOp", "Block", "SimProgram", "lower_for_sim", "STORE", "LOAD", "POLL", "FENCE", "ATOMIC",
           "REDUCE", "WRITE", "SYNC", "KERNEL_END", "MC_LOAD_REDUCE", "MC_STORE", "MC_RED", "HOST_MEMSET",
           "HOST_BARRIER", "PROXY", "BULK_LOAD", "PROXY_FENCE", "WHEN", "KIND_NAMES",
           "EVERY_COPY", "BoundRank", "cta_copy"]


class SimKind(IntEnum):
    """What a :class:`SimOp` does: the position of its IR class in :data:`collsim.ir.ops.OP_TYPES`."""

    STORE = OP_TYPES.index(Store)
    LOAD = OP_TYPES.index(Load)
    POLL = OP_TYPES.index(PollUntil)
    FENCE = OP_TYPES.index(Fence)
    ATOMIC = OP_TYPES.index(Atomic)
    REDUCE = OP_TYPES.index(Reduce)
    WRITE = OP_TYPES.index(WriteOutput)
    SYNC = OP_TYPES.index(SyncGroup)
    KERNEL_END = OP_TYPES.index(KernelBoundary)
    MC_LOAD_REDUCE = OP_TYPES.index(MultimemLoadReduce)
    MC_STORE = OP_TYPES.index(MultimemStore)
    MC_RED = OP_TYPES.index(MultimemRed)
    HOST_MEMSET = OP_TYPES.index(HostMemset)
    HOST_BARRIER = OP_TYPES.index(HostBarrier)
    PROXY = OP_TYPES.index(ProxyThread)
    BULK_LOAD = OP_TYPES.index(BulkLoad)
    PROXY_FENCE = OP_TYPES.index(ProxyFence)
    WHEN = OP_TYPES.index(When)


# Plain ints for the hot path (a rank compares kinds millions of times).
(STORE, LOAD, POLL, FENCE, ATOMIC, REDUCE, WRITE, SYNC, KERNEL_END, MC_LOAD_REDUCE, MC_STORE, MC_RED, HOST_MEMSET,
 HOST_BARRIER, PROXY, BULK_LOAD, PROXY_FENCE, WHEN) = (int(k) for k in SimKind)
#: The owner rank in the ``ref`` of a multimem op: every rank's copy (:mod:`collsim.sim.fabric` costs them).
EVERY_COPY = -1
#: The IR class name of each kind, indexed by kind (a kind is its class's position in OP_TYPES).
KIND_NAMES = tuple(t.__name__ for t in OP_TYPES)
_RELEASING = (Sem.RELEASE, Sem.ACQ_REL)
_ACQUIRING = (Sem.ACQUIRE, Sem.ACQ_REL)


class SimOp:
    """One bound operation. Fields that an op kind does not use are ``None``.

    ``ref`` is ``(buffer, rank, slot, region, line, lines)`` and ``key`` its first four (the location);
    ``src`` a source
    tuple ``("input", offset)``, ``("reg", name, offset, count, stride)`` or
    ``("fill", pattern)``; ``pred`` is the poll's :class:`~collsim.ir.ops.Predicate`, bound (its
    :meth:`~collsim.ir.ops.Predicate.holds` is how :mod:`collsim.sim.memory` judges a polled word);
    ``swap`` is what a CAS loop's successful sample writes (None for a plain poll); a branch
    (:class:`~collsim.ir.ops.When`) tests ``pred`` on register ``into`` at byte ``into_offset`` and runs
    the ops of ``body`` when it holds.
    """

    __slots__ = ("kind", "op", "loops", "label", "ref", "key", "layout", "src", "srcs", "sem", "scope", "flag",
                 "leader", "into", "into_offset", "pred", "nbytes", "offset", "operand", "releasing",
                 "acquiring", "line_bytes", "data_bytes", "polls_flags", "swap", "body")

    @property
    def name(self) -> str:
        """``label[k=2]``, as :attr:`collsim.ir.program.FlatOp.name` spells it."""
        if not self.loops:
            return self.label
        return self.label + "[" + ",".join(f"{var}={value}" for var, value in self.loops) + "]"

    def __repr__(self) -> str:
        return f"<{KIND_NAMES[self.kind]} {self.name}>"


class Block:
    """One loop instance: ``iterations`` lists of items, run as concurrent lanes or in order."""

    __slots__ = ("lanes", "iterations", "label", "has_poll")

    def __init__(self, lanes: bool, iterations: list[list[Any]], label: str, has_poll: bool) -> None:
        self.lanes = lanes
        self.iterations = iterations
        self.label = label
        self.has_poll = has_poll


class BoundRank(list):
    """One rank's items (:class:`SimOp` and :class:`Block`, in program order), and their walk order.

    ``walk_order`` is filled by whoever first needs the items flattened (:mod:`collsim.sim.symmetry`); a
    rank bound again for another size gets the same object back, changed in place, so it stays valid.
    """

    __slots__ = ("walk_order",)

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.walk_order: list[Any] | None = None


def _src(expr: Expr) -> str:
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, LaunchArgument):  # a kernel argument: the launch index, unless a consumer binds it
        return f"e.get({expr.name!r}, e['ITER'])"
    if isinstance(expr, Var):
        return f"e[{expr.name!r}]"
    if isinstance(expr, BinOp):
        return f"({_src(expr.left)} {expr.op} {_src(expr.right)})"
    raise TypeError(f"cannot compile expression {expr!r}")


def _source_tuple(source: Any) -> str:
    if source is None:
        return "None"
    if isinstance(source, Input):
        return f"('input', {_src(source.offset)})"
    if isinstance(source, Reg):
        return f"('reg', {source.name!r}, {_src(source.offset)}, {_src(source.count)}, {_src(source.stride)})"
    if isinstance(source, Fill):
        return f"('fill', {source.pattern!r})"
    if isinstance(source, Expr):
        return _src(source)
    raise TypeError(f"unknown data source {source!r}")


def cta_copy(buffer: str, cta: int) -> str:
    """The simulator's name of CTA ``cta``'s copy of a ``per_cta`` buffer (its own memory locations)."""
    return f"{buffer}@cta{cta}"


def _ref_tuple(ref: Any, on_host: bool = False, per_cta: bool = False) -> str:
    if isinstance(ref, MulticastRef):
        owner = str(EVERY_COPY)
    elif on_host:  # host memory: the owner number of the rank's host (collsim.sim.host.host_owner)
        owner = f"(-2 - {_src(ref.rank)})"
    else:
        owner = _src(ref.rank)
    name = f"{ref.buffer!r} + '@cta' + str(e['CTA'])" if per_cta else repr(ref.buffer)
    return (f"({name}, {owner}, {_src(ref.slot)}, {_src(ref.region)}, {_src(ref.line)}, "
            f"{_src(ref.lines)})")


#: The fields of a bound op, besides its reference, that decide what it costs or what a poll sees (a data
#: source's kind and register are literal in the IR; only its offsets are expressions).
_TIMED_FIELDS = ("flag", "pred", "nbytes", "operand", "swap")


def _contains(ops: tuple, kinds: tuple[type, ...]) -> bool:
    for op in ops:
        if isinstance(op, kinds):
            return True
        if isinstance(op, Loop) and _contains(op.body, kinds):
            return True
    return False


class _Fields:
    """What binding one IR op sets on its :class:`SimOp`: each field as the Python source of its value
    (``fields``, expressions over the bound symbols ``e``) or as a constant (``consts``)."""

    __slots__ = ("kind", "fields", "consts")

    def __init__(self, kind: SimKind, op: Any, program: Program, ref: Any = None) -> None:
        self.kind = kind
        label = getattr(op, "label", type(op).__name__.lower())
        self.fields: dict[str, str] = {"kind": str(int(kind)), "label": repr(label)}
        self.consts: dict[str, Any] = {"op": op}
        if ref is not None:
            buf = program.buffer(ref.buffer)
            self.fields["ref"] = _ref_tuple(ref, buf.on_host, buf.per_cta and program.ctas > 1)
            self.fields["key"] = "o.ref[:4]"
            layout = self.consts["layout"] = buf.layout
            self.consts["line_bytes"] = layout.line_bytes
            self.consts["data_bytes"] = layout.data_bytes
            # the words a poll inspects are flag words (set by a store's flag), not data words
            self.consts["polls_flags"] = bool(layout.poll_words) and all(
                layout.words[i].role is WordRole.FLAG for i in layout.poll_words)
        for name in ("sem", "scope"):
            if hasattr(op, name):
                self.consts[name] = getattr(op, name)
        if getattr(op, "into", None) is not None:
            self.fields["into"] = repr(op.into)
        if hasattr(op, "into_offset"):
            self.fields["into_offset"] = _src(op.into_offset)
        self.consts["leader"] = getattr(op, "issuer", Issuer.ALL).leads
        sem = getattr(op, "sem", None)
        self.consts["releasing"] = sem in _RELEASING
        self.consts["acquiring"] = sem in _ACQUIRING


class _Compiler(OpVisitor):
    """The simulator's walk over the op set: each op becomes a binder item, each loop a loop item of the tree
    :class:`SimProgram` binds (see :meth:`SimProgram.bind`)."""

    consumer = "the simulator's lowering"

    def __init__(self, lowered: "SimProgram") -> None:
        self.lowered = lowered
        self.program = lowered.program

    def compile(self, ops: tuple) -> list[Any]:
        """The items of ``ops``; a loop with nothing to run (an algorithm's phase with no ops here) is dropped."""
        return [item for item in (self.visit(op) for op in ops) if item is not None]

    # -- operations: the fields each sets ---------------------------------------

    def visit_store(self, op: Store) -> tuple:
        return self._write(SimKind.STORE, op, "src", op.src)

    def visit_load(self, op: Load) -> tuple:
        return self._item(op, _Fields(SimKind.LOAD, op, self.program, op.src), moves_data=True)

    def visit_poll_until(self, op: PollUntil) -> tuple:
        f = _Fields(SimKind.POLL, op, self.program, op.src)
        if isinstance(op.until.value, Expr) and op.until.value.free_vars():
            f.fields["pred"] = "c_until.bind(e)"  # the IR binds its own predicate (loop variables are in e)
            f.consts["until"] = op.until
        else:
            f.consts["pred"] = op.until.bind({})
        if op.swap is not None:
            f.fields["swap"] = _src(op.swap)
            self.lowered.value_flow = self.lowered.value_flow or f"{op.label} is a CAS loop (its write is its own)"
        if op.until.loaded:
            self.lowered.value_flow = self.lowered.value_flow or f"{op.label} waits for a value it loaded"
        return self._item(op, f)

    def visit_fence(self, op: Fence) -> tuple:
        f = _Fields(SimKind.FENCE, op, self.program)
        f.consts["sem"] = op.kind  # a fence has no sem; keep its kind (sc / acq_rel) there
        return self._item(op, f)

    def visit_atomic(self, op: Atomic) -> tuple:
        if not isinstance(op.operand, Expr) and getattr(op, "issuer", Issuer.ALL) is Issuer.ALL:
            self.lowered.data_atomics = True
        return self._write(SimKind.ATOMIC, op, "operand", op.operand)

    def visit_reduce(self, op: Reduce) -> tuple:
        f = _Fields(SimKind.REDUCE, op, self.program)
        f.fields["srcs"] = "(" + "".join(_source_tuple(s) + ", " for s in op.srcs) + ")"
        f.fields["nbytes"] = _src(op.nbytes)
        if op.output_offset is not None:
            f.fields["offset"] = _src(op.output_offset)
        return self._item(op, f)

    def visit_write_output(self, op: WriteOutput) -> tuple:
        f = _Fields(SimKind.WRITE, op, self.program)
        f.fields["src"] = _source_tuple(op.src)
        f.fields["nbytes"] = _src(op.nbytes)
        f.fields["offset"] = _src(op.offset)
        return self._item(op, f)

    def visit_sync_group(self, op: SyncGroup) -> tuple:
        return self._item(op, _Fields(SimKind.SYNC, op, self.program))

    def visit_kernel_boundary(self, op: KernelBoundary) -> tuple:
        return self._item(op, _Fields(SimKind.KERNEL_END, op, self.program))

    # multimem (NVLink SHARP): one op reaches every rank's copy through the switch; collsim.sim.fabric costs it

    def visit_multimem_load_reduce(self, op: MultimemLoadReduce) -> tuple:
        self.lowered.multicast = True
        return self._item(op, _Fields(SimKind.MC_LOAD_REDUCE, op, self.program, op.src), moves_data=True)

    def visit_multimem_store(self, op: MultimemStore) -> tuple:
        self.lowered.multicast = True
        return self._write(SimKind.MC_STORE, op, "src", op.src)

    def visit_multimem_red(self, op: MultimemRed) -> tuple:
        self.lowered.multicast = True
        return self._write(SimKind.MC_RED, op, "operand", op.operand)

    # host actions, before the launch: collsim.sim.rank costs them

    def visit_host_memset(self, op: HostMemset) -> tuple:
        f = _Fields(SimKind.HOST_MEMSET, op, self.program, op.dst)
        f.fields["src"] = f"('fill', {op.pattern!r})"
        return self._item(op, f)

    def visit_host_barrier(self, op: HostBarrier) -> tuple:
        return self._item(op, _Fields(SimKind.HOST_BARRIER, op, self.program))

    # the async proxy (cp.async.bulk, fence.proxy.async): collsim.sim.rank costs them

    def visit_bulk_load(self, op: BulkLoad) -> tuple:
        f = _Fields(SimKind.BULK_LOAD, op, self.program, op.src)
        f.consts["acquiring"] = True  # every thread waits on the copy's mbarrier
        return self._item(op, f, moves_data=True)

    def visit_proxy_fence(self, op: ProxyFence) -> tuple:
        return self._item(op, _Fields(SimKind.PROXY_FENCE, op, self.program))

    def visit_proxy_thread(self, op: ProxyThread) -> tuple:
        """The proxy's body, bound with the rank's symbols into the ``body`` of one item (collsim.sim.host runs it)."""
        self.lowered.host_memory = True
        return ("proxy", self._item(op, _Fields(SimKind.PROXY, op, self.program)), self.compile(op.body))

    def visit_when(self, op: When) -> tuple:
        self.lowered.value_flow = self.lowered.value_flow or f"{op.label} branches on a value it read"
        body = self.compile(op.body)
        cond = op.cond
        fixed = None if isinstance(cond.value, Expr) and cond.value.free_vars() else cond.bind({})

        def bind(e: dict, loops: tuple) -> SimOp:
            o = object.__new__(SimOp)
            for slot in SimOp.__slots__:
                setattr(o, slot, None)
            o.kind, o.op, o.loops, o.label = int(SimKind.WHEN), op, loops, op.label
            o.pred = fixed if fixed is not None else cond.bind(e)
            o.into, o.into_offset = op.register, op.offset
            o.leader = False
            o.body = [item[1](e, loops) for item in body]
            return o

        def rebind(o: SimOp, e: dict) -> None:
            for inner, item in zip(o.body, body):
                if item[2] is not None:
                    item[2](inner, e)

        return ("op", bind, rebind if any(item[2] is not None for item in body) else None)

    def visit_loop(self, op: Loop) -> tuple | None:
        body = self.compile(op.body)
        if not body:
            return None
        lanes = not _contains(op.body, (SyncGroup,))
        source = _src(op.count)
        lowered = self.lowered
        lowered._sized_loops |= "e['MSG']" in source
        lowered.rank_shaped |= "e['RANK']" in source
        count = eval(f"lambda e: {source}")  # noqa: S307 - IR expression source
        return ("loop", op.var, count, body, lanes, op.label, _contains(op.body, (PollUntil,)))

    # -- one binder per operation ------------------------------------------------

    def _write(self, kind: SimKind, op: Any, field: str, source: Any) -> tuple:
        """A store or atomic (unicast or multimem): its destination, what it writes (``src`` or ``operand``)
        and the flag or count word it sets beside the data (what the destination's readers poll)."""
        f = _Fields(kind, op, self.program, op.dst)
        f.fields[field] = _source_tuple(source)
        if op.flag is not None:
            f.fields["flag"] = _src(op.flag)
        return self._item(op, f, moves_data=True)

    def _item(self, op: Any, f: _Fields, moves_data: bool = False) -> tuple:
        if moves_data and getattr(op, "issuer", Issuer.ALL) is Issuer.ALL:
            if f.kind in (SimKind.LOAD, SimKind.MC_LOAD_REDUCE, SimKind.BULK_LOAD):
                self.lowered.loads_data = True
            else:
                self.lowered.stores_data = True
        bind, rebind, timed_by_rank = _binder(op, f)
        if timed_by_rank:
            self.lowered.rank_timed.add(id(op))
        if getattr(op, "issuer", None) is Issuer.GRID_LEADER and self.program.ctas > 1:
            return ("cta0", bind, rebind)  # bound for CTA 0 only (SimProgram.bind)
        return ("op", bind, rebind)


def _binder(op: Any, f: _Fields) -> tuple[Callable[[dict, tuple], SimOp], Callable | None, bool]:
    """``bind(env, loops) -> SimOp`` for one symbolic operation, ``rebind(op, env)`` that updates only
    the fields depending on ``MSG`` (None when there are none), and whether a field of
    :data:`_TIMED_FIELDS` depends on ``RANK``."""
    fields, consts = f.fields, f.consts
    lines = ["def bind(e, loops):", "    o = new(SimOp)", "    o.op = op", "    o.loops = loops"]
    for slot in SimOp.__slots__:
        if slot in ("op", "loops"):
            continue
        if slot in fields:
            lines.append(f"    o.{slot} = {fields[slot]}")
        elif slot in consts:
            lines.append(f"    o.{slot} = c_{slot}")
        else:
            lines.append(f"    o.{slot} = None")
    lines.append("    return o")
    # The fields that depend on the message size, recomputed alone when the program is bound again at
    # another size (a scenario runs every size of one configuration in a row).
    sized: list[str] = []
    for slot, source in fields.items():
        if "e['MSG']" in source or (slot == "key" and "ref" in sized):
            sized.append(slot)
    if sized:
        lines.append("def rebind(o, e):")
        lines += [f"    o.{slot} = {fields[slot]}" for slot in sized]
    namespace: dict[str, Any] = {"new": object.__new__, "SimOp": SimOp, "op": op}
    namespace.update({f"c_{k}": v for k, v in consts.items()})
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from IR expressions only
    timed_by_rank = any("e['RANK']" in fields.get(slot, "") for slot in _TIMED_FIELDS)
    return namespace["bind"], namespace.get("rebind"), timed_by_rank


class SimProgram:
    """A program compiled for fast binding: :meth:`bind` gives a rank's item tree, :meth:`flat` its op list."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._sized_loops = False
        #: whether a loop's count depends on the rank (ranks' item trees may then differ in shape)
        self.rank_shaped = False
        #: the symbolic ops (by id) whose flag, predicate, byte count or operand depends on the rank
        self.rank_timed: set[int] = set()
        #: whether all of a CTA's threads load data from, or store (or apply atomics) to, symmetric memory
        self.loads_data = self.stores_data = False
        #: whether the program applies atomics whose operand is data (vector reductions)
        self.data_atomics = False
        #: whether the program has multimem ops (one op reaches every rank's memory through the switch)
        self.multicast = False
        #: whether the program touches host memory or runs a host proxy thread (collsim.sim.host)
        self.host_memory = any(buf.on_host for buf in program.buffers)
        #: what of the program depends on values it reads from memory (a loaded wait target, a CAS loop's
        #: write, a branch on a returned value): a sentence, or "" when nothing does
        self.value_flow = ""
        self._tree = _Compiler(self).compile(program.ops)
        # per thread: (NRANKS/ITER key, {rank: (items, size-dependent updates)}), so threads never share items
        self._reuse: dict[int, tuple[tuple, dict[int, tuple[BoundRank, list[tuple]]]]] = {}

    def bind(self, env: Mapping[str, int], reuse: bool = False) -> BoundRank:
        """The items of one rank: :class:`SimOp` and :class:`Block` objects in program order.

        With ``reuse``, a rank bound just before for the same ``NRANKS`` and ``ITER`` gets its previous
        items back with only the size-dependent fields recomputed (those items change in place, so a
        caller must not keep the earlier ones).
        """
        e = dict(env)
        if not reuse or self._sized_loops:
            return BoundRank(self._bind(self._tree, e, (), None))
        key = tuple(sorted((k, v) for k, v in e.items() if k not in ("RANK", "MSG")))
        thread = threading.get_ident()
        cached = self._reuse.get(thread)
        if cached is None or cached[0] != key:
            cached = self._reuse[thread] = (key, {})
        found = cached[1].get(e["RANK"])
        if found is None:
            updates: list[tuple] = []
            items = BoundRank(self._bind(self._tree, e, (), updates))
            cached[1][e["RANK"]] = (items, updates)
            return items
        items, updates = found
        for bound, rebind, loops in updates:
            for var, value in loops:
                e[var] = value
            rebind(bound, e)
        return items

    def _bind(self, tree: list[Any], e: dict, loops: tuple, updates: list | None) -> list[Any]:
        out: list[Any] = []
        for item in tree:
            if item[0] == "proxy":
                bound = item[1][1](e, loops)
                bound.body = self._bind(item[2], e, (), updates)
                out.append(bound)
                continue
            if item[0] == "op" or (item[0] == "cta0" and not e["CTA"]):
                bound = item[1](e, loops)
                if updates is not None and item[2] is not None:
                    updates.append((bound, item[2], loops))
                out.append(bound)
                continue
            if item[0] == "cta0":
                continue  # thread 0 of CTA 0 alone issues it
            _, var, count, body, lanes, label, has_poll = item
            saved = e.get(var, _MISSING)
            iterations = []
            for value in range(count(e)):
                e[var] = value
                iterations.append(self._bind(body, e, loops + ((var, value),), updates))
            if saved is _MISSING:
                e.pop(var, None)
            else:
                e[var] = saved
            out.append(Block(lanes, iterations, label, has_poll))
        return out

    def flat(self, env: Mapping[str, int]) -> list[SimOp]:
        """Every bound op in program order (what :meth:`Program.flatten` lists)."""
        out: list[SimOp] = []

        def visit(items: list[Any]) -> None:
            for item in items:
                if isinstance(item, Block):
                    for iteration in item.iterations:
                        visit(iteration)
                else:
                    out.append(item)

        visit(self.bind(env))
        return out


_MISSING = object()


def lower_for_sim(program: Program) -> SimProgram:
    """Compile ``program`` for the simulator (see :class:`SimProgram`)."""
    return SimProgram(program)
