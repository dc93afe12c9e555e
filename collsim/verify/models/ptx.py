"""The PTX memory consistency model (generic proxy), encoded for z3.

Source: PTX ISA, chapter "Memory Consistency Model" (sections on operation
types, morally strong operations, release and acquire patterns, ordering of
memory operations, axioms) and Lustig, Sahasrabuddhe, Giroux, "A Formal
Analysis of the NVIDIA PTX Memory Consistency Model", ASPLOS 2019.

Relations, as the ISA defines them
----------------------------------
morally strong (ms)
    ``a != b``; related in program order, or both strong with scopes that
    include each other's thread; and, for two memory operations, the same
    location reached through the same virtual address (complete overlap, same
    proxy).
observation (obs)
    ``W obs R`` if ``R`` reads from ``W`` and they are ms, or ``W obs Z obs R``
    for an atomic operation ``Z`` (observation runs through RMW chains).
release pattern on M
    a release write ``W``; or a release write ``X`` on M followed in program
    order by a strong write ``W`` on M; or a release (``release``,
    ``acq_rel``, ``sc``) fence ``X`` followed by a strong write ``W``.
acquire pattern on M
    an acquire read ``R``; or a strong read ``R`` on M followed by an acquire
    read ``Y`` on M; or a strong read ``R`` followed by an acquire fence ``Y``.
    The read of a ``red`` is not a read here ("red; fence.acquire" is not an
    acquire pattern).
synchronises-with (sw)
    release pattern ``(X, W)``, acquire pattern ``(R, Y)``, ``W obs R`` and
    ``X ms Y``; also ``F1 -> F2`` when ms ``fence.sc`` operations are so
    ordered in Fence-SC order, and barrier synchronisation (events.py).
base causality (hb)
    transitive closure of program order and sw.
causality (cause)
    ``hb | obs;hb``, kept only between accesses to the same virtual address
    (generic proxy: aliases are not ordered without a proxy fence).
coherence (co)
    a strict partial order on the writes of one location, initial write
    first; it relates every ms pair of writes (in some direction) and contains
    ``cause`` between writes. ``fr = rf^-1; co``.

Axioms
------
Coherence       ``cause`` between writes is in ``co``.
Fence-SC        Fence-SC order (a total order on each ms pair of ``fence.sc``)
                does not contradict ``cause``.
Atomicity       an RMW ``A`` and a write ``W`` that are ms: not both
                ``A fr W`` and ``W co A``.
No-Thin-Air     ``rf | dep`` is acyclic.
SC-per-Location ``ms & (rf | co | fr)`` plus program order between accesses
                to one location is acyclic.
Causality       ``(rf | fr); cause`` is irreflexive.

Encoding
--------
z3 names follow the events: ``rf[w->r]``, ``co[a<b]``, ``fr[r->w]``,
``obs[w->r]``, ``sw[x->y]``, ``fsc[f1<f2]``, ``hb[a->b]``, clocks
``nta[e]`` (No-Thin-Air) and ``spl[e]`` (SC-per-Location). ``obs``, ``sw``
and ``hb`` appear only on the "forbidden" side of the axioms, so they are
encoded with implications from their definitions (a least fixpoint the
solver never needs to exceed). The final value of a location is that of a
co-maximal write (co is partial, so more than one can be maximal).
"""
from __future__ import annotations

from itertools import combinations, permutations
from typing import Iterable

import z3

from collsim.verify.events import Event, Program
from collsim.verify.models.base import INIT_PREFIX, Encoding, conj, disj, init_eid

__all__ = ["PTXModel", "PTXEncoding"]

_RELEASE_SEMS = ("release", "acq_rel", "sc")
_ACQUIRE_SEMS = ("acquire", "acq_rel", "sc")


