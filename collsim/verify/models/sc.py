"""Sequential consistency over element events: one total order that respects program order.

Every event gets an integer clock; instructions of a thread are ordered (the
elements of one vector access stay unordered among themselves), a read reads
from the last write to its location before it, coherence order is clock
order, an RMW reads and writes at one point, and a barrier that
synchronises with another is placed no later than it. Fences are no-ops.
Base causality (for the data-race property) is program order and
synchronisation of morally strong accesses through reads-from and barriers.
"""
from __future__ import annotations

from typing import Any

import z3

from collsim.verify.events import Event, EventKind
from collsim.verify.models.ptx import PTXEncoding

__all__ = ["SCEncoding"]


class SCEncoding(PTXEncoding):
    """Sequential consistency (Lamport); shares moral strength and observation with PTX for its data races."""

    model = "sc"

    def must_order(self, a: Event, b: Event) -> bool:
        return True

    def _build_location_axioms(self) -> None:
        clk = {e.id: z3.Int(f"sc_{e.id}", ctx=self.ctx) for e in self.ev}
        self.sc_clock = clk
        for thread in self.program.threads:
            prev: list[Event] = []
            for instr in thread:
                for a in prev:
                    for b in instr.events:
                        self.cons.append(clk[a.id] < clk[b.id])
                prev = instr.events or prev
        for r in self.ev:
            if not r.is_read:
                continue
            for w in self.cands[r.id]:
                if w is not None:
                    self.cons.append(z3.Implies(self.rf_lit(w, r), clk[w.id] < clk[r.id]))
            for cond, w in self.fr_pairs(r):
                self.cons.append(z3.Implies(cond, clk[r.id] < clk[w.id]))
        for loc in self.program.locs:
            ws = self.program.writes_at(loc)
            for a in ws:
                for b in ws:
                    if a.id != b.id:
                        self.cons.append(z3.Implies(z3.And(self.co_lit(a, b), self.wr(a), self.wr(b)),
                                                    clk[a.id] < clk[b.id]))
        for z in self.ev:
            if z.kind is not EventKind.RMW:
                continue
            ws = self.program.writes_at(z.loc)
            for w in self.cands[z.id]:
                lit = self.rf_lit(w, z)
                if w is not None:
                    self.cons.append(z3.Implies(lit, self.co_lit(w, z)))
                for other in ws:
                    if other.id == z.id or (w is not None and other.id == w.id):
                        continue
                    self.cons.append(z3.Implies(z3.And(lit, self.wr(other)),
                                                z3.Not(z3.And(self.co_lit(w, other), self.co_lit(other, z)))))

    def _build_sync(self) -> None:
        self._build_observation()
        self._fsc = []
        for r in self.ev:
            if not (r.is_read and r.strong):
                continue
            for w in self.cands[r.id]:
                if w is not None and w.strong and w.thread != r.thread:
                    self.edge(w, r, self.obs(w, r))

    def _build_causality(self) -> None:
        super()._build_causality()
        for a, b, cond in self.bar_edges:
            self.cons.append(z3.Implies(cond, self.sc_clock[a.id] <= self.sc_clock[b.id]))

    def cause(self, a: Event, b: Event) -> Any:
        """Base causality, and observation; po-loc: a strong write observed by a read orders the same thread's
        later accesses of that element after it (SC is SC-per-location too; the clocks of a vector access alone
        miss it when the write's instruction has other elements)."""
        if self.witnesses_only:
            return self.fresh("cause")
        terms = [self.hb(a, b)]
        if a.is_write and a.strong and b.is_mem and b.loc == a.loc:
            for z in self.program.reads_at(a.loc):
                if z.thread == b.thread and z.instr < b.instr and z.id != a.id:
                    terms.append(self.obs(a, z))
        terms = [t for t in terms if not z3.is_false(t)]
        return z3.Or(terms, self.ctx) if len(terms) > 1 else (terms[0] if terms else self.false())

    def _build_causality_axioms(self) -> None:
        """SC's clock order is the whole model: no causality axioms."""
