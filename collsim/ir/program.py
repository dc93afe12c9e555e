"""Per-rank programs: what an algorithm generates from a protocol, and how consumers unroll it."""
from __future__ import annotations

import inspect
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, fields, replace
from types import FrameType
from typing import Iterator, Mapping

from collsim.errors import ProtocolDefinitionError
from collsim.ir.buffers import Buffer
from collsim.ir.expr import Expr, Var, as_expr
from collsim.ir.floats import WordEncoding
from collsim.ir.ops import (Loop, MultimemLoadReduce, MultimemRed, MultimemStore, NotEqual, Op, PollUntil, Predicate,
                            ProxyThread, When, bind)
from collsim.ir.origin import caller_location, stack_depth

__all__ = ["Program", "FlatOp", "ProgramBuilder", "flatten", "walk", "FABRIC_FEATURES"]

#: What a program may need of the switches between its GPUs (NVLink SHARP): ``multicast``, one write
#: through a multimem address reaching every copy (every multimem op), and ``reduction``, the switch
#: reducing the copies it reads (``multimem.ld_reduce``).
FABRIC_FEATURES = ("multicast", "reduction")


@dataclass(frozen=True)
class FlatOp:
    """One bound operation of an unrolled program.

    ``index`` is its position in program order; ``loops`` the loop variables
    and their values around it (for names such as ``poll[k=2]``).
    """

    index: int
    op: Op
    loops: tuple[tuple[str, int], ...] = ()
    #: for a :class:`~collsim.ir.ops.ProxyThread`, its body unrolled and bound (``op.body`` holds the same ops)
    body: tuple["FlatOp", ...] = ()

    @property
    def name(self) -> str:
        label = getattr(self.op, "label", type(self.op).__name__.lower())
        if not self.loops:
            return label
        return label + "[" + ",".join(f"{var}={value}" for var, value in self.loops) + "]"


