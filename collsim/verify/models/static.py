"""What the program alone says about reads-from: candidates no execution can use, found before solving.

Like Dat3M's relation analysis, this computes part of the model's relations
that hold in *every* execution (must-sets) from the program, and drops the
reads-from candidates they forbid, so the solver never meets them. Every
step is one of the ISA's axioms applied to edges known in advance.

Edges known before solving
--------------------------
* Dependencies: data dependencies, and control dependencies on the reads a
  thread waits on (every later event of the thread, and through a barrier
  every later event of the barrier's other threads).
* *Forced* reads-from of a poll (it can only leave its loop by reading one
  of the writes that satisfy its condition):

  - a flag: every candidate stores a constant and only one of them, or only
    writes of one thread from some write on, satisfy the condition (an
    epoch); the poll comes after that first write's dependencies and, when
    the flag's stores release and the poll acquires, synchronizes with
    everything before it;
  - a counter: every write is an ms atomic add of a positive constant, so
    each reads its immediate coherence predecessor (Atomicity, §8.10.3) and
    a value is the sum of a coherence prefix. If the adds that do not
    depend on the poll sum to exactly what it waits for, the prefix it reads
    is all of them: it observes every one (§8.9.2) and synchronizes with
    each release.
* Barriers of one rank's threads (a static instance, no id or count).

What they forbid
----------------
* No-Thin-Air (§8.10.4): if a read ``r`` precedes a write ``w`` along
  dependencies and forced reads-from, ``r`` cannot read from ``w``.
* Causality (§8.10.6): if ``r`` precedes ``w`` in base causality (program
  order and the forced synchronization), ``r`` cannot read from ``w``; if
  ``w`` precedes ``r``, ``r`` cannot read from a write coherence-before ``w``
  (an earlier write of ``w``'s thread to the same address, or the initial
  value).

A forced edge holds when its poll exits; every edge leaving a poll leads to
an event that only runs if it did, so the conclusions also hold in the hang
check's executions, where polls may be stuck. The poll's own read is the
exception: stuck, it may read any candidate, so under liveness its view
leaves out the synchronisation its exit would force. The analysis iterates (what
it drops can force more polls) and is skipped for programs with atomic
operations whose write does not depend on their read (``exch``: one node
per event would chain through it).

Guarded events (a ``When`` branch, a ``cas`` that may not write)
----------------------------------------------------------------
An event whose guard is not ``None`` (or a write that may not write,
``writes_if``) is *maybe absent*: its thread can pass it without it running.
Every other event runs whenever its thread gets to it, which is all the
arguments above use. So where guarded events exist:

* dependencies are kept whole: the encoding's No-Thin-Air clocks order
  every dependency and control edge whether or not its events run, so what
  they forbid the encoding forbids too;
* a poll forces nothing if one of its events is maybe absent (skipped, its
  thread goes on without having read an exiting write), nor a counter poll
  one of whose adds is;
* a forced synchronisation needs its release source to have run (the write
  the poll read, which did, or an unguarded event before it in its thread)
  and its acquire sink to run when the poll's thread gets there (the poll's
  read, or an unguarded event after it);
* a barrier with a maybe-absent use is no static synchronisation;
* a write is "known seen" by a read (Causality: the read cannot read from a
  write coherence-before it) only if it is not maybe absent: a write that
  precedes the read in static base causality has then run.

Dropping a candidate ``w`` of a read ``r`` because ``r`` precedes ``w``
needs nothing more: in an execution where one of them does not run, ``r``
does not read ``w`` anyway.
"""
from __future__ import annotations

from typing import Any

from collsim.verify.events import INDEPENDENT_RMW_OPS, Event, EventKind, InstrKind, Program
from collsim.verify.terms import Lin

__all__ = ["prune_candidates", "StaticOrder"]


class StaticOrder:
    """What :func:`prune_candidates` found: ``before(a, b)`` says ``a`` precedes ``b`` in base causality in
    every execution in which ``b`` runs (then, for two writes of one address, in coherence order too:
    Coherence, §8.10.1)."""

    def __init__(self, views: dict[int, list[int]] | None = None) -> None:
        self.views = views or {}

    def before(self, a: Event, b: Event) -> bool:
        if a.thread == b.thread:
            return a.instr < b.instr
        view = self.views.get(b.id)
        return view is not None and view[a.thread] > a.instr


