"""Sequential consistency: one total order of all events that respects program order.

Every memory event gets an integer position ``pos[eid]``; positions of memory
events are distinct, program order is increasing position, and a read reads
the last write to its location placed before it (an RMW reads and writes at
one position, so it is atomic). Fences are no-ops. A barrier that
synchronises with another is placed no later than it, so what precedes the
first precedes what follows the second. Coherence order is position order;
the final value of a location is that of its last write.
"""
from __future__ import annotations

import z3

from collsim.verify.events import Program
from collsim.verify.models.base import INIT_PREFIX, Encoding, MemoryModel, conj, implies

__all__ = ["SCModel", "SCEncoding"]


class SCEncoding(Encoding):
    model_name = "sc"

    def __init__(self, program: Program, solver: z3.Solver) -> None:
        super().__init__(program, solver)
        self.pos = {e.eid: self.int(f"pos[{e.eid}]") for e in self.events}
        self._order()
        self._reads_latest()
        self._barriers()
        self._finals()

    def position(self, eid: str) -> z3.ArithRef:
        if eid.startswith(INIT_PREFIX):
            return z3.IntVal(-1, self.ctx)
        return self.pos[eid]

    def _order(self) -> None:
        for t in self.program.threads:
            evs = self.thread_events(t)
            for a, b in zip(evs, evs[1:]):
                self.add(self.pos[a.eid] < self.pos[b.eid])
        mem = [self.pos[e.eid] for e in self.events if e.is_memory]
        for e in self.events:
            self.add(self.pos[e.eid] >= 0)
        if len(mem) > 1:
            self.add(z3.Distinct(mem))

    def _reads_latest(self) -> None:
        for r in self.events:
            if not r.is_read:
                continue
            others = self.writes_to(r.loc, with_init=False)  # type: ignore[arg-type]
            for w, v in self.rf_vars(r.eid).items():
                later = [implies(self._wr(o), z3.Or(self.position(o) < self.position(w),
                                                       self.position(o) > self.pos[r.eid]))
                         for o in others if o != w and o != r.eid]
                self.add(implies(v, conj(self.position(w) < self.pos[r.eid], *later)))

    def _barriers(self) -> None:
        for (b1, b2), cond in self.bar_sync_edges().items():
            self.add(implies(cond, self.pos[b1] <= self.pos[b2]))

    def _co(self, a: str, b: str):
        if a == b or b.startswith(INIT_PREFIX):
            return False
        return conj(self._wr(a), self._wr(b), self.position(a) < self.position(b))

    def _finals(self) -> None:
        for loc in self.locations:
            ws = self.writes_to(loc)
            fin = self.program.final_var(loc)
            for w in ws:
                last = conj(self._wr(w), *[implies(self._wr(o), self.position(o) < self.position(w))
                                              for o in ws if o != w])
                self.add(implies(last, fin == self.written_value(w)))


class SCModel(MemoryModel):
    """Sequential consistency (Lamport)."""

    name = "sc"
    encoding = SCEncoding
