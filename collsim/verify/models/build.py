"""Boolean connectives and integer comparisons built with one z3 C call each.

The encodings build hundreds of thousands of small terms. z3's Python
constructors (``z3.And``, ``z3.Implies``, ``ArithRef.__lt__``, ...) coerce
every argument first: a sort query, a cast and a context check per argument,
several C calls each, which was about a third of the Python time of building
an encoding (atomic-counter at 4 ranks x 3 launches). These functions call
the same C constructors (``Z3_mk_and``, ``Z3_mk_implies``, ``Z3_mk_lt``, ...)
on the same arguments, so the terms are the same ones (z3 hash-conses terms:
identical pointers), and fall back to z3's own constructor for anything that
is not already a term of the expected kind (Python values, probes, mixed
sorts). Written out here rather than taken from z3 only because speed
demands it.

>>> import z3
>>> p, q = z3.Bools("p q")
>>> x, y = z3.Ints("x y")
>>> and_(p, q).eq(z3.And(p, q)) and implies(p, lt(x, y)).eq(z3.Implies(p, x < y))
True
>>> lt(x, z3.IntVal(1)).sexpr() == (x < z3.IntVal(1)).sexpr() == '(> 1 x)'
True
>>> is_false(z3.BoolVal(False)), is_false(p)
(True, False)
"""
from __future__ import annotations

from typing import Any

import z3
from z3 import z3core
from z3.z3types import Ast

__all__ = ["and_", "or_", "implies", "not_", "lt", "le", "ge", "eq", "is_false", "is_true", "add_all"]

_BoolRef = z3.BoolRef
_ArithRef = z3.ArithRef


def _args(args: tuple) -> tuple[tuple | list, Any]:
    ctx = None
    if args and isinstance(args[-1], z3.Context):
        ctx = args[-1]
        args = args[:-1]
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return args, ctx


def _nary(mk: Any, fallback: Any, args: tuple) -> Any:
    terms, ctx = _args(args)
    for a in terms:
        if not isinstance(a, _BoolRef):
            return fallback(*args)
    if terms:
        ctx = terms[0].ctx
    elif ctx is None:
        return fallback(*args)
    n = len(terms)
    arr = (Ast * n)(*[a.ast for a in terms])
    return _BoolRef(mk(ctx.ref(), n, arr), ctx)


def and_(*args: Any) -> Any:
    """``z3.And`` (same arguments, same term)."""
    return _nary(z3core.Z3_mk_and, z3.And, args)


def or_(*args: Any) -> Any:
    """``z3.Or`` (same arguments, same term)."""
    return _nary(z3core.Z3_mk_or, z3.Or, args)


def implies(a: Any, b: Any) -> Any:
    """``z3.Implies(a, b)``."""
    if isinstance(a, _BoolRef) and isinstance(b, _BoolRef):
        ctx = a.ctx
        return _BoolRef(z3core.Z3_mk_implies(ctx.ref(), a.ast, b.ast), ctx)
    return z3.Implies(a, b)


def not_(a: Any) -> Any:
    """``z3.Not(a)``."""
    if isinstance(a, _BoolRef):
        ctx = a.ctx
        return _BoolRef(z3core.Z3_mk_not(ctx.ref(), a.ast), ctx)
    return z3.Not(a)


def _compare(mk: Any, mk_reflected: Any, a: Any, b: Any) -> Any | None:
    """``mk(a, b)`` as Python's operator would build it, or ``None`` where the operands are not two terms.

    Python calls the right operand's reflected comparison first where its type is a proper subclass of the
    left one's (``x < IntVal(1)`` is ``IntNumRef.__gt__``: the term ``1 > x``), so that case is reflected
    here too: the same term, not only an equivalent one.
    """
    if not (isinstance(a, _ArithRef) and isinstance(b, _ArithRef)):
        return None
    ta, tb = type(a), type(b)
    if ta is not tb and issubclass(tb, ta):
        a, b, mk = b, a, mk_reflected
    ctx = a.ctx
    return _BoolRef(mk(ctx.ref(), a.ast, b.ast), ctx)


def lt(a: Any, b: Any) -> Any:
    """``a < b`` (the same term as the operator's)."""
    t = _compare(z3core.Z3_mk_lt, z3core.Z3_mk_gt, a, b)
    return a < b if t is None else t


def le(a: Any, b: Any) -> Any:
    """``a <= b`` (the same term as the operator's)."""
    t = _compare(z3core.Z3_mk_le, z3core.Z3_mk_ge, a, b)
    return a <= b if t is None else t


def ge(a: Any, b: Any) -> Any:
    """``a >= b`` (the same term as the operator's)."""
    t = _compare(z3core.Z3_mk_ge, z3core.Z3_mk_le, a, b)
    return a >= b if t is None else t


def eq(a: Any, b: Any) -> Any:
    """``a == b`` (the same term as the operator's)."""
    t = _compare(z3core.Z3_mk_eq, z3core.Z3_mk_eq, a, b)
    return a == b if t is None else t


def is_false(t: Any) -> bool:
    """``z3.is_false(t)``: one C call instead of four."""
    return isinstance(t, _BoolRef) and z3core.Z3_get_bool_value(t.ctx.ref(), t.ast) == z3.Z3_L_FALSE


def is_true(t: Any) -> bool:
    """``z3.is_true(t)``: one C call instead of four."""
    return isinstance(t, _BoolRef) and z3core.Z3_get_bool_value(t.ctx.ref(), t.ast) == z3.Z3_L_TRUE


def add_all(solver: z3.Solver, terms: list[Any]) -> None:
    """``solver.add(*terms)`` for Boolean terms, one ``Z3_solver_assert`` each without z3's per-term cast."""
    ctx = solver.ctx.ref()
    s = solver.solver
    for t in terms:
        if isinstance(t, _BoolRef):
            z3core.Z3_solver_assert(ctx, s, t.ast)
        else:
            solver.add(t)