@dataclass(frozen=True)
class Program:
    """The symbolic program every rank runs for one collective call.

    It depends on ``RANK``, ``NRANKS``, ``ITER`` and ``MSG``; consumers bind
    them (:meth:`flatten`). ``registers`` maps each register to its size in
    bytes (an expression). ``forbidden_word`` is the word the protocol's data
    domain keeps out of user data (:attr:`collsim.ir.protocol.DataDomain.forbidden_word`),
    if it declares one.
    """

    protocol: str
    algorithm: str
    ops: tuple[Op, ...]
    buffers: tuple[Buffer, ...]
    registers: Mapping[str, Expr] = field(default_factory=dict)
    forbidden_word: int | None = None
    #: the floating-point facts of the data words (:attr:`collsim.ir.protocol.DataDomain.encoding`)
    word_encoding: WordEncoding | None = None
    #: CTAs per rank (:attr:`collsim.ir.protocol.Protocol.ctas`): every CTA runs :attr:`ops` with its own
    #: ``CTA`` (0 .. ctas-1); ``NCTAS`` is this count
    ctas: int = 1

    def __repr__(self) -> str:
        # a program of one CTA per rank prints as before the field existed (cache keys)
        text = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "ctas")
        return f"Program({text}" + (f", ctas={self.ctas})" if self.ctas != 1 else ")")

    def cta_env(self, env: Mapping[str, int], cta: int) -> dict[str, int]:
        """``env`` for CTA ``cta`` of the rank: ``CTA`` and ``NCTAS`` bound.

        >>> Program("p", "one-shot", (), (), ctas=2).cta_env({"RANK": 1}, 1)
        {'RANK': 1, 'CTA': 1, 'NCTAS': 2}
        """
        if not 0 <= cta < self.ctas:
            raise ValueError(f"program {self.protocol}/{self.algorithm} has CTAs 0 .. {self.ctas - 1}, not {cta}")
        return {**env, "CTA": cta, "NCTAS": self.ctas}

    @property
    def sentinel_word(self) -> int | None:
        """The sentinel pattern: the value the ``NotEqual`` polls compare against, else :attr:`forbidden_word`.

        It is what a buffer with ``init=FillPattern.SENTINEL`` starts as and what ``Fill("sentinel")``
        stores; a program polls against one sentinel at most.

        >>> from collsim.ir.ops import Ref
        >>> from collsim.ir.types import Scope, Sem
        >>> poll = PollUntil(Ref("lines", 0), NotEqual(0xFFFAFFFA), Sem.RELAXED, Scope.SYS)
        >>> hex(Program("p", "one-shot", (poll,), ()).sentinel_word)
        '0xfffafffa'
        """
        values = {op.until.value for op in walk(self.ops)
                  if isinstance(op, PollUntil) and isinstance(op.until, NotEqual)}
        if len(values) > 1:
            raise ProtocolDefinitionError(
                f"{self.protocol}/{self.algorithm} polls against several sentinels "
                f"{', '.join(hex(v) for v in sorted(values))}: a program has one sentinel pattern")
        return values.pop() if values else self.forbidden_word

    @property
    def fabric_needs(self) -> frozenset[str]:
        """The :data:`FABRIC_FEATURES` the program's operations need of the switches.

        >>> from collsim.ir.ops import MulticastRef
        >>> from collsim.ir.types import RmwOp, Scope, Sem
        >>> red = MultimemRed(RmwOp.ADD, MulticastRef("inbox"), 1, Sem.RELEASE, Scope.SYS)
        >>> sorted(Program("p", "one-shot", (red,), ()).fabric_needs)
        ['multicast']
        """
        needs: set[str] = set()
        for op in walk(self.ops):
            if isinstance(op, (MultimemLoadReduce, MultimemStore, MultimemRed)):
                needs.add("multicast")
            if isinstance(op, MultimemLoadReduce):
                needs.add("reduction")
        return frozenset(needs)

    def buffer(self, name: str) -> Buffer:
        for buf in self.buffers:
            if buf.name == name:
                return buf
        raise KeyError(f"program {self.protocol}/{self.algorithm} declares no buffer {name!r}")

    def flatten(self, env: Mapping[str, int]) -> list[FlatOp]:
        """Unroll loops and bind every expression for the given symbol values."""
        return flatten(self.ops, env)

    def op_count(self, env: Mapping[str, int]) -> int:
        return len(self.flatten(env))


def flatten(ops: tuple[Op, ...], env: Mapping[str, int]) -> list[FlatOp]:
    """Unroll ``ops`` under ``env``; each loop variable is added to the environment of its body.

    A :class:`~collsim.ir.ops.ProxyThread` stays one flat op: its ``body`` becomes the bound, unrolled ops
    of the proxy (and :attr:`FlatOp.body` their flat ops, numbered from 0 in the proxy's own order).

    >>> from collsim.ir.ops import Fence, Loop
    >>> from collsim.ir.types import FenceKind, Scope
    >>> from collsim.ir.expr import NRANKS
    >>> prog = (Loop("k", NRANKS - 1, (Fence(FenceKind.SC, Scope.SYS),)),)
    >>> [f.name for f in flatten(prog, {"NRANKS": 3})]
    ['fence[k=0]', 'fence[k=1]']
    """
    out: list[FlatOp] = []

    def visit(seq: tuple[Op, ...], scope_env: dict[str, int], loops: tuple[tuple[str, int], ...]) -> None:
        for op in seq:
            if isinstance(op, Loop):
                for value in range(op.count.evaluate(scope_env)):
                    visit(op.body, {**scope_env, op.var: value}, loops + ((op.var, value),))
            elif isinstance(op, ProxyThread):
                inner = flatten(op.body, scope_env)
                out.append(FlatOp(len(out), replace(op, body=tuple(f.op for f in inner)), loops, tuple(inner)))
            else:
                out.append(FlatOp(len(out), bind(op, scope_env), loops))

    visit(tuple(ops), dict(env), ())
    return out


