"""Verify a protocol's synchronization: every property, under its assumptions, and without each one.

:func:`verify` is the API (``collsim verify`` prints its result):

1. the protocol's program under an algorithm is lowered for a bound
   (:class:`~collsim.verify.instance.Bounds`: ranks, launches, lines, threads)
   with the protocol's declared hardware assumptions;
2. a reference execution fixes the value every consumer is meant to read;
3. each property of :data:`~collsim.verify.properties.PROPERTIES` is a
   satisfiability question over the memory model's executions: ``sat`` is a
   violation (with a counterexample), ``unsat`` means it holds *at that
   bound*, anything else is ``unknown`` (never counted as holding);
4. the whole check is repeated without each declared assumption, and the
   sentinel-collision check without the data-domain restriction: a property
   that fails then is reported as "depends on <assumption>".

Verdicts are cached on disk (:mod:`collsim.verify.cache`); :func:`verdict_for`
answers from the cache when it can, so the emitter can refuse an unverified
protocol without re-solving.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable

import z3

from collsim.errors import InputError, is_interrupt
from collsim.executors import check_executor_options, map_tasks
from collsim.ir.assumptions import get_assumption
from collsim.ir.protocol import MAX_FLAG_BITS, Protocol
from collsim.ir.registry import list_mutants, list_protocols, load_protocol
from collsim.verify import cache as _cache
from collsim.verify.events import Event, Instr
from collsim.verify.instance import Bounds, InstrKind, VerifyInstance
from collsim.verify.lower import data_path, lower_instance
from collsim.verify.reference import reference_run
from collsim.verify.models import encode
from collsim.verify.models.build import add_all
from collsim.verify.models.ptx import constant_increment
from collsim.verify.properties import (
    PROPERTIES,
    PROPERTY_TITLES,
    Query,
    data_race,
    hang,
    normalize_property,
    postcondition,
    sentinel_collision,
    stale_or_early,
    torn,
)
from collsim.verify.report import Counterexample, build_counterexample
from collsim.verify.terms import Lin
from collsim.verify.instance import long_integer_text, threads_text
from collsim.verify.solver import raise_if_interrupted
from collsim.verify.slicing import Slice, slice_instance, sliceable
from collsim.verify.symmetry import anchored, rank_rotation, word_rotation

__all__ = [
    "size_sequences",
    "Bound",
    "PropertyResult",
    "Dependency",
    "VerifyResult",
    "verify",
    "verdict_for",
    "verify_all",
    "Summary",
    "FailedRun",
    "DEFAULT_TIMEOUT_S",
    "ProblemSize",
    "problem_size",
    "estimate",
    "LONG_UNKNOWNS",
    "SLOW_UNKNOWNS",
    "LONG_COUNTED",
    "SLOW_COUNTED",
    "counted_increments",
]

DEFAULT_TIMEOUT_S = 60.0
DATA_DOMAIN = "data-domain"


@dataclass(frozen=True)
class Bound:
    """What a verdict is about: instance size, memory model, and what was assumed."""

    ranks: int
    iterations: int
    lines: int
    threads: int
    model: str
    assumptions: tuple[str, ...]
    data_domain: bool
    notes: tuple[str, ...] = ()
    #: CTAs per rank (the JSON form names them only when there are several)
    ctas: int = 1

    def describe(self) -> str:
        text = (f"{self.ranks} ranks x {self.iterations} iterations, {self.lines} line(s) per chunk, "
                f"{threads_text(self.threads, self.ctas)}, {self.model}")
        assumed = list(self.assumptions) + (["data domain"] if self.data_domain else [])
        text += ", assuming " + (", ".join(assumed) if assumed else "nothing")
        return text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["assumptions"] = list(self.assumptions)
        data["notes"] = list(self.notes)
        if self.ctas == 1:
            del data["ctas"]
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Bound":
        return Bound(data["ranks"], data["iterations"], data["lines"], data["threads"], data["model"],
                     tuple(data["assumptions"]), data["data_domain"], tuple(data.get("notes", ())),
                     data.get("ctas", 1))


#: the most CTAs per rank a default bound checks (two CTAs see every CTA-to-CTA ordering; the program is
#: generated for the bound's CTAs, so the grid barrier counts them)
MAX_VERIFIED_CTAS = 2

#: the reason of an ``unknown`` verdict whose premise no execution reaches starts so
VACUOUS = "vacuous"


@dataclass
class PropertyResult:
    """One property's verdict: ``holds`` (at ``bound``), ``violated`` (with a counterexample) or ``unknown``.

    A ``holds`` verdict carries its ``premise``: what the solver found satisfiable before it trusted the
    ``unsat`` of the property's query (an execution of the bound in which every thread finishes, so every
    consumer is reached and every poll is satisfied). Without one the result cannot be made: a property whose
    premise no execution reaches is ``unknown``, with a reason that starts with ``vacuous:``.
    """

    property: str
    status: str
    bound: Bound
    seconds: float
    reason: str | None = None
    counterexample: Counterexample | None = None
    note: str | None = None
    premise: str | None = None

    def __post_init__(self) -> None:
        if self.status == "holds" and not self.premise:
            raise ValueError(f"{self.property}: a property holds only on a premise some execution satisfies "
                             f"(none was recorded)")

    @property
    def vacuous(self) -> bool:
        """Unknown because no execution of the bound reaches the property's premise."""
        return self.status == "unknown" and (self.reason or "").startswith(VACUOUS + ":")

    @property
    def holds(self) -> bool:
        return self.status == "holds"

    @property
    def violated(self) -> bool:
        return self.status == "violated"

    @property
    def title(self) -> str:
        return PROPERTY_TITLES[self.property]

    def describe(self) -> str:
        if self.status == "holds":
            text = f"{self.title}: holds at {self.bound.describe()} ({self.seconds:.2f} s)"
        elif self.status == "violated":
            text = f"{self.title}: VIOLATED at {self.bound.describe()} ({self.seconds:.2f} s)"
        else:
            text = f"{self.title}: unknown ({self.reason}) at {self.bound.describe()}"
        if self.note:
            text += f"; {self.note}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"property": self.property, "status": self.status, "bound": self.bound.to_json(),
                "seconds": round(self.seconds, 4), "reason": self.reason, "note": self.note,
                "premise": self.premise,
                "counterexample": self.counterexample.to_json() if self.counterexample else None}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "PropertyResult":
        cex = data.get("counterexample")
        return PropertyResult(data["property"], data["status"], Bound.from_json(data["bound"]), data["seconds"],
                              data.get("reason"), Counterexample.from_json(cex) if cex else None, data.get("note"),
                              data.get("premise"))


@dataclass
class Dependency:
    """The properties that fail without one assumption (or without the data-domain restriction)."""

    name: str
    kind: str  # "assumption" | "data-domain"
    results: dict[str, PropertyResult]
    statement: str = ""

    @property
    def needed(self) -> bool:
        return any(r.violated for r in self.results.values())

    @property
    def violated(self) -> list[str]:
        return [p for p, r in self.results.items() if r.violated]

    @property
    def unknown(self) -> list[str]:
        return [p for p, r in self.results.items() if r.status == "unknown"]

    def describe(self) -> str:
        if self.needed:
            names = ", ".join(PROPERTY_TITLES[p] for p in self.violated)
            return f"depends on {self.name}: without it, {names} {'is' if len(self.violated) == 1 else 'are'} violated"
        if self.unknown:
            return f"{self.name}: without it, {', '.join(self.unknown)} unknown"
        return f"does not depend on {self.name}: every property still holds without it"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "statement": self.statement, "needed": self.needed,
                "results": {p: r.to_json() for p, r in self.results.items()}}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Dependency":
        return Dependency(data["name"], data["kind"],
                          {p: PropertyResult.from_json(r) for p, r in data["results"].items()},
                          data.get("statement", ""))


