"""The properties the protocol verifier checks, as formulas over a protocol instance's executions.

:func:`collsim.verify.models.encode` turns the events of
:func:`collsim.verify.lower.lower_instance` into z3 constraints whose models
are exactly the executions the memory model allows (within the bound); each
function here builds a :class:`Query`, a formula over that encoding whose
satisfiability means "violated", with the literals that say which part of
it fired (for the counterexample).

Properties that need the executions in which polls may be stuck (``hang``,
the stuck half of ``early-overwrite``, ``sentinel-collision``) take an
encoding built with ``liveness=True`` (see :mod:`collsim.verify.models.encoding`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from collsim.ir.floats import Compare, WordEncoding
from collsim.ir.ops import NotEqual
from collsim.verify.events import Event, EventKind, InstrKind, Instr
from collsim.verify.instance import VerifyInstance
from collsim.verify.models import Encoding
from collsim.verify.reference import RefRun

__all__ = ["PROPERTIES", "PROPERTY_TITLES", "normalize_property", "Query", "consumer_instrs",
           "stale_or_early", "torn", "data_race", "hang", "postcondition", "sentinel_collision", "sum_bits"]

#: properties in report order
PROPERTIES = (
    "stale-read",
    "torn-read",
    "early-overwrite",
    "data-race",
    "hang",
    "sentinel-collision",
    "postcondition",
)

PROPERTY_TITLES = {
    "stale-read": "stale read",
    "torn-read": "torn read",
    "early-overwrite": "early overwrite",
    "data-race": "data race",
    "hang": "hang",
    "sentinel-collision": "sentinel collision",
    "postcondition": "postcondition",
}


def normalize_property(name: str) -> str:
    """``"stale read"``, ``"Stale-Read"`` and ``"stale_read"`` all name ``"stale-read"``."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    if key not in PROPERTIES:
        raise KeyError(f"unknown property {name!r} (valid: {', '.join(PROPERTIES)})")
    return key


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@dataclass
class Query:
    """A property as a formula over an execution, plus how to explain a model of it.

    ``formula`` is the disjunction of the witnesses' literals, conjoined with
    ``premise`` where the property has one (the data domain).
    """

    property: str
    formula: Any
    witnesses: list[tuple[Any, dict]]  # (literal, description) pairs: which disjunct fired
    liveness: bool = False
    symbolic_inputs: bool = False
    note: str | None = None
    premise: Any = None

    def restrict(self, ex: Encoding, witnesses: list[tuple[Any, dict]]) -> Any:
        """The formula of this property over ``witnesses`` only (a subset of its own)."""
        formula = _any_of(ex, witnesses)
        return formula if self.premise is None else z3.And(formula, self.premise)


def _any_of(ex: Encoding, lits: list[tuple[Any, dict]]) -> Any:
    """The disjunction of the literals of ``lits`` (false when there are none), in ``ex``'s context."""
    return z3.Or([lit for lit, _ in lits], ex.ctx) if lits else z3.BoolVal(False, ctx=ex.ctx)


def consumer_instrs(low: VerifyInstance) -> list[Instr]:
    return [i for i in low.instrs if any(e.consumer for e in i.events)]


def _source_position(ex: Encoding, ref: RefRun, r: Event, w: Event | None) -> int:
    return ref.position(r.loc, None if w is None else w.id)


def stale_or_early(ex: Encoding, ref: RefRun, which: str) -> Query:
    """A consumer reads a value other than the intended one, from an older (stale) or later (early) write."""
    low = ex.low
    lits = []
    for r in low.events:
        if not (r.is_read and r.consumer):
            continue
        intended = ref.rf.get(r.id)
        pos = ref.position(r.loc, intended)
        wrong = ex.rval(r) != ref.read_values[r.id]
        for w in ex.cands[r.id]:
            p = _source_position(ex, ref, r, w)
            if (which == "stale" and p < pos) or (which == "early" and p > pos):
                lit = z3.And(ex.exe(r), ex.rf_lit(w, r), wrong)
                lits.append((lit, {"read": r, "write": w, "intended": intended}))
    if which == "early" and ex.live:
        for instr in low.instrs:
            if instr.kind != InstrKind.POLL:
                continue
            for r in instr.events:
                if not r.polled:
                    continue
                intended = ref.rf.get(r.id)
                pos = ref.position(r.loc, intended)
                for w in ex.cands[r.id]:
                    if _source_position(ex, ref, r, w) > pos:
                        lit = z3.And(ex.stuck[instr.id], ex.rf_lit(w, r))
                        lits.append((lit, {"read": r, "write": w, "intended": intended, "stuck": True}))
    name = "stale-read" if which == "stale" else "early-overwrite"
    return Query(name, _any_of(ex, lits), lits, liveness=ex.live)