def prune_candidates(enc: Any, rounds: int = 4) -> tuple[int, StaticOrder]:
    """Drop the candidates of ``enc.cands`` no execution can read from (module doc).

    Returns the number dropped and the static base causality found.
    """
    program: Program = enc.program
    # one node per event below: an RMW's write must depend on its read, as the encoding's No-Thin-Air clocks
    # say (an ``exch`` does not; an add, a ``cas``, an RMW whose value reads itself do)
    depends = getattr(enc, "_rmw_depends", {})
    if any(e.kind is EventKind.RMW and not depends.get(e.id, e.rmw_op not in INDEPENDENT_RMW_OPS)
           for e in program.events):
        return 0, StaticOrder()
    causal = getattr(enc, "release_sources", None) is not None and enc.model == "ptx"
    dropped = 0
    order = StaticOrder()
    for _ in range(rounds):
        analysis = _Analysis(enc, causal)
        now, order = analysis.prune()
        dropped += now
        if not now:
            break
    return dropped, order


class _Analysis:
    def __init__(self, enc: Any, causal: bool) -> None:
        self.enc = enc
        self.program: Program = enc.program
        self.cands: dict[int, list[Event | None]] = enc.cands
        self.n = len(self.program.events)
        self.succ: dict[int, set[int]] = {}
        self.frontier_of: dict[int, int] = {}
        self.next_node = self.n
        self.sync: list[tuple[Event, Event]] = []  # static synchronisation edges (source, sink)
        self.causal = causal
        self._dependencies()
        self.desc = self._descendants()
        for w, r, exact in self._forced_flags():
            if exact:
                self._edge(w.id, r.id)
            elif w.id in self.frontier_of:
                self._edge(self.frontier_of[w.id], r.id)
        self.desc = self._descendants()
        # a counter's forced prefix depends on what depends on its poll, which other counters' prefixes extend
        forced: set[int] = set()
        while True:
            new = [(observed, r) for observed, r in self._forced_counters() if r.id not in forced]
            if not new:
                break
            for observed, r in new:
                forced.add(r.id)
                for a in observed:
                    self._edge(a.id, r.id)
                self._sync_from(observed, r, every=True)
            self.desc = self._descendants()

    # -- the dependency graph ------------------------------------------------------------
    def _edge(self, a: int, b: int) -> None:
        self.succ.setdefault(a, set()).add(b)

    def _dependencies(self) -> None:
        program = self.program
        for e in program.events:
            for d in program.deps_of(e):
                self._edge(d, e.id)
        bar_frontier: dict[Any, int] = {}
        for t, thread in enumerate(program.threads):
            current: int | None = None
            for instr in thread:
                ctrl = program.ctrl_before(instr)
                if ctrl:
                    g = self._node()
                    for d in ctrl:
                        self._edge(d, g)
                    if current is not None:
                        self._edge(current, g)
                    current = g
                if current is not None:
                    for e in instr.events:
                        self._edge(current, e.id)
                        self.frontier_of[e.id] = current
                bars = [e for e in instr.events if e.kind is EventKind.BARRIER]
                if bars:
                    pl = program.placement[t]
                    key = (pl.gpu, pl.cta, repr(bars[0].bar))
                    if key not in bar_frontier:
                        bar_frontier[key] = self._node()
                    g = bar_frontier[key]
                    if current is not None:
                        self._edge(current, g)
                    current = g

    def _node(self) -> int:
        self.next_node += 1
        return self.next_node - 1

    def _descendants(self) -> dict[int, int]:
        """For each read, the bit set of the events that must come after it (rf plus dependencies)."""
        order = _topological(self.next_node, self.succ)
        if order is None:
            return {}
        n = self.n
        desc: dict[int, int] = {}
        for node in reversed(order):
            bits = 0
            for m in self.succ.get(node, ()):
                bits |= desc.get(m, 0) | ((1 << m) if m < n else 0)
            desc[node] = bits
        return {e.id: desc.get(e.id, 0) for e in self.program.events if e.is_read}

    # -- forced reads-from ------------------------------------------------------------------
    def _forced_flags(self) -> list[tuple[Event, Event, bool]]:
        out = []
        program = self.program
        for instr in program.instrs:
            if instr.kind is not InstrKind.POLL or instr.predicate is None or isinstance(instr.predicate.value, Lin):
                continue  # (a loaded wait target is no constant: nothing is forced)
            if any(maybe_absent(self.enc, e) for e in instr.events):
                continue  # a skipped poll's thread goes on without an exiting write
            for r in instr.events:
                if not r.polled:
                    continue
                if r.loc in self.enc.arbitrary_terms:
                    continue  # the initial value is any pattern: no write is known to be the one it exits on
                values = [(w, program.init_value(r.loc) if w is None else _constant(w)) for w in self.cands[r.id]]
                if any(v is None and w is not None for w, v in values):
                    continue
                exits = [w for w, v in values if bool(instr.predicate.holds(v))]
                if not exits or any(w is None for w in exits):
                    continue
                if len(exits) == 1:
                    out.append((exits[0], r, True))
                    self._sync_from(exits, r)
                elif len({(w.thread, w.virtual_loc) for w in exits}) == 1:
                    first = min(exits, key=lambda w: w.instr)
                    out.append((first, r, False))
                    self._sync_from(exits, r)
        return out

    def _forced_counters(self) -> list[tuple[list[Event], Event]]:
        out = []
        program, enc = self.program, self.enc
        for instr in program.instrs:
            if instr.kind is not InstrKind.POLL or instr.predicate is None:
                continue
            want = _threshold(instr.predicate)
            if want is None:
                continue
            for r in instr.events:
                if not r.polled:
                    continue
                if r.loc in enc.arbitrary_terms:
                    continue  # a counter that starts as any pattern reaches no known threshold
                adds = program.writes_at(r.loc)
                if maybe_absent(enc, r) or any(maybe_absent(enc, a) for a in adds):
                    continue
                steps = [_increment(a) for a in adds]
                if not adds or any(s is None or s <= 0 for s in steps):
                    continue
                if not all(enc.must_order(a, b) for i, a in enumerate(adds) for b in adds[i + 1:]):
                    continue
                mine = self.desc.get(r.id, 0)
                rest = [(a, s) for a, s in zip(adds, steps) if not (mine >> a.id) & 1]
                if sum(s for _, s in rest) + program.init_value(r.loc) != want:
                    continue
                observed = [a for a, _ in rest]
                if not all(enc.ms(a, r) for a in observed):
                    continue
                out.append((observed, r))
        return out

    def _sync_from(self, writes: list[Event], r: Event, every: bool = False) -> None:
        """Static synchronisation into ``r``'s acquire patterns: from each write's release pattern if ``every``
        write is observed, else from what all of the writes, whichever is read, release."""
        if not self.causal or not r.strong or not r.returns_value:
            return
        enc = self.enc
        sinks = enc.acquire_sinks(r)
        if not sinks:
            return
        for y in sinks:
            if y.id != r.id and maybe_absent(enc, y):
                continue  # it may not run where the poll's thread gets to it
            if every:
                for w in writes:
                    if not enc.ms(w, r):
                        continue
                    for x in enc.release_sources(w):
                        if x.id != y.id and enc.ms(x, y) and (x.id == w.id or not maybe_absent(enc, x)):
                            self.sync.append((x, y))
                continue
            # whichever write is read: the release that orders least
            best: list[Event] = []
            for w in writes:
                if not (w.strong and enc.ms(w, r)):
                    return
                options = [x for x in enc.release_sources(w) if x.id != y.id and enc.ms(x, y)
                           and (x.id == w.id or not maybe_absent(enc, x))]
                if not options:
                    return
                best.append(max(options, key=lambda x: x.instr))
            self.sync.append((min(best, key=lambda x: x.instr), y))

    # -- static base causality ---------------------------------------------------------------
    def _views(self) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        """Per event: how many leading instructions of each thread precede it in static base causality."""
        program = self.program
        T = len(program.threads)
        edges: list[tuple[Event, Event]] = list(self.sync)
        for groups in _barrier_groups(self.enc, program).values():
            for a in groups:
                for b in groups:
                    if a.thread != b.thread:
                        edges.append((a, b))
        into: dict[int, list[Event]] = {}
        for x, y in edges:
            into.setdefault(y.id, []).append(x)
        view: dict[int, list[int]] = {}
        before: dict[tuple[int, int], list[int]] = {}
        live = bool(getattr(self.enc, "live", False))
        changed = True
        while changed:
            changed = False
            for t, thread in enumerate(program.threads):
                current = [0] * T
                for instr in thread:
                    before[(t, instr.index)] = list(current)
                    after = list(current)
                    for e in instr.events:
                        mine = list(current)
                        for x in into.get(e.id, ()):
                            src = view.get(x.id, before.get((x.thread, x.instr), [0] * T))
                            count = x.instr + 1 if program.threads[x.thread][x.instr].single_element else x.instr
                            for u in range(T):
                                v = count if u == x.thread else src[u]
                                if v > mine[u]:
                                    mine[u] = v
                        # a poll that may be stuck (the hang check) reads anything; only what follows it runs
                        # after it exited, so its own read does not see the synchronisation its exit forces
                        seen = list(current) if live and e.polled else mine
                        if view.get(e.id) != seen:
                            view[e.id] = seen
                            changed = True
                        if e.id in into:
                            after = [max(a, b) for a, b in zip(after, mine)]
                    current = after
        return view, {k: v for k, v in before.items()}

    # -- pruning ----------------------------------------------------------------------------
    def prune(self) -> tuple[int, StaticOrder]:
        program = self.program
        view = None
        if self.causal and (self.sync or _barrier_groups(self.enc, program)):
            view, _ = self._views()
        order = StaticOrder(view)
        precedes = order.before

        dropped = 0
        for r_id, options in self.cands.items():
            r = program.events[r_id]
            mine = self.desc.get(r_id, 0)
            keep = []
            for w in options:
                if w is not None and ((mine >> w.id) & 1 or (
                        view is not None and w.virtual_loc == r.virtual_loc and precedes(r, w))):
                    continue
                keep.append(w)
            if view is not None:
                seen = [w for w in program.writes_at(r.loc) if w.id != r.id and w.virtual_loc == r.virtual_loc
                        and not maybe_absent(self.enc, w) and precedes(w, r)]
                if seen:
                    keep = [w for w in keep if not _hidden(w, seen, order)]
            if keep and len(keep) < len(options):
                dropped += len(options) - len(keep)
                self.cands[r_id] = keep
        return dropped, order


