"""Bind a symbolic :class:`~collsim.ir.program.Program` to one rank's operations, fast.

:meth:`Program.flatten` is the reference binding; this module computes the
same values (a test checks it op by op) about ten times faster, by compiling
every expression of an operation into one Python function once per program,
and it keeps the loop structure, which the simulator needs:

* a :class:`Block` is one loop instance. Its iterations are **lanes** when
  the loop body contains no :class:`~collsim.ir.ops.SyncGroup`: a kernel
  spreads such a loop over threads (one per peer), so the iterations run
  concurrently. A body with a ``SyncGroup`` makes every thread take part in
  every iteration, so the iterations run one after another.
* a :class:`BoundOp` is one operation with every expression replaced by its
  integer value, its buffer's layout attached.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Callable

from collsim.ir.expr import BinOp, Const, Expr, Var
from collsim.ir.layout import WordRole
from collsim.ir.ops import (
    AtLeast, Atomic, Equals, Fence, Fill, Input, KernelBoundary, Load, Loop, MulticastRef, MultimemLoadReduce,
    MultimemRed, MultimemStore, NotEqual, PollUntil, Reduce, Reg, Store, SyncGroup, WriteOutput,
)
from collsim.ir.program import Program
from collsim.ir.types import Issuer, Sem

__all__ = ["BoundOp", "Block", "Lowered", "lower", "STORE", "LOAD", "POLL", "FENCE", "ATOMIC", "REDUCE",
           "WRITE", "SYNC", "KERNEL_END", "MC_LOAD_REDUCE", "MC_STORE", "MC_RED", "KIND_NAMES", "EVERY_COPY"]

STORE, LOAD, POLL, FENCE, ATOMIC, REDUCE, WRITE, SYNC, KERNEL_END, MC_LOAD_REDUCE, MC_STORE, MC_RED = range(12)
KIND_NAMES = ("Store", "Load", "PollUntil", "Fence", "Atomic", "Reduce", "WriteOutput", "SyncGroup",
              "KernelBoundary", "MultimemLoadReduce", "MultimemStore", "MultimemRed")
_KIND_OF = {Store: STORE, Load: LOAD, PollUntil: POLL, Fence: FENCE, Atomic: ATOMIC, Reduce: REDUCE,
            WriteOutput: WRITE, SyncGroup: SYNC, KernelBoundary: KERNEL_END, MultimemLoadReduce: MC_LOAD_REDUCE,
            MultimemStore: MC_STORE, MultimemRed: MC_RED}
#: The owner rank in the ``ref`` of a multimem op: every rank's copy (:mod:`collsim.sim.fabric` costs them).
EVERY_COPY = -1
_RELEASING = (Sem.RELEASE, Sem.ACQ_REL)
_ACQUIRING = (Sem.ACQUIRE, Sem.ACQ_REL)


class BoundOp:
    """One bound operation. Fields that an op kind does not use are ``None``.

    ``ref`` is ``(buffer, rank, slot, region, line, lines)`` and ``key`` its first four (the location);
    ``src`` a source
    tuple ``("input", offset)``, ``("reg", name, offset, count, stride)`` or
    ``("fill", pattern)``; ``pred`` is ``("eq" | "ge" | "ne", value)``.
    """

    __slots__ = ("kind", "op", "loops", "label", "ref", "key", "layout", "src", "srcs", "sem", "scope", "flag",
                 "leader", "into", "into_offset", "pred", "nbytes", "offset", "operand", "releasing",
                 "acquiring", "line_bytes", "data_bytes", "polls_flags")

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


def _src(expr: Expr) -> str:
    if isinstance(expr, Const):
        return str(expr.value)
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


def _ref_tuple(ref: Any) -> str:
    owner = str(EVERY_COPY) if isinstance(ref, MulticastRef) else _src(ref.rank)
    return (f"({ref.buffer!r}, {owner}, {_src(ref.slot)}, {_src(ref.region)}, {_src(ref.line)}, "
            f"{_src(ref.lines)})")


def _pred_tuple(pred: Any) -> str:
    if isinstance(pred, Equals):
        return f"('eq', {_src(pred.value)})"
    if isinstance(pred, AtLeast):
        return f"('ge', {_src(pred.value)})"
    if isinstance(pred, NotEqual):
        return f"('ne', {int(pred.value)})"
    raise TypeError(f"unknown poll predicate {pred!r}")


#: The fields of a bound op, besides its reference, that decide what it costs or what a poll sees (a data
#: source's kind and register are literal in the IR; only its offsets are expressions).
_TIMED_FIELDS = ("flag", "pred", "nbytes", "operand")


def _binder(op: Any, program: Program) -> tuple[Callable[[dict, tuple], BoundOp], Callable | None, bool]:
    """``bind(env, loops) -> BoundOp`` for one symbolic operation, ``rebind(op, env)`` that updates only
    the fields depending on ``MSG`` (None when there are none), and whether a field of
    :data:`_TIMED_FIELDS` depends on ``RANK``."""
    kind = _KIND_OF[type(op)]
    fields: dict[str, str] = {"kind": str(kind), "label": repr(getattr(op, "label", type(op).__name__.lower()))}
    consts: dict[str, Any] = {"op": op}
    ref = getattr(op, "dst", None) or (getattr(op, "src", None) if kind in (LOAD, POLL, MC_LOAD_REDUCE) else None)
    if ref is not None:
        fields["ref"] = _ref_tuple(ref)
        fields["key"] = "o.ref[:4]"
        layout = consts["layout"] = program.buffer(ref.buffer).layout
        consts["line_bytes"] = layout.line_bytes
        consts["data_bytes"] = layout.data_bytes
        # the words a poll inspects are flag words (set by a store's flag), not data words
        consts["polls_flags"] = bool(layout.poll_words) and all(
            layout.words[i].role is WordRole.FLAG for i in layout.poll_words)
    if kind in (STORE, WRITE, MC_STORE):
        fields["src"] = _source_tuple(op.src)
    if kind in (STORE, ATOMIC, MC_STORE, MC_RED) and op.flag is not None:
        fields["flag"] = _src(op.flag)
    if kind in (ATOMIC, MC_RED):
        fields["operand"] = _source_tuple(op.operand)
    if kind == REDUCE:
        fields["srcs"] = "(" + "".join(_source_tuple(s) + ", " for s in op.srcs) + ")"
        fields["nbytes"] = _src(op.nbytes)
        if op.output_offset is not None:
            fields["offset"] = _src(op.output_offset)
    if kind == WRITE:
        fields["nbytes"] = _src(op.nbytes)
        fields["offset"] = _src(op.offset)
    if kind == POLL:
        fields["pred"] = _pred_tuple(op.until)
    if getattr(op, "into", None) is not None:
        fields["into"] = repr(op.into)
    if hasattr(op, "into_offset"):
        fields["into_offset"] = _src(op.into_offset)
    for name in ("sem", "scope"):
        if hasattr(op, name):
            consts[name] = getattr(op, name)
    if kind == FENCE:  # a fence has no sem; keep its kind (sc / acq_rel) there
        consts["sem"] = op.kind
    consts["leader"] = getattr(op, "issuer", Issuer.ALL) is Issuer.LEADER
    sem = getattr(op, "sem", None)
    consts["releasing"] = sem in _RELEASING
    consts["acquiring"] = sem in _ACQUIRING
    lines = ["def bind(e, loops):", "    o = new(BoundOp)", "    o.op = op", "    o.loops = loops"]
    for slot in BoundOp.__slots__:
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
    namespace: dict[str, Any] = {"new": object.__new__, "BoundOp": BoundOp, "op": op}
    namespace.update({f"c_{k}": v for k, v in consts.items()})
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from IR expressions only
    timed_by_rank = any("e['RANK']" in fields.get(slot, "") for slot in _TIMED_FIELDS)
    return namespace["bind"], namespace.get("rebind"), timed_by_rank


def _contains(ops: tuple, kinds: tuple[type, ...]) -> bool:
    for op in ops:
        if isinstance(op, kinds):
            return True
        if isinstance(op, Loop) and _contains(op.body, kinds):
            return True
    return False


class Lowered:
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
        #: whether the program has multimem ops (one op reaches every rank's memory through the switch)
        self.multicast = False
        self._tree = self._compile(program.ops)
        # per thread: (NRANKS/ITER key, {rank: (items, size-dependent updates)}), so threads never share items
        self._reuse: dict[int, tuple[tuple, dict[int, tuple[list[Any], list[tuple]]]]] = {}

    def _compile(self, ops: tuple) -> list[Any]:
        out: list[Any] = []
        for op in ops:
            if isinstance(op, Loop):
                body = self._compile(op.body)
                if not body:  # nothing to run however often it repeats (an algorithm's phase with no ops here)
                    continue
                lanes = not _contains(op.body, (SyncGroup,))
                source = _src(op.count)
                self._sized_loops |= "e['MSG']" in source
                self.rank_shaped |= "e['RANK']" in source
                count = eval(f"lambda e: {source}")  # noqa: S307 - IR expression source
                out.append(("loop", op.var, count, body, lanes, op.label, _contains(op.body, (PollUntil,))))
            else:
                if isinstance(op, (MultimemLoadReduce, MultimemStore, MultimemRed)):
                    self.multicast = True
                if (isinstance(op, (Load, Store, Atomic, MultimemLoadReduce, MultimemStore, MultimemRed))
                        and getattr(op, "issuer", Issuer.ALL) is Issuer.ALL):
                    if isinstance(op, (Load, MultimemLoadReduce)):
                        self.loads_data = True
                    else:
                        self.stores_data = True
                bind, rebind, timed_by_rank = _binder(op, self.program)
                if timed_by_rank:
                    self.rank_timed.add(id(op))
                out.append(("op", bind, rebind))
        return out

    def bind(self, env: Mapping[str, int], reuse: bool = False) -> list[Any]:
        """The items of one rank: :class:`BoundOp` and :class:`Block` objects in program order.

        With ``reuse``, a rank bound just before for the same ``NRANKS`` and ``ITER`` gets its previous
        items back with only the size-dependent fields recomputed (those items change in place, so a
        caller must not keep the earlier ones).
        """
        e = dict(env)
        if not reuse or self._sized_loops:
            return self._bind(self._tree, e, (), None)
        key = tuple(sorted((k, v) for k, v in e.items() if k not in ("RANK", "MSG")))
        thread = threading.get_ident()
        cached = self._reuse.get(thread)
        if cached is None or cached[0] != key:
            cached = self._reuse[thread] = (key, {})
        found = cached[1].get(e["RANK"])
        if found is None:
            updates: list[tuple] = []
            items = self._bind(self._tree, e, (), updates)
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
            if item[0] == "op":
                bound = item[1](e, loops)
                if updates is not None and item[2] is not None:
                    updates.append((bound, item[2], loops))
                out.append(bound)
                continue
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

    def flat(self, env: Mapping[str, int]) -> list[BoundOp]:
        """Every bound op in program order (what :meth:`Program.flatten` lists)."""
        out: list[BoundOp] = []

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


def lower(program: Program) -> Lowered:
    """Compile ``program`` for the simulator (see :class:`Lowered`)."""
    return Lowered(program)