def torn(ex: Encoding, ref: RefRun) -> Query:
    """A consumed line whose words come from different store instructions, where the intended run read one."""
    low = ex.low
    owner = {}
    for instr in low.instrs:
        for e in instr.events:
            owner[e.id] = instr.id
    lits = []
    for instr in consumer_instrs(low):
        reads = [e for e in instr.events if e.is_read]
        if len(reads) < 2:
            continue
        if any(w is not None and w.kind == EventKind.RMW for r in reads for w in ex.cands[r.id]):
            continue  # accumulated by atomics: each word legitimately has its own last writer
        intended = {None if ref.rf.get(r.id) is None else owner[ref.rf[r.id]] for r in reads}
        if len(intended) != 1:
            continue  # written by several instructions even in the intended run
        # reads_from[r][I]: read r reads from (a write of) store instruction I (-1: the initial value)
        reads_from: dict[int, dict[int, list[Any]]] = {}
        for r in reads:
            by_instr: dict[int, list[Any]] = {}
            for w in ex.cands[r.id]:
                by_instr.setdefault(-1 if w is None else owner[w.id], []).append(ex.rf_lit(w, r))
            reads_from[r.id] = by_instr
        first = reads[0]
        for r in reads[1:]:
            mine, theirs = reads_from[first.id], reads_from[r.id]
            # the two reads' source instructions differ: first reads from some I that r does not read from
            parts = [z3.And(_or(ex, lits_i), z3.Not(_or(ex, theirs[i])) if i in theirs else ex.true())
                     for i, lits_i in mine.items()]
            lit = _or(ex, parts)
            lits.append((lit, {"instr": instr, "reads": reads}))
    return Query("torn-read", _any_of(ex, lits), lits)


def _or(ex: Encoding, terms: list[Any]) -> Any:
    return terms[0] if len(terms) == 1 else z3.Or(terms, ex.ctx) if terms else ex.false()


def data_race(ex: Encoding) -> Query:
    """Conflicting accesses, not morally strong, unordered by causality (PTX ISA §8.7)."""
    lits = []
    for loc, events in ex.low.locs.items():
        for i, a in enumerate(events):
            for b in events[i + 1:]:
                if a.thread == b.thread or not (a.is_write or b.is_write):
                    continue
                if ex.model == "ptx" and ex.ms(a, b):
                    continue
                if ex.model == "sc" and a.strong and b.strong:
                    continue
                if a.virtual_loc == b.virtual_loc and (ex.static.before(a, b) or ex.static.before(b, a)):
                    continue  # ordered by causality in every execution (known before solving)
                lit = z3.And(ex.exe(a), ex.exe(b), z3.Not(ex.cause(a, b)), z3.Not(ex.cause(b, a)))
                lits.append((lit, {"a": a, "b": b}))
    return Query("data-race", _any_of(ex, lits), lits)


def hang(ex: Encoding) -> Query:
    assert ex.live
    lits = [(s, {"instr": ex.low.instrs[i]}) for i, s in ex.stuck.items()]
    return Query("hang", _any_of(ex, lits), lits, liveness=True)


def postcondition(ex: Encoding) -> tuple[Query, list[tuple]]:
    """Every output element equals the sum of every rank's input element of that launch."""
    lits = []
    unmodelled = []
    for key, expected in ex.low.expected_outputs.items():
        value = ex.low.outputs.get(key, "missing")
        if value is None:
            unmodelled.append(key)
            continue
        if value == "missing":
            lits.append((z3.BoolVal(True, ctx=ex.ctx), {"output": key, "missing": True}))
            continue
        lit = ex.lin(value) != ex.lin(expected)
        lits.append((lit, {"output": key, "value": value, "expected": expected}))
    return Query("postcondition", _any_of(ex, lits), lits), unmodelled


