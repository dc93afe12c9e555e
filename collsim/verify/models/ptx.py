"""The PTX memory consistency model (generic proxy), encoded for z3.

Source: PTX ISA, chapter 8 "Memory Consistency Model" (operation types §8.4,
scope §8.5, proxies §8.6, morally strong operations §8.7, release and
acquire patterns §8.8, ordering of memory operations §8.9, axioms §8.10,
special cases §8.11), and Lustig, Sahasrabuddhe, Giroux, "A Formal Analysis
of the NVIDIA PTX Memory Consistency Model", ASPLOS 2019.

Relations, as the ISA defines them
----------------------------------
morally strong (ms, §8.7)
    related in program order, or both strong with scopes that include each
    other's thread; and, for two memory operations, the same location
    reached through the same virtual address.
observation (§8.9.2)
    ``W obs R`` if ``R`` reads from ``W`` and they are ms, or ``W obs Z obs R``
    for an atomic operation ``Z``.
release pattern on M (§8.8)
    a release write ``W``; a release operation on M followed in program
    order by a strong write ``W`` on M; a release fence (``release``,
    ``acq_rel`` or ``sc``) followed by a strong write ``W``.
acquire pattern on M (§8.8)
    an acquire read ``R``; a strong read ``R`` on M followed by an acquire
    operation on M; a strong read ``R`` followed by an acquire fence. The
    read of a ``red`` is not a read here (§8.11.1). ``fence.sc`` counts as a
    release and an acquire fence: the PTX atomics ABI maps a seq_cst store to
    ``fence.sc; st.relaxed``, which must release.
synchronizes (§8.9.4)
    a release pattern ``X..W`` with an acquire pattern ``R..Y`` when ``W obs R``
    and ``X``, ``Y`` are ms; ms ``fence.sc`` in Fence-SC order; barriers.
causality (§8.9.5)
    base causality (po and synchronizes, transitively; a strategy of
    :mod:`~collsim.verify.models.causality`) or ``obs; base causality``,
    between accesses to the same virtual address; between two virtual
    aliases of one location only paths through a ``fence.proxy.alias``.
coherence (§8.9.6)
    a strict partial order on the writes of one location; it orders every
    ms pair and contains causality between writes.

Axioms (§8.10)
--------------
Coherence, Fence-SC, Atomicity (an RMW and an ms write: not the RMW reading
before the write while following it in coherence order), No-Thin-Air (in
:mod:`~collsim.verify.models.encoding`), Sequential Consistency per
Location (ms communication plus program order between accesses to one
location is acyclic), Causality (``(rf | fr); causality`` is irreflexive).
"""
from __future__ import annotations

from typing import Any

import z3

from collsim.verify.events import Event, EventKind
from collsim.verify.models.build import and_, eq, implies, is_false, is_true, le, lt, not_, or_
from collsim.verify.models.encoding import Encoding
from collsim.verify.terms import Lin

__all__ = ["PTXEncoding", "constant_increment"]

_RELEASE = ("release", "acq_rel", "sc")
_ACQUIRE = ("acquire", "acq_rel", "sc")
_MEMORY_FENCES = ("acquire", "release", "acq_rel", "sc")


