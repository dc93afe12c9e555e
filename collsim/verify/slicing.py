"""Slicing an instance to the locations a query needs: fewer events, the same proofs.

A query asks whether some *candidate violation* (a read that sees a stale
value, two racing accesses, a stuck poll, ...) exists. The events at a data
location that no candidate touches, that no poll reads and whose values reach
nothing that is kept only add choices (reads-from, coherence, clocks) the
solver must make and then ignore. :func:`slice_instance` drops them.

Why a proof on the slice is a proof on the instance
----------------------------------------------------
Every location of the slice keeps *all* its events, and a kept event's value,
guard, address, control and wait target depend on kept reads only (the
closure below). Take an execution of the whole instance and forget the
dropped events: what is left satisfies every constraint of the slice's
encoding. The per-location constraints (reads-from, coherence, atomicity,
counter sums) see the same events; an atomic group loses members, which only
removes constraints; program order, barriers, fences and polls are those of
the instance (every instruction is kept, possibly with fewer events, so the
reference run's round-robin schedule is the same). The model's other axioms
(causality, No-Thin-Air, Fence-SC) and the properties use base causality only
on their forbidden side; the slice has fewer synchronisation edges (a release
pattern through a dropped location is gone), so its causality is contained in
the instance's, and whatever the instance forbids on it the slice forbids too
or allows. So every execution of the instance, restricted, is one of the
slice, and a candidate violation of the slice that no execution of the slice
has is one no execution of the instance has: ``unsat`` on the slice is
``unsat`` on the instance. The converse does not hold (the slice may lack an
ordering through a dropped location), so a violation or an unknown found on a
slice is asked again on the whole instance (:mod:`collsim.verify.verifier`).

What is always kept: every event without a location (fences, barriers), every
location of a buffer that is not data (flags, counters, host mailboxes),
every location a poll reads, and the locations of the seed events; then, to a
fixed point, the locations of every read a kept event depends on.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Hashable, Iterable

from collsim.verify.events import AtomicGroup, Event, Instr
from collsim.verify.instance import VerifyInstance
from collsim.verify.terms import Lin

__all__ = ["Slice", "slice_instance", "sliceable"]


@dataclass
class Slice:
    """A sliced instance and how its events relate to the instance's.

    ``instance`` is the slice; ``to_slice`` maps an event id of the instance to
    its id in the slice (kept events only); ``dropped`` counts the events left out.
    """

    instance: VerifyInstance
    to_slice: dict[int, int]
    dropped: int

    def describe(self, whole: VerifyInstance, seeded: bool = True) -> str:
        """Where a premise was found, e.g. ``on the instance sliced to 120 of 264 events ...``."""
        kept = len(self.instance.events)
        what = "its candidate violations, polls and synchronisation words" if seeded else \
            "its polls and synchronisation words"
        return (f"on the instance sliced to {kept} of {kept + self.dropped} events and {len(self.instance.locs)} of "
                f"{len(whole.locs)} locations (those {what} access)")


def sliceable(low: VerifyInstance) -> bool:
    """Whether :func:`slice_instance` applies: not to host proxies or bulk copies (whose completion mechanisms
    relate locations beyond the per-location constraints the argument above relies on)."""
    return not low.roles


def _reads_of(value: Any, low: VerifyInstance) -> set[int]:
    if isinstance(value, Lin):
        return value.reads()
    return set()


def _needs(low: VerifyInstance, e: Event) -> set[int]:
    """The reads ``e``'s existence or value depends on (values, guards, control, wait target)."""
    found = set(low.deps_of(e))
    instr = low.threads[e.thread][e.instr]
    found |= low.ctrl_before(instr)
    found |= set(instr.ctrl)
    if instr.predicate is not None:
        found |= _reads_of(getattr(instr.predicate, "value", None), low)
    return found


