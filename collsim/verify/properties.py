"""Candidate executions of a lowered program in Z3, and the properties checked over them.

:class:`Execution` turns the events of :func:`collsim.verify.lower.lower_instance`
into Z3 constraints whose models are exactly the executions the memory
model allows (within the bound); :data:`PROPERTIES` are formulas over those
executions whose satisfiability means "violated".

Memory models
-------------
``ptx`` follows the axiomatic PTX model (Lustig et al., ASPLOS'19, as
written in Dat3M's ``ptx-v6.0.cat``): partial coherence order (total only
between morally strong writes), observation through RMW chains, release and
acquire patterns (fences included), ``fence.sc`` order, CTA barriers, and
the axioms Coherence, Fence-SC, Atomicity, No-Thin-Air, SC-per-location and
Causality. ``sc`` is sequential consistency over element events (the
elements of one vector access stay unordered among themselves).

Causality order is encoded with vector clocks: at every point where a
thread can be synchronized into, one integer per other thread says how far
into that thread its causal past reaches. The clocks are only bounded from
below; every use of causality in an axiom or a property is negative, so a
solver looking for a violation is free to pick the least clocks, which are
the exact causality order. This encoding and the model layer's
(:mod:`collsim.verify.models`, which decides the litmus tests) are checked
against each other: :func:`collsim.verify.bridge.to_event_program` and
:func:`collsim.verify.bridge.to_instance` translate between their event forms.

Polls follow the Dartagnan convention: the read that ends a spin satisfies
its predicate and only executions in which every thread finishes count.
The hang check (``liveness=True``) instead lets each poll be *stuck*:
its polled words read the last write to their location and fail the
predicate, and the thread (and any barrier waiting for it) stops there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import z3

from collsim.ir.ops import NotEqual
from collsim.verify.instance import EventKind, InstrKind, Lin, VerifyEvent, VerifyInstance, VerifyInstr
from collsim.verify.reference import RefRun

__all__ = ["Execution", "PROPERTIES", "PROPERTY_TITLES", "normalize_property", "Query", "consumer_instrs",
           "stale_or_early", "torn", "data_race", "hang", "postcondition", "sentinel_collision"]

#: properties in report order
PROPERTIES = (
    "stale-read",
    "torn-read",
    "early-overwrite",
    "data-race",
    "hang",
    "sentinel-collision",
    "postcondition",
)

PROPERTY_TITLES = {
    "stale-read": "stale read",
    "torn-read": "torn read",
    "early-overwrite": "early overwrite",
    "data-race": "data race",
    "hang": "hang",
    "sentinel-collision": "sentinel collision",
    "postcondition": "postcondition",
}


def normalize_property(name: str) -> str:
    """``"stale read"``, ``"Stale-Read"`` and ``"stale_read"`` all name ``"stale-read"``."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    if key not in PROPERTIES:
        raise KeyError(f"unknown property {name!r} (valid: {', '.join(PROPERTIES)})")
    return key


#: fences and barriers count as strong in the morally-strong relation
_ORDERING = frozenset({EventKind.FENCE, EventKind.BARRIER})
_ACQ = ("acquire", "acq_rel")
_REL = ("release", "acq_rel")
_SCOPE_RANK = {"cta": 0, "gpu": 1, "sys": 2}