class PTXEncoding(Encoding):
    model_name = "ptx"

    def __init__(self, program: Program, solver: z3.Solver) -> None:
        super().__init__(program, solver)
        self.mem = [e for e in self.events if e.is_memory]
        self._edges: dict[tuple[str, str], list[z3.BoolRef]] = {}
        self._co_vars: dict[tuple[str, str], z3.BoolRef] = {}
        self._fr: dict[tuple[str, str], z3.BoolRef] = {}
        self._obs: dict[tuple[str, str], z3.BoolRef] = {}
        self._hb: dict[tuple[str, str], z3.BoolRef] = {}
        self._coherence_order()
        self._from_reads()
        self._observation()
        self._release_acquire_sync()
        self._fence_sc_order()
        self._barrier_sync()
        self._base_causality()
        self._axiom_coherence()
        self._axiom_atomicity()
        self._axiom_no_thin_air()
        self._axiom_sc_per_location()
        self._axiom_causality()
        self._finals()

    # ------------------------------------------------------------ static facts
    def includes(self, e: Event, other: Event) -> bool:
        """Whether ``e``'s scope includes the thread of ``other``."""
        return self.placement[e.thread].includes(e.scope, self.placement[other.thread])

    def ms(self, a: Event, b: Event) -> bool:
        """Morally strong (static: scopes, placement and addresses are fixed)."""
        if a.eid == b.eid or a.kind == "BAR" or b.kind == "BAR":
            return False
        related = a.thread == b.thread or (
            a.is_strong and b.is_strong and self.includes(a, b) and self.includes(b, a))
        if not related:
            return False
        if a.is_memory and b.is_memory:
            return a.loc == b.loc and a.virtual_loc == b.virtual_loc
        return True

    def ms_eid(self, a: str, b: str) -> bool:
        if a.startswith(INIT_PREFIX) or b.startswith(INIT_PREFIX):
            return False
        return self.ms(self.ev[a], self.ev[b])

    def same_address(self, a: str, b: str) -> bool:
        """Same location through the same virtual address (causality is kept)."""
        if a.startswith(INIT_PREFIX) or b.startswith(INIT_PREFIX):
            return True
        ea, eb = self.ev[a], self.ev[b]
        return ea.loc == eb.loc and ea.virtual_loc == eb.virtual_loc

    @staticmethod
    def release_write(e: Event) -> bool:
        return e.is_write and e.sem in _RELEASE_SEMS

    @staticmethod
    def acquire_read(e: Event) -> bool:
        return e.is_read and e.returns_value and e.sem in _ACQUIRE_SEMS

    @staticmethod
    def strong_write(e: Event) -> bool:
        return e.is_write and e.is_strong

    @staticmethod
    def strong_read(e: Event) -> bool:
        return e.is_read and e.returns_value and e.is_strong

    def _edge(self, a: str, b: str, cond: z3.BoolRef) -> None:
        """A synchronisation edge of base causality, present when ``cond``."""
        if z3.is_false(cond):
            return
        self._edges.setdefault((a, b), []).append(cond)

    # --------------------------------------------------------------- coherence
    def co(self, a: str, b: str) -> z3.BoolRef:
        if a == b or b.startswith(INIT_PREFIX):
            return z3.BoolVal(False)
        if a.startswith(INIT_PREFIX):
            return self.writes(b)
        return self._co_vars[(a, b)]

    def _coherence_order(self) -> None:
        for loc in self.locations:
            ws = self.writes_to(loc, with_init=False)
            for a, b in permutations(ws, 2):
                self._co_vars[(a, b)] = self.bool(f"co[{a}<{b}]")
            for a, b in permutations(ws, 2):
                v = self._co_vars[(a, b)]
                self.add(z3.Implies(v, conj(self.writes(a), self.writes(b))))
            for a, b in combinations(ws, 2):
                self.add(z3.Not(z3.And(self.co(a, b), self.co(b, a))))
                if self.ms_eid(a, b):
                    self.add(z3.Implies(conj(self.writes(a), self.writes(b)),
                                        z3.Or(self.co(a, b), self.co(b, a))))
            for a, b, c in permutations(ws, 3):
                self.add(z3.Implies(z3.And(self.co(a, b), self.co(b, c)), self.co(a, c)))

    def fr(self, r: str, w: str) -> z3.BoolRef:
        """``r`` reads from a write coherence-before ``w``."""
        return self._fr.get((r, w), z3.BoolVal(False))

    def _from_reads(self) -> None:
        for r in self.mem:
            if not r.is_read:
                continue
            for w in self.writes_to(r.loc, with_init=False):  # type: ignore[arg-type]
                d = disj(conj(v, self.co(src, w)) for src, v in self.rf_vars(r.eid).items() if src != w)
                if z3.is_false(d):
                    continue
                var = self.bool(f"fr[{r.eid}->{w}]")
                self.add(var == d)
                self._fr[(r.eid, w)] = var

    # ------------------------------------------------------------- observation
    def obs(self, w: str, r: str) -> z3.BoolRef:
        return self._obs.get((w, r), z3.BoolVal(False))

    def _ms_rf(self, w: str, r: str) -> z3.BoolRef:
        return self.rf(w, r) if self.ms_eid(w, r) else z3.BoolVal(False)

    def _observation(self) -> None:
        for loc in self.locations:
            ws = self.writes_to(loc, with_init=False)
            rs = self.reads_of(loc)
            atomics = [z for z in rs if self.ev[z].kind == "RMW"]
            for w in ws:
                for r in rs:
                    if r == w:
                        continue
                    direct = self.ms_eid(w, r)
                    chained = any(self.ms_eid(z, r) for z in atomics if z not in (w, r))
                    if direct or chained:
                        self._obs[(w, r)] = self.bool(f"obs[{w}->{r}]")
            for (w, r), v in list(self._obs.items()):
                if self.loc_of(w) != loc:
                    continue
                self.add(z3.Implies(self._ms_rf(w, r), v))
                for z in atomics:
                    if z in (w, r) or (w, z) not in self._obs:
                        continue
                    step = self._ms_rf(z, r)
                    if not z3.is_false(step):
                        self.add(z3.Implies(z3.And(self._obs[(w, z)], step), v))

    # ---------------------------------------------------------------- patterns
    def release_patterns(self) -> list[tuple[Event, Event]]:
        """``(first, write)`` pairs: the pattern starts at ``first`` and ``write`` is observed."""
        out = []
        for w in self.mem:
            if not self.strong_write(w):
                continue
            if self.release_write(w):
                out.append((w, w))
            for x in self.events:
                if not self.po(x, w):
                    continue
                if x.is_memory and self.release_write(x) and x.loc == w.loc \
                        and x.virtual_loc == w.virtual_loc:
                    out.append((x, w))
                elif x.kind == "F" and x.sem in _RELEASE_SEMS:
                    out.append((x, w))
        return out

    def acquire_patterns(self) -> list[tuple[Event, Event]]:
        """``(read, last)`` pairs: ``read`` observes, the pattern ends at ``last``."""
        out = []
        for r in self.mem:
            if not self.strong_read(r):
                continue
            if self.acquire_read(r):
                out.append((r, r))
            for y in self.events:
                if not self.po(r, y):
                    continue
                if y.is_memory and self.acquire_read(y) and y.loc == r.loc \
                        and y.virtual_loc == r.virtual_loc:
                    out.append((r, y))
                elif y.kind == "F" and y.sem in _ACQUIRE_SEMS:
                    out.append((r, y))
        return out

    def _release_acquire_sync(self) -> None:
        rels = self.release_patterns()
        acqs = self.acquire_patterns()
        conds: dict[tuple[str, str], list[z3.BoolRef]] = {}
        for x, w in rels:
            for r, y in acqs:
                if w.loc != r.loc or w.eid == r.eid or x.eid == y.eid or not self.ms(x, y):
                    continue
                o = self.obs(w.eid, r.eid)
                if z3.is_false(o):
                    continue
                c = conj(self.executed(x.eid), self.writes(w.eid), self.executed(r.eid),
                         self.executed(y.eid), o)
                conds.setdefault((x.eid, y.eid), []).append(c)
        for (x, y), cs in conds.items():
            v = self.bool(f"sw[{x}->{y}]")
            self.add(z3.Implies(disj(cs), v))
            self._edge(x, y, v)

    # ---------------------------------------------------------------- fence.sc
    def _fence_sc_order(self) -> None:
        fences = [e for e in self.events if e.kind == "F" and e.sem == "sc"]
        self._fsc: dict[tuple[str, str], z3.BoolRef] = {}
        clock = {f.eid: self.int(f"fscclk[{f.eid}]") for f in fences}
        for f1, f2 in combinations(fences, 2):
            if not self.ms(f1, f2):
                continue
            both = conj(self.executed(f1.eid), self.executed(f2.eid))
            v = self.bool(f"fsc[{f1.eid}<{f2.eid}]")
            fwd, bwd = conj(both, v), conj(both, z3.Not(v))
            self._fsc[(f1.eid, f2.eid)] = fwd
            self._fsc[(f2.eid, f1.eid)] = bwd
            self.add(z3.Implies(fwd, clock[f1.eid] < clock[f2.eid]),
                     z3.Implies(bwd, clock[f2.eid] < clock[f1.eid]))
            self._edge(f1.eid, f2.eid, fwd)
            self._edge(f2.eid, f1.eid, bwd)

    def _barrier_sync(self) -> None:
        for (b1, b2), cond in self.bar_sync_edges().items():
            self._edge(b1, b2, cond)

    # -------------------------------------------------------- base causality
    def _base_causality(self) -> None:
        """``hb[s->x]`` for every memory event and fence ``s``: reachability
        along program order and synchronisation edges."""
        succ: dict[str, list[tuple[str, z3.BoolRef]]] = {e.eid: [] for e in self.events}
        for t in self.program.threads:
            evs = self.thread_events(t)
            for a, b in zip(evs, evs[1:]):
                succ[a.eid].append((b.eid, z3.BoolVal(True)))
        for (a, b), cs in self._edges.items():
            succ[a].append((b, disj(cs)))
        has_dynamic = bool(self._edges)
        sources = [e for e in self.events if e.is_memory or (e.kind == "F" and e.sem == "sc")]
        for s in sources:
            row: dict[str, z3.BoolRef] = {}
            for x in self.events:
                if self.po(s, x):
                    row[x.eid] = z3.BoolVal(True)
                elif has_dynamic:
                    row[x.eid] = self.bool(f"hb[{s.eid}->{x.eid}]")
                else:
                    row[x.eid] = z3.BoolVal(False)
            for a, outs in succ.items():
                for b, cond in outs:
                    if z3.is_true(row[b]) or z3.is_false(row[b]):
                        continue
                    start = cond if a == s.eid else conj(row[a], cond)
                    if not z3.is_false(start):
                        self.add(z3.Implies(start, row[b]))
            for x, v in row.items():
                self._hb[(s.eid, x)] = v

    def hb(self, a: str, b: str) -> z3.BoolRef:
        """Base causality order."""
        return self._hb.get((a, b), z3.BoolVal(False))

    def cause(self, a: str, b: str) -> z3.BoolRef:
        """Causality order ``hb | obs;hb`` (memory endpoints; same virtual address
        for the generic proxy)."""
        if a.startswith(INIT_PREFIX) or b.startswith(INIT_PREFIX):
            return z3.BoolVal(False)
        ea, eb = self.ev[a], self.ev[b]
        if ea.is_memory and eb.is_memory and not self.same_address(a, b):
            return z3.BoolVal(False)
        parts = [self.hb(a, b)]
        if ea.is_write:
            for z in self.reads_of(ea.loc):  # type: ignore[arg-type]
                if z != a and (a, z) in self._obs:
                    parts.append(conj(self._obs[(a, z)], self.hb(z, b)))
        return disj(parts)

    # ------------------------------------------------------------------ axioms
    def _axiom_coherence(self) -> None:
        for loc in self.locations:
            for a, b in permutations(self.writes_to(loc, with_init=False), 2):
                c = self.cause(a, b)
                if not z3.is_false(c):
                    self.add(z3.Implies(conj(self.writes(a), self.writes(b), c), self.co(a, b)))
        for (f1, f2), order in self._fsc.items():
            c = self.cause(f1, f2)
            if not z3.is_false(c):
                both = conj(self.executed(f1), self.executed(f2))
                self.add(z3.Implies(conj(both, c), order))

    def _axiom_atomicity(self) -> None:
        for a in self.mem:
            if a.kind != "RMW":
                continue
            for w in self.writes_to(a.loc, with_init=False):  # type: ignore[arg-type]
                if w != a.eid and self.ms_eid(a.eid, w):
                    self.add(z3.Not(z3.And(self.fr(a.eid, w), self.co(w, a.eid))))

    def _axiom_no_thin_air(self) -> None:
        clk = {e.eid: self.int(f"nta[{e.eid}]") for e in self.events}
        for r in self.mem:
            if not r.is_read:
                continue
            for w, v in self.rf_vars(r.eid).items():
                if not w.startswith(INIT_PREFIX):
                    self.add(z3.Implies(v, clk[w] < clk[r.eid]))
        for e in self.events:
            for d in sorted(self.program.deps_of(e)):
                self.add(z3.Implies(conj(self.executed(d), self.executed(e.eid)), clk[d] < clk[e.eid]))

    def _axiom_sc_per_location(self) -> None:
        clk = {e.eid: self.int(f"spl[{e.eid}]") for e in self.mem}

        def before(a: str, b: str, cond: z3.BoolRef) -> None:
            if not z3.is_false(cond):
                self.add(z3.Implies(cond, clk[a] < clk[b]))

        for loc in self.locations:
            ws = self.writes_to(loc, with_init=False)
            rs = self.reads_of(loc)
            for r in rs:
                for w in ws:
                    if w == r or not self.ms_eid(w, r):
                        continue
                    before(w, r, self.rf(w, r))
                    before(r, w, self.fr(r, w))
            for a, b in permutations(ws, 2):
                if self.ms_eid(a, b):
                    before(a, b, self.co(a, b))
        for t in self.program.threads:
            evs = [e for e in self.thread_events(t) if e.is_memory]
            for a, b in combinations(evs, 2):
                if a.loc == b.loc and a.virtual_loc == b.virtual_loc:
                    before(a.eid, b.eid, conj(self.executed(a.eid), self.executed(b.eid)))

    def _axiom_causality(self) -> None:
        for loc in self.locations:
            for r in self.reads_of(loc):
                for w in self.writes_to(loc, with_init=False):
                    if w == r:
                        # an RMW reads a write coherence-before its own write
                        self.add(z3.Not(z3.And(self._self_fr(r), self.cause(r, r))))
                        continue
                    c_rw = self.cause(r, w)
                    if not z3.is_false(c_rw):
                        self.add(z3.Not(z3.And(self.rf(w, r), c_rw)))
                    c_wr = self.cause(w, r)
                    if not z3.is_false(c_wr):
                        self.add(z3.Not(z3.And(self.fr(r, w), c_wr)))

    def _self_fr(self, a: str) -> z3.BoolRef:
        return disj(conj(v, self.co(w, a)) for w, v in self.rf_vars(a).items())

    # ------------------------------------------------------------- final values
    def _finals(self) -> None:
        for loc in self.locations:
            ws = self.writes_to(loc)
            sel = {w: self.bool(f"final[{loc}]={w}") for w in ws}
            self.add(z3.PbEq([(v, 1) for v in sel.values()], 1))
            fin = self.program.final_var(loc)
            for w, v in sel.items():
                maximal = [z3.Not(self.co(w, o)) for o in ws if o != w]
                self.add(z3.Implies(v, conj(self.writes(w), *maximal)),
                         z3.Implies(v, fin == self.written_value(w)))


class PTXModel:
    """PTX memory consistency model, generic proxy (PTX ISA; ASPLOS'19)."""

    name = "ptx"

    def encode(self, program: Program, solver: z3.Solver) -> PTXEncoding:
        return PTXEncoding(program, solver)