@dataclass
class VerifyResult:
    """Everything :func:`verify` found about one protocol under one algorithm."""

    protocol: str
    algorithm: str
    model: str
    bound: Bound
    properties: dict[str, PropertyResult]
    dependencies: list[Dependency] = field(default_factory=list)
    seconds: float = 0.0
    expected_violation: str | None = None
    cached: bool = False
    engine: str = "native"

    @property
    def ok(self) -> bool:
        """Every property holds under the declared assumptions (unknown is not ok)."""
        return all(r.holds for r in self.properties.values())

    @property
    def depends_on(self) -> list[str]:
        return [d.name for d in self.dependencies if d.needed]

    @property
    def violated(self) -> list[str]:
        return [p for p, r in self.properties.items() if r.violated]

    @property
    def caught(self) -> bool | None:
        """For a mutant: is its expected violation found (with a counterexample)?"""
        if not self.expected_violation:
            return None
        r = self.properties.get(self.expected_violation)
        return bool(r and r.violated and r.counterexample is not None)

    def render(self, counterexamples: bool = True) -> str:
        out = [f"{self.protocol} / {self.algorithm} under {self.model}: "
               f"{'all properties hold' if self.ok else 'NOT verified'} ({self.seconds:.1f} s"
               f"{', cached' if self.cached else ''})",
               f"bound: {self.bound.describe()}"]
        out += [f"note: {n}" for n in self.bound.notes]
        for p in PROPERTIES:
            r = self.properties.get(p)
            if r is None:
                continue
            line = f"  {r.title:<20} {r.status.upper() if r.violated else r.status:<9} {r.seconds:7.2f} s"
            if r.reason and r.status == "unknown":
                line += f"  ({r.reason})"
            if r.note:
                line += f"  [{r.note}]"
            out.append(line)
        for d in self.dependencies:
            out.append(d.describe() + (f" ({d.statement})" if d.statement and d.needed else ""))
        if self.expected_violation:
            out.append(f"mutant: expected {PROPERTY_TITLES[self.expected_violation]} -> "
                       f"{'caught' if self.caught else 'NOT caught'}")
        if counterexamples:
            for p in PROPERTIES:
                r = self.properties.get(p)
                if r is not None and r.counterexample is not None:
                    out.append(f"\ncounterexample: {r.title} ({self.model})")
                    out.append(r.counterexample.render())
            for d in self.dependencies:
                for p, r in d.results.items():
                    # one that fails only without the assumption: the others are shown above already
                    if r.counterexample is not None and not (p in self.properties and self.properties[p].violated):
                        out.append(f"\ncounterexample without {d.name}: {r.title}")
                        out.append(r.counterexample.render())
                        break
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol, "algorithm": self.algorithm, "model": self.model, "engine": self.engine,
            "bound": self.bound.to_json(), "ok": self.ok, "seconds": round(self.seconds, 3),
            "depends_on": self.depends_on, "expected_violation": self.expected_violation, "caught": self.caught,
            "properties": {p: r.to_json() for p, r in self.properties.items()},
            "dependencies": [d.to_json() for d in self.dependencies],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> "VerifyResult":
        return VerifyResult(
            data["protocol"], data["algorithm"], data["model"], Bound.from_json(data["bound"]),
            {p: PropertyResult.from_json(r) for p, r in data["properties"].items()},
            [Dependency.from_json(d) for d in data.get("dependencies", [])], data.get("seconds", 0.0),
            data.get("expected_violation"), cached=True, engine=data.get("engine", "native"))


# ---------------------------------------------------------------------------
# Running the checks
# ---------------------------------------------------------------------------


def _resolve(protocol: str | Protocol, flag_bits: int | None) -> Protocol:
    if isinstance(protocol, Protocol):
        if flag_bits is None:
            return protocol
        proto = protocol
        params = dict(proto.params)
    else:
        proto = load_protocol(protocol)
        params = {}
    if flag_bits is not None:
        if "flag_bits" not in proto.default_params:
            raise InputError(f"protocol {proto.name!r} has no flag width to set", field="--flag-bits")
        if not 1 <= flag_bits <= MAX_FLAG_BITS:
            raise InputError(f"a flag is 1 to {MAX_FLAG_BITS} bits wide", field="--flag-bits")
        params["flag_bits"] = flag_bits
    if isinstance(protocol, Protocol):
        return type(protocol)(**params)
    return load_protocol(protocol, **params)


def _status(result: z3.CheckSatResult) -> str:
    if result == z3.sat:
        return "violated"
    if result == z3.unsat:
        return "holds"
    return "unknown"


#: properties asked of executions in which every thread finishes (the others let polls be stuck)
_FINISHING = ("stale-read", "torn-read", "data-race", "postcondition")


