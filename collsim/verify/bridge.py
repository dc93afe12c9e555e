"""The bridge between the verifier's two event forms, in both directions.

The protocol verifier (:class:`collsim.verify.properties.Execution`) encodes
PTX with vector clocks over a :class:`~collsim.verify.instance.VerifyInstance`;
the litmus runner uses :mod:`collsim.verify.models` over a
:class:`collsim.verify.events.Program`. So that the same programs can be
decided by both encodings (their agreement is tested, not assumed):

* :func:`to_event_program` turns a lowered protocol instance into an event
  program for the model layer;
* :func:`to_instance` turns an event program (a parsed litmus test, a random
  test program) into the verifier's form, and :func:`native_exists` /
  :func:`native_outcomes` are the verifier's answers about it.

In :func:`to_instance` one event becomes one instruction. Guards (branches)
become :attr:`VerifyInstance.guards`, program assumptions extra constraints,
values z3 terms over the verifier's read variables. Features the verifier's
event form does not have raise :class:`Unsupported`: virtual aliases and proxy
fences, barriers with a register id, a thread count or ``bar.arrive``. A
``cas`` writes only when its comparison holds (:attr:`VerifyEvent.writes_if`).
None of them occurs in a lowered protocol.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from collsim.errors import UnsupportedError
from collsim.verify.events import Event as ModelEvent
from collsim.verify.events import Placement, Program, rmw_result
from collsim.verify.instance import Bounds, EventKind, InstrKind, Lin, VerifyEvent, VerifyInstance, VerifyInstr
from collsim.verify.properties import Execution
from collsim.verify.solver import raise_if_interrupted

__all__ = ["Unsupported", "Converted", "to_instance", "to_event_program", "native_exists", "native_outcomes",
           "final_values"]

_INSTR_KIND = {EventKind.WRITE: InstrKind.STORE, EventKind.READ: InstrKind.LOAD, EventKind.RMW: InstrKind.RMW,
               EventKind.FENCE: InstrKind.FENCE, EventKind.BARRIER: InstrKind.BARRIER}


class Unsupported(UnsupportedError):
    """The program uses a feature outside the verifier's event form."""


@dataclass
class Converted:
    """A program in the verifier's event form."""

    low: VerifyInstance
    id_of: dict[str, int]  # program eid -> verifier event id
    assumptions: list[Any]  # the program's assumptions over the verifier's read variables
    pairs: list[tuple[Any, Any]] = field(default_factory=list)  # value variable -> read variable

    def term(self, t: Any) -> Any:
        """``t`` (over the program's value variables) over the verifier's read variables."""
        return _subst(t, self.pairs)


def _subst(t: Any, pairs: list[tuple[Any, Any]]) -> Any:
    if isinstance(t, bool):
        return z3.BoolVal(t)
    if isinstance(t, int):
        return z3.IntVal(t)
    return z3.substitute(t, *pairs) if pairs else t


def to_instance(program: Program) -> Converted:
    """``program`` as a :class:`VerifyInstance` for :class:`Execution` (raises :class:`Unsupported`)."""
    if program.sort != z3.IntSort():
        raise Unsupported("bit-vector values")
    threads = program.threads
    id_of: dict[str, int] = {}
    order = []
    for t in threads:
        for e in sorted(program.events_of(t), key=lambda e: e.po_index):
            id_of[e.eid] = len(order)
            order.append((threads.index(t), e))
    pairs = [(program.value_var(eid), z3.Int(f"v{i}")) for eid, i in id_of.items()
             if program.event(eid).is_read]
    conv = Converted(low=None, id_of=id_of, assumptions=[], pairs=pairs)  # type: ignore[arg-type]

    def term(x: Any) -> Any:
        return _subst(program.const(x) if isinstance(x, int) else x, pairs)

    events: list[VerifyEvent] = []
    instr_lists: list[list[VerifyInstr]] = [[] for _ in threads]
    guards: dict[int, Any] = {}
    for t, e in order:
        i = id_of[e.eid]
        if e.vloc is not None and e.vloc != e.loc:
            raise Unsupported("virtual aliases")
        kw: dict[str, Any] = dict(id=i, kind=e.kind, thread=t, rank=t, instr=len(instr_lists[t]),
                                  label=e.eid, sem=e.sem, scope=e.scope or "sys",
                                  deps=frozenset(id_of[d] for d in program.deps_of(e)))
        if e.is_memory:
            kw["loc"] = (e.loc,)
        if e.kind == EventKind.FENCE and e.sem == "proxy_alias":
            raise Unsupported("proxy fences")
        if e.kind == EventKind.WRITE:
            kw["value"] = term(e.value)
        elif e.kind == EventKind.RMW:
            kw["returns_value"] = e.returns_value
            if callable(e.value) or e.rmw_op is None:
                raise Unsupported("rmw given as a function")
            old = z3.Int(f"v{i}")
            operand = term(e.operand if e.operand is not None else 0)
            compare = term(e.compare) if e.compare is not None else None
            new, does = rmw_result(e.rmw_op, old, operand, compare)
            does = z3.simplify(does)
            if not z3.is_true(does):
                kw["writes_if"] = does
                new = z3.If(does, new, old)
            kw["rmw_op"] = e.rmw_op
            kw["value"] = z3.simplify(new)
        elif e.kind == EventKind.BARRIER:
            if e.bar_arrive or e.bar_quorum is not None:
                raise Unsupported("bar.arrive / barrier thread counts")
            if e.bar_id is not None and not isinstance(e.bar_id, int):
                raise Unsupported("barrier id in a register")
            pl = program.placement[e.thread]
            kw["bar"] = (pl.gpu, pl.cta, str(e.bar_instance), e.bar_id)
        ev = VerifyEvent(**kw)
        events.append(ev)
        if e.guard is not True:
            guards[i] = term(e.guard)
        instr_lists[t].append(VerifyInstr(thread=t, index=ev.instr, kind=_INSTR_KIND[ev.kind], events=[ev],
                                          label=e.eid, iteration=0))
    instrs = [ins for th in instr_lists for ins in th]
    for n, ins in enumerate(instrs):
        ins.id = n
    locs: dict[tuple, list[VerifyEvent]] = {}
    for ev in events:
        if ev.loc is not None:
            locs.setdefault(ev.loc, []).append(ev)
    placement = [(t, program.placement[th].cta, program.placement[th].gpu) for t, th in enumerate(threads)]
    conv.low = VerifyInstance(
        protocol=program.name or "program", algorithm="events", bounds=Bounds(ranks=max(2, len(threads))),
        msg=0, assumptions=(), events=events, threads=instr_lists, placement=placement,
        init={(loc,): program.init_value(loc) for loc in program.locations}, outputs={},
        expected_outputs={}, word_bytes=8, elements=0, sentinel=None, forbidden_word=None,
        instrs=instrs, locs=locs, guards=guards)
    conv.assumptions = [term(a) for a in program.assumptions]
    return conv


