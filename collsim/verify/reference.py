"""The reference execution: one fair SC run of a verifier instance, the "intended" behaviour.

:func:`reference_run` executes the events once under a fair round-robin
schedule with whole-instruction atomicity (a valid SC execution); its
reads-from and coherence order are the intended ones the properties
(:mod:`collsim.verify.properties`) compare against.
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from collsim.verify.events import read_vars_in, value_const
from collsim.verify.instance import InstrKind, Lin, VerifyInstance

__all__ = ["RefRun", "reference_run"]


@dataclass
class RefRun:
    """One fair SC execution: the "intended" behaviour the properties compare against."""

    completed: bool
    rf: dict[int, int | None]  # read event -> write event (None: the initial value)
    read_values: dict[int, int]
    co: dict[tuple, list[int | None]]  # location -> writes in coherence order (None first: init)
    stuck: list[tuple[int, str]]  # (thread, instruction label) where the run stopped
    steps: int = 0

    def position(self, loc: tuple, write: int | None) -> int:
        order = self.co.get(loc, [None])
        return order.index(write) if write in order else -1


def _runs(low: VerifyInstance, ev, values: dict[int, int]) -> bool:
    """Whether a guarded event runs: its guard (over values this thread read earlier) under those values."""
    pairs = []
    for name in read_vars_in(ev.guard):
        read = low.event(name)
        pairs.append((value_const(name, z3.IntSort(ev.guard.ctx)),
                      z3.IntVal(values[read.id], ev.guard.ctx)))
    return z3.is_true(z3.simplify(z3.substitute(ev.guard, *pairs) if pairs else ev.guard))


def reference_run(low: VerifyInstance, max_rounds: int = 100000) -> RefRun:
    """Execute ``low`` under a round-robin schedule, one whole instruction at a time."""
    env: dict[tuple, int] = dict(low.input_env())
    memory: dict[tuple, tuple[int, int | None]] = {loc: (v, None) for loc, v in low.init.items()}
    co: dict[tuple, list[int | None]] = {loc: [None] for loc in low.init}
    rf: dict[int, int | None] = {}
    values: dict[int, int] = {}
    pcs = [0] * len(low.threads)
    # the threads that take part in each barrier (a host proxy thread or a bulk copy's engine never does)
    members_of: dict = {}
    for thread in low.threads:
        for key in {i.events[0].bar for i in thread if i.kind == InstrKind.BARRIER}:
            members_of[key] = members_of.get(key, 0) + 1
    # barrier arrivals: (rank, k) -> set of threads waiting
    steps = 0
    rounds = 0
    while True:
        progressed = False
        for t, thread in enumerate(low.threads):
            if pcs[t] >= len(thread):
                continue
            instr = thread[pcs[t]]
            if instr.kind == InstrKind.BARRIER:
                key = instr.events[0].bar
                waiting = [u for u, th in enumerate(low.threads) if pcs[u] < len(th)
                           and th[pcs[u]].kind == InstrKind.BARRIER and th[pcs[u]].events[0].bar == key]
                members = members_of[key]
                if len(waiting) == members:
                    for u in waiting:
                        pcs[u] += 1
                    progressed = True
                continue
            if instr.kind == InstrKind.POLL:
                target = instr.predicate.value
                want = target.evaluate(env) if isinstance(target, Lin) else None  # a loaded wait target
                ok = all(instr.predicate.holds(memory[e.loc][0], want) for e in instr.events if e.polled)
                if not ok:
                    continue
            for ev in instr.events:
                if ev.guard is not None and not _runs(low, ev, values):
                    continue  # an op of a branch not taken
                if ev.is_read:
                    value, source = memory[ev.loc]
                    rf[ev.id] = source
                    values[ev.id] = value
                    env[("rd", ev.id)] = value
            for ev in instr.events:
                if ev.guard is not None and not _runs(low, ev, values):
                    continue
                if ev.is_write and ev.rmw_op == "cas":  # a failed CAS writes nothing
                    if env[("rd", ev.id)] == ev.compare.evaluate(env):
                        memory[ev.loc] = (ev.operand.evaluate(env), ev.id)
                        co[ev.loc].append(ev.id)
                elif ev.is_write:
                    memory[ev.loc] = (ev.value.evaluate(env), ev.id)
                    co[ev.loc].append(ev.id)
            pcs[t] += 1
            steps += 1
            progressed = True
        rounds += 1
        if all(pcs[t] >= len(th) for t, th in enumerate(low.threads)):
            return RefRun(True, rf, values, co, [], steps)
        if not progressed or rounds > max_rounds:
            stuck = [(t, th[pcs[t]].label) for t, th in enumerate(low.threads) if pcs[t] < len(th)]
            return RefRun(False, rf, values, co, stuck, steps)