class _Checker:
    """Answers every property query of one lowered instance on one solver, building every term in ``ctx``.

    The instance carries the atomic groups of every assumption set a
    verification needs (``lower_instance(recheck=True)``); one encoding
    (liveness, inputs symbolic behind a ``concrete`` literal, each set's groups
    behind a literal) serves the properties, the re-checks without each
    assumption and the one without the data domain, each asked with
    assumptions on one incremental solver, so what it learns on one query
    serves the next. Where the instance is symmetric under renaming ranks
    (:mod:`collsim.verify.symmetry`), only violations anchored at rank 0 are
    looked for.
    """

    def __init__(self, low: VerifyInstance, model: str, timeout: float, ctx: z3.Context,
                 progress: "Callable[[str], None] | None" = None, slicing: bool = False,
                 hinting: bool = False) -> None:
        self.low = low
        #: ask each query first on the instance sliced to the locations its candidates need (:meth:`_on_slice`)
        self.slicing = slicing and sliceable(low)
        self._slices: dict[frozenset, _Checker] = {}
        #: on a slice's checker: per property, the keys of the candidate violations to ask (the instance's)
        self.only: dict[str, set] = {}
        #: on a slice's checker: the slice
        self.slice: Slice | None = None
        #: look for a violation first under the reads-from of the last one found (large instances only, so
        #: counterexamples at small bounds stay what a free search finds)
        self.hinting = hinting
        self._violation_rf: dict[frozenset[str], list[Any]] = {}
        #: violations found under those hints
        self.hint_hits = 0
        self.model = model
        self.timeout = timeout
        self.ctx = ctx
        self.progress = progress
        self.ref = reference_run(low)
        options = dict(liveness=True, symbolic_inputs=True, input_literal=True, group_literals=True, ctx=ctx)
        # with slices, the whole instance's encoding is built only if a query falls back to it; what seeds the
        # slices (the candidate violations) needs reads-from candidates alone
        self._enc = None if self.slicing else encode(low, model, **options)
        self._options = options
        self.dry = encode(low, model, witnesses_only=True, **options) if self.slicing else None
        # z3's configuration for linear integer arithmetic (relevancy off, among others) proves the arithmetic
        # of counter polls and of sentinel words fastest (atomic-counter 4x3 stale read 1.3 s against 4.8 s,
        # sentinel's collision without the data domain 0.1 s against 2 s), but it assigns every atom of the
        # vector clocks in every model: a finishing execution of barrier at 8x3 took more than a minute to
        # find that way, 3 s with z3's default configuration (the whole check 28 s). Which one only changes
        # how fast an answer comes, never which (unknown is never read as holding).
        self.solver = z3.SolverFor("QF_LIA", ctx=ctx) if arithmetic(low) else z3.SimpleSolver(ctx=ctx)
        self._added = 0
        self.rotation = rank_rotation(low, self.ref) if self.ref.completed else None
        self.word_rotation = word_rotation(low, self.ref) if self.ref.completed else None
        self._queries: dict[tuple[str, bool], Query | None] = {}
        self._vacuous: dict[frozenset[str], str | None] = {}
        self._witness: dict[frozenset[str], str] = {}
        self._unmodelled: list[tuple] = []

    @property
    def enc(self) -> Any:
        """The whole instance's encoding (built on first use where slices come first)."""
        if self._enc is None:
            self._enc = encode(self.low, self.model, **self._options)
        return self._enc

    # -- solving ------------------------------------------------------------------------
    def _sync(self) -> None:
        cons = self.enc.cons
        add_all(self.solver, cons[self._added:])
        self._added = len(cons)

    def _check(self, lits: list[Any]) -> Any:
        self._sync()
        self.solver.set("timeout", max(1, int(self.timeout * 1000)))
        start = time.perf_counter()
        try:
            r = self.solver.check(*lits)
        except z3.Z3Exception as exc:  # pragma: no cover - interrupted
            raise_if_interrupted(self.solver, exc)
            raise
        if r == z3.unknown:  # Ctrl-C stopped z3: the command stops, no "unknown" verdict
            raise_if_interrupted(self.solver, elapsed_s=time.perf_counter() - start, timeout_s=self.timeout)
        return r

    def _check_hinted(self, lits: list[Any], sset: frozenset[str]) -> Any:
        """``_check``, first under the reads-from of the last violation found under ``sset`` where there is one:
        a model under more assumptions is still an execution (sound); unsat or unknown there asks the free query.
        A property violated once is often violated by the same execution (a stale read makes the output wrong)."""
        hints = self._violation_rf.get(sset) if self.hinting else None
        if hints:
            r = self._check(lits + hints)
            if r == z3.sat:
                self.hint_hits += 1
                return r
        return self._check(lits)

    def _mode(self, sset: frozenset[str], finishing: bool, concrete: bool = True) -> list[Any]:
        lits = [self.enc.assuming(sset)]
        if concrete:
            lits.append(self.enc.concrete)
        if finishing:
            lits.append(self.enc.finish)
        return lits

    def _vacuity(self, sset: frozenset[str]) -> str | None:
        """Why no execution in which every thread finishes exists, or None: the reference run's reads-from, tried first, is one."""
        if sset not in self._vacuous:
            lits = self._mode(sset, True)
            hints = [self.enc.rf_lit(None if w is None else self.low.events[w], self.low.events[r])
                     for r, w in self.ref.rf.items()] if self.ref.completed else []
            reason = None
            if not hints or self._check(lits + hints) != z3.sat:
                base = self._check(lits)
                if base != z3.sat:
                    reason = (f"{VACUOUS}: no execution in which every thread finishes exists within the bound, "
                              f"so no poll is ever satisfied and no consumer reached in an execution the property "
                              f"could be judged on (see hang)"
                              if base == z3.unsat else f"solver gave up on the program itself: "
                                                       f"{self.solver.reason_unknown()}")
                else:
                    self._witness[sset] = "found by the solver"
            else:
                self._witness[sset] = "the reference run's reads-from"
            self._vacuous[sset] = reason
        return self._vacuous[sset]

    def _premise(self, sset: frozenset[str]) -> str:
        """The satisfied premise a ``holds`` rests on (after :meth:`_vacuity` found it satisfiable)."""
        polls = sum(1 for i in self.low.instrs if i.kind is InstrKind.POLL)
        reads = sum(1 for e in self.low.events if e.consumer is not None)
        consumers = f", all {reads} consumer read(s) reached" if reads else ""  # none: a slice of polls alone
        return (f"an execution in which every thread finishes ({self._witness[sset]}): all {polls} poll(s) "
                f"satisfied{consumers}")

    # -- queries ------------------------------------------------------------------------
    @staticmethod
    def _query_key(prop: str, with_domain: bool, dry: bool) -> tuple[str, bool]:
        return (prop if prop != "sentinel-collision" else f"{prop}/{with_domain}", dry)

    def _query(self, prop: str, with_domain: bool = True, dry: bool = False) -> Query | None:
        """The query of ``prop`` over the whole encoding, or (``dry``) its candidates over the seeding one."""
        key = self._query_key(prop, with_domain, dry)
        if key not in self._queries:
            self._queries[key] = self._build_query(prop, with_domain, self.dry if dry else self.enc)
        return self._queries[key]

    def _build_query(self, prop: str, with_domain: bool, enc: Any) -> Query | None:
        ref, low = self.ref, self.low
        if prop == "stale-read":
            q = stale_or_early(enc, ref, "stale")
            anchor = lambda d: [d["read"]]  # noqa: E731
        elif prop == "early-overwrite":
            q = stale_or_early(enc, ref, "early")
            anchor = lambda d: [d["read"]]  # noqa: E731
        elif prop == "torn-read":
            q = torn(enc, ref)
            anchor = lambda d: [low.rank_of(d["instr"].thread)]  # noqa: E731
        elif prop == "data-race":
            q = data_race(enc)
            anchor = lambda d: [d["a"], d["b"]]  # noqa: E731
        elif prop == "hang":
            q = hang(enc)
            anchor = lambda d: [low.rank_of(d["instr"].thread)]  # noqa: E731
        elif prop == "postcondition":
            q, self._unmodelled = postcondition(enc)
            if self._unmodelled:
                q.note = (f"{len(low.expected_outputs) - len(self._unmodelled)} of {len(low.expected_outputs)} "
                          f"output elements modelled (shrunk lanes)")
            # with the word rotation, an output is anchored at the reads its value is made of (the rotation
            # takes an output and its reads together to another output and its reads)
            anchor = lambda d: ([low.events[i] for i in sorted(d["value"].reads())]  # noqa: E731
                                if self.word_rotation is not None and isinstance(d.get("value"), Lin) else []
                                ) or [d["output"][0]]
        else:
            q = sentinel_collision(enc, with_domain)
            if with_domain and (low.forbidden_word is not None or low.word_encoding is not None):
                q.note = "under the protocol's data-domain restriction"
            anchor = lambda d: [d["write"]]  # noqa: E731
        ranks, words = self.rotation is not None, self.word_rotation is not None
        if prop in self.only:  # a slice's checker: the instance's anchored candidates, whatever its own symmetry
            keys = self.only[prop]
            kept = [(lit, d) for lit, d in q.witnesses if _witness_key(d, None) in keys]
            q.witnesses = kept
            q.formula = q.restrict(enc, kept)
        elif ranks or words:
            kept = anchored(low, q.witnesses, anchor, ranks, words)
            q.witnesses = kept
            q.formula = q.restrict(enc, kept)
        return q

    def run(self, props: Iterable[str], sset: frozenset[str], bound: Bound,
            with_domain: bool = True) -> dict[str, PropertyResult]:
        props = list(props)
        low = self.low
        results: dict[str, PropertyResult] = {}
        ref_ok = self.ref.completed
        if not ref_ok:
            where = ", ".join(f"thread {t} at {label}" for t, label in self.ref.stuck[:3])
            for p in ("stale-read", "torn-read", "early-overwrite"):
                if p in props:
                    # where no execution finishes at all, that is the reason (the premise is vacuous)
                    results[p] = PropertyResult(p, "unknown", bound, 0.0, self._vacuity(sset) or
                                                f"the reference round-robin execution deadlocked ({where}), so the "
                                                f"intended values are undefined")
        def holds(prop: str, start: float, note: str | None) -> PropertyResult:
            # no "holds" without a premise some execution satisfies: unsat on an empty set of executions is vacuous
            if self.slicing:
                skeleton = self._skeleton()
                if skeleton is not None and skeleton._vacuity(sset) is None:  # it keeps every poll
                    return PropertyResult(prop, "holds", bound, time.perf_counter() - start, note=note,
                                          premise=f"{skeleton._premise(sset)}, "
                                                  f"{skeleton.slice.describe(low, seeded=False)}")
            vacuous = self._vacuity(sset)
            if vacuous is not None:
                return PropertyResult(prop, "unknown", bound, time.perf_counter() - start, vacuous, note=note)
            return PropertyResult(prop, "holds", bound, time.perf_counter() - start, note=note,
                                  premise=self._premise(sset))

        if "sentinel-collision" in props and not low.sentinel_polls:
            results["sentinel-collision"] = holds("sentinel-collision", time.perf_counter(),
                                                  "no poll compares data against a sentinel")
        for prop in PROPERTIES:
            if prop not in props or prop in results:
                continue
            start = time.perf_counter()
            q = self._query(prop, with_domain, dry=self.slicing)
            finishing = prop in _FINISHING
            if z3.is_false(q.formula):
                results[prop] = holds(prop, start, q.note)
                continue
            if self.slicing:
                sliced = self._on_slice(prop, q, sset, bound, with_domain, start)
                if sliced is not None:
                    results[prop] = sliced
                    continue
                q = self._query(prop, with_domain)
            if finishing:
                vacuous = self._vacuity(sset)
                if vacuous is not None:
                    results[prop] = PropertyResult(prop, "unknown", bound, time.perf_counter() - start, vacuous)
                    continue
            if self.progress:
                self.progress(f"  {PROPERTY_TITLES[prop]}: solving ({len(q.witnesses)} candidate violation(s))")
            lits = self._mode(sset, finishing, concrete=prop != "sentinel-collision")
            try:
                r = self._check_hinted(lits + [q.formula], sset)
            except z3.Z3Exception as exc:  # pragma: no cover - interrupted
                results[prop] = PropertyResult(prop, "unknown", bound, time.perf_counter() - start, f"z3 error: {exc}")
                continue
            status = _status(r)
            reason = None
            cex = None
            if status == "unknown":
                reason = self.solver.reason_unknown() or "unknown"
                if "timeout" in reason or "canceled" in reason:
                    reason = f"timeout after {self.timeout:g} s"
            elif status == "violated":
                if self.hinting:
                    model = self.solver.model()
                    self._violation_rf[sset] = [lit for lit in self.enc.rf.values()
                                                if not z3.is_true(lit) and z3.is_true(model.eval(lit))]
                    del model  # when z3 terms are freed steers later searches (their ids are reused)
                cex = build_counterexample(q, self.enc, self.solver.model(), self.ref if ref_ok else None, sset)
            else:
                results[prop] = holds(prop, start, q.note)
                continue
            results[prop] = PropertyResult(prop, status, bound, time.perf_counter() - start, reason, cex, q.note)
        return {p: results[p] for p in PROPERTIES if p in results}

    # -- slices -------------------------------------------------------------------------
    def _sub(self, sl: Slice) -> "_Checker":
        """The checker of slice ``sl`` (one per set of kept locations, sharing this context)."""
        key = frozenset(sl.instance.locs)
        if key not in self._slices:
            sub = self._slices[key] = _Checker(sl.instance, self.model, self.timeout, self.ctx)
            sub.slice = sl
        return self._slices[key]

    def _skeleton(self) -> "_Checker | None":
        """The checker of the instance sliced to its synchronisation alone (no seeds), where that drops enough:
        what a property with no candidate violation rests its premise on while the whole is never solved."""
        sl = slice_instance(self.low, ())
        return self._sub(sl) if sl.dropped >= SLICE_MIN_DROPPED * len(self.low.events) else None

    def _on_slice(self, prop: str, q: Query, sset: frozenset[str], bound: Bound, with_domain: bool,
                  start: float) -> PropertyResult | None:
        """``prop`` asked on the instance sliced to what its candidate violations need, or None (ask the whole).

        Only a ``holds`` is taken from the slice (:mod:`collsim.verify.slicing`: unsat there is unsat here); a
        violation or an unknown there may come from an ordering the slice lacks, so the caller asks the whole
        instance. A slice that keeps most events is not worth its own encoding and is not built.
        """
        seeds: set[int] = set()
        for _, d in q.witnesses:
            seeds |= _events_in(d)
        sl = slice_instance(self.low, seeds)
        if sl.dropped < SLICE_MIN_DROPPED * len(self.low.events):
            return None
        sub = self._sub(sl)
        sub.only[prop] = {_witness_key(d, sl.to_slice) for _, d in q.witnesses}
        sub._queries.pop(self._query_key(prop, with_domain, False), None)  # asked with this call's candidates
        if self.progress:
            self.progress(f"  {PROPERTY_TITLES[prop]}: solving ({len(q.witnesses)} candidate violation(s)) on a "
                          f"slice of {len(sl.instance.events)} of {len(self.low.events)} events")
        found = sub.run([prop], sset, bound, with_domain)[prop]
        asked = sub._query(prop, with_domain)
        if not found.holds or asked is None or len(asked.witnesses) != len(q.witnesses):
            return None
        return replace(found, seconds=time.perf_counter() - start, note=q.note,
                       premise=f"{found.premise}, {sl.describe(self.low)}")