def walk(ops: tuple[Op, ...]) -> Iterator[Op]:
    """Every operation in ``ops``, loops included, depth first (symbolic, not unrolled)."""
    for op in ops:
        yield op
        yield from walk(op.children())


class ProgramBuilder:
    """Collects operations; protocols and algorithms write programs through it.

    Every operation is recorded with its :attr:`~collsim.ir.ops.Op.origin`: the frames of
    protocol code (outside the collsim package) between the call that created the builder and
    the ``emit`` (or ``loop``) call, so a consumer's error can name the protocol file and line.

    >>> from collsim.ir.ops import Fence
    >>> from collsim.ir.types import FenceKind, Scope
    >>> b = ProgramBuilder()
    >>> with b.loop("k", 2) as k:
    ...     _ = b.emit(Fence(FenceKind.SC, Scope.SYS))
    >>> len(b.ops), len(b.ops[0].body)
    (1, 1)
    """

    def __init__(self, ctas: int = 1) -> None:
        #: CTAs per rank of the program being built (what an algorithm slices its sends by)
        self.ctas = ctas
        self._stack: list[list[Op]] = [[]]
        self.registers: dict[str, Expr] = {}
        self._counter = 0
        # frames at or outside the one that created the builder are not protocol code
        self._root_depth = stack_depth(inspect.currentframe()) - 1

    def _located(self, op: Op, caller: FrameType | None) -> Op:
        origin = caller_location(caller, self._root_depth)
        return op if origin is None else replace(op, origin=origin)

    def emit(self, op: Op) -> Op:
        """Append ``op`` (recorded with where protocol code emitted it) and return the recorded op."""
        frame = inspect.currentframe()
        op = self._located(op, frame.f_back if frame is not None else None)
        self._stack[-1].append(op)
        return op

    def loop(self, var: str, count: Expr | int) -> AbstractContextManager[Var]:
        """Collect the body of a ``Loop`` over ``var`` = 0 .. ``count``-1 (a ``with`` block)."""
        frame = inspect.currentframe()
        return self._loop(self._located(Loop(var, as_expr(count)), frame.f_back if frame is not None else None))

    @contextmanager
    def _loop(self, loop: Loop) -> Iterator[Var]:
        self._stack.append([])
        try:
            yield Var(loop.var)
        finally:
            body = tuple(self._stack.pop())
            self._stack[-1].append(replace(loop, body=body))

    def proxy(self, label: str = "proxy") -> AbstractContextManager[None]:
        """Collect the body of this rank's :class:`~collsim.ir.ops.ProxyThread` (a ``with`` block)."""
        frame = inspect.currentframe()
        return self._collect_body(self._located(ProxyThread(label=label),
                                                frame.f_back if frame is not None else None))

    def when(self, register: str, cond: Predicate, offset: int = 0, label: str = "when",
             nbytes: int = 8) -> AbstractContextManager[None]:
        """Collect the body of a :class:`~collsim.ir.ops.When` on register ``register`` (a ``with`` block)."""
        frame = inspect.currentframe()
        return self._collect_body(self._located(When(register, cond, (), offset, label, nbytes),
                                                frame.f_back if frame is not None else None))

    @contextmanager
    def _collect_body(self, op: ProxyThread | When) -> Iterator[None]:
        """The ops of a ``with`` block become ``op``'s body."""
        self._stack.append([])
        try:
            yield None
        finally:
            body = tuple(self._stack.pop())
            self._stack[-1].append(replace(op, body=body))

    def register(self, name: str, nbytes: Expr | int) -> str:
        """Declare register ``name`` of ``nbytes`` bytes (the largest size wins)."""
        self.registers.setdefault(name, as_expr(nbytes))
        return name

    def fresh(self, prefix: str) -> str:
        """A register or variable name not used before."""
        self._counter += 1
        return f"{prefix}{self._counter}"

    @property
    def ops(self) -> tuple[Op, ...]:
        if len(self._stack) != 1:
            raise RuntimeError("a loop is still open")
        return tuple(self._stack[0])