class Execution:
    """The executions of ``low`` under ``model`` as Z3 constraints.

    Parameters
    ----------
    low : VerifyInstance
    model : "ptx" or "sc"
    liveness : bool
        Let polls be stuck (hang check) instead of requiring every thread to finish.
    symbolic_inputs : bool
        Input elements are unconstrained integers instead of distinct constants.
    ctx : z3.Context, optional
        The context every term and the solver are built in (default: z3's main
        context, which the terms of an event program converted by
        :mod:`collsim.verify.bridge` live in). The verifier passes a fresh one
        per verification, so what this process solved before does not change
        a verdict or its counterexample.
    """

    def __init__(self, low: VerifyInstance, model: str = "ptx", liveness: bool = False,
                 symbolic_inputs: bool = False, ctx: z3.Context | None = None) -> None:
        if model not in ("ptx", "sc"):
            raise ValueError(f"memory model is 'ptx' or 'sc', not {model!r}")
        self.ctx = ctx if ctx is not None else z3.main_ctx()
        self.low = low
        self.model = model
        self.live = liveness
        self.symbolic = symbolic_inputs
        self.cons: list[Any] = []
        self.ev = low.events
        self.n_threads = len(low.threads)
        self._fresh = 0
        self._inputs = low.input_env()
        self.input_terms: dict[tuple, Any] = {}
        for key, value in self._inputs.items():
            self.input_terms[key] = (z3.Int("in_%d_%d_%d" % key[1:], ctx=self.ctx) if symbolic_inputs
                                     else z3.IntVal(value, ctx=self.ctx))
        self.read_var: dict[int, Any] = {e.id: z3.Int(f"v{e.id}", ctx=self.ctx) for e in self.ev if e.is_read}
        self._build_exec()
        self._build_rf()
        self._build_co()
        self._build_coherence_locally()
        self._build_groups()
        self._build_polls()
        self._build_thin_air()
        self._build_causality()

    # -- helpers -----------------------------------------------------------
    def fresh(self, prefix: str, sort: str = "bool") -> Any:
        self._fresh += 1
        name = f"{prefix}!{self._fresh}"
        return z3.Bool(name, ctx=self.ctx) if sort == "bool" else z3.Int(name, ctx=self.ctx)

    def lin(self, value: Lin) -> Any:
        if isinstance(value, z3.ExprRef):  # events converted from the event interface
            return value
        terms = [z3.IntVal(value.c, ctx=self.ctx)] if value.c or not value.terms else []
        for key, coeff in value.terms.items():
            atom = self.input_terms[key] if key[0] == "in" else self.read_var[key[1]]
            terms.append(atom if coeff == 1 else coeff * atom)
        return terms[0] if len(terms) == 1 else z3.Sum(terms)

    def wval(self, w: VerifyEvent | None, loc: tuple) -> Any:
        """The value a write (``None``: the initial value of ``loc``) stores."""
        if w is None:
            return z3.IntVal(self.low.init[loc], ctx=self.ctx)
        return self.lin(w.value)

    def rval(self, r: VerifyEvent) -> Any:
        return self.read_var[r.id]

    def same_thread(self, a: VerifyEvent, b: VerifyEvent) -> bool:
        return a.thread == b.thread

    def po(self, a: VerifyEvent, b: VerifyEvent) -> bool:
        return a.thread == b.thread and a.instr < b.instr

    def scope_includes(self, a: VerifyEvent, other_thread: int) -> bool:
        """Does ``a``'s scope include ``other_thread``? (placement: ``(rank, cta, gpu)``)"""
        if a.scope == "sys":
            return True
        _, cta, gpu = self.low.placement[a.thread]
        _, other_cta, other_gpu = self.low.placement[other_thread]
        if a.scope == "cta":
            return (cta, gpu) == (other_cta, other_gpu)
        return gpu == other_gpu

    def ms(self, a: VerifyEvent, b: VerifyEvent) -> bool:
        """Morally strong (PTX): related in po, or both strong with scopes including each other; same location."""
        if a.is_mem and b.is_mem and a.loc != b.loc:
            return False
        if a.thread == b.thread:
            return True
        strong_a = a.kind in _ORDERING or a.strong
        strong_b = b.kind in _ORDERING or b.strong
        return strong_a and strong_b and self.scope_includes(a, b.thread) and self.scope_includes(b, a.thread)

    # -- execution (which events run) ----------------------------------------
    def _build_exec(self) -> None:
        low = self.low
        self.stuck: dict[int, Any] = {}
        self.reached: dict[tuple[int, int], Any] = {}
        if not self.live:
            self._exec = {e.id: low.guards.get(e.id, z3.BoolVal(True, ctx=self.ctx)) for e in self.ev}
            self.passed_all = z3.BoolVal(True, ctx=self.ctx)
            return
        bars: dict[tuple, list[VerifyInstr]] = {}
        for thread in low.threads:
            for instr in thread:
                if instr.kind == InstrKind.BARRIER:
                    bars.setdefault(instr.events[0].bar, []).append(instr)
        for t, thread in enumerate(low.threads):
            for instr in thread:
                self.reached[(t, instr.index)] = z3.Bool(f"reach_{t}_{instr.index}", ctx=self.ctx)
        for t, thread in enumerate(low.threads):
            self.cons.append(self.reached[(t, 0)]) if thread else None
            for instr in thread:
                here = self.reached[(t, instr.index)]
                passes = [here]
                if instr.kind == InstrKind.POLL:
                    s = z3.Bool(f"stuck_{instr.id}", ctx=self.ctx)
                    self.stuck[instr.id] = s
                    self.cons.append(z3.Implies(s, here))
                    passes.append(z3.Not(s))
                if instr.kind == InstrKind.BARRIER:
                    passes += [self.reached[(m.thread, m.index)] for m in bars[instr.events[0].bar]]
                nxt = self.reached.get((t, instr.index + 1))
                if nxt is not None:
                    self.cons.append(nxt == z3.And(passes, self.ctx))
                else:
                    self.reached[(t, "done")] = z3.And(passes, self.ctx)
        self._exec = {e.id: self.reached[(e.thread, e.instr)] for e in self.ev}

    def exe(self, e: VerifyEvent) -> Any:
        return self._exec[e.id]

    def wr(self, w: VerifyEvent) -> Any:
        """The write event runs and writes (a failing ``cas`` does not)."""
        if w.writes_if is None:
            return self._exec[w.id]
        return z3.And(self._exec[w.id], w.writes_if)

    # -- reads-from ------------------------------------------------------------
    def _candidate_ok(self, w: VerifyEvent | None, r: VerifyEvent) -> bool:
        if w is not None:
            if w.id == r.id or (w.thread == r.thread and w.instr >= r.instr):
                return False  # po-later (or same instruction) writes of the reading thread
        if self.live or not r.polled:
            return True
        instr = self.low.instrs[r.poll]
        value = self.low.init[r.loc] if w is None else (w.value.c if w.value.is_const else None)
        if value is None:
            return True
        return instr.predicate.holds(value)

    def _build_rf(self) -> None:
        self.rf: dict[tuple[int | None, int], Any] = {}
        self.cands: dict[int, list[VerifyEvent | None]] = {}
        for r in self.ev:
            if not r.is_read:
                continue
            cands: list[VerifyEvent | None] = [None] + self.low.writes_at(r.loc)
            cands = [w for w in cands if self._candidate_ok(w, r)]
            self.cands[r.id] = cands
            lits = []
            for w in cands:
                v = z3.Bool(f"rf_{'i' if w is None else w.id}_{r.id}", ctx=self.ctx)
                self.rf[(None if w is None else w.id, r.id)] = v
                lits.append(v)
                self.cons.append(z3.Implies(v, self.rval(r) == self.wval(w, r.loc)))
                if w is not None and (self.live or self.low.guards or w.writes_if is not None):
                    self.cons.append(z3.Implies(v, self.wr(w)))
            if not lits:
                self.cons.append(z3.Not(self.exe(r)))
                continue
            if self.live or self.low.guards:
                self.cons.append(z3.Implies(self.exe(r), z3.PbEq([(x, 1) for x in lits], 1, ctx=self.ctx)))
                self.cons.append(z3.Implies(z3.Not(self.exe(r)), z3.Not(z3.Or(lits, self.ctx))))
            else:
                self.cons.append(z3.PbEq([(x, 1) for x in lits], 1, ctx=self.ctx))

    def rf_lit(self, w: VerifyEvent | None, r: VerifyEvent) -> Any:
        return self.rf.get((None if w is None else w.id, r.id), z3.BoolVal(False, ctx=self.ctx))

    # -- coherence order -------------------------------------------------------
    def _build_co(self) -> None:
        self.co: dict[tuple[int, int], Any] = {}
        for loc in self.low.locs:
            ws = self.low.writes_at(loc)
            for i, a in enumerate(ws):
                for b in ws[i + 1:]:
                    if a.thread == b.thread:
                        first, second = (a, b) if a.instr < b.instr else (b, a)
                        self.co[(first.id, second.id)] = z3.BoolVal(True, ctx=self.ctx)
                        self.co[(second.id, first.id)] = z3.BoolVal(False, ctx=self.ctx)
                        continue
                    ab = z3.Bool(f"co_{a.id}_{b.id}", ctx=self.ctx)
                    if self.model == "sc" or self.ms(a, b):
                        ba = z3.Not(ab)
                    else:
                        ba = z3.Bool(f"co_{b.id}_{a.id}", ctx=self.ctx)
                        self.cons.append(z3.Not(z3.And(ab, ba)))
                    self.co[(a.id, b.id)] = ab
                    self.co[(b.id, a.id)] = ba
            for a in ws:
                for b in ws:
                    for c in ws:
                        if len({a.id, b.id, c.id}) == 3:
                            self.cons.append(z3.Implies(z3.And(self.co[(a.id, b.id)], self.co[(b.id, c.id)]),
                                                        self.co[(a.id, c.id)]))

    def co_lit(self, a: VerifyEvent | None, b: VerifyEvent | None) -> Any:
        """``a`` before ``b`` in coherence order (``None`` is the initial write)."""
        if b is None:
            return z3.BoolVal(False, ctx=self.ctx)
        if a is None:
            return z3.BoolVal(True, ctx=self.ctx)
        if a.id == b.id:
            return z3.BoolVal(False, ctx=self.ctx)
        return self.co[(a.id, b.id)]

    def fr_pairs(self, r: VerifyEvent) -> Iterable[tuple[Any, VerifyEvent]]:
        """(condition, w) such that the condition means ``r`` reads from before ``w``."""
        for w in self.low.writes_at(r.loc):
            if w.id == r.id:
                continue
            terms = [z3.And(self.rf_lit(src, r), self.co_lit(src, w)) for src in self.cands[r.id]
                     if src is None or src.id != w.id]
            if terms:
                yield z3.And(z3.Or(terms, self.ctx), self.wr(w)), w

    def _build_coherence_locally(self) -> None:
        """SC-per-location (ptx) or the single SC order (sc), and RMW atomicity."""
        if self.model == "sc":
            clk = {e.id: z3.Int(f"sc_{e.id}", ctx=self.ctx) for e in self.ev}
            self.sc_clock = clk
            for thread in self.low.threads:
                prev: list[VerifyEvent] = []
                for instr in thread:
                    for a in prev:
                        for b in instr.events:
                            self.cons.append(clk[a.id] < clk[b.id])
                    prev = instr.events or prev
            bars: dict[tuple, list[VerifyEvent]] = {}
            for e in self.ev:
                if e.kind == EventKind.BARRIER:
                    bars.setdefault(e.bar, []).append(e)
            for members in bars.values():
                for m in members[1:]:
                    self.cons.append(clk[m.id] == clk[members[0].id])
            edge = lambda a, b: clk[a.id] < clk[b.id]  # noqa: E731
        else:
            clk = {e.id: z3.Int(f"loc_{e.id}", ctx=self.ctx) for e in self.ev if e.is_mem}
            for loc, events in self.low.locs.items():
                for a in events:
                    for b in events:
                        if self.po(a, b):
                            self.cons.append(clk[a.id] < clk[b.id])
            edge = lambda a, b: clk[a.id] < clk[b.id]  # noqa: E731
        guard = self.model == "sc"
        for r in self.ev:
            if not r.is_read:
                continue
            for w in self.cands[r.id]:
                if w is not None and (guard or self.ms(w, r)):
                    self.cons.append(z3.Implies(self.rf_lit(w, r), edge(w, r)))
            for cond, w in self.fr_pairs(r):
                if guard or self.ms(r, w):
                    self.cons.append(z3.Implies(cond, edge(r, w)))
        for loc in self.low.locs:
            ws = self.low.writes_at(loc)
            for a in ws:
                for b in ws:
                    if a.id != b.id and (guard or self.ms(a, b)):
                        self.cons.append(z3.Implies(z3.And(self.co_lit(a, b), self.wr(a), self.wr(b)), edge(a, b)))
        # Atomicity: no morally strong write between an RMW's read and its write. An RMW is
        # co-after a morally strong write it reads (SC-per-location); a weak write it reads
        # stays unordered with it unless something else orders them (the PTX coherence
        # order is partial).
        for z in self.ev:
            if z.kind != EventKind.RMW:
                continue
            ws = self.low.writes_at(z.loc)
            for w in self.cands[z.id]:
                lit = self.rf_lit(w, z)
                if w is not None and (guard or self.ms(w, z)):
                    self.cons.append(z3.Implies(lit, self.co_lit(w, z)))
                for other in ws:
                    if other.id == z.id or (w is not None and other.id == w.id):
                        continue
                    if guard or self.ms(other, z):
                        self.cons.append(z3.Implies(z3.And(lit, self.wr(other)),
                                                    z3.Not(z3.And(self.co_lit(w, other), self.co_lit(other, z)))))

    # -- atomic groups ---------------------------------------------------------
    def _build_groups(self) -> None:
        low = self.low
        groups_at: dict[tuple, list[int]] = {}
        for gid, members in low.wgroups.items():
            for w in members:
                groups_at.setdefault(w.loc, []).append(gid)
        # coherence agrees across the locations two groups share
        seen: set[tuple[int, int]] = set()
        for gid, members in low.wgroups.items():
            by_loc = {w.loc: w for w in members}
            for loc in by_loc:
                for other in groups_at.get(loc, ()):
                    if other == gid or (min(gid, other), max(gid, other)) in seen:
                        continue
                    seen.add((min(gid, other), max(gid, other)))
                    theirs = {w.loc: w for w in low.wgroups[other]}
                    shared = [l for l in by_loc if l in theirs]
                    first = shared[0]
                    for l in shared[1:]:
                        self.cons.append(self.co_lit(by_loc[first], theirs[first]) == self.co_lit(by_loc[l], theirs[l]))
        # a read group sees a write group whole or not at all
        for members in low.rgroups.values():
            reads = {r.loc: r for r in members}
            gids = {g for r in members for g in groups_at.get(r.loc, ())}
            for gid in gids:
                covered = [(reads[w.loc], w) for w in low.wgroups[gid] if w.loc in reads]
                if len(covered) < 2:
                    continue
                r0, w0 = covered[0]
                for r, w in covered[1:]:
                    self.cons.append(self.rf_lit(w0, r0) == self.rf_lit(w, r))

    # -- polls -------------------------------------------------------------------
    def _build_polls(self) -> None:
        for instr in self.low.instrs:
            if instr.kind != InstrKind.POLL:
                continue
            polled = [e for e in instr.events if e.polled]
            ok = z3.And([instr.predicate.holds(self.rval(e)) for e in polled], self.ctx)
            if not self.live:
                self.cons.append(ok)
                continue
            stuck = self.stuck[instr.id]
            here = self.reached[(instr.thread, instr.index)]
            self.cons.append(z3.Implies(z3.And(here, z3.Not(stuck)), ok))
            self.cons.append(z3.Implies(stuck, z3.Not(ok)))
            for r in polled:
                for w in self.cands[r.id]:
                    later = [z3.And(self.wr(o), self.co_lit(w, o)) for o in self.low.writes_at(r.loc)
                             if w is None or o.id != w.id]
                    if later:
                        self.cons.append(z3.Implies(z3.And(stuck, self.rf_lit(w, r)),
                                                    z3.Not(z3.Or(later, self.ctx))))

    # -- no thin air ---------------------------------------------------------------
    def _build_thin_air(self) -> None:
        clk = {e.id: z3.Int(f"nta_{e.id}", ctx=self.ctx) for e in self.ev}
        for r in self.ev:
            if r.is_read:
                for w in self.cands[r.id]:
                    if w is not None:
                        self.cons.append(z3.Implies(self.rf_lit(w, r), clk[w.id] < clk[r.id]))
        for e in self.ev:
            for d in e.deps:
                self.cons.append(clk[d] < clk[e.id])
        # control dependencies: everything after a poll depends on its reads; a barrier passes them on
        frontier: dict[int, Any] = {}
        bar_frontier: dict[tuple, Any] = {}
        for t, thread in enumerate(self.low.threads):
            current = None
            for instr in thread:
                if current is not None:
                    for e in instr.events:
                        self.cons.append(current < clk[e.id])
                if instr.kind == InstrKind.POLL:
                    g = self.fresh("ctrl", "int")
                    for e in instr.events:
                        self.cons.append(clk[e.id] < g)
                    if current is not None:
                        self.cons.append(current <= g)
                    current = g
                elif instr.kind == InstrKind.BARRIER:
                    key = instr.events[0].bar
                    if key not in bar_frontier:
                        bar_frontier[key] = self.fresh("barctrl", "int")
                    g = bar_frontier[key]
                    if current is not None:
                        self.cons.append(current <= g)
                    current = g
            frontier[t] = current
        self.nta_clock = clk

    # -- causality (vector clocks) -------------------------------------------------
    def _is_sink(self, e: VerifyEvent, seen_strong_read: bool) -> bool:
        """Can ``e`` end a synchronization (the last event of an acquire pattern, a barrier, a fence.sc)?"""
        if e.kind == EventKind.BARRIER:
            return True
        if self.model == "sc":
            return e.is_read and e.strong
        if e.kind == EventKind.FENCE:
            return seen_strong_read or e.sem == "sc"
        return e.is_read and e.sem in _ACQ and e.returns_value

    def _build_causality(self) -> None:
        """Vector clocks: ``V[e][u] = c`` means the first ``c`` instructions of thread ``u`` precede ``e``.

        Clocks live at synchronization points (sink events). An event that is
        not a sink sees the join of the sinks of earlier instructions: the
        elements of one vector access are unordered, so a sibling element of
        an acquire does not acquire.
        """
        low = self.low
        T = self.n_threads
        self.V: dict[int, list[Any]] = {}  # sink event -> clock per thread
        self.J: list[list[Any]] = []  # per thread, per instr: join of sinks in instructions <= instr
        self.J_before: list[list[Any]] = []  # per thread, per instr: join of sinks in instructions < instr
        zero = [z3.IntVal(0, ctx=self.ctx)] * T
        for t, thread in enumerate(low.threads):
            prev = zero
            joins, befores = [], []
            strong_read = False
            for instr in thread:
                befores.append(prev)
                sinks = [e for e in instr.events if self._is_sink(e, strong_read)]
                if sinks:
                    join = [None if u == t else z3.Int(f"J_{t}_{instr.index}_{u}", ctx=self.ctx)
                            for u in range(T)]
                    for e in sinks:
                        vec = [None if u == t else z3.Int(f"V_{e.id}_{u}", ctx=self.ctx) for u in range(T)]
                        self.V[e.id] = vec
                        for u in range(T):
                            if u != t:
                                self.cons.append(vec[u] >= prev[u])
                                self.cons.append(join[u] >= vec[u])
                    for u in range(T):
                        if u != t:
                            self.cons.append(join[u] >= prev[u])
                    prev = join
                joins.append(prev)
                strong_read = strong_read or any(e.is_read and e.strong and e.returns_value for e in instr.events)
            self.J.append(joins)
            self.J_before.append(befores)
        self._sync_cond: dict[tuple[int, int], list[Any]] = {}
        self._build_observation()
        if self.model == "ptx":
            self._release_acquire_edges()
            self._fence_sc_edges()
        else:
            for r in self.ev:
                if not (r.is_read and r.strong):
                    continue
                for w in self.cands[r.id]:
                    if w is not None and w.strong and w.thread != r.thread:
                        self._sync_cond.setdefault((w.id, r.id), []).append(self.obs(w, r))
        self._barrier_edges()
        for (a_id, b_id), conds in self._sync_cond.items():
            self._edge(self.ev[a_id], self.ev[b_id], z3.Or(conds, self.ctx))
        self._causality_axioms()

    def v_in(self, e: VerifyEvent, u: int) -> Any:
        """How many leading instructions of thread ``u`` precede ``e`` in causality order (an int term)."""
        if e.id in self.V:
            return self.V[e.id][u]
        return self.J_before[e.thread][e.instr][u]

    def v_out(self, a: VerifyEvent, u: int) -> Any:
        """What a synchronization from ``a`` passes on about thread ``u``."""
        if u == a.thread:
            whole = len(self.low.threads[a.thread][a.instr].events) == 1
            return z3.IntVal(a.instr + 1 if whole else a.instr, ctx=self.ctx)
        return self.v_in(a, u)

    def _edge(self, a: VerifyEvent, b: VerifyEvent, cond: Any) -> None:
        vec = self.V.get(b.id)
        if vec is None:
            raise AssertionError(f"sync target {b.label} is not a synchronization point")
        for u in range(self.n_threads):
            if u == b.thread:
                continue
            self.cons.append(z3.Implies(cond, vec[u] >= self.v_out(a, u)))

    def _build_observation(self) -> None:
        """observation = (ms & rf) | observation; rmw; observation — through RMW chains."""
        self._obs: dict[tuple[int, int], Any] = {}
        for loc, events in self.low.locs.items():
            rmws = [e for e in events if e.kind == EventKind.RMW]
            if not rmws:
                continue
            writes = [e for e in events if e.is_write and e.strong]
            reads = [e for e in events if e.is_read and e.strong]
            for w in writes:
                for r in reads:
                    if w.id != r.id:
                        self._obs[(w.id, r.id)] = z3.Bool(f"obs_{w.id}_{r.id}", ctx=self.ctx)
            for w in writes:
                for r in reads:
                    if w.id == r.id:
                        continue
                    o = self._obs[(w.id, r.id)]
                    if self.ms(w, r):
                        self.cons.append(z3.Implies(self.rf_lit(w, r), o))
                    for z in rmws:
                        if z.id in (w.id, r.id) or not z.strong or not self.ms(z, r):
                            continue
                        self.cons.append(z3.Implies(z3.And(self._obs[(w.id, z.id)], self.rf_lit(z, r)), o))

    def obs(self, w: VerifyEvent, r: VerifyEvent) -> Any:
        if (w.id, r.id) in self._obs:
            return self._obs[(w.id, r.id)]
        if not (w.strong and r.strong and self.ms(w, r)):
            return z3.BoolVal(False, ctx=self.ctx)
        return self.rf_lit(w, r)

    def _release_acquire_edges(self) -> None:
        low = self.low
        threads = low.threads
        for loc, events in low.locs.items():
            writes = [e for e in events if e.is_write and e.strong]
            reads = [e for e in events if e.is_read and e.strong and e.returns_value]
            for w in writes:
                sources = self._release_sources(w, threads[w.thread])
                if not sources:
                    continue
                for r in reads:
                    if r.thread == w.thread or r.id == w.id:
                        continue
                    sinks = self._acquire_sinks(r, threads[r.thread])
                    pairs = [(a, b) for a in sources for b in sinks if self.ms(a, b)]
                    if not pairs:
                        continue
                    o = self.obs(w, r)
                    if z3.is_false(o):
                        continue
                    for a, b in pairs:
                        self._sync_cond.setdefault((a.id, b.id), []).append(o)

    def _release_sources(self, w: VerifyEvent, thread: list[VerifyInstr]) -> list[VerifyEvent]:
        out = []
        if w.sem in _REL:
            out.append(w)
        for instr in reversed(thread[: w.instr]):
            for e in instr.events:
                if e.kind == EventKind.FENCE and e not in out:
                    out.append(e)
                    return out
                if e.is_write and e.loc == w.loc and e.sem in _REL and not out:
                    out.append(e)
        return out

    def _acquire_sinks(self, r: VerifyEvent, thread: list[VerifyInstr]) -> list[VerifyEvent]:
        out = []
        if r.sem in _ACQ:
            out.append(r)
        found_read = bool(out)
        for instr in thread[r.instr + 1:]:
            for e in instr.events:
                if e.kind == EventKind.FENCE:
                    out.append(e)
                    return out
                if not found_read and e.is_read and e.returns_value and e.loc == r.loc and e.sem in _ACQ:
                    out.append(e)
                    found_read = True
        return out

    def _fence_sc_edges(self) -> None:
        fences = [e for e in self.ev if e.kind == EventKind.FENCE and e.sem == "sc"]
        self.sc_pos = {f.id: z3.Int(f"scpos_{f.id}", ctx=self.ctx) for f in fences}
        if len(fences) > 1:
            self.cons.append(z3.Distinct([self.sc_pos[f.id] for f in fences]))
        for a in fences:
            for b in fences:
                if a.id == b.id:
                    continue
                if a.thread == b.thread:
                    if a.instr < b.instr:
                        self.cons.append(self.sc_pos[a.id] < self.sc_pos[b.id])
                    continue
                if not self.ms(a, b):
                    continue
                before = self.sc_pos[a.id] < self.sc_pos[b.id]
                guard = z3.And(before, self.exe(a), self.exe(b))
                self._sync_cond.setdefault((a.id, b.id), []).append(guard)
                # Fence-SC: the fence order never contradicts causality
                self.cons.append(z3.Implies(z3.And(z3.Not(before), self.exe(a), self.exe(b)),
                                            self.v_in(b, a.thread) <= a.instr))

    def _barrier_edges(self) -> None:
        bars: dict[tuple, list[VerifyEvent]] = {}
        for e in self.ev:
            if e.kind == EventKind.BARRIER:
                bars.setdefault(e.bar, []).append(e)
        for members in bars.values():
            done = z3.And([self.exe(m) for m in members], self.ctx)
            for a in members:
                for b in members:
                    if a.id != b.id:
                        self._sync_cond.setdefault((a.id, b.id), []).append(done)

    # -- causality order as a formula -------------------------------------------------
    def cause_base(self, x: VerifyEvent, y: VerifyEvent) -> Any:
        if x.thread == y.thread:
            return z3.BoolVal(False, ctx=self.ctx)
        v = self.v_in(y, x.thread)
        if z3.is_int_value(v):
            return z3.BoolVal(x.instr < v.as_long(), ctx=self.ctx)
        return z3.IntVal(x.instr, ctx=self.ctx) < v

    def _first_observer(self, x: VerifyEvent, u: int) -> Any:
        """An int no larger than the index of any read in thread ``u`` that observes write ``x``."""
        key = (x.id, u)
        if key not in self._first_obs:
            m = z3.Int(f"fobs_{x.id}_{u}", ctx=self.ctx)
            self._first_obs[key] = m
            readers = [r for r in self.low.reads_at(x.loc) if r.thread == u and r.id != x.id]
            self.cons.append(m >= 0)
            for r in readers:
                o = self.obs(x, r)
                if not z3.is_false(o):
                    self.cons.append(z3.Implies(o, m <= r.instr))
            if not readers:
                self.cons.append(m == 10 ** 6)
        return self._first_obs[key]

    def cause(self, x: VerifyEvent, y: VerifyEvent) -> Any:
        """``x`` precedes ``y`` in causality order (cause-base | observation; (cause-base | po-loc))."""
        terms = [self.cause_base(x, y)]
        if x.is_write and x.strong and self.model == "ptx":
            for u in range(self.n_threads):
                if u == y.thread or u == x.thread:
                    continue
                v = self.v_in(y, u)
                if z3.is_int_value(v) and v.as_long() <= 0:
                    continue
                terms.append(self._first_observer(x, u) < v)
        # observation; po-loc orders x before a later access of the same element under either model (sc is
        # sc-per-location too); the vector clocks alone miss it when x's instruction has other elements
        if x.is_write and x.strong and y.is_mem and y.loc == x.loc:
            for z in self.low.reads_at(x.loc):
                if z.thread == y.thread and z.instr < y.instr and z.id != x.id:
                    terms.append(self.obs(x, z))
        terms = [t for t in terms if not z3.is_false(t)]
        return z3.Or(terms, self.ctx) if terms else z3.BoolVal(False, ctx=self.ctx)

    def _causality_axioms(self) -> None:
        self._first_obs: dict[tuple[int, int], Any] = {}
        if self.model == "sc":
            return
        for loc in self.low.locs:
            ws = self.low.writes_at(loc)
            # Coherence: causality order between writes is coherence order
            for a in ws:
                for b in ws:
                    if a.id != b.id and a.thread != b.thread:
                        c = self.cause(a, b)
                        if not z3.is_false(c):
                            self.cons.append(z3.Implies(z3.And(c, self.wr(a), self.wr(b)), self.co_lit(a, b)))
            # Causality: irreflexive((rf | fr); cause)
            for r in self.low.reads_at(loc):
                for w in self.cands[r.id]:
                    if w is not None and w.thread != r.thread:
                        c = self.cause(r, w)
                        if not z3.is_false(c):
                            self.cons.append(z3.Implies(self.rf_lit(w, r), z3.Not(c)))
                for cond, w in self.fr_pairs(r):
                    if w.thread != r.thread:
                        c = self.cause(w, r)
                        if not z3.is_false(c):
                            self.cons.append(z3.Implies(cond, z3.Not(c)))

    # -- solver --------------------------------------------------------------------
    def solver(self, timeout_s: float | None = None) -> z3.Solver:
        s = z3.SolverFor("QF_LIA", ctx=self.ctx)
        if timeout_s:
            s.set("timeout", int(timeout_s * 1000))
        s.add(self.cons)
        return s


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@dataclass
class Query:
    """A property as a formula over an execution, plus how to explain a model of it."""

    property: str
    formula: Any
    witnesses: list[tuple[Any, dict]]  # (literal, description) pairs: which disjunct fired
    liveness: bool = False
    symbolic_inputs: bool = False
    note: str | None = None