#: A slice is built only when it leaves out at least this share of the instance's events.
SLICE_MIN_DROPPED = 0.25
#: Verifications with at least this many unknowns (:class:`ProblemSize`) whose solver runs in z3's
#: linear-arithmetic configuration (:func:`arithmetic`) ask their queries on slices first. That configuration
#: assigns every atom of the encoding, so its time follows the encoding's size, which a slice cuts
#: (atomic-counter 4x3: 12.2 -> 4.3 s); z3's default configuration assigns only the atoms a query reaches, and
#: there the extra encodings cost more than they save (barrier 8x3: 31 s whole, 42 s with slices).
SLICE_UNKNOWNS = 5_000


def arithmetic(low: VerifyInstance) -> bool:
    """Whether a poll waits on a counter or on a sentinel: the checker then solves with z3's linear-arithmetic
    configuration (:class:`_Checker`)."""
    return counted_increments(low) > 0 or bool(low.sentinel_polls)


def _events_in(d: dict) -> set[int]:
    """The event ids a candidate violation's description names (events, instructions, linear terms)."""
    found: set[int] = set()
    stack = list(d.values())
    while stack:
        v = stack.pop()
        if isinstance(v, Event):
            found.add(v.id)
        elif isinstance(v, Instr):
            found |= {e.id for e in v.events}
        elif isinstance(v, Lin):
            found |= v.reads()
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return found


def _witness_key(d: dict, ids: dict[int, int] | None) -> tuple:
    """What identifies a candidate violation across an instance and its slice (``ids``: event ids to the slice)."""
    def norm(v: Any) -> Any:
        if isinstance(v, Event):
            return ("e", v.id if ids is None else ids[v.id])
        if isinstance(v, Instr):
            return ("i", v.thread, v.index)
        if isinstance(v, Lin):
            return ("lin", v.c, tuple(sorted(((k[0], k[1] if ids is None else ids[k[1]]) + tuple(k[2:])
                                              if k[0] == "rd" else k, c) for k, c in v.terms.items())))
        if isinstance(v, (list, tuple)):
            return tuple(norm(x) for x in v)
        if isinstance(v, z3.AstRef):
            return ("z3", v.sexpr())
        return v
    # "intended" names the reference run's write by event id (None: the initial value)
    return tuple(sorted((k, norm(v) if k != "intended" or v is None else ("e", v if ids is None else ids[v]))
                        for k, v in d.items()))