def final_values(ex: Execution, conv: Converted, program: Program) -> list[Any]:
    """Constraints tying ``program.final_var(loc)`` to a coherence-maximal executed write."""
    out = []
    for loc in program.locations:
        key = (loc,)
        fin = program.final_var(loc)
        ws = ex.low.writes_at(key)
        options = [z3.And([z3.Not(ex.wr(w)) for w in ws] + [fin == ex.wval(None, key)])]
        for w in ws:
            later = [z3.And(ex.wr(o), ex.co_lit(w, o)) for o in ws if o.id != w.id]
            options.append(z3.And(ex.wr(w), z3.Not(z3.Or(later)) if later else z3.BoolVal(True),
                                  fin == ex.wval(w, key)))
        out.append(z3.Or(options))
    return out


def native_exists(program: Program, outcome: Any, model: str = "ptx",
                  timeout_s: float | None = 120) -> str:
    """``"sat"``, ``"unsat"`` or ``"unknown"``: can ``outcome`` (over the program's value and
    final variables) happen under the verifier's encoding?"""
    conv = to_instance(program)
    ex = Execution(conv.low, model)
    s = ex.solver(timeout_s)
    s.add(conv.assumptions)
    s.add(final_values(ex, conv, program))
    s.add(conv.term(outcome))
    status = s.check()
    if status == z3.unknown:
        raise_if_interrupted(s)
    return str(status)


def native_outcomes(program: Program, terms: dict[str, Any], model: str = "ptx",
                    timeout_s: float | None = 120, limit: int = 10_000) -> set[tuple[int, ...]]:
    """Every tuple of values of ``terms`` (over the program's value and final variables)
    under the verifier's encoding; the counterpart of :func:`collsim.verify.solver.outcomes`."""
    conv = to_instance(program)
    ex = Execution(conv.low, model)
    s = ex.solver(timeout_s)
    s.add(conv.assumptions)
    s.add(final_values(ex, conv, program))
    exprs = [conv.term(t) for t in terms.values()]
    found: set[tuple[int, ...]] = set()
    while len(found) < limit:
        status = s.check()
        if status == z3.unknown:
            raise_if_interrupted(s)
            raise TimeoutError(s.reason_unknown())
        if status == z3.unsat:
            break
        m = s.model()
        vals = tuple(m.eval(t, model_completion=True).as_long() for t in exprs)
        found.add(vals)
        if not exprs:
            break
        s.add(z3.Or([t != v for t, v in zip(exprs, vals)]))
    return found


def to_event_program(low: VerifyInstance, symbolic_inputs: bool = False) -> tuple[Program, dict[int, str]]:
    """The same events as a :class:`collsim.verify.events.Program`, for the model layer's encodings.

    Elements of one instruction get consecutive ``po_index`` values (the
    event interface orders every event of a thread); polls become one read
    per word with the exit predicate as an assumption and a control
    dependency of everything after them; data dependencies are kept within
    a thread. Returns ``(program, eid_of)`` where ``eid_of`` maps event ids
    to the program's event names.
    """
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
                kw: dict[str, Any] = dict(eid=eid_of[e.id], thread=f"t{t}", kind=e.kind.value, po_index=po, deps=deps,
                                          label=f"{e.label} {e.where()}".strip())
                po += 1
                if e.is_mem:
                    kw.update(loc=repr(e.loc), sem=e.sem, scope=e.scope)
                    group = e.wgroup if e.is_write else e.rgroup
                    if group is not None:
                        kw["atomic_group"] = f"g{group}"
                    if e.kind == EventKind.WRITE:
                        kw["value"] = term(e.value)
                    elif e.kind == EventKind.RMW:
                        if e.rmw_op == "add":
                            kw.update(rmw_op="add", operand=term(e.value + Lin.atom(("rd", e.id), -1)))
                        else:
                            kw.update(rmw_op="exch", operand=term(e.value))
                elif e.kind == EventKind.FENCE:
                    kw.update(sem=e.sem, scope=e.scope)
                else:
                    kw.update(bar_instance=f"{e.bar[0]}:{e.bar[1]}", scope="cta")
                events.append(ModelEvent(**kw))
            if instr.kind == InstrKind.POLL:
                for e in instr.events:
                    if e.polled:
                        assumptions.append(instr.predicate.holds(z3.Int("val!" + eid_of[e.id])))
                ctrl |= {eid_of[e.id] for e in instr.events}
    init = {repr(loc): v for loc, v in low.init.items()}
    program = Program(events, placement, init, assumptions, name=f"{low.protocol}/{low.algorithm}")
    return program, eid_of