def _any_of(ex: Execution, lits: list[tuple[Any, dict]]) -> Any:
    """The disjunction of the literals of ``lits`` (false when there are none), in ``ex``'s context."""
    return z3.Or([lit for lit, _ in lits], ex.ctx) if lits else z3.BoolVal(False, ctx=ex.ctx)


def consumer_instrs(low: VerifyInstance) -> list[VerifyInstr]:
    return [i for i in low.instrs if any(e.consumer for e in i.events)]


def _source_position(ex: Execution, ref: RefRun, r: VerifyEvent, w: VerifyEvent | None) -> int:
    return ref.position(r.loc, None if w is None else w.id)


def stale_or_early(ex: Execution, ref: RefRun, which: str) -> Query:
    """A consumer reads a value other than the intended one, from an older (stale) or later (early) write."""
    low = ex.low
    lits = []
    for r in low.events:
        if not (r.is_read and r.consumer):
            continue
        intended = ref.rf.get(r.id)
        pos = ref.position(r.loc, intended)
        wrong = ex.rval(r) != ref.read_values[r.id]
        for w in ex.cands[r.id]:
            p = _source_position(ex, ref, r, w)
            if (which == "stale" and p < pos) or (which == "early" and p > pos):
                lit = z3.And(ex.exe(r), ex.rf_lit(w, r), wrong)
                lits.append((lit, {"read": r, "write": w, "intended": intended}))
    if which == "early" and ex.live:
        for instr in low.instrs:
            if instr.kind != InstrKind.POLL:
                continue
            for r in instr.events:
                if not r.polled:
                    continue
                intended = ref.rf.get(r.id)
                pos = ref.position(r.loc, intended)
                for w in ex.cands[r.id]:
                    if _source_position(ex, ref, r, w) > pos:
                        lit = z3.And(ex.stuck[instr.id], ex.rf_lit(w, r))
                        lits.append((lit, {"read": r, "write": w, "intended": intended, "stuck": True}))
    name = "stale-read" if which == "stale" else "early-overwrite"
    return Query(name, _any_of(ex, lits), lits, liveness=ex.live)