@dataclass(frozen=True)
class ProblemSize:
    """How large one verification's encoding is, counted on the lowered instance before any solving.

    ``rf_choices`` is the number of (write, read) pairs at the same element (each read's initial value
    included): the reads-from unknowns before the static analysis drops some; ``co_pairs`` the pairs of
    writes to one element whose coherence order is unknown before solving. Their sum, ``unknowns``, is the
    estimate the CLI reports and warns on (docs/PERFORMANCE.md relates it to measured times).
    """

    events: int
    reads: int
    writes: int
    rf_choices: int
    co_pairs: int
    #: over every poll of a counter (a location only RMWs adding constants write), the increments at it: how
    #: many arrivals a proof must place before or after each wait (:func:`counted_increments`)
    counted: int = 0

    @property
    def unknowns(self) -> int:
        return self.rf_choices + self.co_pairs

    def __str__(self) -> str:
        text = (f"{self.events} events, about {self.unknowns} unknowns ({self.rf_choices} reads-from choices, "
                f"{self.co_pairs} coherence pairs)")
        return text + (f", {self.counted} counted increments" if self.counted else "")


#: Above this many unknowns a verification usually runs for more than a few seconds: the CLI shows the size.
LONG_UNKNOWNS = 5_000
#: Above this many unknowns no verification measured so far finished within a few minutes on a 2-core machine
#: (the ring programs at 8 ranks x 3 launches, 44k-58k unknowns: simple ended unverified after 150 s of CPU,
#: ll128 had not finished after more than 100 s); the CLI warns.
SLOW_UNKNOWNS = 40_000


#: Above this many counted increments (:func:`counted_increments`) a verification took minutes or did not finish:
#: nvls at 3x3 (81) took 28 s of CPU, at 4x3 (144) no query finished within 30 s; atomic-counter at 4x3 (80)
#: took 11 s, at 8x3 (320) did not finish in 145 s. The CLI warns; with more than LONG_COUNTED it shows progress.
SLOW_COUNTED = 100
LONG_COUNTED = 60


def counted_increments(low: VerifyInstance) -> int:
    """Over every poll of a counter, the number of increments at the polled location (cheap: no encoding).

    A counter is a location written only by RMWs that add a constant (an arrival counter, a multicast
    barrier's copy). A poll ``counter >= K`` on one is satisfied by *some* K of its increments, so a proof
    that it waits long enough has to show which arrivals precede it and which cannot (later launches' ones),
    a counting argument over every increment at the location; this measures that work, and it predicts the
    hard queries the reads-from count does not (nvls at 4x3: 1 972 unknowns, queries of minutes).
    """
    counters: dict[Any, int] = {}
    for loc in low.locs:
        ws = low.writes_at(loc)
        if ws and all(constant_increment(w) is not None for w in ws):
            counters[loc] = len(ws)
    return sum(counters.get(e.loc, 0) for i in low.instrs if i.kind is InstrKind.POLL for e in i.events
               if e.polled)


def problem_size(low: VerifyInstance) -> ProblemSize:
    """The :class:`ProblemSize` of a lowered instance (cheap: no encoding is built)."""
    reads = [e for e in low.events if e.is_read]
    writes = [e for e in low.events if e.is_write]
    rf = sum(1 + len(low.writes_at(e.loc)) - (1 if e.is_write else 0) for e in reads)
    co = 0
    for loc in low.locs:
        ws = low.writes_at(loc)
        co += sum(1 for i, a in enumerate(ws) for b in ws[i + 1:] if a.thread != b.thread)
    return ProblemSize(len(low.events), len(reads), len(writes), rf, co, counted_increments(low))


def estimate(protocol: str | Protocol, algorithm: str | None = None, **kwargs: Any) -> ProblemSize:
    """The :class:`ProblemSize` :func:`verify` with the same arguments would solve (lowers, never solves)."""
    plan = _plan(protocol, algorithm, **{k: v for k, v in kwargs.items() if k not in ("timeout", "use_cache")})
    return problem_size(plan.low)


def _bound(low: VerifyInstance, bounds: Bounds, model: str, assumptions: tuple[str, ...], data_domain: bool) -> Bound:
    return Bound(bounds.ranks, bounds.iterations, bounds.lines, bounds.threads, model, assumptions, data_domain,
                 tuple(low.notes), bounds.ctas)


def _bounds_for(proto: Protocol, algorithm: str, ranks, iterations, lines, threads,
                max_lanes, sizes: tuple[int, ...] | None = None, ctas=None) -> tuple[Bounds, str | None]:
    """The bound to check: the options given, else the protocol's ``verify_bounds`` hints, else the defaults.

    The default threads and lines come from the width of the data path (:func:`~collsim.verify.lower.data_path`):
    2 threads x 2 lines where an operation moves more than one line or a line has more than one lane, so the
    threads of a block take lines in turn and a flag published before another thread's data is seen. The note
    (printed with the bound) says so when those defaults decide.
    """
    hints = dict(getattr(proto, "verify_bounds", {}) or {})
    chosen_ctas = ctas if ctas is not None else hints.get("ctas", min(proto.ctas, MAX_VERIFIED_CTAS))
    if chosen_ctas > proto.ctas:
        raise InputError(_more_ctas_than_declared(proto, chosen_ctas),
                         field="--ctas" if ctas is not None else "verify_bounds",
                         choices=[str(n) for n in range(1, proto.ctas + 1)])
    path = data_path(proto, algorithm)
    chosen_lines = lines if lines is not None else hints.get("lines", path.default_lines)
    chosen_threads = threads if threads is not None else hints.get("threads", path.default_threads)
    lines_defaulted = lines is None and "lines" not in hints
    threads_defaulted = threads is None and "threads" not in hints
    bounds = Bounds(ranks=ranks if ranks is not None else hints.get("ranks", 3),
                    iterations=iterations if iterations is not None else hints.get("iterations", 2),
                    lines=chosen_lines, threads=chosen_threads,
                    max_lanes=max_lanes if max_lanes is not None else hints.get("max_lanes", 2), sizes=sizes,
                    ctas=chosen_ctas)
    defaulted = threads_defaulted or lines_defaulted
    return bounds, (path.describe(threads=threads_defaulted, lines=lines_defaulted) if defaulted else None)


def _more_ctas_than_declared(proto: Protocol, ctas: int) -> str:
    """Why a bound of ``ctas`` CTAs per rank is not a kernel ``proto`` runs.

    The CTAs a protocol declares (``ctas``) share its buffers and meet through them; the other CTAs of a
    launch are channels, each with its own copy of every buffer, its own launch counter and its own part of
    the message (as the emitted kernel runs them), so they never touch each other's memory and one channel
    is the whole check. A program generated for more CTAs than declared would have them share buffers the
    protocol never partitioned among CTAs: a kernel nobody runs, whose collisions would be reported as bugs.
    """
    if proto.ctas == 1:
        return (f"protocol {proto.name!r} runs one CTA per rank: its kernel's other CTAs are channels with buffers "
                f"of their own, so one CTA is the whole check (a protocol whose CTAs share buffers declares ctas; "
                f"docs/WRITING_PROTOCOLS.md §17), not {ctas}")
    return (f"protocol {proto.name!r} runs {proto.ctas} CTAs per rank: a bound may check fewer CTAs than its kernel "
            f"launches, not {ctas}")


def size_sequences(lines: int, iterations: int) -> list[tuple[int, ...]]:
    """The per-launch sizes (lines per chunk) :func:`verify` checks for a protocol with ``varying_sizes``: the
    largest in every launch first, then every sequence of 1 .. ``lines`` in which the size changes (a sequence
    of one smaller size throughout is a fixed-size instance of a smaller bound).

    >>> size_sequences(2, 2)
    [(2, 2), (2, 1), (1, 2)]
    """
    changing = [s for s in itertools.product(range(lines, 0, -1), repeat=iterations) if len(set(s)) > 1]
    return [(lines,) * iterations] + changing


