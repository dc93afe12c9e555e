"""Integer expressions over the few symbols a protocol program depends on.

A program is written once, symbolically, and instantiated by each consumer:
the simulator and the verifier evaluate an expression for concrete values
(``evaluate``), the emitter prints it as C (``to_c``).

Symbols
-------
``RANK``, ``NRANKS``
    this rank and the rank count.
``ITER``
    the collective's launch index; epochs and buffer rotation derive from it,
    so two or three iterations in the verifier exercise what a long run does.
``MSG``
    message size in bytes per rank.
``CTA``, ``NCTAS``
    this CTA's index among its rank's CTAs (``blockIdx.x``) and their count
    (:attr:`collsim.ir.protocol.Protocol.ctas`); 0 and 1 in a program of one
    CTA per rank.
``ARG_ITER``
    the launch index as a *kernel argument* the host computed: ``ITER`` for a
    launch issued on the stream, but the index of the capture launch in every
    replay of a CUDA graph, whose kernel arguments are frozen at capture
    (:attr:`collsim.ir.protocol.Protocol.graph_replay`). ``ITER`` itself is what
    the kernel reads from its launch counter in device memory, so it advances
    in graph replays too.
Loop variables are plain :class:`Var` objects named by the loop.

Values from memory
------------------
:class:`Loaded` names the word an earlier operation of the same thread loaded
into a register (a device step counter, a generation number read at kernel
start). Binding leaves it symbolic: it evaluates to a :class:`LoadedValue`
(the register word plus an integer), which each consumer resolves with the
value it has for the register (the verifier: the read's value term; the
simulator: what its memory held; the emitter: the register in C). Only
``+`` and ``-`` of an integer combine with it.

Examples
--------
>>> slot = ITER % 3
>>> slot.evaluate({"ITER": 4})
1
>>> (ITER + 1).to_c()
'(iter + 1)'
>>> ceil_div(MSG, 8).evaluate({"MSG": 20})
3
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

__all__ = [
    "Expr",
    "Const",
    "Var",
    "BinOp",
    "as_expr",
    "ceil_div",
    "mask",
    "RANK",
    "NRANKS",
    "ITER",
    "MSG",
    "ARG_ITER",
    "CTA",
    "NCTAS",
    "LaunchArgument",
    "Loaded",
    "LoadedValue",
    "loaded_registers",
]

ExprLike = Union["Expr", int]

# C spelling of the built-in symbols in emitted kernels.
_C_NAMES = {"RANK": "rank", "NRANKS": "nranks", "ITER": "iter", "MSG": "msg_bytes", "ARG_ITER": "p.arg_iter",
           "CTA": "cta", "NCTAS": "nctas"}


class Expr:
    """Base of all expressions; supports ``+ - * // %`` and ``&``."""

    def evaluate(self, env: Mapping[str, int]) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_c(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def free_vars(self) -> frozenset[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __add__(self, other: ExprLike) -> "Expr":
        return _bin("+", self, other)

    def __radd__(self, other: ExprLike) -> "Expr":
        return _bin("+", other, self)

    def __sub__(self, other: ExprLike) -> "Expr":
        return _bin("-", self, other)

    def __rsub__(self, other: ExprLike) -> "Expr":
        return _bin("-", other, self)

    def __mul__(self, other: ExprLike) -> "Expr":
        return _bin("*", self, other)

    def __rmul__(self, other: ExprLike) -> "Expr":
        return _bin("*", other, self)

    def __floordiv__(self, other: ExprLike) -> "Expr":
        return _bin("//", self, other)

    def __mod__(self, other: ExprLike) -> "Expr":
        return _bin("%", self, other)

    def __and__(self, other: ExprLike) -> "Expr":
        return _bin("&", self, other)

    def __neg__(self) -> "Expr":
        return _bin("-", 0, self)


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """An integer literal."""

    value: int

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.value

    def to_c(self) -> str:
        return str(self.value) if self.value >= 0 else f"({self.value})"

    def free_vars(self) -> frozenset[str]:
        return frozenset()

    def __repr__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A named symbol; its value comes from the environment."""

    name: str

    def evaluate(self, env: Mapping[str, int]) -> int:
        try:
            return int(env[self.name])
        except KeyError:
            raise KeyError(f"expression needs a value for {self.name!r}") from None

    def to_c(self) -> str:
        return _C_NAMES.get(self.name, self.name)

    def free_vars(self) -> frozenset[str]:
        return frozenset({self.name})

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=True)
class LaunchArgument(Var):
    """A value the host passes as a kernel argument at launch, derived from ``ITER`` (:data:`ARG_ITER`).

    A consumer that models CUDA-graph replay binds it (the verifier binds ``ARG_ITER`` to the capture
    launch's index, 0); one that does not distinguish the two (the simulator: values do not change
    timing) gets ``ITER``.

    >>> ARG_ITER.evaluate({"ITER": 3}), ARG_ITER.evaluate({"ITER": 3, "ARG_ITER": 0}), (ARG_ITER + 1).to_c()
    (3, 0, '(p.arg_iter + 1)')
    """

    def evaluate(self, env: Mapping[str, int]) -> int:
        if self.name in env:
            return int(env[self.name])
        return Var("ITER").evaluate(env)

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=True)
class Loaded(Expr):
    """The ``nbytes``-byte word at byte ``offset`` of register ``register``, as an operation loaded it.

    A poll's predicate may wait for it (``Equals(Loaded("step") + 1)``): the register must be filled
    earlier on every path of the thread that polls (:mod:`collsim.ir.checks`).

    >>> target = Loaded("step") + ITER % 1 + 1
    >>> value = target.evaluate({"ITER": 4})
    >>> value, value.resolve(lambda register, offset: 41)
    (step[0] + 1, 42)
    >>> Loaded("step").to_c()
    'collsim_loaded(step, 0)'
    """

    register: str
    offset: int = 0
    nbytes: int = 8

    def evaluate(self, env: Mapping[str, int]) -> "LoadedValue":  # type: ignore[override]
        return LoadedValue(self.register, self.offset, 0, self.nbytes)

    def to_c(self) -> str:
        # no C of its own: the emitter prints the register's scratch word (KernelGenerator._value_c); this
        # names no defined function, so a path that forgets to does not compile
        return f"collsim_loaded({self.register}, {self.offset})"

    def free_vars(self) -> frozenset[str]:
        return frozenset()

    def __repr__(self) -> str:
        return f"{self.register}[{self.offset}]"


@dataclass(frozen=True, eq=True)
class LoadedValue:
    """A bound :class:`Loaded` word plus ``add``: what a consumer resolves (:meth:`resolve`) with its register
    values."""

    register: str
    offset: int = 0
    add: int = 0
    nbytes: int = 8

    def _plus(self, other: object, sign: int) -> "LoadedValue":
        if isinstance(other, bool) or not isinstance(other, int):
            raise TypeError(f"a loaded value ({self!r}) combines only with + and - of an integer, not {other!r}")
        return LoadedValue(self.register, self.offset, self.add + sign * other, self.nbytes)

    def __add__(self, other: object) -> "LoadedValue":
        return self._plus(other, 1)

    __radd__ = __add__

    def __sub__(self, other: object) -> "LoadedValue":
        return self._plus(other, -1)

    def _refuse(self, *_: object) -> "LoadedValue":
        raise TypeError(f"a loaded value ({self!r}) combines only with + and - of an integer")

    __rsub__ = __mul__ = __rmul__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __and__ = __rand__ = _refuse

    def resolve(self, lookup: "Callable[[str, int], Any]") -> Any:
        """The value, given ``lookup(register, offset)``: the consumer's value of the register word, plus
        :attr:`add`."""
        base = lookup(self.register, self.offset)
        return base + self.add if self.add else base

    def __repr__(self) -> str:
        if not self.add:
            return f"{self.register}[{self.offset}]"
        return f"{self.register}[{self.offset}] {'+' if self.add > 0 else '-'} {abs(self.add)}"


def loaded_registers(value: object) -> tuple[str, ...]:
    """The registers a value names through :class:`Loaded` (symbolic) or :class:`LoadedValue` (bound).

    >>> loaded_registers(Loaded("gen") + 1), loaded_registers(ITER + 1)
    (('gen',), ())
    """
    if isinstance(value, (Loaded, LoadedValue)):
        return (value.register,)
    if isinstance(value, BinOp):
        return loaded_registers(value.left) + loaded_registers(value.right)
    return ()


_PY_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "&": lambda a, b: a & b,
}
# Operands are non-negative wherever we use // and %, so C's truncating
# division agrees with Python's flooring division.
_C_OPS = {"+": "+", "-": "-", "*": "*", "//": "/", "%": "%", "&": "&"}


@dataclass(frozen=True, eq=True)
class BinOp(Expr):
    """``left op right`` for op in ``+ - * // % &``."""

    op: str
    left: Expr
    right: Expr

    def evaluate(self, env: Mapping[str, int]) -> int:
        return _PY_OPS[self.op](self.left.evaluate(env), self.right.evaluate(env))

    def to_c(self) -> str:
        return f"({self.left.to_c()} {_C_OPS[self.op]} {self.right.to_c()})"

    def free_vars(self) -> frozenset[str]:
        return self.left.free_vars() | self.right.free_vars()

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


def as_expr(value: ExprLike) -> Expr:
    """Wrap an int as :class:`Const`; pass expressions through.

    >>> as_expr(3)
    3
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an int or Expr, got {value!r}")
    return Const(value)


def _bin(op: str, left: ExprLike, right: ExprLike) -> Expr:
    left_e, right_e = as_expr(left), as_expr(right)
    # Fold constants so printed programs stay readable.
    if isinstance(left_e, Const) and isinstance(right_e, Const):
        return Const(_PY_OPS[op](left_e.value, right_e.value))
    if op in ("+", "-") and isinstance(right_e, Const) and right_e.value == 0:
        return left_e
    if op == "*" and isinstance(right_e, Const) and right_e.value == 1:
        return left_e
    return BinOp(op, left_e, right_e)


def ceil_div(numerator: ExprLike, denominator: ExprLike) -> Expr:
    """``ceil(numerator / denominator)`` for non-negative operands.

    >>> ceil_div(17, 8)
    3
    """
    return (as_expr(numerator) + (as_expr(denominator) - 1)) // denominator


def mask(value: ExprLike, bits: int) -> Expr:
    """Keep the low ``bits`` bits, as a flag of that width does.

    >>> mask(ITER + 1, 2).evaluate({"ITER": 3})
    0
    """
    if bits >= 64:
        return as_expr(value)
    return as_expr(value) & ((1 << bits) - 1)


RANK = Var("RANK")
NRANKS = Var("NRANKS")
ITER = Var("ITER")
MSG = Var("MSG")
ARG_ITER = LaunchArgument("ARG_ITER")
CTA = Var("CTA")
NCTAS = Var("NCTAS")
