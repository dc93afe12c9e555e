"""Counterexamples as readable timelines (and JSON).

A counterexample is one execution that breaks a property, told as the
steps that matter: which rank and thread ran which operation, on which
buffer, slot, line and word, what value it read or wrote, where that value
came from ("rank 0, iteration 1, element 3") and, in one sentence, why the
protocol allowed it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import z3

from collsim.ir.floats import Compare
from collsim.verify.instance import (INPUT_BASE, INPUT_OFFSET, EventKind, InstrKind, VerifyEvent, VerifyInstance,
                                     VerifyInstr)
from collsim.verify.properties import sum_bits
from collsim.verify.reference import RefRun

__all__ = ["CounterexampleStep", "Counterexample", "describe_value", "build_counterexample"]

#: instructions a timeline always shows: they synchronize
_SYNC_INSTRS = frozenset({InstrKind.POLL, InstrKind.FENCE, InstrKind.RMW, InstrKind.BARRIER})


@dataclass
class CounterexampleStep:
    """One line of a timeline: one instruction of one thread."""

    rank: int
    thread: int
    iteration: int
    op: str
    action: str  # writes | reads | polls | rmw | fence | barrier
    target: str = ""
    values: list[str] = field(default_factory=list)
    note: str = ""
    mark: bool = False  # the step the violation is about
    source: str = ""  # where protocol code emitted the op (file:line); empty for the algorithm's own ops
    cta: int | None = None  # the thread's CTA within its rank, with several CTAs per rank

    def render(self) -> str:
        tag = {-1: "proxy", -2: "tma"}.get(self.thread, f"t{self.thread}")
        who = f"rank {self.rank} " + (tag if self.cta is None else f"c{self.cta}.{tag}")
        head = f"{'>>' if self.mark else '  '} {who:<10} it{self.iteration}  {self.op:<28} {self.action:<7} {self.target}"
        lines = [head.rstrip()]
        if self.source:
            lines.append(" " * 18 + f"at {self.source}")
        for v in self.values:
            lines.append(" " * 18 + v)
        if self.note:
            lines.append(" " * 18 + "-- " + self.note)
        return "\n".join(lines)


@dataclass
class Counterexample:
    """One violating execution."""

    property: str
    reason: str
    steps: list[CounterexampleStep]
    facts: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        out = [f"why: {self.reason}", "timeline (>> marks the violation):"]
        out += [s.render() for s in self.steps]
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {"property": self.property, "reason": self.reason,
                "steps": [_step_json(s) for s in self.steps], "facts": self.facts}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Counterexample":
        return Counterexample(data["property"], data["reason"], [CounterexampleStep(**s) for s in data["steps"]],
                              data.get("facts", {}))


def _decode_inputs(value: int, low: VerifyInstance) -> tuple[int, dict[tuple, int]] | None:
    """Split ``value`` into (small part, {input key: multiplicity}) if it is built from inputs."""
    floor = INPUT_BASE ** INPUT_OFFSET
    if value < floor:
        return None
    small = value % floor
    rest = value // floor
    counts: dict[tuple, int] = {}
    index = 0
    n = low.elements
    while rest:
        digit = rest % INPUT_BASE
        if digit:
            e = index % n
            r = (index // n) % low.bounds.ranks
            i = index // (n * low.bounds.ranks)
            counts[(r, i, e)] = digit
        rest //= INPUT_BASE
        index += 1
    return small, counts


def describe_value(value: int, low: VerifyInstance, role: str | None = None, symbolic: bool = False) -> str:
    """``value`` in words: a flag, the sentinel, zero, or the inputs it is made of."""
    if symbolic:
        text = f"{value}"
        if low.sentinel is not None and value == low.sentinel:
            text += f" (= the sentinel {low.sentinel:#x})"
        return text
    if role == "flag":
        return f"flag {value}"
    if low.sentinel is not None and value == low.sentinel:
        return f"sentinel {value:#x}"
    decoded = _decode_inputs(value, low)
    if decoded is None:
        return str(value)
    small, counts = decoded
    parts = []
    keys = sorted(counts)
    if len(keys) == 1 and counts[keys[0]] == 1:
        r, i, e = keys[0]
        parts.append(f"input of rank {r}, iteration {i}, element {e}")
    else:
        same = {(i, e) for _, i, e in keys}
        if len(same) == 1:
            i, e = same.pop()
            ranks = "+".join(f"{r}" + (f"x{counts[(r, i, e)]}" if counts[(r, i, e)] > 1 else "") for r, _, _ in keys)
            parts.append(f"sum of ranks {ranks} inputs (iteration {i}, element {e})")
        else:
            parts.append("sum of " + " + ".join(
                f"{'%dx ' % counts[k] if counts[k] > 1 else ''}input(rank {k[0]}, iteration {k[1]}, element {k[2]})"
                for k in keys))
    if small:
        parts.append(f"plus {small:#x}" if low.sentinel and small % (low.sentinel or 1) == 0 else f"plus {small}")
    return ", ".join(parts)


def _num(model: z3.ModelRef, term: Any) -> int:
    v = model.eval(term, model_completion=True)
    return v.as_long()


def _true(model: z3.ModelRef, term: Any) -> bool:
    return z3.is_true(model.eval(term, model_completion=True))


def _step_json(step: CounterexampleStep) -> dict[str, Any]:
    data = asdict(step)
    if step.cta is None:
        del data["cta"]  # one CTA per rank: as before the field existed
    return data


def _writer_text(w: VerifyEvent | None, low: VerifyInstance) -> str:
    if w is None:
        return "the initial value"
    source = low.threads[w.thread][w.instr].source
    return f"rank {w.rank} {low.thread_text(w.thread, short=True)} {w.label} (iteration {w.iteration}{_at(source)})"


def _at(source: str) -> str:
    return f", {source}" if source else ""


class _Builder:
    def __init__(self, ex, model: z3.ModelRef, ref: RefRun | None, symbolic: bool = False,
                 assumptions: frozenset[str] | None = None) -> None:
        self.ex = ex
        self.symbolic = symbolic
        self.assumptions = assumptions
        self.low: VerifyInstance = ex.low
        self.m = model
        self.ref = ref
        self.instr_of = {}
        for instr in self.low.instrs:
            for e in instr.events:
                self.instr_of[e.id] = instr

    def executed(self, e: VerifyEvent) -> bool:
        return _true(self.m, self.ex.exe(e))

    def source(self, r: VerifyEvent) -> VerifyEvent | None:
        for w in self.ex.cands[r.id]:
            if _true(self.m, self.ex.rf_lit(w, r)):
                return w
        return None

    def value_text(self, e: VerifyEvent, value: int) -> str:
        return describe_value(value, self.low, e.role, self.symbolic)

    def step(self, instr: VerifyInstr, focus: set[int] | None = None, mark: bool = False, note: str = "") -> CounterexampleStep:
        low = self.low
        kinds = {InstrKind.STORE: "writes", InstrKind.LOAD: "reads", InstrKind.POLL: "polls", InstrKind.RMW: "rmw",
                 InstrKind.FENCE: "fence", InstrKind.BARRIER: "barrier"}
        first = instr.events[0] if instr.events else None
        target = ""
        values = []
        if first is not None and first.loc is not None:
            buf, owner, _flat, _w = first.loc
            target = f"{buf}@rank{owner}[slot {first.slot}, region {first.region}, line {first.line}]"
            for e in instr.events:
                if (focus is not None and e.id not in focus and instr.kind != InstrKind.POLL
                        and len(instr.events) > 4):
                    continue
                if e.kind == EventKind.WRITE:
                    v = _num(self.m, self.ex.lin(e.value))
                    values.append(f"word {e.word} := {self.value_text(e, v)}")
                elif e.is_read:
                    v = _num(self.m, self.ex.rval(e))
                    src = self.source(e)
                    text = f"word {e.word} = {self.value_text(e, v)}   [from {_writer_text(src, low)}]"
                    if e.kind == EventKind.RMW and e.value is None and not _true(self.m, self.ex.wr(e)):
                        text += "; the cas fails: writes nothing"
                    elif e.kind == EventKind.RMW and e.value is None:  # a cas: its value is the encoding's
                        text += f"; writes {self.value_text(e, _num(self.m, self.ex.wval(e, e.loc)))}"
                    elif e.kind == EventKind.RMW:
                        text += f"; writes {self.value_text(e, _num(self.m, self.ex.lin(e.value)))}"
                    values.append(text)
        elif first is not None and first.kind == EventKind.FENCE:
            target = f"fence.{first.sem}.{first.scope}"
        elif first is not None and first.kind == EventKind.BARRIER:
            target = "bar.sync (rank's threads)" if low.bounds.ctas == 1 else "bar.sync (the CTA's threads)"
        if instr.kind == InstrKind.POLL and instr.predicate:
            target += f" until {instr.predicate.describe()}"
            stuck = self.ex.stuck.get(instr.id) if self.ex.live else None
            if stuck is not None and _true(self.m, stuck):
                note = (note + "; " if note else "") + "stuck here forever"
        rank = low.rank_of(instr.thread)
        return CounterexampleStep(rank=rank, thread=low.local_thread(instr.thread), iteration=instr.iteration, op=instr.label,
                    action=kinds.get(instr.kind, instr.kind), target=target, values=values, note=note, mark=mark,
                    source=instr.source, cta=low.cta_of(instr.thread))

    def timeline(self, key_instrs: list[VerifyInstr], marks: dict[int, str], limit: int = 40) -> list[CounterexampleStep]:
        """Steps for ``key_instrs`` plus the synchronization around them, in an order consistent with po and rf."""
        low = self.low
        chosen: dict[int, VerifyInstr] = {i.id: i for i in key_instrs}
        threads = {i.thread for i in key_instrs}
        last = {t: max(i.index for i in key_instrs if i.thread == t) for t in threads}
        # sources of every read shown
        for instr in list(chosen.values()):
            for e in instr.events:
                if e.is_read and self.executed(e):
                    w = self.source(e)
                    if w is not None:
                        chosen.setdefault(self.instr_of[w.id].id, self.instr_of[w.id])
        threads = {i.thread for i in chosen.values()}
        last = {t: max(i.index for i in chosen.values() if i.thread == t) for t in threads}
        for t in threads:
            for instr in low.threads[t][: last[t] + 1]:
                if not instr.events or not self.executed(instr.events[0]):
                    continue
                sync = instr.kind in _SYNC_INSTRS or any(e.role == "flag" for e in instr.events)
                if sync and len(chosen) < limit:
                    chosen.setdefault(instr.id, instr)
        # stuck polls of other threads (hangs)
        if self.ex.live:
            for iid, s in self.ex.stuck.items():
                if _true(self.m, s) and len(chosen) < limit + 5:
                    chosen.setdefault(iid, low.instrs[iid])
        order = self._order(list(chosen.values()))
        steps = []
        for instr in order:
            steps.append(self.step(instr, mark=instr.id in marks, note=marks.get(instr.id, "")))
        return steps

    def _order(self, instrs: list[VerifyInstr]) -> list[VerifyInstr]:
        ids = {i.id for i in instrs}
        preds: dict[int, set[int]] = {i.id: set() for i in instrs}
        by_thread: dict[int, list[VerifyInstr]] = {}
        for i in instrs:
            by_thread.setdefault(i.thread, []).append(i)
        for seq in by_thread.values():
            seq.sort(key=lambda i: i.index)
            for a, b in zip(seq, seq[1:]):
                preds[b.id].add(a.id)
        for i in instrs:
            for e in i.events:
                if e.is_read and self.executed(e):
                    w = self.source(e)
                    if w is not None and self.instr_of[w.id].id in ids and self.instr_of[w.id].id != i.id:
                        preds[i.id].add(self.instr_of[w.id].id)
        out: list[VerifyInstr] = []
        done: set[int] = set()
        pending = sorted(instrs, key=lambda i: (i.iteration, i.thread, i.index))
        while pending:
            ready = [i for i in pending if preds[i.id] <= done]
            if not ready:  # a cycle (weak memory): fall back to program order
                ready = [min(pending, key=lambda i: (len(preds[i.id] - done), i.iteration, i.index))]
            nxt = min(ready, key=lambda i: (i.iteration, i.index, i.thread))
            out.append(nxt)
            done.add(nxt.id)
            pending.remove(nxt)
        return out


def _where(e: VerifyEvent) -> str:
    return e.where()


def _who(e: VerifyEvent, low: VerifyInstance) -> str:
    return f"rank {e.rank} {low.thread_text(e.thread)} ({e.label}, iteration {e.iteration})"


def build_counterexample(query, ex, model: z3.ModelRef, ref: RefRun | None,
                         assumptions: frozenset[str] | None = None) -> Counterexample:
    """Explain the model of a violated :class:`~collsim.verify.properties.Query`.

    ``assumptions`` are the hardware assumptions the query was asked under
    (default: the instance's own): they say which words were atomic together.
    """
    b = _Builder(ex, model, ref, query.symbolic_inputs, assumptions)
    low = ex.low
    detail = next((d for lit, d in query.witnesses if _true(model, lit)), None)
    prop = query.property
    if detail is None:
        return Counterexample(prop, "the solver found a violating execution", b.timeline(low.instrs[:1], {}), {})
    name = ex.model
    if prop in ("stale-read", "early-overwrite"):
        r: VerifyEvent = detail["read"]
        w: VerifyEvent | None = detail["write"]
        intended = None if detail.get("intended") is None else low.events[detail["intended"]]
        instr = b.instr_of[r.id]
        got = _num(model, ex.rval(r))
        expected = ref.read_values.get(r.id) if ref else None
        if detail.get("stuck"):
            reason = (f"{_who(r, low)} waits on {_where(r)} for the write of {_writer_text(intended, low)}, but "
                      f"{_writer_text(w, low)} was written for a later use of the slot and overwrote it before the poll "
                      f"saw it, so the poll never succeeds")
        else:
            why = _stale_cause(b, r, w, intended, instr)
            reason = (f"{_who(r, low)} reads {_where(r)} = {describe_value(got, low, r.role)} from "
                      f"{_writer_text(w, low)}, but the value meant for it is "
                      f"{describe_value(expected, low, r.role) if expected is not None else '?'} from "
                      f"{_writer_text(intended, low)}: {why}")
        marks = {instr.id: "violation"}
        keys = [instr] + ([b.instr_of[w.id]] if w is not None else []) + (
            [b.instr_of[intended.id]] if intended is not None else [])
        facts = {"read": r.where(), "reader": _who(r, low), "value": got, "intended": expected,
                 "source": _writer_text(w, low)}
        return Counterexample(prop, reason, b.timeline(keys, marks), facts)
    if prop == "torn-read":
        instr: VerifyInstr = detail["instr"]
        sources = {}
        for r in detail["reads"]:
            src = b.source(r)
            sources.setdefault(_writer_text(src, low), []).append(r.word)
        parts = "; ".join(f"words {', '.join(map(str, ws))} from {k}" for k, ws in sources.items())
        first = detail["reads"][0]
        reason = (f"{_who(first, low)} consumes line {first.where().rsplit(', word', 1)[0]}] mixing parts of different "
                  f"writes ({parts}): {_torn_cause(ex, detail['reads'], b)}")
        keys = [instr] + [b.instr_of[b.source(r).id] for r in detail["reads"] if b.source(r) is not None]
        return Counterexample(prop, reason, b.timeline(keys, {instr.id: "torn"}), {"sources": sources})
    if prop == "data-race":
        a: VerifyEvent = detail["a"]
        c: VerifyEvent = detail["b"]
        weak = [x for x in (a, c) if not x.strong]
        if weak:
            strength = f"{', '.join(_who(x, low) for x in weak)} {'is' if len(weak) == 1 else 'are'} weak"
        elif a.span != c.span:  # mixed size (collsim.ir.layout.LineLayout.load_bytes)
            strength = (f"they do not overlap completely: a {a.span[2]}-byte and a {c.span[2]}-byte access to "
                        f"the same bytes (mixed-size accesses)" if a.span and c.span else "mixed-size accesses")
        else:
            strength = "their scopes do not include each other"
        reason = (f"{_who(a, low)} and {_who(c, low)} both access {_where(a)} (at least one writes), are not morally "
                  f"strong ({strength}), and no release/acquire pattern, fence or barrier orders them under {name}")
        keys = [b.instr_of[a.id], b.instr_of[c.id]]
        marks = {b.instr_of[a.id].id: "racing access", b.instr_of[c.id].id: "racing access"}
        return Counterexample(prop, reason, b.timeline(keys, marks), {"a": _who(a, low), "b": _who(c, low),
                                                                      "location": _where(a)})
    if prop == "hang":
        instr = detail["instr"]
        polled = [e for e in instr.events if e.polled]
        texts = []
        keys = [instr]
        marks = {instr.id: "waits forever"}
        facts: dict[str, Any] = {"poll": instr.label, "source": instr.source}
        for e in polled:
            w = b.source(e)
            texts.append(f"word {e.word} holds {describe_value(_num(model, ex.rval(e)), low, e.role)} "
                         f"(last written by {_writer_text(w, low)})")
            needed, why = _needed_write(b, instr, e, w)
            if needed is not None:
                keys.append(b.instr_of[needed.id])
                marks.setdefault(b.instr_of[needed.id].id, "the write the poll needed")
                facts.setdefault("needed", _writer_text(needed, low))
            if w is not None and needed is not None and w.id != needed.id and b.executed(needed):
                keys.append(b.instr_of[w.id])
                marks.setdefault(b.instr_of[w.id].id, "overwrote it")
                facts.setdefault("overwritten_by", _writer_text(w, low))
            if why:
                texts[-1] += f": {why}"
        want = instr.predicate.describe()
        reason = (f"rank {low.rank_of(instr.thread)} {low.thread_text(instr.thread)} waits at "
                  f"{instr.label} (iteration {instr.iteration}{_at(instr.source)}) for {want} but "
                  f"{'; '.join(texts)}; no thread that is still running will write it again")
        return Counterexample(prop, reason, b.timeline(keys, marks), facts)
    if prop == "postcondition":
        key = detail["output"]
        r, i, e = key
        if detail.get("missing"):
            reason = f"rank {r} never writes output element {e} of iteration {i}"
            return Counterexample(prop, reason, [], {"output": list(key)})
        got = _num(model, ex.lin(detail["value"]))
        want = _num(model, ex.lin(detail["expected"]))
        reason = (f"rank {r}'s output element {e} of iteration {i} is {describe_value(got, low)}, but the reduction "
                  f"of every rank's input is {describe_value(want, low)}")
        reads = [low.events[x] for x in detail["value"].reads()]
        keys = [b.instr_of[x.id] for x in reads] or low.threads[r * low.bounds.threads][:1]
        return Counterexample(prop, reason, b.timeline(keys, {k.id: "feeds the output" for k in keys}),
                              {"output": list(key), "value": got, "expected": want})
    if prop == "sentinel-collision":
        w = detail["write"]
        v = _num(model, ex.lin(w.value))
        if low.word_encoding is not None and w.value is not None and len(w.value.terms) > 1:
            v = _num(model, sum_bits(ex, w))  # the float sum's bit pattern, not the sum's identity
        same = ("equal to the sentinel" if detail["compare"] is Compare.BITWISE else
                f"that the poll's ieee comparison takes for the sentinel {detail['sentinel']:#x}")
        reason = (f"{_who(w, low)} stores user data {v:#x} {same} into {_where(w)}, which a reader polls "
                  f"until it differs from the sentinel: the reader takes the data as not yet arrived and waits "
                  f"forever (or, after a re-poison, takes the sentinel for data)")
        return Counterexample(prop, reason, b.timeline([b.instr_of[w.id]], {b.instr_of[w.id].id: "collides"}),
                              {"write": _who(w, low), "value": v})
    return Counterexample(prop, "violated", [], {})


def _needed_write(b: _Builder, instr: VerifyInstr, e: VerifyEvent,
                  last: VerifyEvent | None) -> tuple[VerifyEvent | None, str]:
    """The write a stuck poll's word ``e`` needed, and why the poll never saw it.

    The needed write is the one the reference run's poll read (else the first write to the word whose value
    satisfies the poll). Executed but not the last write the poll sees: ``last`` overwrote it (a reset that
    erased a peer's flag, a later use of the slot). Not executed: it was never produced, and the thread that
    would have produced it is named with where it stopped.
    """
    low, ref = b.low, b.ref
    needed = None
    if ref is not None and ref.rf.get(e.id) is not None:
        needed = low.events[ref.rf[e.id]]
    elif isinstance(instr.predicate.value, int):  # (a loaded wait target has no value without the run)
        for w in low.writes_at(e.loc):
            value = w.value.c if w.value is not None and w.value.is_const else None
            if value is not None and bool(instr.predicate.holds(value)):
                needed = w
                break
    if needed is None:
        return None, "no operation of the bound writes a value the poll accepts"
    if last is not None and needed.id == last.id:
        return needed, ""
    if b.executed(needed):
        if last is None:
            return needed, f"{_writer_text(needed, low)} wrote what it waits for, but the poll still reads the initial value"
        return needed, (f"{_writer_text(needed, low)} wrote what it waits for, but {_writer_text(last, low)} "
                        f"overwrote it before the poll saw it")
    stuck = _where_stopped(b, needed.thread)
    return needed, (f"the write it needs, {_writer_text(needed, low)}, is never produced: "
                    f"{stuck or 'its thread never gets there'}")


def _where_stopped(b: _Builder, thread: int) -> str:
    """Where ``thread`` stops in the model of a hang: its stuck poll, or the first instruction it never runs."""
    low = b.low
    if b.ex.live:
        for iid, lit in b.ex.stuck.items():
            stuck = low.instrs[iid]
            if stuck.thread == thread and _true(b.m, lit):
                return (f"rank {low.rank_of(thread)} {low.thread_text(thread)} is itself stuck at "
                        f"{stuck.label} (iteration {stuck.iteration}{_at(stuck.source)})")
    for instr in low.threads[thread]:
        if instr.events and not b.executed(instr.events[0]):
            return (f"rank {low.rank_of(thread)} {low.thread_text(thread)} never gets past "
                    f"{instr.label} (iteration {instr.iteration}{_at(instr.source)})")
    return ""


def _stale_cause(b: _Builder, r: VerifyEvent, w: VerifyEvent | None, intended: VerifyEvent | None, instr: VerifyInstr) -> str:
    ex, low, m = b.ex, b.low, b.m
    model = ex.model
    if instr.kind == InstrKind.POLL:
        polled = [e for e in instr.events if e.polled]
        flag_sources = [(e, b.source(e)) for e in polled]
        intended_instr = b.instr_of[intended.id].id if intended is not None else None
        srcs = {b.instr_of[s.id].id for _, s in flag_sources if s is not None}
        if intended_instr is not None and intended_instr in srcs and not r.polled:
            return ("the flag and the data element of one store instruction are separate element accesses in "
                    "unspecified order (PTX ISA 8.2.4) and no declared assumption makes them one atomic unit")
        arbitrary = getattr(low, "arbitrary_init", {})
        if polled and all(s is None and e.loc in arbitrary for e, s in flag_sources):
            vals = sorted({_num(m, ex.rval(e)) for e, _ in flag_sources})
            return (f"the polled word held {', '.join(map(str, vals))} before anything was written to it: the "
                    f"buffer starts as whatever its memory held (init=\"arbitrary\", never cleared), and that "
                    f"pattern passes the poll")
        if polled and all(ref_older(b, e, s) for e, s in flag_sources):
            vals = sorted({_num(m, ex.rval(e)) for e, _ in flag_sources})
            return (f"the polled word already held {', '.join(map(str, vals))} from an older write: the flag value "
                    f"repeats across uses of the slot (it wrapped or was never cleared)")
        if intended_instr is not None and srcs and intended_instr not in srcs:
            return (f"the flag comes from a separate store that nothing orders after the data store under "
                    f"{model} (no release, no fence between them)")
        return f"no declared assumption or synchronization makes the poll's words arrive together under {model}"
    if intended is not None:
        c = ex.cause(intended, r)
        if not _true(m, c):
            return (f"no release/acquire chain, fence or barrier orders the intended store before this load under "
                    f"{model}, so the load may still see {'an older' if w is None or ref_older(b, r, w) else 'another'} "
                    f"value")
    if w is not None and not ref_older(b, r, w):
        return "the producer reused the slot before the consumer read it: nothing made it wait for the consumer"
    return f"the load is not ordered after the write it needs under {model}"


def ref_older(b: _Builder, r: VerifyEvent, w: VerifyEvent | None) -> bool:
    if b.ref is None:
        return False
    pos = b.ref.position(r.loc, None if w is None else w.id)
    return pos < b.ref.position(r.loc, b.ref.rf.get(r.id))


def _torn_cause(ex, reads: list[VerifyEvent], b: _Builder) -> str:
    ids = {r.id for r in reads}
    grouped = {m.id for g in b.low.groups_under(b.assumptions) if g.kind == "r" for m in g.members if m.id in ids}
    if not grouped:
        return ("the words are separate element accesses (PTX ISA 8.2.4) and no declared assumption joins them into "
                "one atomic unit")
    return f"the words span several atomic units, and nothing orders the writes of one before the other under {ex.model}"