def torn(ex: Execution, ref: RefRun) -> Query:
    """A consumed line whose words come from different store instructions, where the intended run read one."""
    low = ex.low
    owner = {}
    for instr in low.instrs:
        for e in instr.events:
            owner[e.id] = instr.id
    lits = []
    for instr in consumer_instrs(low):
        reads = [e for e in instr.events if e.is_read]
        if len(reads) < 2:
            continue
        if any(w is not None and w.kind == EventKind.RMW for r in reads for w in ex.cands[r.id]):
            continue  # accumulated by atomics: each word legitimately has its own last writer
        intended = {None if ref.rf.get(r.id) is None else owner[ref.rf[r.id]] for r in reads}
        if len(intended) != 1:
            continue  # written by several instructions even in the intended run
        src = {}
        for r in reads:
            var = ex.fresh(f"src{r.id}", "int")
            src[r.id] = var
            for w in ex.cands[r.id]:
                ex.cons.append(z3.Implies(ex.rf_lit(w, r), var == (-1 if w is None else owner[w.id])))
        first = reads[0]
        for r in reads[1:]:
            lit = src[r.id] != src[first.id]
            lits.append((lit, {"instr": instr, "reads": reads}))
    return Query("torn-read", _any_of(ex, lits), lits)


def data_race(ex: Execution) -> Query:
    """Conflicting accesses, not morally strong, unordered by causality (PTX ISA §8.7)."""
    lits = []
    for loc, events in ex.low.locs.items():
        for i, a in enumerate(events):
            for b in events[i + 1:]:
                if a.thread == b.thread or not (a.is_write or b.is_write):
                    continue
                if ex.model == "ptx" and ex.ms(a, b):
                    continue
                if ex.model == "sc" and a.strong and b.strong:
                    continue
                lit = z3.And(ex.exe(a), ex.exe(b), z3.Not(ex.cause(a, b)), z3.Not(ex.cause(b, a)))
                lits.append((lit, {"a": a, "b": b}))
    return Query("data-race", _any_of(ex, lits), lits)