def _hidden(w: Event | None, seen: list[Event], order: StaticOrder) -> bool:
    """Whether ``w`` is coherence-before a write a read is known to see (Causality): the initial value, an
    earlier write of its thread to its address, or one that precedes it in base causality (Coherence)."""
    for s in seen:
        if w is None:
            return True
        if w.id != s.id and w.virtual_loc == s.virtual_loc and order.before(w, s):
            return True
    return False


def _barrier_groups(enc: Any, program: Program) -> dict[Any, list[Event]]:
    """Barriers every thread of a CTA uses once, in the same place: static synchronisation."""
    groups: dict[Any, list[Event]] = {}
    for e in program.events:
        if e.kind is EventKind.BARRIER:
            pl = program.placement[e.thread]
            groups.setdefault((pl.gpu, pl.cta, repr(e.bar)), []).append(e)
    out = {}
    for key, members in groups.items():
        if any(m.bar_id is not None or m.bar_quorum is not None or m.bar_arrive or maybe_absent(enc, m)
               for m in members):
            continue
        if len({m.thread for m in members}) != len(members):
            continue
        out[key] = members
    return out


def maybe_absent(enc: Any, e: Event) -> bool:
    """Whether ``e``'s thread can get past it without it running (a guard), or a write without writing."""
    if enc.guards.get(e.id) is not None or e.writes_if is not None:
        return True
    # a write whose writing has a condition of its own (a litmus ``cas``: ``wr`` is ``exe`` and the comparison)
    return e.is_write and enc.wr(e) is not enc.exe(e)


def _constant(w: Event) -> int | None:
    if w.kind is EventKind.WRITE:
        if isinstance(w.value, Lin) and w.value.is_const:
            return w.value.c
        if isinstance(w.value, int) and not isinstance(w.value, bool):
            return w.value
    return None


def _increment(w: Event) -> int | None:
    """The constant an atomic add adds (its value is its own read plus it), or None."""
    if w.kind is not EventKind.RMW or not isinstance(w.value, Lin):
        return None
    if w.value.terms != {("rd", w.id): 1}:
        return None
    return w.value.c


def _threshold(predicate: Any) -> int | None:
    """The value an ``AtLeast``/``Equals`` poll needs at least, if it is a constant."""
    name = type(predicate).__name__
    value = getattr(predicate, "value", None)
    if name in ("AtLeast", "Equals") and isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _topological(count: int, succ: dict[int, set[int]]) -> list[int] | None:
    """A topological order of the nodes, or None when the edges form a cycle (a program that cannot finish)."""
    indeg = [0] * count
    for bs in succ.values():
        for b in bs:
            indeg[b] += 1
    ready = [v for v in range(count) if indeg[v] == 0]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for m in succ.get(v, ()):
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    return order if len(order) == count else None

