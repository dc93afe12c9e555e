"""Two encodings of base causality order, one model: chosen by option, as Dat3M chooses encodings.

Base causality order (PTX ISA §8.9.5) is the transitive closure of program
order and the model's synchronisation edges (release/acquire patterns,
Fence-SC order, barriers), each present under a condition. A model states
its axioms over :meth:`hb` and ``x observed by z, z hb y``
(:meth:`observed_then`); a strategy decides how those are encoded. Both use
base causality only on the "forbidden" side of the axioms and properties (as
premises), so a least solution is exact and both encode it with lower bounds
the solver never needs to exceed.

``vector-clock`` (:class:`VectorClocks`, the default)
    One integer per other thread at each event a synchronisation edge ends
    at: how many leading instructions of that thread precede it. An event
    sees the join of the edge targets before it in its thread. Size: edges x
    threads; what keeps a whole node's protocol to seconds.
``relational`` (:class:`Relational`)
    Reachability over the edge graph, one Bool per (edge source, edge
    target): the direct transcription of the ISA's definition, quadratic in
    the edges; the reference the vector clocks are tested against.

Program order relates instructions, not the events of one instruction: the
elements of a vector access are unordered (PTX ISA §8.2.4), so a sibling
element of a synchronising access is not ordered by it.
"""
from __future__ import annotations

import weakref
from typing import Any

import z3

from collsim.errors import InputError
from collsim.verify.events import Event
from collsim.verify.models.build import and_, ge, implies, is_false, lt, not_, or_

__all__ = ["CAUSALITY", "VectorClocks", "Relational", "strategy"]


def _constant(v: z3.IntNumRef) -> int:
    """The value of an integer numeral: ``as_long`` without the sort check z3py makes first (C calls and wrappers)."""
    return int(v.as_string())


class VectorClocks:
    """Base causality order as vector clocks at synchronisation targets (module doc)."""

    name = "vector-clock"

    def __init__(self, enc: Any, edges: list[tuple[Event, Event, Any]]) -> None:
        # A proxy, not a reference: no cycle, so the encoding's z3 terms are freed when it is, not whenever the
        # garbage collector runs (z3 reuses the ids of freed terms, and term ids steer its search).
        self.enc = weakref.proxy(enc)
        ctx = enc.ctx
        program = enc.program
        T = enc.n_threads
        targets = {b.id for _, b, _ in edges}
        self.V: dict[int, list[Any]] = {}
        self.J_before: list[list[Any]] = []
        zero = [z3.IntVal(0, ctx=ctx)] * T
        for t, thread in enumerate(program.threads):
            prev = zero
            befores = []
            for instr in thread:
                befores.append(prev)
                sinks = [e for e in instr.events if e.id in targets]
                if sinks:
                    join = [None if u == t else z3.Int(f"J_{t}_{instr.index}_{u}", ctx=ctx) for u in range(T)]
                    for e in sinks:
                        vec = [None if u == t else z3.Int(f"V_{e.id}_{u}", ctx=ctx) for u in range(T)]
                        self.V[e.id] = vec
                        for u in range(T):
                            if u != t:
                                enc.cons.append(ge(vec[u], prev[u]))
                                enc.cons.append(ge(join[u], vec[u]))
                    for u in range(T):
                        if u != t:
                            enc.cons.append(ge(join[u], prev[u]))
                    prev = join
            self.J_before.append(befores)
        self._first_obs: dict[tuple[int, int], Any] = {}
        for a, b, cond in edges:
            vec = self.V[b.id]
            for u in range(T):
                if u != b.thread:
                    enc.cons.append(implies(cond, ge(vec[u], self.v_out(a, u))))

    def v_in(self, e: Event, u: int) -> Any:
        """How many leading instructions of thread ``u`` precede ``e`` in base causality (an int term)."""
        if e.id in self.V:
            return self.V[e.id][u]
        return self.J_before[e.thread][e.instr][u]

    def v_out(self, a: Event, u: int) -> Any:
        """What a synchronisation from ``a`` passes on about thread ``u``."""
        if u == a.thread:
            whole = self.enc.program.threads[a.thread][a.instr].single_element
            return z3.IntVal(a.instr + 1 if whole else a.instr, ctx=self.enc.ctx)
        return self.v_in(a, u)

    def hb(self, x: Event, y: Event) -> Any:
        if x.thread == y.thread:
            return self.enc.true() if x.instr < y.instr else self.enc.false()
        v = self.v_in(y, x.thread)
        if isinstance(v, z3.IntNumRef):  # a constant (z3.is_int_value, without its four C calls)
            return self.enc.true() if x.instr < _constant(v) else self.enc.false()
        return lt(z3.IntVal(x.instr, ctx=self.enc.ctx), v)

    def _first_observer(self, x: Event, u: int, readers: list[Event]) -> Any:
        """An int no larger than the index of any read in thread ``u`` that observes write ``x``."""
        key = (x.id, u)
        if key not in self._first_obs:
            enc = self.enc
            m = z3.Int(f"fobs_{x.id}_{u}", ctx=enc.ctx)
            self._first_obs[key] = m
            mine = [r for r in readers if r.thread == u]
            enc.cons.append(m >= 0)
            for r in mine:
                o = enc.obs(x, r)
                if not is_false(o):
                    enc.cons.append(implies(o, m <= r.instr))
            if not mine:
                enc.cons.append(m == 10 ** 6)
        return self._first_obs[key]

    def observed_then(self, x: Event, y: Event, readers: list[Event]) -> list[Any]:
        """Terms whose disjunction means: some read ``z`` of ``readers`` observes ``x`` and ``z`` hb ``y``."""
        terms = []
        reading = {r.thread for r in readers}
        for u in range(self.enc.n_threads):
            if u == y.thread or u == x.thread or u not in reading:
                continue
            v = self.v_in(y, u)
            if isinstance(v, z3.IntNumRef) and _constant(v) <= 0:
                continue
            terms.append(lt(self._first_observer(x, u, readers), v))
        for z in readers:
            if z.thread == y.thread and z.instr < y.instr and z.id != x.id:
                terms.append(self.enc.obs(x, z))
        return terms


