"""What every memory model shares: which events run, values, reads-from, coherence, barriers, thin air.

:class:`Encoding` turns a :class:`~collsim.verify.events.Program` into z3
constraints (:attr:`Encoding.cons`) whose models are the program's candidate
executions; a model subclass (:mod:`~collsim.verify.models.ptx`,
:mod:`~collsim.verify.models.sc`) adds its axioms, and a causality strategy
(:mod:`~collsim.verify.models.causality`) encodes base causality order. Every
term lives in the encoding's z3 context; terms of the program (litmus
values, guards, assumptions) are translated into it.

Executions
----------
Without ``liveness`` an execution is one in which every thread finishes (the
Dartagnan convention): every assumption holds, every poll's exiting read
satisfies its predicate and every barrier a thread reaches completes. With
``liveness`` (the hang check) each poll may instead be *stuck*: its polled
words read the last write to their location and fail the predicate, and the
thread, and any barrier waiting for it, stops there; ``reached`` says how far
each thread got.

Barriers (PTX ISA §9.7.13.1, ``barrier{.cta}``)
-----------------------------------------------
Barrier events of one CTA with the same instance (:attr:`Event.bar`) and,
where given, equal resource ids (:attr:`Event.bar_id`) use one barrier; the
k-th use of it by a thread meets the k-th use by the others (the barrier "is
reinitialized so that it can be immediately reused"). A ``bar.sync`` waits
for the non-exited threads that use it (all of them, or ``bar_quorum`` of
them); ``bar.arrive`` does not wait. Waiting is well founded: where threads
could use barriers in different orders, every barrier gets an arrival and a
completion time, a thread arrives at a barrier only after it left the
previous one, and a barrier completes only after its participants arrived,
so threads waiting for each other at different barriers deadlock instead of
passing (no execution in which every thread finishes).

Reads-from and coherence
------------------------
A read reads from exactly one candidate write (the initial value, or a write
to its location that is not po-after it) and takes its value. Coherence
order is a strict partial order per location; the model says which pairs it
must order. Writes of one thread are ordered by program order.

No-Thin-Air (PTX ISA §8.10.4)
-----------------------------
``rf`` plus dependencies is acyclic, with integer clocks. Dependencies are
the events' data dependencies and control dependencies (see
:mod:`collsim.verify.events`); an atomic operation's write depends on its own
read unless its value does not (``exch``: the PTX ISA's "no self-fulfilling
cycle" case, where "the implementation may ... determine that a store is not
dependent on a prior load").
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Hashable, Iterable

import z3

from collsim.errors import InputError
from collsim.verify.events import (INDEPENDENT_RMW_OPS, VALUE_PREFIX, Event, EventKind, Instr, InstrKind, Program,
                                   rmw_result)
from collsim.verify.models.build import and_, eq, implies, is_false, is_true, lt, not_, or_
from collsim.verify.models.causality import strategy
from collsim.verify.models.static import StaticOrder, prune_candidates
from collsim.verify.models.witness import Witness, linearise
from collsim.verify.terms import Lin

__all__ = ["Encoding", "INIT"]

#: the name of the initial write in decoded executions
INIT = "init"
_SCOPE_RANK = {"cta": 0, "gpu": 1, "sys": 2}


class Encoding:
    """The executions of ``program`` under a memory model, as z3 constraints.

    Parameters
    ----------
    program : Program
    causality : str or strategy class
        How base causality order is encoded (:data:`collsim.verify.models.CAUSALITY`).
    liveness : bool
        Let polls be stuck (hang check) instead of requiring every thread to finish.
    symbolic_inputs : bool
        Input elements of a protocol instance are unconstrained integers instead of distinct constants.
    ctx : z3.Context, optional
        The context every term and the solver are built in (default: that of
        the program's value sort, where a litmus program's terms live).
    witnesses_only : bool
        Stop after reads-from: what lists the properties' candidate violations, with causality a placeholder
        (the verifier's slice seeds); such an encoding is never solved.

    Public API
    ----------
    ``exe(e)`` the event runs; ``wr(w)`` it runs and writes; ``rval(r)`` the
    value a read returns; ``wval(w, loc)`` the value a write (``None``: the
    initial write) stores; ``rf_lit(w, r)``, ``co_lit(a, b)``,
    ``fr_pairs(r)``; ``hb(a, b)`` base causality and ``cause(a, b)``
    causality; ``final_value(loc)``; ``term(x)`` any program value as a z3
    term; ``solver()``; ``decode(model)``.
    """

    model = "base"

    def __init__(self, program: Program, *, causality: Any = "vector-clock", liveness: bool = False,
                 symbolic_inputs: bool = False, ctx: z3.Context | None = None, group_literals: bool = False,
                 input_literal: bool = False, prune: bool = True, witnesses_only: bool = False) -> None:
        self.program = program
        self.prune = prune
        #: only which events run, their values and reads-from candidates: enough to list a property's candidate
        #: violations (:mod:`collsim.verify.slicing` seeds), never to solve (causality is a placeholder)
        self.witnesses_only = witnesses_only
        self.group_literals = group_literals
        self.ctx = ctx if ctx is not None else program.sort.ctx
        # built once: asked for hundreds of thousands of times at a node's size (z3 keeps both constants for
        # the context's life, so holding them changes no term's id)
        self._true, self._false = z3.BoolVal(True, ctx=self.ctx), z3.BoolVal(False, ctx=self.ctx)
        self.live = liveness
        self.symbolic = symbolic_inputs
        self.sort = z3.IntSort(self.ctx) if program.value_bits is None else z3.BitVecSort(program.value_bits, self.ctx)
        self.cons: list[Any] = []
        self.ev = program.events
        self.n_threads = len(program.threads)
        self._fresh = 0
        self._finals: dict[Hashable, Any] = {}
        self.causality_class = strategy(causality)
        self.input_terms: dict[tuple, Any] = {}
        env = program.input_env() if hasattr(program, "input_env") else {}
        for key, value in env.items():
            self.input_terms[key] = (z3.Int("in_%d_%d_%d" % key[1:], ctx=self.ctx) if symbolic_inputs
                                     else z3.IntVal(value, ctx=self.ctx))
        #: the initial value of each location that starts as any bit pattern (``Buffer(init="arbitrary")``)
        self.arbitrary_terms: dict[Hashable, Any] = {}
        for index, (loc, bits) in enumerate(getattr(program, "arbitrary_init", {}).items()):
            garbage = z3.Const(f"garbage_{index}", self.sort)
            self.arbitrary_terms[loc] = garbage
            if program.value_bits is None:
                self.cons.append(and_(garbage >= 0, garbage < 2 ** bits))
        #: with symbolic inputs and ``input_literal``: assuming this literal makes every input its constant
        self.concrete = z3.Bool("concrete", ctx=self.ctx)
        if symbolic_inputs and input_literal:
            for key, value in env.items():
                self.cons.append(implies(self.concrete, self.input_terms[key] == value))
        self.read_var: dict[int, Any] = {e.id: z3.Const(VALUE_PREFIX + e.name, self.sort) for e in self.ev
                                         if e.is_read}
        self._build_exec()
        self._build_values()
        self._build_rf()
        if witnesses_only:
            return
        self._build_co()
        self._build_location_axioms()
        self._build_groups()
        self._build_polls()
        self._build_barriers()
        self._build_thin_air()
        self._build_causality()
        for a in program.assumptions:
            self.cons.append(self._translate(a))

    # -- helpers -----------------------------------------------------------------
    @property
    def low(self) -> Program:
        """The program (for protocol instances: the :class:`~collsim.verify.instance.VerifyInstance`)."""
        return self.program

    def true(self) -> Any:
        return self._true

    def false(self) -> Any:
        return self._false

    def fresh(self, prefix: str, sort: str = "bool") -> Any:
        self._fresh += 1
        name = f"{prefix}!{self._fresh}"
        return z3.Bool(name, ctx=self.ctx) if sort == "bool" else z3.Int(name, ctx=self.ctx)

    def _translate(self, t: Any) -> Any:
        if isinstance(t, bool):
            return z3.BoolVal(t, ctx=self.ctx)
        if t.ctx is not self.ctx and t.ctx.ref() != self.ctx.ref():
            return t.translate(self.ctx)
        return t

    def term(self, value: Any) -> Any:
        """A program value (``int``, :class:`Lin`, z3 term) as a z3 term of this encoding."""
        if isinstance(value, Lin):
            terms = [z3.IntVal(value.c, ctx=self.ctx)] if value.c or not value.terms else []
            for key, coeff in value.terms.items():
                atom = self.input_terms[key] if key[0] == "in" else self.read_var[key[1]]
                terms.append(atom if coeff == 1 else coeff * atom)
            return terms[0] if len(terms) == 1 else z3.Sum(terms)
        if isinstance(value, bool):
            return z3.BoolVal(value, ctx=self.ctx)
        if isinstance(value, int):
            return (z3.IntVal(value, ctx=self.ctx) if self.program.value_bits is None
                    else z3.BitVecVal(value, self.program.value_bits, ctx=self.ctx))
        return self._translate(value)

    lin = term

    def wval(self, w: Event | None, loc: Hashable) -> Any:
        """The value a write (``None``: the initial value of ``loc``) stores."""
        if w is None:
            if loc in self.arbitrary_terms:
                return self.arbitrary_terms[loc]
            return self.term(self.program.init_value(loc))
        return self._written[w.id]

    def rval(self, r: Event) -> Any:
        return self.read_var[r.id]

    def po(self, a: Event, b: Event) -> bool:
        return a.thread == b.thread and a.instr < b.instr

    def includes(self, a: Event, other_thread: int) -> bool:
        """Does ``a``'s scope include ``other_thread``?"""
        return self.program.placement[a.thread].includes(a.scope, self.program.placement[other_thread])

    def scope_at_least(self, a: Event, b: Event) -> bool:
        """``a``'s scope includes every thread ``b``'s does (both in one thread)."""
        return _SCOPE_RANK.get(a.scope or "", -1) >= _SCOPE_RANK.get(b.scope or "", -1)

    # -- which events run ---------------------------------------------------------
    def _guard(self, e: Event) -> Any:
        return None if e.guard is None or e.guard is True else self._translate(e.guard)

    def _build_exec(self) -> None:
        program = self.program
        self.stuck: dict[int, Any] = {}
        self.reached: dict[tuple[int, Any], Any] = {}
        self.guards = {e.id: self._guard(e) for e in self.ev}
        #: liveness: assuming this literal leaves no poll stuck (the executions in which every thread finishes)
        self.finish = z3.Bool("finish", ctx=self.ctx)
        if not self.live:
            self._exec = {e.id: (self.guards[e.id] if self.guards[e.id] is not None else self.true()) for e in self.ev}
            return
        for t, thread in enumerate(program.threads):
            for instr in thread:
                self.reached[(t, instr.index)] = z3.Bool(f"reach_{t}_{instr.index}", ctx=self.ctx)
        self._exec = {}
        for e in self.ev:
            here = self.reached[(e.thread, e.instr)]
            g = self.guards[e.id]
            self._exec[e.id] = here if g is None else and_(here, g)
        for t, thread in enumerate(program.threads):
            if thread:
                self.cons.append(self.reached[(t, 0)])
            for instr in thread:
                if instr.kind == InstrKind.POLL:
                    s = z3.Bool(f"stuck_{instr.id}", ctx=self.ctx)
                    self.stuck[instr.id] = s
                    self.cons.append(implies(s, self.reached[(t, instr.index)]))
                    self.cons.append(implies(self.finish, not_(s)))

    def _link_reached(self, complete: dict[int, Any]) -> None:
        """Liveness: a thread gets past an instruction when it reached it, is not stuck there and its barriers complete."""
        for t, thread in enumerate(self.program.threads):
            for instr in thread:
                here = self.reached[(t, instr.index)]
                passes = [here]
                if instr.kind == InstrKind.POLL:
                    passes.append(not_(self.stuck[instr.id]))
                for e in instr.events:
                    if e.kind is EventKind.BARRIER and not e.bar_arrive:
                        g = self.guards[e.id]
                        passes.append(complete[e.id] if g is None else or_(not_(g), complete[e.id]))
                nxt = self.reached.get((t, instr.index + 1))
                if nxt is not None:
                    self.cons.append(nxt == and_(passes, self.ctx))
                else:
                    self.reached[(t, "done")] = and_(passes, self.ctx)

    def exe(self, e: Event) -> Any:
        return self._exec[e.id]

    def wr(self, w: Event) -> Any:
        """The write event runs and writes (a failing ``cas`` does not)."""
        return self._writes[w.id]

    def done(self, thread: int) -> Any:
        """Liveness: the thread finishes."""
        return self.reached.get((thread, "done"), self.true())

    # -- values ---------------------------------------------------------------------
    def _build_values(self) -> None:
        self._written: dict[int, Any] = {}
        self._writes: dict[int, Any] = {}
        self._rmw_depends: dict[int, bool] = {}
        for e in self.ev:
            if e.kind is EventKind.WRITE:
                self._written[e.id] = self.term(e.value)
                self._writes[e.id] = self._exec[e.id]
            elif e.kind is EventKind.RMW:
                old = self.read_var[e.id]
                does = None
                if callable(e.value) and not isinstance(e.value, z3.ExprRef):
                    out = e.value(old)
                    new, does = out if isinstance(out, tuple) else (out, None)
                    new = self.term(new)
                elif e.value is not None:
                    new = self.term(e.value)
                else:
                    operand = self.term(e.operand if e.operand is not None else 0)
                    compare = self.term(e.compare) if e.compare is not None else None
                    new, does = rmw_result(e.rmw_op, old, operand, compare)
                    does = z3.simplify(does)
                if e.writes_if is not None:
                    does = self._translate(e.writes_if)
                self._written[e.id] = new
                if does is None or is_true(does):
                    self._writes[e.id] = self._exec[e.id]
                else:
                    self._writes[e.id] = and_(self._exec[e.id], does)
                self._rmw_depends[e.id] = (e.rmw_op not in INDEPENDENT_RMW_OPS or e.writes_if is not None
                                           or (isinstance(e.value, Lin) and e.id in e.value.reads()))

    # -- reads-from -------------------------------------------------------------------
    def _candidate_ok(self, w: Event | None, r: Event) -> bool:
        if w is not None and (w.id == r.id or (w.thread == r.thread and w.instr >= r.instr)):
            return False  # po-later (or same instruction) writes of the reading thread
        if self.live or not r.polled:
            return True
        instr = self.program.instrs[r.poll]
        if w is None and r.loc in self.arbitrary_terms:
            return True  # any pattern: it may satisfy the poll
        if isinstance(instr.predicate.value, Lin):
            return True  # the wait target is a loaded value: no write is excluded statically
        value = self.program.init_value(r.loc) if w is None else (
            w.value.c if isinstance(w.value, Lin) and w.value.is_const
            else w.value if isinstance(w.value, int) and w.kind is EventKind.WRITE else None)
        if value is None:
            return True
        return bool(instr.predicate.holds(value))

    def _build_rf(self) -> None:
        self.rf: dict[tuple[int | None, int], Any] = {}
        self.cands: dict[int, list[Event | None]] = {}
        guarded = self.live or any(g is not None for g in self.guards.values())
        for r in self.ev:
            if r.is_read:
                self.cands[r.id] = [w for w in [None] + self.program.writes_at(r.loc) if self._candidate_ok(w, r)]
        self.pruned, self.static = prune_candidates(self) if self.prune else (0, StaticOrder())
        for r in self.ev:
            if not r.is_read:
                continue
            cands = self.cands[r.id]
            lits = []
            for w in cands:
                v = z3.Bool(f"rf_{'i' if w is None else w.id}_{r.id}", ctx=self.ctx)
                self.rf[(None if w is None else w.id, r.id)] = v
                lits.append(v)
                self.cons.append(implies(v, eq(self.rval(r), self.wval(w, r.loc))))
                if w is not None and (guarded or not is_true(self._writes[w.id])):
                    self.cons.append(implies(v, self.wr(w)))
            if not lits:
                self.cons.append(not_(self.exe(r)))
                continue
            if guarded:
                self.cons.append(implies(self.exe(r), z3.PbEq([(x, 1) for x in lits], 1, ctx=self.ctx)))
                self.cons.append(implies(not_(self.exe(r)), and_([not_(x) for x in lits]
                                                                        + [self.rval(r) == self.term(0)])))
            else:
                self.cons.append(z3.PbEq([(x, 1) for x in lits], 1, ctx=self.ctx))

    def rf_lit(self, w: Event | None, r: Event) -> Any:
        return self.rf.get((None if w is None else w.id, r.id), self.false())

    def _named(self, name: str) -> Event | None:
        return None if name.startswith(INIT + ":") else self.program.event(name)

    def rf_vars(self, read: str) -> dict[str, Any]:
        """``{write name: rf literal}`` of read ``read`` (``init:<loc>`` is the initial write)."""
        r = self.program.event(read)
        return {(f"{INIT}:{r.loc}" if w is None else w.name): self.rf_lit(w, r) for w in self.cands[r.id]}

    def co_names(self, a: str, b: str) -> Any:
        """``a`` before ``b`` in coherence order, by event name (``init:<loc>`` is the initial write)."""
        wa, wb = self._named(a), self._named(b)
        if wb is None:
            return self.false()
        if wa is None:
            return self.wr(wb)
        return and_(self.co_lit(wa, wb), self.wr(wa), self.wr(wb))

    # -- coherence order ----------------------------------------------------------------
    def must_order(self, a: Event, b: Event) -> bool:  # pragma: no cover - defined by each model
        """Whether coherence order relates every executed pair ``a``, ``b`` of writes to one location."""
        raise NotImplementedError

    def _build_co(self) -> None:
        """Coherence order per location (module doc), encoded by how much of it can vary.

        Writes of one thread through one virtual address are ordered by
        program order; a location written that way only needs no unknowns. At
        any other location every write gets an integer position (a linear
        extension of coherence order): a pair the model must order is ordered
        as the positions say, a pair it need not order is related only if a
        Bool ``co_<a>_<b>`` says so. Transitivity only needs stating where it
        ends at such a pair; the positions give the rest.
        """
        self.co_pos: dict[int, Any] = {}
        self._co_static: dict[tuple[int, int], bool] = {}
        self._co_rel: dict[tuple[int, int], Any] = {}
        self._co_cache: dict[tuple[int, int], Any] = {}
        self._rpos: dict[int, Any] = {}
        self._fr_cache: dict[tuple[int, int], Any] = {}
        for loc in self.program.locs:
            ws = self.program.writes_at(loc)
            ordered = []
            for i, a in enumerate(ws):
                for b in ws[i + 1:]:
                    if a.virtual_loc != b.virtual_loc or (a.thread == b.thread and a.instr == b.instr):
                        continue
                    # program order, or base causality known before solving (Coherence: then coherence order)
                    if self.static.before(a, b):
                        first, second = a, b
                    elif self.static.before(b, a):
                        first, second = b, a
                    else:
                        continue
                    self._co_static[(first.id, second.id)] = True
                    self._co_static[(second.id, first.id)] = False
                    ordered.append((first, second))
            if len(ws) < 2 or len(ordered) == len(ws) * (len(ws) - 1) // 2:
                continue
            for w in ws:
                self.co_pos[w.id] = z3.Int(f"co_{w.id}", ctx=self.ctx)
                self.cons.append(self.co_pos[w.id] >= 0)
            self.cons.append(z3.Distinct([self.co_pos[w.id] for w in ws]))
            for first, second in ordered:
                self.cons.append(self.co_pos[first.id] < self.co_pos[second.id])
            loose = []
            for i, a in enumerate(ws):
                for b in ws[i + 1:]:
                    if (a.id, b.id) not in self._co_static and not self.must_order(a, b):
                        self._co_rel[(a.id, b.id)] = self._co_rel[(b.id, a.id)] = \
                            z3.Bool(f"co_{a.id}_{b.id}", ctx=self.ctx)
                        loose.append((a, b))
            for a, c in loose:
                for x, z in ((a, c), (c, a)):
                    for b in ws:
                        if b.id in (x.id, z.id):
                            continue
                        self.cons.append(implies(and_(self.wr(b), self.co_lit(x, b), self.co_lit(b, z)),
                                                    self._co_rel[(x.id, z.id)]))

    def co_lit(self, a: Event | None, b: Event | None) -> Any:
        """``a`` before ``b`` in coherence order (``None`` is the initial write)."""
        if b is None:
            return self.false()
        if a is None:
            return self.true()
        if a.id == b.id:
            return self.false()
        key = (a.id, b.id)
        if key in self._co_static:
            return self.true() if self._co_static[key] else self.false()
        cached = self._co_cache.get(key)
        if cached is None:
            before = lt(self.co_pos[a.id], self.co_pos[b.id])
            rel = self._co_rel.get(key)
            cached = before if rel is None else and_(rel, before)
            self._co_cache[key] = cached
        return cached

    def _read_pos(self, r: Event) -> Any:
        """The coherence position of the write ``r`` reads from (-1: the initial value)."""
        if r.id not in self._rpos:
            v = z3.Int(f"rpos_{r.id}", ctx=self.ctx)
            self._rpos[r.id] = v
            for w in self.cands[r.id]:
                self.cons.append(implies(self.rf_lit(w, r), v == (-1 if w is None else self.co_pos[w.id])))
        return self._rpos[r.id]

    def fr(self, r: Event, w: Event) -> Any:
        """``r`` reads from a write coherence-before ``w`` (whether ``w`` runs aside)."""
        key = (r.id, w.id)
        if key in self._fr_cache:
            return self._fr_cache[key]
        srcs = [src for src in self.cands[r.id] if src is None or src.id != w.id]
        if w.id not in self.co_pos:
            terms = [self.rf_lit(src, r) for src in srcs if src is None or self._co_static.get((src.id, w.id))]
        else:
            ordered = [src for src in srcs if src is None or (src.id, w.id) in self._co_static
                       or self.must_order(src, w)]
            loose = [src for src in srcs if src is not None and src not in ordered]
            terms = [and_(self.rf_lit(src, r), self.co_lit(src, w)) for src in loose]
            if ordered:
                if not loose:
                    which = self.exe(r)
                elif len(ordered) <= len(loose) + 1:
                    which = or_([self.rf_lit(src, r) for src in ordered])
                else:
                    which = and_(self.exe(r), not_(or_([self.rf_lit(src, r) for src in loose])))
                terms.append(and_(which, lt(self._read_pos(r), self.co_pos[w.id])))
        out = self.false() if not terms else terms[0] if len(terms) == 1 else or_(terms)
        self._fr_cache[key] = out
        return out

    def fr_pairs(self, r: Event) -> Iterable[tuple[Any, Event]]:
        """(condition, w) such that the condition means ``r`` reads from a write coherence-before ``w``."""
        for w in self.program.writes_at(r.loc):
            if w.id == r.id:
                continue
            f = self.fr(r, w)
            if not is_false(f):
                yield and_(f, self.wr(w)), w

    def self_fr(self, z: Event) -> Any:
        """An RMW reads from a write coherence-before its own write."""
        return or_([and_(self.rf_lit(w, z), self.co_lit(w, z)) for w in self.cands[z.id]] or [self.false()])

    def _build_location_axioms(self) -> None:  # pragma: no cover - defined by each model
        raise NotImplementedError

    # -- atomic groups ------------------------------------------------------------------
    def _group_guard(self, when: frozenset[frozenset[str]] | None) -> Any:
        """None: the group always holds; else the literal(s) that enable it."""
        if when is None or not self.group_literals:
            return None
        lits = [self.assuming(s) for s in sorted(when, key=sorted)]
        return lits[0] if len(lits) == 1 else or_(lits)

    def assuming(self, assumptions: Iterable[str]) -> Any:
        """The literal that enables the atomic groups of one set of hardware assumptions (``group_literals``)."""
        key = frozenset(assumptions)
        lits = self.__dict__.setdefault("_assume_lits", {})
        if key not in lits:
            lits[key] = z3.Bool("assume[" + ",".join(sorted(key)) + "]", ctx=self.ctx)
        return lits[key]

    def _build_groups(self) -> None:
        groups = self.program.groups if self.group_literals else self.program.groups_under()
        wgroups = [g for g in groups if g.kind == "w"]
        rgroups = [g for g in groups if g.kind == "r"]
        at: dict[Hashable, list[Any]] = {}
        for g in wgroups:
            for w in g.members:
                at.setdefault(w.loc, []).append(g)

        def add(guard: Any, c: Any) -> None:
            self.cons.append(c if guard is None else implies(guard, c))

        # coherence agrees across the locations two write groups share
        seen: set[tuple[int, int]] = set()
        for g in wgroups:
            mine = {w.loc: w for w in g.members}
            for loc in mine:
                for h in at.get(loc, ()):
                    key = (min(id(g), id(h)), max(id(g), id(h)))
                    if h is g or key in seen:
                        continue
                    seen.add(key)
                    theirs = {w.loc: w for w in h.members}
                    shared = [l for l in mine if l in theirs]
                    guard = _and_guards(self._group_guard(g.when), self._group_guard(h.when))
                    first = shared[0]
                    for l in shared[1:]:
                        add(guard, self.co_lit(mine[first], theirs[first]) == self.co_lit(mine[l], theirs[l]))
        # a read group sees a write group whole or not at all
        for rg in rgroups:
            reads = {r.loc: r for r in rg.members}
            for g in {id(g): g for r in rg.members for g in at.get(r.loc, ())}.values():
                covered = [(reads[w.loc], w) for w in g.members if w.loc in reads and w.id != reads[w.loc].id]
                if len(covered) < 2:
                    continue
                guard = _and_guards(self._group_guard(rg.when), self._group_guard(g.when))
                r0, w0 = covered[0]
                for r, w in covered[1:]:
                    add(guard, self.rf_lit(w0, r0) == self.rf_lit(w, r))

    # -- polls ----------------------------------------------------------------------------
    def _build_polls(self) -> None:
        for instr in self.program.instrs:
            if instr.kind != InstrKind.POLL:
                continue
            polled = [e for e in instr.events if e.polled]
            # a loaded wait target (collsim.ir.expr.Loaded) is the read's value term; None: the bound constant
            want = self.term(instr.predicate.value) if isinstance(instr.predicate.value, Lin) else None
            ok = and_([instr.predicate.holds(self.rval(e), want) for e in polled], self.ctx)
            if not self.live:
                self.cons.append(ok)
                continue
            stuck = self.stuck[instr.id]
            here = self.reached[(instr.thread, instr.index)]
            self.cons.append(implies(and_(here, not_(stuck)), ok))
            self.cons.append(implies(stuck, not_(ok)))
            for r in polled:
                for w in self.cands[r.id]:
                    later = [and_(self.wr(o), self.co_lit(w, o)) for o in self.program.writes_at(r.loc)
                             if w is None or o.id != w.id]
                    if later:
                        self.cons.append(implies(and_(stuck, self.rf_lit(w, r)), not_(or_(later, self.ctx))))

    # -- barriers --------------------------------------------------------------------------
    def _bar_value(self, v: Any) -> Any:
        return None if v is None else self.term(v)

    def _build_barriers(self) -> None:
        """Barrier completion, synchronisation edges and (where needed) well-founded waiting (module doc)."""
        program = self.program
        groups: dict[tuple, list[Event]] = {}
        for e in self.ev:
            if e.kind is EventKind.BARRIER:
                pl = program.placement[e.thread]
                groups.setdefault((pl.gpu, pl.cta, repr(e.bar)), []).append(e)
        self.bar_edges: list[tuple[Event, Event, Any]] = []
        self.bar_groups = groups
        complete: dict[int, Any] = {}
        syncsel: dict[int, Any] = {}
        same_of: dict[tuple[int, int], Any] = {}
        for members in groups.values():
            phase = self._bar_phases(members)
            ids = {m.id: self._bar_value(m.bar_id) for m in members}

            def same(a: Event, b: Event) -> Any:
                key = (a.id, b.id)
                if key not in same_of:
                    parts = []
                    if ids[a.id] is not None and ids[b.id] is not None:
                        parts.append(ids[a.id] == ids[b.id])
                    pa, pb = phase[a.id], phase[b.id]
                    if isinstance(pa, int) and isinstance(pb, int):
                        if pa != pb:
                            parts.append(self.false())
                    else:
                        parts.append(self._int(pa) == self._int(pb))
                    same_of[key] = _fold_and(self, [z3.simplify(p) for p in parts])
                return same_of[key]

            for b in members:
                if b.bar_quorum is None:
                    syncsel[b.id] = self.exe(b)
                else:
                    syncsel[b.id] = z3.Bool(f"barsync_{b.id}", ctx=self.ctx)
            for b in members:
                others = [o for o in members if o.thread != b.thread]
                if b.bar_quorum is None:
                    complete[b.id] = _fold_and(self, [_or_not(self, self.exe(o), same(b, o)) for o in others])
                else:
                    q = self.term(b.bar_quorum)
                    one, zero = self.term(1), self.term(0)
                    everyone = [b] + others
                    reached = z3.Sum([z3.If(and_(self.exe(o), same(b, o)) if o is not b else self.exe(o), one, zero)
                                      for o in everyone])
                    synced = z3.Sum([z3.If(and_(syncsel[o.id], same(b, o)) if o is not b else syncsel[o.id],
                                           one, zero) for o in everyone])
                    has_q = z3.Bool(f"barquorum_{b.id}", ctx=self.ctx)
                    ge = (lambda x, y: z3.UGE(x, y)) if z3.is_bv(q) else (lambda x, y: x >= y)
                    self.cons += [implies(ge(reached, q), has_q), has_q == ge(synced, q),
                                  implies(syncsel[b.id], self.exe(b))]
                    complete[b.id] = has_q
                if not self.live and not b.bar_arrive:
                    self.cons.append(implies(self.exe(b), complete[b.id]))
            for b1 in members:
                for b2 in members:
                    if b1.thread == b2.thread or b2.bar_arrive:
                        continue
                    cond = _fold_and(self, [syncsel[b1.id], self.exe(b2), same(b1, b2), complete[b2.id]])
                    if not is_false(cond):
                        self.bar_edges.append((b1, b2, cond))
        if self.live:
            self._link_reached(complete)
        if self._barrier_waits_may_cycle(groups):
            self._barrier_times(groups, complete, syncsel, same_of)

    def _int(self, v: Any) -> Any:
        return z3.IntVal(v, ctx=self.ctx) if isinstance(v, int) else v

    def _bar_phases(self, members: list[Event]) -> dict[int, Any]:
        """The use of the barrier each member is, per thread (an int where static, else a term)."""
        phase: dict[int, Any] = {}
        by_thread: dict[int, list[Event]] = {}
        for m in members:
            by_thread.setdefault(m.thread, []).append(m)
        for seq in by_thread.values():
            seq.sort(key=lambda e: e.instr)
            for k, b in enumerate(seq):
                earlier = seq[:k]
                static = all(self.guards[e.id] is None and e.bar_id is None for e in earlier) and b.bar_id is None
                if static:
                    phase[b.id] = k
                    continue
                counts = []
                for e in earlier:
                    same = self.exe(e)
                    if e.bar_id is not None and b.bar_id is not None:
                        same = and_(same, self.term(e.bar_id) == self.term(b.bar_id))
                    counts.append(z3.If(same, z3.IntVal(1, ctx=self.ctx), z3.IntVal(0, ctx=self.ctx)))
                phase[b.id] = z3.Sum(counts) if counts else 0
        return phase

    def _barrier_waits_may_cycle(self, groups: dict[tuple, list[Event]]) -> bool:
        """Whether threads might wait at barriers in orders that form a cycle (else no times are needed)."""
        if not groups:
            return False
        graph: dict[Any, set[Any]] = {}
        for members in groups.values():
            if any(m.bar_id is not None or m.bar_quorum is not None or self.guards[m.id] is not None
                   for m in members):
                return True
        for thread in self.program.threads:
            uses: dict[Any, int] = {}
            seq = []
            for instr in thread:
                for e in instr.events:
                    if e.kind is EventKind.BARRIER:
                        pl = self.program.placement[e.thread]
                        key = (pl.gpu, pl.cta, repr(e.bar))
                        seq.append((key, uses.get(key, 0)))
                        uses[key] = uses.get(key, 0) + 1
            for a, b in zip(seq, seq[1:]):
                graph.setdefault(a, set()).add(b)
        color: dict[Any, int] = {}

        def cyclic(n: Any) -> bool:
            color[n] = 1
            for m in graph.get(n, ()):
                if color.get(m) == 1 or (m not in color and cyclic(m)):
                    return True
            color[n] = 2
            return False

        return any(n not in color and cyclic(n) for n in list(graph))

    def _barrier_times(self, groups, complete, syncsel, same_of) -> None:
        arrive = {e.id: z3.Int(f"bararr_{e.id}", ctx=self.ctx) for ms in groups.values() for e in ms}
        leave = {e.id: z3.Int(f"barleave_{e.id}", ctx=self.ctx) for ms in groups.values() for e in ms}
        passes = {}
        for e_id in arrive:
            e = self.ev[e_id]
            passes[e_id] = and_(self.exe(e), complete[e_id]) if not e.bar_arrive else self.exe(e)
            self.cons.append(arrive[e_id] <= leave[e_id])
            if e.bar_arrive:
                self.cons.append(leave[e_id] == arrive[e_id])
        for thread in self.program.threads:
            bars = [e for instr in thread for e in instr.events if e.id in arrive]
            for a, b in combinations(bars, 2):
                self.cons.append(implies(and_(passes[a.id], self.exe(b)), leave[a.id] < arrive[b.id]))
        for members in groups.values():
            for b in members:
                if b.bar_arrive:
                    continue
                for o in members:
                    if o.thread == b.thread:
                        continue
                    waits_for = syncsel[o.id] if o.bar_quorum is not None else self.exe(o)
                    s = same_of.get((b.id, o.id), self.true())
                    self.cons.append(implies(and_(passes[b.id], waits_for, s), leave[b.id] >= arrive[o.id]))

    # -- no thin air ------------------------------------------------------------------------
    def _build_thin_air(self) -> None:
        rclk: dict[int, Any] = {}
        wclk: dict[int, Any] = {}
        for e in self.ev:
            if e.is_read:
                rclk[e.id] = z3.Int(f"nta_{e.id}", ctx=self.ctx)
            if e.is_write:
                if e.kind is EventKind.RMW and self._rmw_depends[e.id]:
                    wclk[e.id] = rclk[e.id]
                else:
                    wclk[e.id] = z3.Int(f"nta_{e.id}" + ("w" if e.is_read else ""), ctx=self.ctx)
        self.nta_clock = rclk | wclk

        def clocks(e: Event) -> list[Any]:
            out = []
            if e.id in rclk:
                out.append(rclk[e.id])
            if e.id in wclk and wclk[e.id] is not rclk.get(e.id):
                out.append(wclk[e.id])
            return out

        for r in self.ev:
            if r.is_read:
                for w in self.cands[r.id]:
                    if w is not None:
                        self.cons.append(implies(self.rf_lit(w, r), lt(wclk[w.id], rclk[r.id])))
        for e in self.ev:
            for d in sorted(self.program.deps_of(e)):
                target = wclk.get(e.id, rclk.get(e.id))
                if target is not None:
                    self.cons.append(rclk[d] < target)
        # control dependencies: everything after them in the thread; a barrier passes them on
        bar_frontier: dict[tuple, Any] = {}
        for t, thread in enumerate(self.program.threads):
            current = None
            for instr in thread:
                ctrl = self.program.ctrl_before(instr)
                if ctrl:
                    g = self.fresh("ctrl", "int")
                    for d in ctrl:
                        self.cons.append(rclk[d] < g)
                    if current is not None:
                        self.cons.append(current <= g)
                    current = g
                if current is not None:
                    for e in instr.events:
                        for c in clocks(e):
                            self.cons.append(current < c)
                bars = [e for e in instr.events if e.kind is EventKind.BARRIER]
                if bars:
                    pl = self.program.placement[t]
                    key = (pl.gpu, pl.cta, repr(bars[0].bar))
                    if key not in bar_frontier:
                        bar_frontier[key] = self.fresh("barctrl", "int")
                    g = bar_frontier[key]
                    if current is not None:
                        self.cons.append(current <= g)
                    current = g

    # -- causality ------------------------------------------------------------------------
    def _build_causality(self) -> None:
        self._sync_cond: dict[tuple[int, int], list[Any]] = {}
        self._build_sync()
        for a, b, cond in self.bar_edges:
            self._sync_cond.setdefault((a.id, b.id), []).append(cond)
        edges = [(self.ev[a], self.ev[b], or_(conds, self.ctx) if len(conds) > 1 else conds[0])
                 for (a, b), conds in self._sync_cond.items()]
        self.causality = self.causality_class(self, edges)
        self._build_causality_axioms()

    def _build_sync(self) -> None:  # pragma: no cover - defined by each model
        raise NotImplementedError

    def _build_causality_axioms(self) -> None:
        """The model's axioms over causality order (none for SC)."""

    def hb(self, a: Event, b: Event) -> Any:
        """Base causality order (a term)."""
        if self.witnesses_only:
            return self.fresh("hb")
        return self.causality.hb(a, b)

    def cause(self, a: Event, b: Event) -> Any:  # pragma: no cover - defined by each model
        raise NotImplementedError

    def edge(self, a: Event, b: Event, cond: Any) -> None:
        """A synchronisation edge of base causality from ``a`` to ``b``, present when ``cond``."""
        if not is_false(cond):
            self._sync_cond.setdefault((a.id, b.id), []).append(cond)

    # -- final values ------------------------------------------------------------------------
    def final_value(self, loc: Hashable) -> Any:
        """The final value of ``loc``: that of a coherence-maximal executed write (constraints added on first use)."""
        if loc not in self._finals:
            fin = z3.Const(f"final!{loc}", self.sort)
            ws = self.program.writes_at(loc)
            options = [and_([not_(self.wr(w)) for w in ws] + [fin == self.wval(None, loc)])]
            for w in ws:
                later = [and_(self.wr(o), self.co_lit(w, o)) for o in ws if o.id != w.id]
                options.append(and_(self.wr(w), not_(or_(later)) if later else self.true(),
                                      fin == self.wval(w, loc)))
            self.cons.append(or_(options))
            self._finals[loc] = fin
        return self._finals[loc]

    def finals_in(self, condition: Any) -> None:
        """Add the final-value constraints of every ``final!<loc>`` constant in ``condition``."""
        names = {str(loc): loc for loc in self.program.locations}
        stack, seen = [condition], set()
        while stack:
            t = stack.pop()
            if not isinstance(t, z3.ExprRef) or t.get_id() in seen:
                continue
            seen.add(t.get_id())
            if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                name = t.decl().name()
                if name.startswith("final!") and name[len("final!"):] in names:
                    self.final_value(names[name[len("final!"):]])
            else:
                stack.extend(t.children())

    # -- solver ---------------------------------------------------------------------------------
    def solver(self, timeout_s: float | None = None) -> z3.Solver:
        s = z3.SolverFor("QF_LIA", ctx=self.ctx) if self.program.value_bits is None else z3.Solver(ctx=self.ctx)
        if timeout_s:
            s.set("timeout", max(1, int(timeout_s * 1000)))
        s.add(self.cons)
        return s

    # -- decoding ---------------------------------------------------------------------------------
    @staticmethod
    def holds(m: z3.ModelRef, t: Any) -> bool:
        """Whether term ``t`` is true in model ``m``."""
        if isinstance(t, bool):
            return t
        return is_true(m.eval(t, model_completion=True))

    @staticmethod
    def num(m: z3.ModelRef, t: Any) -> int:
        v = m.eval(t, model_completion=True)
        if z3.is_bv_value(v):
            return v.as_signed_long()
        return v.as_long()

    def decode(self, m: z3.ModelRef, extra: dict[str, Any] | None = None) -> Witness:
        """The execution described by model ``m`` (event names; ``init`` is the initial write)."""
        executed = [e.name for e in self.ev if self.holds(m, self.exe(e))]
        done = set(executed)
        rf: dict[str, str] = {}
        values: dict[str, int] = {}
        written: dict[str, int] = {}
        for e in self.ev:
            if e.name not in done:
                continue
            if e.is_read:
                values[e.name] = self.num(m, self.rval(e))
                for w in self.cands[e.id]:
                    if self.holds(m, self.rf_lit(w, e)):
                        rf[e.name] = f"{INIT}:{e.loc}" if w is None else w.name
            if e.is_write and self.holds(m, self.wr(e)):
                written[e.name] = self.num(m, self._written[e.id])
        co: dict[str, list[tuple[str, str]]] = {}
        co_order: dict[str, list[str]] = {}
        final: dict[str, int] = {}
        for loc in self.program.locations:
            ws = [w for w in self.program.writes_at(loc) if self.holds(m, self.wr(w))]
            init = f"{INIT}:{loc}"
            pairs = [(init, w.name) for w in ws]
            pairs += [(a.name, b.name) for a in ws for b in ws if a.id != b.id and self.holds(m, self.co_lit(a, b))]
            co[str(loc)] = pairs
            co_order[str(loc)] = linearise([init] + [w.name for w in ws], pairs)
            final[str(loc)] = self.num(m, self.final_value(loc)) if loc in self._finals else (
                written[co_order[str(loc)][-1]] if len(co_order[str(loc)]) > 1 else self.num(m, self.wval(None, loc)))
        ext = {}
        for k, t in (extra or {}).items():
            t = self._translate(t) if isinstance(t, z3.ExprRef) else t
            if isinstance(t, z3.BoolRef):
                ext[k] = is_true(m.eval(t, model_completion=True))
            elif isinstance(t, z3.ExprRef):
                ext[k] = self.num(m, t)
            else:
                ext[k] = t
        threads = {self.program.thread_names[t]: [e.name for e in self.program.events_of(t)]
                   for t in range(self.n_threads)}
        return Witness(executed=executed, rf=rf, values=values, written=written, co=co, co_order=co_order,
                       final=final, extra=ext, labels={e.name: e.text() for e in self.ev}, threads=threads)


def _and_guards(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return and_(a, b)


def _fold_and(enc: Encoding, parts: list[Any]) -> Any:
    out = []
    for p in parts:
        if is_true(p):
            continue
        if is_false(p):
            return enc.false()
        out.append(p)
    if not out:
        return enc.true()
    return out[0] if len(out) == 1 else and_(out)


def _or_not(enc: Encoding, a: Any, same: Any) -> Any:
    if is_true(same):
        return a
    if is_false(same):
        return enc.true()
    return or_(a, not_(same))


def check_scope(e: Event) -> None:
    if e.strong and e.scope not in ("cta", "gpu", "sys") and e.sem != "proxy_alias":
        raise InputError(f"event {e.name} needs a scope", field="scope")