@dataclass
class _Plan:
    """What one :func:`verify` call checks: the protocol, its lowered program at the bound, and its cache key."""

    proto: Protocol
    algorithm: str
    bounds: Bounds
    low: VerifyInstance
    active: tuple[str, ...]
    domain: bool
    props: list[str]
    expected: str | None
    key: str


def _plan(protocol: str | Protocol, algorithm: str | None, *, ranks: int | None = None,
          iterations: int | None = None, model: str = "ptx", assume: Iterable[str] | None = None,
          flag_bits: int | None = None, lines: int | None = None, threads: int | None = None,
          max_lanes: int | None = None, dependencies: bool = True, properties: Iterable[str] | None = None,
          sizes: Iterable[int] | None = None, ctas: int | None = None) -> _Plan:
    """Check the arguments of :func:`verify` and lower the program (no solving)."""
    if model not in ("ptx", "sc"):
        raise InputError(f"unknown memory model {model!r}", field="--model", choices=["ptx", "sc"])
    proto = _resolve(protocol, flag_bits)
    algorithm = algorithm or proto.algorithms[0]
    if algorithm not in proto.algorithms:
        raise InputError(f"protocol {proto.name!r} has no {algorithm} program", field="--algorithm",
                         choices=proto.algorithms)
    declared = tuple(proto.assumptions)
    active = declared if assume is None else tuple(dict.fromkeys(assume))
    for a in active:
        get_assumption(a)
    props = list(PROPERTIES) if properties is None else [normalize_property(p) for p in properties]
    if sizes is not None:
        sizes = tuple(sizes)
        if len(set(sizes)) > 1 and not proto.varying_sizes:
            raise InputError(f"protocol {proto.name!r} runs every launch at one message size (it does not declare "
                             "varying_sizes): per-launch sizes do not apply", field="--sizes")
        if lines is None:
            lines = max(sizes, default=1)
    try:
        bounds, bound_note = _bounds_for(proto, algorithm, ranks, iterations, lines, threads, max_lanes, sizes,
                                         ctas)
    except ValueError as err:
        if sizes is None:
            raise
        raise InputError(str(err), field="--sizes") from None
    expected = normalize_property(proto.expected_violation) if proto.expected_violation else None
    low = lower_instance(proto, algorithm, bounds, active, recheck=dependencies)
    if bound_note:
        low.notes.insert(0, bound_note)
    if bounds.sizes is not None:
        low.notes.append(f"message size per launch: {'/'.join(map(str, bounds.sizes))} line(s) per chunk "
                         f"(buffers allocated for {bounds.lines})")
    key = _cache.cache_key({
        "protocol": list(proto.key), "algorithm": algorithm, "program": low.flat_signature, "bounds": repr(bounds),
        "model": model, "assumptions": list(active), "data_domain": repr(proto.data_domain), "properties": props,
        "dependencies": dependencies,
    })
    return _Plan(proto, algorithm, bounds, low, active, proto.data_domain is not None, props, expected, key)


def verify(
    protocol: str | Protocol,
    algorithm: str | None = None,
    *,
    ranks: int | None = None,
    iterations: int | None = None,
    model: str = "ptx",
    assume: Iterable[str] | None = None,
    flag_bits: int | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    lines: int | None = None,
    threads: int | None = None,
    max_lanes: int | None = None,
    dependencies: bool = True,
    properties: Iterable[str] | None = None,
    use_cache: bool = True,
    progress: "Callable[[str], None] | None" = None,
    sizes: Iterable[int] | None = None,
    ctas: int | None = None,
    slicing: bool | None = None,
) -> VerifyResult:
    """Check every property of ``protocol`` under ``algorithm`` (default: its first) at a bound.

    Parameters
    ----------
    protocol : str or Protocol
        A shipped or mutant name, a ``.py`` path, or an instance.
    assume : names, optional
        Hardware assumptions to prove under (default: the protocol's declared ones).
    flag_bits : int, optional
        Override the protocol's ``flag_bits`` parameter (epoch wrap-around).
    ctas : int, optional
        CTAs per rank in the bound (default: the protocol's ``ctas``, at most :data:`MAX_VERIFIED_CTAS`); more
        than the protocol's is an :class:`~collsim.errors.InputError` (a one-CTA protocol's other CTAs are
        channels with buffers of their own).
    slicing : bool, optional
        Ask each query first on the instance sliced to the locations its candidate violations need
        (:mod:`collsim.verify.slicing`; a ``holds`` there is one here, anything else is asked on the whole).
        Default: for instances of at least :data:`SLICE_UNKNOWNS` unknowns that poll counters or sentinels
        (:func:`arithmetic`). Statuses do not depend on it; a premise found on a slice says which.
    dependencies : bool
        Also re-check without each assumption and without the data-domain restriction.
    properties : names, optional
        A subset of :data:`~collsim.verify.properties.PROPERTIES`.
    progress : callable, optional
        Called with one line of text as the check goes: the :class:`ProblemSize` first, then each property
        being solved and each re-check (the CLI shows it as a status line).
    sizes : ints, optional
        The lines per chunk of each launch (one per iteration), for a protocol whose message size changes
        between launches (``varying_sizes``). Default for such a protocol: every sequence of
        :func:`size_sequences`, each checked on its own, the verdicts merged (a property holds when it holds
        for every sequence; a violation names its sequence).

    Returns
    -------
    VerifyResult
    """
    start = time.perf_counter()
    common = dict(ranks=ranks, iterations=iterations, model=model, assume=assume, flag_bits=flag_bits, lines=lines,
                  threads=threads, max_lanes=max_lanes, dependencies=dependencies, properties=properties, ctas=ctas)
    enumerated = _size_enumeration(protocol, algorithm, sizes, common)
    if enumerated is not None:
        bounds, sequences = enumerated
        runs = [verify(protocol, algorithm, timeout=timeout, use_cache=use_cache, progress=progress, sizes=seq,
                       slicing=slicing, **common) for seq in sequences]
        return _merged_sizes(runs, sequences, bounds, time.perf_counter() - start)
    plan = _plan(protocol, algorithm, sizes=sizes, **common)
    proto, algorithm, bounds, low, active, domain, props, expected, key = (
        plan.proto, plan.algorithm, plan.bounds, plan.low, plan.active, plan.domain, plan.props, plan.expected,
        plan.key)
    if slicing is not None:  # the verdicts are the same; the premises name the slices
        key = _cache.cache_key({"plan": key, "slicing": slicing})
    if use_cache:
        cached = _cache.load(key)
        if cached is not None:
            result = VerifyResult.from_json(cached)
            result.expected_violation = expected
            return result
    # Z3's choice of counterexample depends on the terms its context already holds: a context of its own
    # makes a verdict and its counterexample independent of what this process solved before (serially, in
    # a pool worker or on a Dask worker alike).
    if progress:
        progress(f"{proto.name} ({algorithm}) at {bounds.ranks}x{bounds.iterations}: {problem_size(low)}")
    with long_integer_text():
        results, deps = _check_all(proto, algorithm, bounds, low, model, active, domain, timeout, props,
                                   dependencies, z3.Context(), progress, slicing)
    result = VerifyResult(proto.name, algorithm, model, _bound(low, bounds, model, active, domain), results, deps,
                          time.perf_counter() - start, expected)
    if use_cache:
        _cache.store(key, result.to_json())
    return result


