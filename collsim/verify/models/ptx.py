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
    order by a strong write ``W`` on M; or a release fence ``X`` (``release``,
    ``acq_rel`` or ``sc``) followed by a strong write ``W``.
acquire pattern on M
    an acquire read ``R``; or a strong read ``R`` on M followed by an acquire
    read ``Y`` on M; or a strong read ``R`` followed by an acquire fence ``Y``
    (``acquire``, ``acq_rel`` or ``sc``). The read of a ``red`` is not a read
    here ("red; fence.acquire" is not an acquire pattern).
    ``fence.sc`` counts as a release and an acquire fence: the PTX atomics
    ABI maps a seq_cst store to ``fence.sc; st.relaxed``, which must release,
    and the ASPLOS'19 Alloy model makes FenceSC a kind of FenceAcqRel.
synchronises-with (sw)
    release pattern ``(X, W)``, acquire pattern ``(R, Y)``, ``W obs R`` and
    ``X ms Y``; also ``F1 -> F2`` when ms ``fence.sc`` operations are so
    ordered in Fence-SC order, and barrier synchronisation (events.py).
base causality (hb)
    transitive closure of program order and sw.
causality (cause)
    ``hb | obs;hb`` between accesses to the same virtual address (generic
    proxy); between two virtual aliases of one location only ``hb`` paths
    through a ``fence.proxy.alias`` count.
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
``obs[w->r]``, ``sw[x->y]``, ``fsc[f1<f2]``, ``hb[o->b]``, clocks
``nta[e]`` (No-Thin-Air), ``spl[e]`` (SC-per-Location), ``fscclk[f]``
(Fence-SC order). Base causality is reachability over program order and
synchronisation edges; variables ``hb[o->b]`` exist only from edge sources
``o`` to edge targets ``b``, every other pair maps onto them (see
:meth:`PTXEncoding.hb`). ``obs``, ``sw`` and ``hb`` appear only on the
"forbidden" side of the axioms, so they are encoded with implications from
their definitions (a least fixpoint the solver never needs to exceed).
Coherence order is a strict partial order: the solver may order any two
writes, must order ms pairs, and must follow causality. The final value of a
location is that of a co-maximal write (more than one can be maximal when
racing weak writes are left unordered).
"""
from __future__ import annotations

from itertools import combinations, permutations
from typing import Any

import z3

from collsim.verify.events import Event, Program
from collsim.verify.models.base import INIT_PREFIX, Encoding, MemoryModel, conj, disj, implies, negate, to_z3

__all__ = ["PTXModel", "PTXEncoding"]

_RELEASE_SEMS = ("release", "acq_rel", "sc")
_ACQUIRE_SEMS = ("acquire", "acq_rel", "sc")
#: ``fence.sc`` is also a release and an acquire fence: the PTX atomics ABI
#: maps a seq_cst store to ``fence.sc; st.relaxed`` (which must release), and
#: the ASPLOS'19 model declares FenceSC a subset of FenceAcqRel.
_MEMORY_FENCES = ("acquire", "release", "acq_rel", "sc")


class PTXEncoding(Encoding):
    model_name = "ptx"

    def __init__(self, program: Program, solver: z3.Solver) -> None:
        super().__init__(program, solver)
        self.mem = [e for e in self.events if e.is_memory]
        self._ms: dict[tuple[str, str], bool] = {}
        self._edges: dict[tuple[str, str], list[Any]] = {}
        self._co_vars: dict[tuple[str, str], z3.BoolRef] = {}
        self._fr: dict[tuple[str, str], Any] = {}
        self._obs: dict[tuple[str, str], z3.BoolRef] = {}
        self._fsc: dict[tuple[str, str], Any] = {}
        self._reach: dict[str, dict[str, Any]] = {}
        self._cause: dict[tuple[str, str], Any] = {}
        self._coherence_order()
        self._from_reads()
        self._observation()
        self._release_acquire_sync()
        self._fence_sc_order()
        self._barrier_sync()
        self._base_causality()
        self._axiom_coherence()
        self._axiom_fence_sc()
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
        key = (a.eid, b.eid)
        if key not in self._ms:
            self._ms[key] = self._morally_strong(a, b)
        return self._ms[key]

    def _morally_strong(self, a: Event, b: Event) -> bool:
        if a.eid == b.eid or not self._ordering_op(a) or not self._ordering_op(b):
            return False
        related = a.thread == b.thread or (
            a.is_strong and b.is_strong and self.includes(a, b) and self.includes(b, a))
        if not related:
            return False
        if a.is_memory and b.is_memory:
            return a.loc == b.loc and a.virtual_loc == b.virtual_loc
        return True

    @staticmethod
    def _ordering_op(e: Event) -> bool:
        return e.is_memory or (e.kind == "F" and e.sem in _MEMORY_FENCES)

    def ms_eid(self, a: str, b: str) -> bool:
        if a.startswith(INIT_PREFIX) or b.startswith(INIT_PREFIX):
            return False
        return self.ms(self.ev[a], self.ev[b])

    def same_address(self, a: str, b: str) -> bool:
        """Same location through the same virtual address."""
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

    def _edge(self, a: str, b: str, cond: Any) -> None:
        """A synchronisation edge of base causality, present when ``cond``."""
        if cond is not False:
            self._edges.setdefault((a, b), []).append(cond)

    # --------------------------------------------------------------- coherence
    def _co(self, a: str, b: str) -> Any:
        if a == b or b.startswith(INIT_PREFIX):
            return False
        if a.startswith(INIT_PREFIX):
            return self._wr(b)
        return self._co_vars[(a, b)]

    def _coherence_order(self) -> None:
        """``co[a<b]``: a strict partial order per location; ms writes are ordered."""
        for loc in self.locations:
            ws = self.writes_to(loc, with_init=False)
            for a, b in permutations(ws, 2):
                self._co_vars[(a, b)] = self.bool(f"co[{a}<{b}]")
            for a, b in permutations(ws, 2):
                self.add(implies(self._co_vars[(a, b)], conj(self._wr(a), self._wr(b))))
            for a, b in combinations(ws, 2):
                self.add(negate_and(self._co(a, b), self._co(b, a)))
                if self.ms_eid(a, b):
                    self.add(implies(conj(self._wr(a), self._wr(b)),
                                     disj([self._co(a, b), self._co(b, a)])))
            for a, b, c in permutations(ws, 3):
                self.add(implies(conj(self._co(a, b), self._co(b, c)), self._co(a, c)))

    def fr(self, r: str, w: str) -> Any:
        """``r`` reads from a write coherence-before ``w`` (``r != w``)."""
        return self._fr.get((r, w), False)

    def _from_reads(self) -> None:
        for r in self.mem:
            if not r.is_read:
                continue
            for w in self.writes_to(r.loc, with_init=False):  # type: ignore[arg-type]
                if w == r.eid:
                    continue
                d = disj(conj(v, self._co(src, w)) for src, v in self.rf_vars(r.eid).items() if src != w)
                if d is False:
                    continue
                var = self.bool(f"fr[{r.eid}->{w}]")
                self.add(var == to_z3(d, self.ctx))
                self._fr[(r.eid, w)] = var

    # ------------------------------------------------------------- observation
    def obs(self, w: str, r: str) -> Any:
        return self._obs.get((w, r), False)

    def _ms_rf(self, w: str, r: str) -> Any:
        return self._rf_of(w, r) if self.ms_eid(w, r) else False

    def _observation(self) -> None:
        """``obs[w->r]`` (implied by its definition; only used where it forbids)."""
        for loc in self.locations:
            ws = self.writes_to(loc, with_init=False)
            rs = self.reads_of(loc)
            atomics = [z for z in rs if self.ev[z].kind == "RMW"]
            pairs = []
            for w in ws:
                for r in rs:
                    if r == w:
                        continue
                    direct = self.ms_eid(w, r)
                    chained = any(self.ms_eid(z, r) for z in atomics if z not in (w, r))
                    if direct or chained:
                        self._obs[(w, r)] = self.bool(f"obs[{w}->{r}]")
                        pairs.append((w, r))
            for w, r in pairs:
                v = self._obs[(w, r)]
                self.add(implies(self._ms_rf(w, r), v))
                for z in atomics:
                    if z in (w, r) or (w, z) not in self._obs:
                        continue
                    step = self._ms_rf(z, r)
                    if step is not False:
                        self.add(implies(conj(self._obs[(w, z)], step), v))

    # ---------------------------------------------------------------- patterns
    def release_patterns(self) -> list[tuple[Event, Event]]:
        """``(first, write)``: the pattern starts at ``first``; ``write`` is observed."""
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
        """``(read, last)``: ``read`` observes; the pattern ends at ``last``."""
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
        """``sw[x->y]`` for a release pattern starting at x and an acquire pattern ending at y."""
        rels = self.release_patterns()
        acqs = self.acquire_patterns()
        conds: dict[tuple[str, str], list[Any]] = {}
        for x, w in rels:
            for r, y in acqs:
                if w.loc != r.loc or w.eid == r.eid or x.eid == y.eid or not self.ms(x, y):
                    continue
                o = self.obs(w.eid, r.eid)
                if o is False:
                    continue
                c = conj(self._ex(x.eid), self._wr(w.eid), self._ex(r.eid),
                         self._ex(y.eid), o)
                conds.setdefault((x.eid, y.eid), []).append(c)
        for (x, y), cs in conds.items():
            v = self.bool(f"sw[{x}->{y}]")
            self.add(implies(disj(cs), v))
            self._edge(x, y, v)

    # ---------------------------------------------------------------- fence.sc
    def _fence_sc_order(self) -> None:
        """``fsc[f1<f2]``: a total order on each ms pair of executed fence.sc."""
        fences = [e for e in self.events if e.kind == "F" and e.sem == "sc"]
        clock = {f.eid: self.int(f"fscclk[{f.eid}]") for f in fences}
        for f1, f2 in combinations(fences, 2):
            if not self.ms(f1, f2):
                continue
            both = conj(self._ex(f1.eid), self._ex(f2.eid))
            v = self.bool(f"fsc[{f1.eid}<{f2.eid}]")
            fwd, bwd = conj(both, v), conj(both, negate(v))
            self._fsc[(f1.eid, f2.eid)] = fwd
            self._fsc[(f2.eid, f1.eid)] = bwd
            self.add(implies(fwd, clock[f1.eid] < clock[f2.eid]),
                     implies(bwd, clock[f2.eid] < clock[f1.eid]))
            self._edge(f1.eid, f2.eid, fwd)
            self._edge(f2.eid, f1.eid, bwd)

    def _barrier_sync(self) -> None:
        for (b1, b2), cond in self.bar_sync_edges().items():
            self._edge(b1, b2, cond)

    # -------------------------------------------------------- base causality
    def _base_causality(self) -> None:
        """Reachability along program order and synchronisation edges.

        Base causality from an event ``s`` only depends on the first edge
        source ("origin") at or after ``s`` in its thread, and reachability of
        an event ``x`` only on the last edge target ("entry") at or before
        ``x`` in its thread. So variables ``hb[o->b]`` exist for origins ``o``
        and entries ``b`` only; :meth:`hb` maps any pair onto them.
        """
        edges = [(self.ev[a], self.ev[b], disj(cs)) for (a, b), cs in self._edges.items()]
        origin_ids = {a.eid for a, _, _ in edges}
        entry_ids = {b.eid for _, b, _ in edges}
        self._origins_of: dict[str, list[Event]] = {}
        self._entries_of: dict[str, list[Event]] = {}
        for e in self.events:
            if e.eid in origin_ids:
                self._origins_of.setdefault(e.thread, []).append(e)
            if e.eid in entry_ids:
                self._entries_of.setdefault(e.thread, []).append(e)
        entries = [e for es in self._entries_of.values() for e in es]
        for o in (e for es in self._origins_of.values() for e in es):
            row: dict[str, Any] = {}
            self._reach[o.eid] = row
            for b in entries:
                row[b.eid] = True if self.po(o, b) else self.bool(f"hb[{o.eid}->{b.eid}]")
        for o_id, row in self._reach.items():
            o = self.ev[o_id]
            for a, b, cond in edges:
                src = True if (a.eid == o_id or self.po(o, a)) else self._row_at(row, a)
                self.add(implies(conj(src, cond), row[b.eid]))
            for es in self._entries_of.values():
                for p1, p2 in zip(es, es[1:]):
                    self.add(implies(row[p1.eid], row[p2.eid]))

    def _row_at(self, row: dict[str, Any], x: Event) -> Any:
        """Reachability of ``x`` in ``row``: that of the last entry at or before ``x``."""
        last = None
        for e in self._entries_of.get(x.thread, ()):
            if e.po_index <= x.po_index:
                last = e
            else:
                break
        return False if last is None else row[last.eid]

    def hb(self, a: str, b: str) -> Any:
        """Base causality order (a term)."""
        ea, eb = self.ev[a], self.ev[b]
        if self.po(ea, eb):
            return True
        origin = next((o for o in self._origins_of.get(ea.thread, ()) if o.po_index >= ea.po_index),
                      None)
        if origin is None:
            return False
        return self._row_at(self._reach[origin.eid], eb)

    def cause(self, a: str, b: str) -> Any:
        """Causality order between memory events: ``hb | obs;hb``, kept when both reach
        the location through the same virtual address, or through an alias
        proxy fence on the way."""
        if a.startswith(INIT_PREFIX) or b.startswith(INIT_PREFIX):
            return False
        key = (a, b)
        if key in self._cause:
            return self._cause[key]
        ea, eb = self.ev[a], self.ev[b]
        if ea.is_memory and eb.is_memory and not self.same_address(a, b):
            parts = [conj(self.hb(a, f.eid), self.hb(f.eid, b)) for f in self.events
                     if f.kind == "F" and f.sem == "proxy_alias"]
        else:
            parts = [self.hb(a, b)]
            if ea.is_write:
                for z in self.reads_of(ea.loc):  # type: ignore[arg-type]
                    if z != a and (a, z) in self._obs:
                        parts.append(conj(self._obs[(a, z)], self.hb(z, b)))
        self._cause[key] = disj(parts)
        return self._cause[key]

    # ------------------------------------------------------------------ axioms
    def _axiom_coherence(self) -> None:
        """Coherence: writes ordered by causality are ordered by coherence."""
        for loc in self.locations:
            for a, b in permutations(self.writes_to(loc, with_init=False), 2):
                c = self.cause(a, b)
                if c is not False:
                    self.add(implies(conj(self._wr(a), self._wr(b), c), self._co(a, b)))

    def _axiom_fence_sc(self) -> None:
        """Fence-SC: Fence-SC order does not contradict causality."""
        for (f1, f2), order in self._fsc.items():
            c = self.hb(f1, f2)
            if c is not False:
                both = conj(self._ex(f1), self._ex(f2))
                self.add(implies(conj(both, c), order))

    def _axiom_atomicity(self) -> None:
        """Atomicity: no ms write lands between an RMW's read and its write."""
        for a in self.mem:
            if a.kind != "RMW":
                continue
            for w in self.writes_to(a.loc, with_init=False):  # type: ignore[arg-type]
                if w != a.eid and self.ms_eid(a.eid, w):
                    self.add(negate_and(self.fr(a.eid, w), self._co(w, a.eid)))

    def _axiom_no_thin_air(self) -> None:
        """No-Thin-Air: ``rf | dep`` is acyclic (integer clocks ``nta[e]``)."""
        clk = {e.eid: self.int(f"nta[{e.eid}]") for e in self.events}
        for r in self.mem:
            if not r.is_read:
                continue
            for w, v in self.rf_vars(r.eid).items():
                if not w.startswith(INIT_PREFIX):
                    self.add(implies(v, clk[w] < clk[r.eid]))
        for e in self.events:
            for d in sorted(self.program.deps_of(e)):
                self.add(implies(conj(self._ex(d), self._ex(e.eid)), clk[d] < clk[e.eid]))

    def _axiom_sc_per_location(self) -> None:
        """SC-per-Location: ms communication plus po-loc is acyclic (clocks ``spl[e]``)."""
        clk = {e.eid: self.int(f"spl[{e.eid}]") for e in self.mem}

        def before(a: str, b: str, cond: Any) -> None:
            self.add(implies(cond, clk[a] < clk[b]))

        for loc in self.locations:
            ws = self.writes_to(loc, with_init=False)
            for r in self.reads_of(loc):
                for w in ws:
                    if w == r or not self.ms_eid(w, r):
                        continue
                    before(w, r, self._rf_of(w, r))
                    before(r, w, self.fr(r, w))
            for a, b in permutations(ws, 2):
                if self.ms_eid(a, b):
                    before(a, b, self._co(a, b))
        for t in self.program.threads:
            evs = [e for e in self.thread_events(t) if e.is_memory]
            for a, b in combinations(evs, 2):
                if a.loc == b.loc and a.virtual_loc == b.virtual_loc:
                    before(a.eid, b.eid, conj(self._ex(a.eid), self._ex(b.eid)))

    def _axiom_causality(self) -> None:
        """Causality: ``(rf | fr); cause`` is irreflexive."""
        for loc in self.locations:
            for r in self.reads_of(loc):
                for w in self.writes_to(loc, with_init=False):
                    if w == r:
                        # an RMW that reads a write coherence-before its own write
                        self.add(negate_and(self._self_fr(r), self.cause(r, r)))
                        continue
                    self.add(negate_and(self._rf_of(w, r), self.cause(r, w)))
                    self.add(negate_and(self.fr(r, w), self.cause(w, r)))

    def _self_fr(self, a: str) -> Any:
        return disj(conj(v, self._co(w, a)) for w, v in self.rf_vars(a).items())

    # ------------------------------------------------------------- final values
    def _finals(self) -> None:
        """The final value of a location is that of a co-maximal write."""
        for loc in self.locations:
            ws = self.writes_to(loc)
            sel = {w: self.bool(f"final[{loc}]={w}") for w in ws}
            self.add(z3.PbEq([(v, 1) for v in sel.values()], 1, self.ctx))
            fin = self.program.final_var(loc)
            for w, v in sel.items():
                maximal = [negate_and(self._co(w, o)) for o in ws if o != w]
                self.add(implies(v, conj(self._wr(w), *maximal)),
                         implies(v, fin == self.written_value(w)))


def negate_and(*xs: Any) -> Any:
    """``Not(And(xs))`` of terms."""
    return negate(conj(*xs))


class PTXModel(MemoryModel):
    """PTX memory consistency model, generic proxy (PTX ISA; ASPLOS'19)."""

    name = "ptx"
    encoding = PTXEncoding