def sentinel_collision(ex: Encoding, with_domain: bool) -> Query:
    """A data store puts a word into a location a ``NotEqual`` poll inspects that the poll reads as the sentinel.

    With a bitwise compare that is the sentinel's own pattern. Where the protocol states its
    data's floating-point facts (``DataDomain.encoding``) the written word is its bit pattern:
    an input word is the input's pattern, a partial sum's is any pattern a float sum can hold
    (:meth:`~collsim.ir.floats.WordEncoding.sum_lane_ranges`), and the poll's own comparison
    (:meth:`~collsim.ir.ops.NotEqual.holds`: ``ieee`` makes ``+0.0`` match a ``-0.0`` sentinel)
    decides the match. The premise (the data domain) keeps inputs to the encodings the
    domain admits and inputs and partial sums off the forbidden word.
    """
    low = ex.low
    encoding = low.word_encoding
    sentinel_locs: dict[tuple, Any] = {}
    for instr in low.instrs:
        if instr.kind == InstrKind.POLL and isinstance(instr.predicate, NotEqual):
            for e in instr.events:
                if e.polled:
                    sentinel_locs[e.loc] = instr.predicate
    lits = []
    sums: list[Any] = []  # the bit patterns of partial sums stored into polled words
    for w in low.events:
        if not w.is_write or w.loc not in sentinel_locs or w.fill is not None or w.role != "data":
            continue
        pred = sentinel_locs[w.loc]
        if encoding is None and pred.compare is Compare.BITWISE:
            lit = z3.And(ex.exe(w), ex.lin(w.value) == pred.value)
        else:
            word = ex.lin(w.value)
            facts = []
            if encoding is not None and w.value is not None and len(w.value.terms) > 1:
                word = sum_bits(ex, w)
                facts = _word_in(word, encoding, encoding.sum_lane_ranges())
                if low.forbidden_word is not None:
                    sums.append(word)
            lit = z3.And([ex.exe(w), z3.Not(pred.holds(word)), *facts])
        lits.append((lit, {"write": w, "sentinel": pred.value, "compare": pred.compare}))
    formula = _any_of(ex, lits)
    premise = None
    if with_domain and (low.forbidden_word is not None or encoding is not None):
        restriction = []
        if encoding is not None:
            for t in ex.input_terms.values():
                restriction.extend(_word_in(t, encoding, encoding.lane_ranges()))
        if low.forbidden_word is not None:
            restriction.extend(t != low.forbidden_word for t in ex.input_terms.values())
            for w in low.events:  # partial sums stored from registers
                if (w.is_write and w.fill is None and w.role == "data" and w.value is not None
                        and len(w.value.terms) > 1):
                    restriction.append(ex.lin(w.value) != low.forbidden_word)
            restriction.extend(b != low.forbidden_word for b in sums)
        premise = z3.And(restriction, ex.ctx)
        formula = z3.And(formula, premise)
    return Query("sentinel-collision", formula, lits, liveness=True, symbolic_inputs=True, premise=premise)


def sum_bits(ex: Encoding, w: Event) -> Any:
    """The bit pattern of the float sum a data write ``w`` stores (its integer value is the sum's identity)."""
    return z3.Int(f"bits_{w.name}", ex.ctx)


def _word_in(word: Any, encoding: WordEncoding, ranges: tuple[tuple[int, int], ...]) -> list[Any]:
    """``word`` is a 32-bit pattern each of whose float lanes lies in one of ``ranges``."""
    facts = [word >= 0, word < (1 << 32)]
    for k in range(encoding.lanes):
        lane = (word / (1 << (encoding.lane_bits * k))) % (1 << encoding.lane_bits) if encoding.lanes > 1 else word
        facts.append(z3.Or([z3.And(lane >= lo, lane <= hi) for lo, hi in ranges]))
    return facts