def _size_enumeration(protocol: str | Protocol, algorithm: str | None, sizes: Any,
                      options: dict[str, Any]) -> tuple[Bounds, list[tuple[int, ...]]] | None:
    """For a protocol with ``varying_sizes`` checked without ``sizes``: its bound and the sequences to check
    (:func:`size_sequences`); ``None`` for any other call (bad arguments are left to :func:`_plan`)."""
    if sizes is not None:
        return None
    proto = _resolve(protocol, options.get("flag_bits"))
    algorithm = algorithm or proto.algorithms[0]
    if not proto.varying_sizes or algorithm not in proto.algorithms:
        return None
    bounds, _ = _bounds_for(proto, algorithm, *(options.get(k) for k in ("ranks", "iterations", "lines", "threads",
                                                                         "max_lanes")))
    return bounds, size_sequences(bounds.lines, bounds.iterations)


def _first_failing(results: list[PropertyResult], sequences: list[tuple[int, ...]]) -> PropertyResult:
    """A violated result, else one that is unknown (either noting the sizes it was found at), else the first."""
    for keep in (lambda r: r.violated, lambda r: not r.holds):
        for r, seq in zip(results, sequences):
            if keep(r):
                where = f"at launches of {'/'.join(map(str, seq))} line(s) per chunk"
                return replace(r, note=f"{r.note}; {where}" if r.note else where)
    return results[0]


def _merged_sizes(runs: list[VerifyResult], sequences: list[tuple[int, ...]], bounds: Bounds,
                  seconds: float) -> VerifyResult:
    """One verdict from the verdicts of every per-launch size sequence (see :func:`size_sequences`)."""
    first = runs[0]
    props = {p: _first_failing([run.properties[p] for run in runs], sequences) for p in first.properties}
    deps = []
    for k, dep in enumerate(first.dependencies):
        names = set().union(*(run.dependencies[k].results for run in runs))
        merged = {}
        for p in sorted(names):
            found = [(run.dependencies[k].results[p], seq) for run, seq in zip(runs, sequences)
                     if p in run.dependencies[k].results]
            merged[p] = _first_failing([r for r, _ in found], [seq for _, seq in found])
        deps.append(Dependency(dep.name, dep.kind, merged, dep.statement))
    note = (f"message size per launch: each of {len(runs)} sequences of 1..{bounds.lines} line(s) per chunk over "
            f"{bounds.iterations} launches (the largest throughout, and every sequence in which the size changes; "
            f"enumerated, each checked on its own)")
    notes = tuple(n for n in first.bound.notes if not n.startswith("message size per launch")) + (note,)
    return VerifyResult(first.protocol, first.algorithm, first.model, replace(first.bound, notes=notes), props, deps,
                        seconds, first.expected_violation, cached=all(run.cached for run in runs),
                        engine=first.engine)


def _check_all(proto: Protocol, algorithm: str, bounds: Bounds, low: VerifyInstance, model: str,
               active: tuple[str, ...], domain: bool, timeout: float, props: list[str], dependencies: bool,
               ctx: z3.Context, progress: "Callable[[str], None] | None" = None, slicing: bool | None = None
               ) -> tuple[dict[str, PropertyResult], list[Dependency]]:
    """The properties under ``active``, and (with ``dependencies``) without each assumption and the data domain.

    ``low`` carries the atomic groups of every set of assumptions asked
    (``lower_instance(..., recheck=True)``). Every term is built, and every
    query solved, in ``ctx``, on one solver.
    """
    if slicing is None:  # where slices pay (SLICE_UNKNOWNS)
        slicing = arithmetic(low) and problem_size(low).unknowns >= SLICE_UNKNOWNS
    large = problem_size(low).unknowns >= SLICE_UNKNOWNS
    checker = _Checker(low, model, timeout, ctx, progress, slicing=slicing, hinting=large)
    full = frozenset(active)
    results = checker.run(props, full, _bound(low, bounds, model, active, domain))
    deps: list[Dependency] = []
    if dependencies:
        dep_props = [p for p in props if p != "sentinel-collision"]
        for a in active:
            rest = tuple(x for x in active if x != a)
            if progress:
                progress(f"re-checking without {a}")
            if get_assumption(a).is_granule:
                # Fewer atomic groups allow every execution more allow, so what is violated under all of
                # ``active`` is violated without ``a`` by the same execution: only the rest is asked again.
                without = _bound(low, bounds, model, rest, domain)
                asked = [p for p in dep_props if p not in results or not results[p].violated]
                res2 = checker.run(asked, frozenset(rest), without)
                res2.update({p: replace(results[p], bound=without, seconds=0.0)
                             for p in dep_props if p not in asked})
                res2 = {p: res2[p] for p in PROPERTIES if p in res2}
            else:  # an ordering assumption (host-tso) changes the events themselves: an instance of its own
                res2 = _recheck_without_ordering(proto, algorithm, bounds, low, model, rest, domain, timeout,
                                                 dep_props, ctx, progress)
            deps.append(Dependency(a, "assumption", {p: r for p, r in res2.items() if not r.holds},
                                   get_assumption(a).statement))
        if domain and "sentinel-collision" in props and low.sentinel_polls:
            if progress:
                progress("re-checking without the data domain")
            res2 = checker.run(["sentinel-collision"], full, _bound(low, bounds, model, active, False),
                               with_domain=False)
            deps.append(Dependency(DATA_DOMAIN, "data-domain", {p: r for p, r in res2.items() if not r.holds},
                                   proto.data_domain.statement))
    return results, deps


def _recheck_without_ordering(proto: Protocol, algorithm: str, bounds: Bounds, low: VerifyInstance, model: str,
                              rest: tuple[str, ...], domain: bool, timeout: float, props: list[str],
                              ctx: z3.Context, progress: "Callable[[str], None] | None"
                              ) -> dict[str, PropertyResult]:
    """The properties under ``rest``, an assumption set that lacks an ordering assumption: the program is lowered
    again (the host's accesses become relaxed) and solved on a checker of its own; the notes are ``low``'s, with
    the host-ordering one as the new instance states it."""
    again = lower_instance(proto, algorithm, bounds, rest)
    ordering = [n for n in again.notes if n.startswith("host ordering")]
    again.notes = [ordering[0] if ordering and n.startswith("host ordering") else n for n in low.notes]
    return _Checker(again, model, timeout, ctx, progress).run(props, frozenset(rest),
                                                               _bound(again, bounds, model, rest, domain))


def verdict_for(protocol: str | Protocol, algorithm: str | None = None, model: str = "ptx", *,
                solve: bool = True, **kwargs: Any) -> VerifyResult | None:
    """The verdict for ``protocol`` under ``algorithm``, from the on-disk cache when present.

    With ``solve=False`` it never runs the solver and returns ``None`` when
    no verdict is cached (so a consumer such as the CUDA emitter can refuse
    an unverified protocol cheaply); it looks up the key :func:`verify`
    stores, and checks its arguments as :func:`verify` does. Keyword
    arguments are :func:`verify`'s.
    """
    if not solve:
        enumerated = _size_enumeration(protocol, algorithm, kwargs.get("sizes"), kwargs)
        if enumerated is not None:
            bounds, sequences = enumerated
            runs = [verdict_for(protocol, algorithm, model, solve=False, **{**kwargs, "sizes": seq})
                    for seq in sequences]
            if any(run is None for run in runs):
                return None
            return _merged_sizes(runs, sequences, bounds, sum(run.seconds for run in runs))  # type: ignore[union-attr]
        plan = _plan(protocol, algorithm, model=model,
                     **{k: v for k, v in kwargs.items() if k not in ("timeout", "use_cache")})
        data = _cache.load(plan.key)
        if data is None:
            return None
        result = VerifyResult.from_json(data)
        result.expected_violation = plan.expected
        return result
    return verify(protocol, algorithm, model=model, **kwargs)