class PTXEncoding(Encoding):
    """The PTX model's executions of a program (see the module docstring)."""

    model = "ptx"

    # -- static relations -------------------------------------------------------------
    def ms(self, a: Event, b: Event) -> bool:
        """Morally strong (static: scopes, placement and addresses are fixed)."""
        cache = self.__dict__.setdefault("_ms", {})
        key = (a.id, b.id)
        if key not in cache:
            cache[key] = self._morally_strong(a, b)
        return cache[key]

    def _morally_strong(self, a: Event, b: Event) -> bool:
        if a.id == b.id or not _ordering(a) or not _ordering(b):
            return False
        related = a.thread == b.thread or (
            a.strong and b.strong and self.includes(a, b.thread) and self.includes(b, a.thread))
        if not related:
            return False
        if a.is_mem and b.is_mem:
            # complete overlap: the same location, and the same element access where sizes differ (mixed size)
            return a.loc == b.loc and a.virtual_loc == b.virtual_loc and a.span == b.span
        return True

    def must_order(self, a: Event, b: Event) -> bool:
        return self.ms(a, b)

    # -- per-location axioms ---------------------------------------------------------------
    def _build_location_axioms(self) -> None:
        """Sequential consistency per location (integer clocks ``loc_<e>``) and RMW atomicity."""
        program = self.program
        clk = {e.id: z3.Int(f"loc_{e.id}", ctx=self.ctx) for e in self.ev if e.is_mem}
        for events in program.locs.values():
            for a in events:
                for b in events:
                    if self.po(a, b) and a.virtual_loc == b.virtual_loc:
                        self.cons.append(lt(clk[a.id], clk[b.id]))
        for r in self.ev:
            if not r.is_read:
                continue
            for w in self.cands[r.id]:
                if w is not None and self.ms(w, r):
                    self.cons.append(implies(self.rf_lit(w, r), lt(clk[w.id], clk[r.id])))
            for cond, w in self.fr_pairs(r):
                if self.ms(r, w):
                    self.cons.append(implies(cond, lt(clk[r.id], clk[w.id])))
        for loc in program.locs:
            ws = program.writes_at(loc)
            for a in ws:
                for b in ws:
                    if a.id != b.id and self.ms(a, b):
                        self.cons.append(implies(and_(self.co_lit(a, b), self.wr(a), self.wr(b)),
                                                    lt(clk[a.id], clk[b.id])))
        # Atomicity (8.10.3): an RMW and an ms write W: not both reading from before W and following W in
        # coherence order. An RMW is co-after an ms write it reads (SC per location, stated for the solver).
        for z in self.ev:
            if z.kind is not EventKind.RMW:
                continue
            for w in self.cands[z.id]:
                if w is not None and self.ms(w, z):
                    self.cons.append(implies(self.rf_lit(w, z), self.co_lit(w, z)))
            for other in program.writes_at(z.loc):
                if other.id == z.id or not self.ms(other, z):
                    continue
                f = self.fr(z, other)
                if not is_false(f):
                    self.cons.append(not_(and_(self.wr(other), f, self.co_lit(other, z))))
        self._counter_sums()

    def _counter_sums(self) -> None:
        """Implied: at a counter, a read returns the initial value plus the increments coherence-before its source.

        A counter is a location (integer values) written only by RMWs that add a constant to what they read,
        pairwise morally strong, with coherence positions (``co_pos``). In every model of the constraints
        above, the executed RMWs of such a location form one chain: each reads, by Atomicity, from its
        immediate executed coherence predecessor (the first from the initial value), so the k-th writes
        ``init + c_1 + ... + c_k``; and a read returns what its source wrote. So an executed read returns
        ``init`` plus the constants of the executed RMWs at or before its source's position, which is what is
        stated here. Nothing is excluded (every model satisfies it); it hands the solver the count of
        arrivals a poll ``counter >= K`` implies as one linear constraint, instead of a chain of reads-from
        choices to search through (the counter barriers of the atomic and multicast protocols).
        """
        if self.program.value_bits is not None:
            return  # modular values: the sum wraps
        for loc, events in self.program.locs.items():
            ws = self.program.writes_at(loc)
            if not ws or any(w.id not in self.co_pos for w in ws):
                continue
            incs = {w.id: constant_increment(w) for w in ws}
            if any(c is None for c in incs.values()) or not isinstance(self.program.init_value(loc), int):
                continue
            if not all(self.ms(a, b) for i, a in enumerate(ws) for b in ws[i + 1:]):
                continue
            for r in events:
                if not r.is_read or not self.cands[r.id]:
                    continue
                pos = self._read_pos(r)
                parts = [z3.If(and_(self.wr(a), self.co_pos[a.id] <= pos), self.term(incs[a.id]), self.term(0))
                         for a in ws if a.id != r.id]
                total = z3.Sum([self.term(self.program.init_value(loc))] + parts)
                self.cons.append(implies(self.exe(r), self.rval(r) == total))

    # -- observation and synchronisation -------------------------------------------------------
    def _build_sync(self) -> None:
        self._build_observation()
        self._release_acquire_edges()
        self._fence_sc_edges()

    def _build_observation(self) -> None:
        """observation = (ms & rf) | observation; rmw; observation: through chains of atomic operations.

        Where every two atomic operations of a location are morally strong,
        no two of them read from one write (Atomicity), so a chain of
        observations is a path: each write gets a chain (the write that
        starts it) and a position on it, and ``W obs R`` is "``R`` reads, ms,
        from a write on ``W``'s chain at or after ``W``": two integers per
        event instead of a Bool per (write, read) pair. Elsewhere the
        definition is encoded as it reads, with implications.
        """
        self._obs: dict[tuple[int, int], Any] = {}
        self._chain_obs: dict[tuple[int, int], Any] = {}
        self._chains: dict[Any, tuple[dict[int, Any], dict[int, Any], dict[int, Any], dict[int, Any]]] = {}
        for loc, events in self.program.locs.items():
            rmws = [e for e in events if e.kind is EventKind.RMW]
            if not rmws:
                continue
            if all(self.ms(a, b) for i, a in enumerate(rmws) for b in rmws[i + 1:]):
                self._chain_observation(loc, events)
                continue
            writes = [e for e in events if e.is_write]
            reads = [e for e in events if e.is_read]
            pairs = []
            for w in writes:
                for r in reads:
                    if w.id == r.id:
                        continue
                    if self.ms(w, r) or any(self.ms(z, r) for z in rmws if z.id not in (w.id, r.id)):
                        self._obs[(w.id, r.id)] = z3.Bool(f"obs_{w.id}_{r.id}", ctx=self.ctx)
                        pairs.append((w, r))
            for w, r in pairs:
                o = self._obs[(w.id, r.id)]
                if self.ms(w, r):
                    self.cons.append(implies(self.rf_lit(w, r), o))
                for z in rmws:
                    if z.id in (w.id, r.id) or (w.id, z.id) not in self._obs or not self.ms(z, r):
                        continue
                    self.cons.append(implies(and_(self._obs[(w.id, z.id)], self.rf_lit(z, r)), o))

    def _chain_observation(self, loc: Any, events: list[Event]) -> None:
        ctx = self.ctx
        chain: dict[int, Any] = {}
        step: dict[int, Any] = {}
        for w in events:
            if not w.is_write:
                continue
            if w.kind is EventKind.RMW:
                chain[w.id] = z3.Int(f"chain_{w.id}", ctx=ctx)
                step[w.id] = z3.Int(f"step_{w.id}", ctx=ctx)
            else:
                chain[w.id] = z3.IntVal(w.id + 1, ctx=ctx)
                step[w.id] = z3.IntVal(0, ctx=ctx)
        seen_chain: dict[int, Any] = {}
        seen_step: dict[int, Any] = {}
        for r in events:
            if not r.is_read:
                continue
            sc = z3.Int(f"obschain_{r.id}", ctx=ctx)
            ss = z3.Int(f"obsstep_{r.id}", ctx=ctx)
            seen_chain[r.id], seen_step[r.id] = sc, ss
            for src in self.cands[r.id]:
                lit = self.rf_lit(src, r)
                if src is not None and self.ms(src, r):
                    self.cons.append(implies(lit, and_(eq(sc, chain[src.id]), eq(ss, step[src.id]))))
                    if r.kind is EventKind.RMW:
                        self.cons.append(implies(lit, and_(eq(chain[r.id], chain[src.id]),
                                                                step[r.id] == step[src.id] + 1)))
                else:
                    self.cons.append(implies(lit, sc == -1))
                    if r.kind is EventKind.RMW:
                        self.cons.append(implies(lit, and_(chain[r.id] == r.id + 1, step[r.id] == 0)))
        self._chains[loc] = (chain, step, seen_chain, seen_step)

    def obs(self, w: Event, r: Event) -> Any:
        """``w`` precedes ``r`` in observation order (a term)."""
        if w.id == r.id:
            return self.false()
        if (w.id, r.id) in self._obs:
            return self._obs[(w.id, r.id)]
        chains = self._chains.get(r.loc)
        if chains is not None and w.loc == r.loc and w.is_write:
            # built once per pair (the same term z3 would hash-cons anyway; building it is what costs)
            key = (w.id, r.id)
            cached = self._chain_obs.get(key)
            if cached is None:
                chain, step, seen_chain, seen_step = chains
                cached = and_(self.exe(r), eq(seen_chain[r.id], chain[w.id]), le(step[w.id], seen_step[r.id]))
                self._chain_obs[key] = cached
            return cached
        if not self.ms(w, r):
            return self.false()
        return self.rf_lit(w, r)

    def release_sources(self, w: Event) -> list[Event]:
        """First events of the release patterns ending at strong write ``w``, without dominated ones.

        A source is dominated by a later one in the same thread whose scope is
        at least as wide: every acquire it is morally strong with, the later
        one is too, and it orders more.
        """
        thread = self.program.threads[w.thread]
        found = [w] if w.sem in _RELEASE else []
        for instr in thread[: w.instr]:
            for e in instr.events:
                if e.kind is EventKind.FENCE and e.sem in _RELEASE:
                    found.append(e)
                elif (e.is_write and e.strong and e.sem in _RELEASE and e.loc == w.loc
                      and e.virtual_loc == w.virtual_loc):
                    found.append(e)
        return [x for x in found if not any(y is not x and y.instr > x.instr and self.scope_at_least(y, x)
                                            for y in found)]

    def acquire_sinks(self, r: Event) -> list[Event]:
        """Last events of the acquire patterns starting at strong read ``r``, without dominated ones."""
        thread = self.program.threads[r.thread]
        found = [r] if r.sem in _ACQUIRE else []
        for instr in thread[r.instr + 1:]:
            for e in instr.events:
                if e.kind is EventKind.FENCE and e.sem in _ACQUIRE:
                    found.append(e)
                elif (e.is_read and e.returns_value and e.sem in _ACQUIRE and e.loc == r.loc
                      and e.virtual_loc == r.virtual_loc):
                    found.append(e)
        return [y for y in found if not any(x is not y and x.instr < y.instr and self.scope_at_least(x, y)
                                            for x in found)]

    def _release_acquire_edges(self) -> None:
        guarded = any(g is not None for g in self.guards.values())
        for loc, events in self.program.locs.items():
            writes = [e for e in events if e.is_write and e.strong]
            reads = [e for e in events if e.is_read and e.strong and e.returns_value]
            for w in writes:
                sources = self.release_sources(w)
                if not sources:
                    continue
                for r in reads:
                    if r.thread == w.thread or r.id == w.id:
                        continue
                    sinks = self.acquire_sinks(r)
                    pairs = [(x, y) for x in sources for y in sinks if x.id != y.id and self.ms(x, y)]
                    if not pairs:
                        continue
                    o = self.obs(w, r)
                    if is_false(o):
                        continue
                    for x, y in pairs:
                        cond = and_(self.exe(x), self.exe(y), o) if guarded else o
                        self.edge(x, y, cond)

    def _fence_sc_edges(self) -> None:
        fences = [e for e in self.ev if e.kind is EventKind.FENCE and e.sem == "sc"]
        self.sc_pos = {f.id: z3.Int(f"scpos_{f.id}", ctx=self.ctx) for f in fences}
        self._fsc: list[tuple[Event, Event, Any]] = []
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
                self.edge(a, b, and_(before, self.exe(a), self.exe(b)))
                self._fsc.append((a, b, before))

    # -- causality ---------------------------------------------------------------------------------
    def cause(self, a: Event, b: Event) -> Any:
        """``a`` precedes ``b`` in causality order (§8.9.5)."""
        if self.witnesses_only:
            return self.fresh("cause")
        cache = self.__dict__.setdefault("_cause", {})
        key = (a.id, b.id)
        if key in cache:
            return cache[key]
        if a.is_mem and b.is_mem and a.virtual_loc != b.virtual_loc:
            fences = [f for f in self.ev if f.kind is EventKind.FENCE and f.sem == "proxy_alias"]
            terms = [and_(self.hb(a, f), self.hb(f, b)) for f in fences]
        else:
            terms = [self.hb(a, b)]
            if a.is_write:
                readers_of = self.__dict__.setdefault("_readers", {})
                if a.id not in readers_of:
                    readers_of[a.id] = [z for z in self.program.reads_at(a.loc)
                                        if z.id != a.id and z.virtual_loc == a.virtual_loc]
                terms += self.causality.observed_then(a, b, readers_of[a.id])
        terms = [t for t in terms if not is_false(t)]
        cache[key] = or_(terms, self.ctx) if terms else self.false()
        return cache[key]

    def _build_causality_axioms(self) -> None:
        program = self.program
        # Fence-SC: Fence-SC order never contradicts causality
        for a, b, before in self._fsc:
            h = self.hb(a, b)
            if not is_false(h):
                self.cons.append(implies(and_(not_(before), self.exe(a), self.exe(b)), not_(h)))
        for loc in program.locs:
            ws = program.writes_at(loc)
            # Coherence: causality order between writes is coherence order
            for a in ws:
                for b in ws:
                    if a.id != b.id and _ordered_across(a, b):
                        c = self.cause(a, b)
                        if not is_false(c):
                            self.cons.append(implies(and_(c, self.wr(a), self.wr(b)), self.co_lit(a, b)))
            # Causality: irreflexive((rf | fr); cause)
            for r in program.reads_at(loc):
                for w in self.cands[r.id]:
                    if w is not None and _ordered_across(w, r):
                        c = self.cause(r, w)
                        if not is_false(c):
                            self.cons.append(implies(self.rf_lit(w, r), not_(c)))
                for cond, w in self.fr_pairs(r):
                    if _ordered_across(w, r):
                        c = self.cause(w, r)
                        if not is_false(c):
                            self.cons.append(implies(cond, not_(c)))
                if r.kind is EventKind.RMW:
                    # an RMW that reads a write coherence-before its own write is not caused by itself
                    c = self.cause(r, r)
                    if not is_false(c):
                        self.cons.append(implies(self.self_fr(r), not_(c)))


def _ordered_across(a: Event, b: Event) -> bool:
    """Whether the causality axioms must relate ``a`` and ``b`` (program order and SC per location already
    relate accesses of one thread through one virtual address)."""
    return a.thread != b.thread or a.virtual_loc != b.virtual_loc


def constant_increment(w: Event) -> int | None:
    """The constant an RMW adds to the value it reads (``None``: not such an RMW)."""
    if w.kind is not EventKind.RMW or w.writes_if is not None or w.guard is not None:
        return None
    v = w.value
    if v is None:
        if w.rmw_op == "add" and isinstance(w.operand, int) and w.compare is None:
            return w.operand
        return None
    if isinstance(v, Lin) and v.terms == {("rd", w.id): 1}:
        return v.c
    return None


def _ordering(e: Event) -> bool:
    return e.is_mem or (e.kind is EventKind.FENCE and e.sem in _MEMORY_FENCES)