def _kept_locations(low: VerifyInstance, seeds: Iterable[int]) -> set[Hashable]:
    keep: set[Hashable] = set()
    for loc, events in low.locs.items():
        if any(e.role != "data" or e.poll is not None for e in events):  # a poll's words, polled or not
            keep.add(loc)
    for i in seeds:
        loc = low.events[i].loc
        if loc is not None:
            keep.add(loc)
    frontier = [e for e in low.events if e.loc is None or e.loc in keep]
    while frontier:
        grown: list[Event] = []
        for e in frontier:
            for r in _needs(low, e):
                loc = low.events[r].loc
                if loc is not None and loc not in keep:
                    keep.add(loc)
                    grown.extend(low.locs[loc])
        frontier = grown
    return keep


def _remap_lin(value: Any, ids: dict[int, int]) -> Any:
    if not isinstance(value, Lin) or not value.reads():
        return value
    out = copy.copy(value)  # keeps a subclass (a loaded wait target's text)
    out.terms = {(("rd", ids[k[1]]) if k[0] == "rd" else k): v for k, v in value.terms.items()}
    return out


def slice_instance(low: VerifyInstance, seeds: Iterable[int]) -> Slice:
    """``low`` without the events of data locations that neither ``seeds`` (event ids) nor anything kept needs.

    Parameters
    ----------
    low : VerifyInstance
    seeds : event ids
        Events whose locations must be kept (the candidate violations' reads and writes).

    Returns
    -------
    Slice
        Every instruction of ``low`` is kept (with the events it keeps), so thread positions and the
        reference run's schedule are unchanged; event ids are renumbered, names kept.
    """
    keep = _kept_locations(low, seeds)
    kept = [e for e in low.events if e.loc is None or e.loc in keep]
    ids = {e.id: n for n, e in enumerate(kept)}
    new_events: dict[int, Event] = {}
    for e in kept:
        new_events[e.id] = replace(
            e, id=ids[e.id], deps=frozenset(ids[d] for d in e.deps),
            value=_remap_lin(e.value, ids), operand=_remap_lin(e.operand, ids), compare=_remap_lin(e.compare, ids),
            bar_id=_remap_lin(e.bar_id, ids), bar_quorum=_remap_lin(e.bar_quorum, ids))
    threads: list[list[Instr]] = []
    for thread in low.threads:
        instrs = []
        for instr in thread:
            predicate = instr.predicate
            if predicate is not None and isinstance(getattr(predicate, "value", None), Lin):
                predicate = predicate.with_value(_remap_lin(predicate.value, ids))
            instrs.append(replace(instr, events=[new_events[e.id] for e in instr.events if e.id in new_events],
                                  ctrl=frozenset(ids[c] for c in instr.ctrl if c in ids), predicate=predicate,
                                  elements=len(instr.events) if instr.elements is None else instr.elements))
        threads.append(instrs)
    groups = []
    for g in low.groups:
        members = [new_events[m.id] for m in g.members if m.id in new_events]
        if len(members) >= 2:
            groups.append(AtomicGroup(g.id, g.kind, members, g.when))
    outputs = {k: (v if v is None or v.reads() <= set(ids) else None) for k, v in low.outputs.items()}
    outputs = {k: _remap_lin(v, ids) for k, v in outputs.items()}
    sub = VerifyInstance(
        protocol=low.protocol, algorithm=low.algorithm, bounds=low.bounds, msg=low.msg,
        assumptions=low.assumptions_active, threads=threads, placement=low.placement,
        init={loc: v for loc, v in low.init.items() if loc in keep}, outputs=outputs,
        expected_outputs=low.expected_outputs, word_bytes=low.word_bytes, elements=low.elements,
        sentinel=low.sentinel, forbidden_word=low.forbidden_word, notes=list(low.notes),
        flat_signature=low.flat_signature, groups=groups, word_encoding=low.word_encoding,
        arbitrary_init={loc: b for loc, b in low.arbitrary_init.items() if loc in keep})
    sub.thread_names = list(low.thread_names)
    sub.roles = dict(low.roles)
    return Slice(sub, ids, len(low.events) - len(kept))
