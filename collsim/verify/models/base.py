"""What every memory model shares: values, reads-from, barriers, termination.

:class:`Encoding` turns a :class:`~collsim.verify.events.Program` into z3
constraints that every candidate execution satisfies, whatever the model:

* ``exec(e)``: the event's guard;
* read values: ``program.value_var(eid)``; written values from ``value`` or
  the RMW operation;
* reads-from: one Bool ``rf[w->r]`` per candidate write (``init:<loc>`` is the
  initial write); an executed read reads from exactly one write and takes its
  value;
* single-copy-atomic groups (``atomic_group``);
* barriers: completion and the ``bar_sync`` edges (see events.py);
* termination: every assumption holds and no thread is stuck at a barrier.

A model subclass adds coherence order, final values and its axioms.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import z3
from z3 import z3core

from collsim.verify.events import Event, Program, rmw_result

__all__ = ["INIT_PREFIX", "Encoding", "MemoryModel", "Witness", "init_eid", "conj", "disj", "implies", "negate",
           "fold", "to_z3"]

INIT_PREFIX = "init:"


def init_eid(loc: str) -> str:
    """The name of the initial write of ``loc``."""
    return INIT_PREFIX + loc


def fold(x: Any) -> Any:
    """``x`` as a Python bool when it is a constant, else the z3 term itself.

    Encodings pass *terms*: Python ``True``/``False`` or non-constant z3
    Bools. Folding constants in Python keeps formulas small and avoids the
    cost of z3 calls on trivially true or false parts.
    """
    if isinstance(x, bool):
        return x
    if z3.is_true(x):
        return True
    if z3.is_false(x):
        return False
    return x


# Boolean connectives built with the z3 C API directly: the Python wrappers
# re-check sorts on every call, which dominates encoding time on big programs.
def _nary(fn: Any, args: list[z3.BoolRef]) -> z3.BoolRef:
    ctx = args[0].ctx
    arr = (z3.Ast * len(args))()
    for i, a in enumerate(args):
        arr[i] = a.as_ast()
    return z3.BoolRef(fn(ctx.ref(), len(args), arr), ctx)


def _not(a: z3.BoolRef) -> z3.BoolRef:
    return z3.BoolRef(z3core.Z3_mk_not(a.ctx.ref(), a.as_ast()), a.ctx)


def _implies(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    return z3.BoolRef(z3core.Z3_mk_implies(a.ctx.ref(), a.as_ast(), b.as_ast()), a.ctx)


def conj(*xs: Any) -> Any:
    """``And`` of terms (Python bools fold away)."""
    out = []
    for x in xs:
        if x is True:
            continue
        if x is False:
            return False
        out.append(x)
    if not out:
        return True
    return out[0] if len(out) == 1 else _nary(z3core.Z3_mk_and, out)


def disj(xs: Iterable[Any]) -> Any:
    """``Or`` of terms (Python bools fold away)."""
    out = []
    for x in xs:
        if x is False:
            continue
        if x is True:
            return True
        out.append(x)
    if not out:
        return False
    return out[0] if len(out) == 1 else _nary(z3core.Z3_mk_or, out)


def implies(a: Any, b: Any) -> Any:
    """``Implies`` of terms."""
    if a is False or b is True:
        return True
    if a is True:
        return b
    if b is False:
        return _not(a)
    return _implies(a, b)


def negate(a: Any) -> Any:
    """``Not`` of a term."""
    if isinstance(a, bool):
        return not a
    return _not(a)


def to_z3(a: Any, ctx: z3.Context | None = None) -> z3.BoolRef:
    """A term as a z3 Bool: a Python bool becomes a constant of ``ctx`` (default: z3's main context)."""
    return z3.BoolVal(a, ctx) if isinstance(a, bool) else a


@dataclass
class Witness:
    """One execution, decoded from a z3 model for printing and inspection.

    Attributes
    ----------
    executed : list of str
        Eids of the events that ran.
    rf : dict read eid -> write eid
        Which write each executed read read from (``init:<loc>`` for the initial value).
    values : dict eid -> int
        Value returned by each executed read.
    written : dict eid -> int
        Value written by each executed write (RMWs that wrote).
    co : dict loc -> list of (eid, eid)
        Coherence-order pairs (immediate pairs only for a total order).
    co_order : dict loc -> list of str
        A linearisation of coherence order (init first).
    final : dict loc -> int
        Final value of each location.
    extra : dict name -> int
        Values of the caller's terms (registers, conditions), if asked.
    """

    executed: list[str]
    rf: dict[str, str]
    values: dict[str, int]
    written: dict[str, int]
    co: dict[str, list[tuple[str, str]]]
    co_order: dict[str, list[str]]
    final: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    threads: dict[str, list[str]] = field(default_factory=dict)

    def format(self) -> str:
        """Readable multi-line description of the execution."""
        lines = []
        for thread, eids in self.threads.items():
            lines.append(f"thread {thread}:")
            for eid in eids:
                if eid not in self.executed:
                    continue
                text = self.labels.get(eid, eid)
                parts = []
                if eid in self.values:
                    parts.append(f"reads {self.values[eid]} from {self.rf.get(eid, '?')}")
                if eid in self.written:
                    parts.append(f"writes {self.written[eid]}")
                tail = ("  -> " + "; ".join(parts)) if parts else ""
                lines.append(f"  {eid}: {text}{tail}")
        for loc, order in self.co_order.items():
            lines.append(f"co {loc}: " + " < ".join(order))
        if self.final:
            lines.append("final: " + ", ".join(f"{k}={v}" for k, v in self.final.items()))
        if self.extra:
            lines.append("values: " + ", ".join(f"{k}={v}" for k, v in self.extra.items()))
        return "\n".join(lines)


class Encoding:
    """Base encoding (see module docstring). Use a model's ``encode``.

    Public API (all models)
    -----------------------
    executed(eid) -> z3 Bool              the event runs
    writes(eid) -> z3 Bool                the event runs and writes
    read_value(eid) -> z3 term            value returned by a read / RMW
    written_value(eid) -> z3 term         value written by a W / RMW (or init:<loc>)
    rf_vars(read eid) -> {write eid: z3 Bool}   exactly one true when the read runs
    rf(w, r) -> z3 Bool
    co(a, b) -> z3 Bool                   a before b in coherence order (same loc)
    final_value(loc) -> z3 term
    writes_to(loc), reads_of(loc) -> list of eids
    bar_sync_edges() -> {(b1, b2): term}  barrier synchronisation
    decode(z3 model, extra) -> Witness

    The PTX encoding adds ``fr``, ``obs``, ``hb`` and ``cause`` (terms);
    the SC encoding adds ``position(eid)``.
    """

    model_name = "base"

    def __init__(self, program: Program, solver: z3.Solver) -> None:
        self.program = program
        self.solver = solver
        #: the context every term of this encoding is built in: the solver's, which must be the program's
        self.ctx = solver.ctx
        self.sort = program.sort
        self.events = list(program.events)
        self.ev = {e.eid: e for e in self.events}
        self.placement = program.placement
        self._written: dict[str, z3.ExprRef] = {}
        self._writes: dict[str, z3.BoolRef] = {}
        self._rf: dict[str, dict[str, z3.BoolRef]] = {}
        self._bar_sync: dict[tuple[str, str], z3.BoolRef] = {}
        self._bar_complete: dict[str, z3.BoolRef] = {}
        self.locations = program.locations
        self._build_common()

    # ---------------------------------------------------------------- helpers
    def add(self, *constraints: Any) -> None:
        """Assert terms (``True`` is skipped)."""
        for c in constraints:
            if c is True:
                continue
            self.solver.add(to_z3(c, self.ctx))

    def bool(self, name: str) -> z3.BoolRef:
        return z3.Bool(name, self.ctx)

    def int(self, name: str) -> z3.ArithRef:
        return z3.Int(name, self.ctx)

    def val(self, v: Any) -> z3.ExprRef:
        return self.program.const(v)

    def po(self, a: Event, b: Event) -> bool:
        """Static program order."""
        return a.thread == b.thread and a.po_index < b.po_index

    def same_thread(self, a: Event, b: Event) -> bool:
        return a.thread == b.thread

    def thread_events(self, thread: str) -> list[Event]:
        return [e for e in self.events if e.thread == thread]

    # ------------------------------------------------------------ public API
    def executed(self, eid: str) -> z3.BoolRef:
        """z3 Bool: the event runs (``init:<loc>`` always does)."""
        return to_z3(self._ex(eid), self.ctx)

    def writes(self, eid: str) -> z3.BoolRef:
        """z3 Bool: the event runs and writes (a failing ``cas`` does not)."""
        return to_z3(self._wr(eid), self.ctx)

    def read_value(self, eid: str) -> z3.ExprRef:
        """The value returned by read or RMW ``eid`` (``program.value_var(eid)``)."""
        return self.program.value_var(eid)

    def written_value(self, eid: str) -> z3.ExprRef:
        """The value written by write or RMW ``eid`` (or the initial value of ``init:<loc>``)."""
        return self._written[eid]

    def rf_vars(self, eid: str) -> dict[str, z3.BoolRef]:
        """``{write eid: rf[w->eid]}`` for read ``eid``: exactly one is true when it runs."""
        return self._rf[eid]

    def rf(self, w: str, r: str) -> z3.BoolRef:
        """z3 Bool: ``r`` reads from ``w`` (False when ``w`` cannot be read by ``r``)."""
        return to_z3(self._rf_of(w, r), self.ctx)

    def co(self, a: str, b: str) -> z3.BoolRef:
        """z3 Bool: write ``a`` precedes write ``b`` in coherence order (same location)."""
        return to_z3(self._co(a, b), self.ctx)

    def final_value(self, loc: str) -> z3.ExprRef:
        """The final value of ``loc`` (``program.final_var(loc)``)."""
        return self.program.final_var(loc)

    def writes_to(self, loc: str, *, with_init: bool = True) -> list[str]:
        """Eids of the writes (and RMWs) of ``loc``; ``init:<loc>`` first."""
        out = [init_eid(loc)] if with_init else []
        out += [e.eid for e in self.events if e.is_write and e.loc == loc]
        return out

    def reads_of(self, loc: str) -> list[str]:
        """Eids of the reads (and RMWs) of ``loc``."""
        return [e.eid for e in self.events if e.is_read and e.loc == loc]

    def loc_of(self, eid: str) -> str:
        if eid.startswith(INIT_PREFIX):
            return eid[len(INIT_PREFIX):]
        return self.ev[eid].loc  # type: ignore[return-value]

    # terms (Python bool or z3 Bool) for the encoders ---------------------------
    def _ex(self, eid: str) -> Any:
        if eid.startswith(INIT_PREFIX):
            return True
        return self._exec[eid]

    def _wr(self, eid: str) -> Any:
        return self._writes[eid]

    def _rf_of(self, w: str, r: str) -> Any:
        return self._rf.get(r, {}).get(w, False)

    def _co(self, a: str, b: str) -> Any:  # pragma: no cover - defined by each model
        raise NotImplementedError

    # ---------------------------------------------------------- construction
    def _build_common(self) -> None:
        p = self.program
        self._exec = {e.eid: fold(e.guard) for e in self.events}
        for loc in self.locations:
            self._written[init_eid(loc)] = self.val(p.init_value(loc))
            self._writes[init_eid(loc)] = True
        for e in self.events:
            if e.kind == "W":
                self._written[e.eid] = self.val(e.value)
                self._writes[e.eid] = self._ex(e.eid)
            elif e.kind == "RMW":
                old = self.read_value(e.eid)
                if callable(e.value):
                    out = e.value(old)
                    new, does = out if isinstance(out, tuple) else (out, True)
                    new, does = self.val(new), to_z3(does, self.ctx)
                else:
                    operand = self.val(e.operand if e.operand is not None else 0)
                    compare = self.val(e.compare) if e.compare is not None else None
                    new, does = rmw_result(e.rmw_op, old, operand, compare)  # type: ignore[arg-type]
                self._written[e.eid] = z3.simplify(new)
                self._writes[e.eid] = conj(self._ex(e.eid), fold(z3.simplify(does)))
        self._encode_rf()
        self._encode_atomic_groups()
        self._encode_barriers()
        for a in p.assumptions:
            self.add(a)

    def rf_candidates(self, r: Event) -> list[str]:
        """Writes ``r`` may read from: same location, not ``r``, not po-after ``r``."""
        out = []
        for w in self.writes_to(r.loc):  # type: ignore[arg-type]
            if w == r.eid:
                continue
            if not w.startswith(INIT_PREFIX):
                we = self.ev[w]
                if we.thread == r.thread and we.po_index > r.po_index:
                    continue
            out.append(w)
        return out

    def _encode_rf(self) -> None:
        for r in self.events:
            if not r.is_read:
                continue
            ex = self._ex(r.eid)
            choices = {}
            for w in self.rf_candidates(r):
                v = self.bool(f"rf[{w}->{r.eid}]")
                choices[w] = v
                self.add(implies(v, conj(ex, self._wr(w))),
                         implies(v, self.read_value(r.eid) == self.written_value(w)))
            self._rf[r.eid] = choices
            vs = list(choices.values())
            self.add(implies(ex, z3.PbEq([(v, 1) for v in vs], 1, self.ctx)))
            self.add(implies(negate(ex), z3.And([z3.Not(v) for v in vs] + [
                self.read_value(r.eid) == self.val(0)], self.ctx)))

    def _encode_atomic_groups(self) -> None:
        wgroups: dict[str, list[Event]] = {}
        rgroups: dict[str, list[Event]] = {}
        for e in self.events:
            if e.atomic_group is None or not e.is_memory:
                continue
            if e.is_write:
                wgroups.setdefault(e.atomic_group, []).append(e)
            if e.is_read and e.returns_value:
                rgroups.setdefault(e.atomic_group, []).append(e)
        for rname, reads in rgroups.items():
            for wname, writes in wgroups.items():
                # reads of this read group that access a location the write group writes
                pairs = []
                for r in reads:
                    ws = [w for w in writes if w.loc == r.loc and w.eid != r.eid]
                    if ws:
                        pairs.append(disj(self._rf_of(w.eid, r.eid) for w in ws))
                if len(pairs) < 2:
                    continue
                for a, b in zip(pairs, pairs[1:]):
                    self.add(to_z3(a, self.ctx) == to_z3(b, self.ctx))

    # barriers ----------------------------------------------------------------
    def _bar_group_key(self, e: Event) -> tuple[Any, ...]:
        pl = self.placement[e.thread]
        return (pl.gpu, pl.cta, str(e.bar_instance))

    def _same_bar_id(self, a: Event, b: Event) -> Any:
        if a.bar_id is None or b.bar_id is None:
            return True
        return fold(z3.simplify(self.val(a.bar_id) == self.val(b.bar_id)))

    def _encode_barriers(self) -> None:
        groups: dict[tuple[Any, ...], list[Event]] = {}
        for e in self.events:
            if e.kind == "BAR":
                groups.setdefault(self._bar_group_key(e), []).append(e)
        for members in groups.values():
            syncsel: dict[str, z3.BoolRef] = {}
            for b in members:
                if b.bar_quorum is None:
                    syncsel[b.eid] = self._ex(b.eid)
                else:
                    syncsel[b.eid] = self.bool(f"barsync[{b.eid}]")
            for b in members:
                ex = self._ex(b.eid)
                same = {o.eid: self._same_bar_id(b, o) for o in members}
                if b.bar_quorum is None:
                    complete = conj(*[disj([self._ex(o.eid), negate(same[o.eid])])
                                      for o in members])
                else:
                    q = self.val(b.bar_quorum)
                    one, zero = self.val(1), self.val(0)
                    reached = sum(z3.If(to_z3(conj(self._ex(o.eid), same[o.eid]), self.ctx), one, zero)
                                  for o in members)
                    synced = sum(z3.If(to_z3(conj(syncsel[o.eid], same[o.eid]), self.ctx), one, zero)
                                 for o in members)
                    has_q = self.bool(f"barquorum[{b.eid}]")
                    ge = (lambda x, y: z3.UGE(x, y)) if z3.is_bv(q) else (lambda x, y: x >= y)
                    self.add(z3.Implies(ge(reached, q), has_q), has_q == ge(synced, q),
                             implies(syncsel[b.eid], ex))
                    complete = has_q
                self._bar_complete[b.eid] = complete
                # termination: a thread that reaches bar.sync gets through it
                # (bar.arrive does not wait)
                if not b.bar_arrive:
                    self.add(implies(ex, complete))
            for b1 in members:
                for b2 in members:
                    if b1.eid == b2.eid or b1.thread == b2.thread or b2.bar_arrive:
                        continue
                    s = conj(syncsel[b1.eid], self._ex(b2.eid), self._same_bar_id(b1, b2))
                    if s is not False:
                        self._bar_sync[(b1.eid, b2.eid)] = s

    def bar_sync_edges(self) -> dict[tuple[str, str], Any]:
        """``(b1, b2) -> cond``: barrier ``b1`` synchronises with ``b2`` when ``cond``."""
        return dict(self._bar_sync)

    # ---------------------------------------------------------------- decoding
    def co_order_pairs(self, m: z3.ModelRef, loc: str) -> list[tuple[str, str]]:
        ws = [w for w in self.writes_to(loc) if self.holds(m, self._wr(w))]
        out = []
        for a in ws:
            for b in ws:
                if a != b and self.holds(m, self._co(a, b)):
                    out.append((a, b))
        return out

    @staticmethod
    def holds(m: z3.ModelRef, t: Any) -> bool:
        """Whether term ``t`` is true in model ``m``."""
        if isinstance(t, bool):
            return t
        return z3.is_true(m.eval(t, model_completion=True))

    def _num(self, m: z3.ModelRef, t: z3.ExprRef) -> int:
        v = m.eval(t, model_completion=True)
        if z3.is_bv_value(v):
            return v.as_signed_long()
        return v.as_long()

    def decode(self, m: z3.ModelRef, extra: dict[str, Any] | None = None) -> Witness:
        """The execution described by model ``m``."""
        executed = [e.eid for e in self.events if self.holds(m, self._ex(e.eid))]
        rf: dict[str, str] = {}
        values: dict[str, int] = {}
        written: dict[str, int] = {}
        for e in self.events:
            if e.eid not in executed:
                continue
            if e.is_read:
                values[e.eid] = self._num(m, self.read_value(e.eid))
                for w, v in self._rf[e.eid].items():
                    if self.holds(m, v):
                        rf[e.eid] = w
            if e.is_write and self.holds(m, self._wr(e.eid)):
                written[e.eid] = self._num(m, self.written_value(e.eid))
        co: dict[str, list[tuple[str, str]]] = {}
        co_order: dict[str, list[str]] = {}
        final: dict[str, int] = {}
        for loc in self.locations:
            pairs = self.co_order_pairs(m, loc)
            ws = [w for w in self.writes_to(loc) if self.holds(m, self._wr(w))]
            co[loc] = pairs
            co_order[loc] = _linearise(ws, pairs)
            final[loc] = self._num(m, self.final_value(loc))
        ext = {}
        for k, t in (extra or {}).items():
            if isinstance(t, z3.BoolRef):
                ext[k] = z3.is_true(m.eval(t, model_completion=True))
            elif isinstance(t, z3.ExprRef):
                ext[k] = self._num(m, t)
            else:
                ext[k] = t
        threads: dict[str, list[str]] = {}
        for e in self.events:
            threads.setdefault(e.thread, []).append(e.eid)
        return Witness(executed=executed, rf=rf, values=values, written=written, co=co,
                       co_order=co_order, final=final, extra=ext,
                       labels={e.eid: e.text() for e in self.events}, threads=threads)


class MemoryModel:
    """A memory model: its ``name`` and the :class:`Encoding` subclass that states its axioms.

    ``encode(program, solver)`` adds to ``solver`` the constraints whose
    models are exactly the executions of ``program`` the model allows.
    """

    name: str = "base"
    encoding: type[Encoding] = Encoding

    def encode(self, program: Program, solver: z3.Solver) -> Encoding:
        return self.encoding(program, solver)


def _linearise(nodes: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    """A topological order of ``nodes`` under ``pairs`` (stable, init first)."""
    succ = {n: set() for n in nodes}
    indeg = {n: 0 for n in nodes}
    for a, b in pairs:
        if a in succ and b in indeg and b not in succ[a]:
            succ[a].add(b)
            indeg[b] += 1
    order = []
    ready = [n for n in nodes if indeg[n] == 0]
    while ready:
        n = ready.pop(0)
        order.append(n)
        for s in sorted(succ[n], key=nodes.index):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    order += [n for n in nodes if n not in order]
    return order
