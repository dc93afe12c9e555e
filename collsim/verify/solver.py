"""Queries over a program's executions, with three-valued answers.

``exists(program, C)`` asks whether some execution allowed by a memory model
satisfies ``C``; the program is encoded by :func:`collsim.verify.models.encode`
(the one model the protocol verifier uses, with the causality strategy of
``causality``). The answer is a :class:`QueryResult`:

* ``status == "sat"``: yes; ``witness`` describes one such execution;
* ``status == "unsat"``: no execution does;
* ``status == "unknown"``: z3 gave up (timeout, resource limit, ...);
  ``reason`` says why. Unknown is never reported as "no".

Conditions are z3 Bools over read values (``program.value_var(name)``) and
final values (``program.final_var(loc)``), or functions ``encoding -> Bool``
for anything else the encoding exposes (``rf_vars``, ``co_names``, ...).

Examples
--------
>>> from collsim.verify.events import ProgramBuilder
>>> b = ProgramBuilder()
>>> b.thread("P0", cta=0); b.thread("P1", cta=1)
>>> _ = b.st("P0", "x", 1); _ = b.st("P0", "y", 1)
>>> ry = b.ld("P1", "y"); rx = b.ld("P1", "x")
>>> p = b.build()
>>> cond = z3.And(p.value_var(ry) == 1, p.value_var(rx) == 0)
>>> exists(p, cond, model="sc").status, exists(p, cond, model="ptx").status
('unsat', 'sat')
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import z3

from collsim.verify.events import Program
from collsim.verify.models import DEFAULT_CAUSALITY, Encoding, Witness
from collsim.verify.models import encode as encode_program

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "INTERRUPTED_REASON",
    "raise_if_interrupted",
    "Condition",
    "QueryResult",
    "OutcomeSet",
    "make_solver",
    "check",
    "encode",
    "exists",
    "always",
    "outcomes",
]

#: Default wall-clock limit of one solver call, in seconds.
DEFAULT_TIMEOUT_S = 30.0

#: z3's reason for an unknown when Ctrl-C stopped the check. z3 takes SIGINT itself while it solves (and then
#: puts Python's handler back), so Python raises nothing: such a check must end the command, not read as unknown.
INTERRUPTED_REASON = "interrupted from keyboard"


def raise_if_interrupted(solver: z3.Solver, error: Exception | None = None, *, elapsed_s: float | None = None,
                         timeout_s: float | None = None) -> None:
    """Raise :class:`KeyboardInterrupt` when ``solver``'s last check was stopped by Ctrl-C: its result is unknown
    for :data:`INTERRUPTED_REASON`, or ``canceled`` (what z3 says when Ctrl-C lands in some of its phases)
    well before its ``timeout_s`` ran out, or it raised ``error`` saying so."""
    try:
        reason = solver.reason_unknown()
    except z3.Z3Exception:
        reason = ""
    early = elapsed_s is not None and timeout_s is not None and elapsed_s < 0.9 * timeout_s
    if reason == INTERRUPTED_REASON or (reason == "canceled" and early) or (
            error is not None and "interrupted" in str(error).lower()):
        raise KeyboardInterrupt


Condition = Union[z3.BoolRef, bool, Callable[[Encoding], z3.BoolRef], None]


@dataclass
class QueryResult:
    """Answer of one query. ``status`` is ``"sat"``, ``"unsat"`` or ``"unknown"``."""

    status: str
    witness: Witness | None = None
    reason: str | None = None
    seconds: float = 0.0
    model: str = ""

    @property
    def found(self) -> bool | None:
        """True (sat), False (unsat) or None (unknown)."""
        return {"sat": True, "unsat": False}.get(self.status)

    @property
    def unknown(self) -> bool:
        return self.status == "unknown"

    def describe(self) -> str:
        if self.status == "unknown":
            return f"unknown ({self.reason})"
        return self.status


@dataclass
class OutcomeSet:
    """All value tuples of some terms over the allowed executions.

    ``complete`` is False when enumeration stopped early (``reason`` says why:
    a timeout, an unknown answer, or the ``limit``).
    """

    names: tuple[str, ...]
    values: set[tuple[Any, ...]] = field(default_factory=set)
    complete: bool = True
    reason: str | None = None
    seconds: float = 0.0


def make_solver(timeout_s: float | None = DEFAULT_TIMEOUT_S, ctx: z3.Context | None = None) -> z3.Solver:
    """A fresh z3 solver in ``ctx`` (default: z3's main context) with a per-call timeout (``None``: no limit)."""
    s = z3.Solver(ctx=ctx)
    if timeout_s is not None:
        s.set("timeout", max(1, int(timeout_s * 1000)))
    return s


def check(solver: z3.Solver, *assumptions: z3.BoolRef) -> tuple[str, str | None]:
    """``(status, reason)`` of ``solver.check``; reason only for unknown."""
    try:
        r = solver.check(*assumptions)
    except z3.Z3Exception as exc:  # e.g. interrupted
        raise_if_interrupted(solver, exc)
        return "unknown", f"z3 error: {exc}"
    if r == z3.sat:
        return "sat", None
    if r == z3.unsat:
        return "unsat", None
    raise_if_interrupted(solver)
    return "unknown", solver.reason_unknown() or "unknown"


def encode(program: Program, model: str = "ptx", timeout_s: float | None = DEFAULT_TIMEOUT_S, *,
           causality: str = DEFAULT_CAUSALITY, prune: bool = True) -> tuple[Encoding, z3.Solver]:
    """Encode ``program`` under ``model`` into a fresh solver; returns both.

    Use this for several questions about one program: push/pop around each
    condition, or pass conditions as ``check(solver, cond)`` assumptions.
    The solver and every term of the encoding live in the context of the
    program's own terms (that of its value sort).
    """
    enc = encode_program(program, model, causality=causality, prune=prune)
    solver = make_solver(timeout_s, enc.ctx)
    solver.add(enc.cons)
    return enc, solver


def _condition(enc: Encoding, cond: Condition) -> z3.BoolRef:
    if cond is None:
        return z3.BoolVal(True, enc.ctx)
    if callable(cond) and not isinstance(cond, z3.ExprRef):
        cond = cond(enc)
    if isinstance(cond, bool):
        return z3.BoolVal(cond, enc.ctx)
    cond = enc.term(cond)
    enc.finals_in(cond)
    return cond


def _add_new(enc: Encoding, solver: z3.Solver, done: int) -> int:
    """Add the encoding's constraints from index ``done`` on (final values added on demand); the new count."""
    for c in enc.cons[done:]:
        solver.add(c)
    return len(enc.cons)


def exists(program: Program, condition: Condition = None, *, model: str = "ptx",
           timeout_s: float | None = DEFAULT_TIMEOUT_S,
           extra: Mapping[str, Any] | None = None, causality: str = DEFAULT_CAUSALITY) -> QueryResult:
    """Is there an execution allowed by ``model`` that satisfies ``condition``?

    ``extra`` maps names to terms whose values the witness reports.
    """
    start = time.perf_counter()
    enc, solver = encode(program, model, timeout_s, causality=causality)
    done = len(enc.cons)
    cond = _condition(enc, condition)
    extra_terms = {k: enc.term(t) if isinstance(t, z3.ExprRef) else t for k, t in dict(extra or {}).items()}
    for t in extra_terms.values():
        if isinstance(t, z3.ExprRef):
            enc.finals_in(t)
    _add_new(enc, solver, done)
    solver.add(cond)
    status, reason = check(solver)
    witness = enc.decode(solver.model(), extra_terms) if status == "sat" else None
    return QueryResult(status=status, witness=witness, reason=reason,
                       seconds=time.perf_counter() - start, model=model)


def always(program: Program, condition: Condition, *, model: str = "ptx",
           timeout_s: float | None = DEFAULT_TIMEOUT_S,
           extra: Mapping[str, Any] | None = None, causality: str = DEFAULT_CAUSALITY) -> QueryResult:
    """Does every allowed execution satisfy ``condition``?

    Returned as the search for a counterexample: ``"unsat"`` means it always
    holds, ``"sat"`` comes with a counterexample witness.
    """
    if callable(condition) and not isinstance(condition, z3.ExprRef):
        fn = condition
        negated: Condition = lambda enc: z3.Not(fn(enc))  # noqa: E731
    else:
        negated = z3.Not(condition if not isinstance(condition, bool) else z3.BoolVal(condition, program.sort.ctx))
    return exists(program, negated, model=model, timeout_s=timeout_s, extra=extra, causality=causality)


def outcomes(program: Program, terms: Mapping[str, Any], *, model: str = "ptx",
             timeout_s: float | None = DEFAULT_TIMEOUT_S, limit: int = 10_000,
             causality: str = DEFAULT_CAUSALITY, prune: bool = True) -> OutcomeSet:
    """Every tuple of values of ``terms`` (name -> z3 term) over allowed executions.

    ``timeout_s`` bounds the whole enumeration.
    """
    start = time.perf_counter()
    names = tuple(terms)
    enc, solver = encode(program, model, timeout_s, causality=causality, prune=prune)
    done = len(enc.cons)
    exprs = [_condition(enc, t) if callable(t) and not isinstance(t, z3.ExprRef) else enc.term(t)
             for t in terms.values()]
    for t in exprs:
        enc.finals_in(t)
    _add_new(enc, solver, done)
    result = OutcomeSet(names=names)
    while True:
        if timeout_s is not None:
            left = timeout_s - (time.perf_counter() - start)
            if left <= 0:
                result.complete, result.reason = False, "timeout"
                break
            solver.set("timeout", max(1, int(left * 1000)))
        status, reason = check(solver)
        if status == "unsat":
            break
        if status == "unknown":
            result.complete, result.reason = False, reason
            break
        m = solver.model()
        vals = tuple(enc.num(m, t) if not isinstance(t, z3.BoolRef)
                     else z3.is_true(m.eval(t, model_completion=True)) for t in exprs)
        result.values.add(vals)
        if len(result.values) >= limit:
            result.complete, result.reason = False, f"limit of {limit} outcomes"
            break
        solver.add(z3.Or([t != (enc.term(v) if not isinstance(t, z3.BoolRef) else z3.BoolVal(v, enc.ctx))
                          for t, v in zip(exprs, vals)], enc.ctx) if exprs else z3.BoolVal(False, enc.ctx))
    result.seconds = time.perf_counter() - start
    return result