def hang(ex: Execution) -> Query:
    assert ex.live
    lits = [(s, {"instr": ex.low.instrs[i]}) for i, s in ex.stuck.items()]
    return Query("hang", _any_of(ex, lits), lits, liveness=True)


def postcondition(ex: Execution) -> tuple[Query, list[tuple]]:
    """Every output element equals the sum of every rank's input element of that launch."""
    lits = []
    unmodelled = []
    for key, expected in ex.low.expected_outputs.items():
        value = ex.low.outputs.get(key, "missing")
        if value is None:
            unmodelled.append(key)
            continue
        if value == "missing":
            lits.append((z3.BoolVal(True, ctx=ex.ctx), {"output": key, "missing": True}))
            continue
        lit = ex.lin(value) != ex.lin(expected)
        lits.append((lit, {"output": key, "value": value, "expected": expected}))
    return Query("postcondition", _any_of(ex, lits), lits), unmodelled


def sentinel_collision(ex: Execution, with_domain: bool) -> Query:
    """A data store puts the sentinel pattern into a word a ``NotEqual`` poll inspects."""
    low = ex.low
    sentinel_locs: dict[tuple, Any] = {}
    for instr in low.instrs:
        if instr.kind == InstrKind.POLL and isinstance(instr.predicate, NotEqual):
            for e in instr.events:
                if e.polled:
                    sentinel_locs[e.loc] = instr.predicate.value
    lits = []
    for w in low.events:
        if not w.is_write or w.loc not in sentinel_locs or w.fill is not None or w.role != "data":
            continue
        lit = z3.And(ex.exe(w), ex.lin(w.value) == sentinel_locs[w.loc])
        lits.append((lit, {"write": w, "sentinel": sentinel_locs[w.loc]}))
    formula = _any_of(ex, lits)
    if with_domain and low.forbidden_word is not None:
        restriction = [t != low.forbidden_word for t in ex.input_terms.values()]
        for w in low.events:  # partial sums stored from registers
            if w.is_write and w.fill is None and w.role == "data" and w.value is not None and len(w.value.terms) > 1:
                restriction.append(ex.lin(w.value) != low.forbidden_word)
        formula = z3.And(formula, z3.And(restriction, ex.ctx))
    return Query("sentinel-collision", formula, lits, liveness=True, symbolic_inputs=True)