@dataclass
class FailedRun:
    """A :func:`verify_all` job that raised on every attempt: ``status`` is ``"error"``.

    Attributes
    ----------
    protocol, algorithm : str
        What was being verified.
    kind : str
        ``"protocol"`` (a shipped protocol) or ``"mutant"``.
    error : str
        ``"ExceptionType: message"`` of the last attempt.
    attempts : int
        Calls made (2 after the retry; 1 when the protocol did not even load).
    """

    protocol: str
    algorithm: str
    kind: str
    error: str
    attempts: int = 1
    status: str = "error"

    def to_json(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "algorithm": self.algorithm, "kind": self.kind, "status": self.status,
                "error": self.error, "attempts": self.attempts}


@dataclass
class Summary:
    """``verify --all``: shipped protocols, mutants, and the jobs that failed (each in job order)."""

    protocols: list[VerifyResult]
    mutants: list[VerifyResult]
    seconds: float = 0.0
    failed: list[FailedRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and all(r.ok for r in self.protocols) and all(r.caught for r in self.mutants)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": round(self.seconds, 2),
                "protocols": [r.to_json() for r in self.protocols], "mutants": [r.to_json() for r in self.mutants],
                "failed": [f.to_json() for f in self.failed]}


def _previous_seconds(job: tuple[str, str, dict[str, Any]]) -> float | None:
    """How long this exact check took when it last ran here (from the verdict cache), if it did."""
    name, algorithm, kwargs = job
    try:
        plan = _plan(name, algorithm, **{k: v for k, v in kwargs.items() if k not in ("timeout", "use_cache")})
    except Exception as exc:  # noqa: BLE001 - only a hint; the job itself will report the problem
        if is_interrupt(exc):
            raise
        return None
    cached = _cache.load(plan.key)
    seconds = cached.get("seconds") if cached else None
    return float(seconds) if isinstance(seconds, (int, float)) else None


def _verify_job(job: tuple[str, str, dict[str, Any]]) -> VerifyResult:
    """Run one :func:`verify_all` job, ``(protocol, algorithm, keyword arguments)``, on a worker."""
    name, algorithm, kwargs = job
    return verify(name, algorithm, **kwargs)


def _all_jobs(only: Iterable[str] | None, algorithm: str | None, common: dict[str, Any]
              ) -> list[tuple[str, tuple[str, str, dict[str, Any]] | FailedRun]]:
    """``(kind, job)`` for every run :func:`verify_all` makes, in order; a protocol that does not load is a FailedRun."""
    shipped, mutants = list_protocols(), list_mutants()
    if only is None:
        entries: list[tuple[str, str | None]] = [(n, "protocol") for n in shipped] + [(n, "mutant") for n in mutants]
    else:
        entries = []
        for name in dict.fromkeys(only):
            if name.endswith(".py") or "/" in name:
                entries.append((name, None))
            elif name in shipped or name in mutants:
                entries.append((name, "protocol" if name in shipped else "mutant"))
            else:
                raise InputError(f"unknown protocol {name!r}", field="only", choices=shipped + mutants)
    jobs: list[tuple[str, tuple[str, str, dict[str, Any]] | FailedRun]] = []
    for name, kind in entries:
        try:
            proto = load_protocol(name)
        except Exception as exc:  # noqa: BLE001 - reported as this run's failure; the others still run
            if is_interrupt(exc):
                raise
            kind = kind or "protocol"
            jobs.append((kind, FailedRun(name, algorithm or "-", kind, f"{type(exc).__name__}: {exc}")))
            continue
        if kind is None:
            kind = "mutant" if proto.expected_violation else "protocol"
        if kind == "protocol":
            if algorithm and algorithm not in proto.algorithms:
                continue
            # all of them: every program the protocol has, the ones `collsim emit --all` prints; a chosen few
            # (``only``): each under its first algorithm
            for alg in [algorithm] if algorithm else list(proto.algorithms) if only is None else proto.algorithms[:1]:
                jobs.append((kind, (name, alg, dict(common))))
        else:
            alg = algorithm if algorithm in proto.algorithms else proto.algorithms[0]
            jobs.append((kind, (name, alg, {**common, "dependencies": False})))
    return jobs


def verify_all(*, algorithm: str | None = None, model: str = "ptx", ranks: int | None = None,
               iterations: int | None = None, timeout: float = DEFAULT_TIMEOUT_S, mutants: bool = True,
               use_cache: bool = True, only: Iterable[str] | None = None, executor: Any = "local",
               workers: int | None = None, scheduler: str | None = None, progress: Any = None,
               **kwargs: Any) -> Summary:
    """Verify every shipped protocol (under ``algorithm``, or under each algorithm it has: every program
    ``collsim emit --all`` prints) and catch every mutant (under ``algorithm`` where it has it, else its first);
    with ``only``, each protocol named is verified under ``algorithm`` or its first.

    The runs go through :func:`collsim.executors.map_tasks`, so they can be
    spread over processes or a Dask cluster; verdicts and their order do not
    depend on where they ran. A run that raises is tried once more, then
    listed in :attr:`Summary.failed` (and the summary is not ok) while every
    other run is kept. Workers use the verdict cache of their own working
    directory, which for ``processes`` and a local Dask cluster is this one.

    Parameters
    ----------
    mutants : bool
        Also run the mutants (each is expected to be caught).
    only : names or paths, optional
        Run just these (shipped or mutant names, or ``.py`` files; a file
        counts as a mutant when it declares ``expected_violation``), in this order.
    executor, workers, scheduler
        Where runs go; see :func:`collsim.executors.open_executor`.
    progress : None, bool, str or callable
        As for :func:`collsim.executors.map_tasks` (``True``: a progress bar on a terminal).
    **kwargs
        Further :func:`verify` arguments (``flag_bits``, ``lines``, ``threads``, ...).

    Returns
    -------
    Summary

    Raises
    ------
    InputError
        An unknown memory model, executor option or name in ``only``.
    """
    if model not in ("ptx", "sc"):
        raise InputError(f"unknown memory model {model!r}", field="--model", choices=["ptx", "sc"])
    if isinstance(executor, str):
        check_executor_options(executor, workers=workers, scheduler=scheduler)
    start = time.perf_counter()
    common = dict(model=model, ranks=ranks, iterations=iterations, timeout=timeout, use_cache=use_cache, **kwargs)
    jobs = [(kind, job) for kind, job in _all_jobs(only, algorithm, common) if mutants or kind == "protocol"]
    todo = [job for _, job in jobs if not isinstance(job, FailedRun)]
    weights = None
    if executor != "local":
        # Longest first, by the time each check took when it last ran here, so the slow ones do not end alone.
        hints = [_previous_seconds(job) for job in todo]
        known = sorted(h for h in hints if h is not None)
        typical = known[len(known) // 2] if known else 1.0
        weights = [typical if h is None else h for h in hints]
    outcomes = iter(map_tasks(_verify_job, todo, executor, workers=workers, scheduler=scheduler,
                              progress=progress, chunksize=1, weights=weights))
    shipped: list[VerifyResult] = []
    caught: list[VerifyResult] = []
    failed: list[FailedRun] = []
    for kind, job in jobs:
        if isinstance(job, FailedRun):
            failed.append(job)
            continue
        outcome = next(outcomes)
        if outcome.ok:
            (shipped if kind == "protocol" else caught).append(outcome.value)
        else:
            failed.append(FailedRun(job[0], job[1], kind, outcome.error or "unknown error", outcome.attempts))
    return Summary(shipped, caught, time.perf_counter() - start, failed)