class Relational:
    """Base causality order as reachability over the synchronisation edges (module doc).

    Reachability from an event only depends on the first edge source at or
    after it in its thread ("origin"), and reachability of an event only on
    the last edge targets before it ("entries"), so Bools ``hb[o->b]`` exist
    for origins and entries only.
    """

    name = "relational"

    def __init__(self, enc: Any, edges: list[tuple[Event, Event, Any]]) -> None:
        self.enc = weakref.proxy(enc)  # no cycle (see VectorClocks)
        ctx = enc.ctx
        self.origins: dict[int, list[Event]] = {}
        self.entries: dict[int, list[Event]] = {}
        srcs = {a.id: a for a, _, _ in edges}
        dsts = {b.id: b for _, b, _ in edges}
        for e in sorted(srcs.values(), key=lambda e: (e.instr, e.id)):
            self.origins.setdefault(e.thread, []).append(e)
        for e in sorted(dsts.values(), key=lambda e: (e.instr, e.id)):
            self.entries.setdefault(e.thread, []).append(e)
        entries = [e for es in self.entries.values() for e in es]
        self.reach: dict[int, dict[int, Any]] = {}
        for o in srcs.values():
            self.reach[o.id] = {b.id: (z3.BoolVal(True, ctx=ctx) if enc.po(o, b)
                                       else z3.Bool(f"hb_{o.id}_{b.id}", ctx=ctx)) for b in entries}
        for o_id, row in self.reach.items():
            o = srcs[o_id]
            for a, b, cond in edges:
                src = True if (a.id == o.id or enc.po(o, a)) else self._row_at(row, a)
                if src is False:
                    continue
                premise = cond if src is True else and_(src, cond)
                enc.cons.append(implies(premise, row[b.id]))
            for es in self.entries.values():
                for p in es:
                    later = [q for q in es if q.instr > p.instr]
                    if later:
                        first = later[0].instr
                        for q in later:
                            if q.instr == first:
                                enc.cons.append(implies(row[p.id], row[q.id]))

    def _row_at(self, row: dict[int, Any], x: Event) -> Any:
        """Reachability of ``x`` in ``row``: that of the entries at or before it (not its siblings)."""
        found = [e for e in self.entries.get(x.thread, ()) if e.id == x.id or e.instr < x.instr]
        if not found:
            return False
        last = found[-1].instr
        terms = [row[e.id] for e in found if e.instr == last or e.id == x.id]
        return terms[0] if len(terms) == 1 else or_(terms)

    def _origin(self, x: Event) -> Event | None:
        for o in self.origins.get(x.thread, ()):
            if o.id == x.id or o.instr > x.instr:
                return o
        return None

    def hb(self, x: Event, y: Event) -> Any:
        ctx = self.enc.ctx
        if x.thread == y.thread and x.instr < y.instr:
            return z3.BoolVal(True, ctx=ctx)
        origin = self._origin(x)
        if origin is None:
            return z3.BoolVal(False, ctx=ctx)
        r = self._row_at(self.reach[origin.id], y)
        return z3.BoolVal(False, ctx=ctx) if r is False else r

    def observed_then(self, x: Event, y: Event, readers: list[Event]) -> list[Any]:
        terms = []
        for z in readers:
            if z.id == x.id or z.thread == x.thread:
                continue
            o = self.enc.obs(x, z)
            if is_false(o):
                continue
            terms.append(and_(o, self.hb(z, y)))
        return terms


#: name -> strategy class
CAUSALITY: dict[str, type] = {VectorClocks.name: VectorClocks, Relational.name: Relational}


def strategy(name: Any) -> type:
    """The causality strategy called ``name`` (or the class itself)."""
    if isinstance(name, type):
        return name
    try:
        return CAUSALITY[name]
    except KeyError:
        raise InputError(f"unknown causality encoding '{name}'", field="causality", choices=sorted(CAUSALITY)) from None
