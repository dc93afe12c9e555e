"""Litmus tests in the suite's JSONL format: parse, lower to events, evaluate.

One test per line. Fields used (others are kept as metadata):

``name``
    test name.
``init``
    ``{"x": 0, "P1:r3": 0}``: initial memory and register values (default 0).
``aliases``
    ``[{"name": "y", "proxy": "generic", "of": "x"}]``: ``y`` is another
    virtual address of ``x``. Only generic-proxy aliases can be accessed.
``placement``
    ``[{"thread": "P0", "cta": 0, "gpu": 0}, ...]``, one per thread, in order.
``threads``
    one list of operations per thread (see :data:`OPS` for the fields of
    each). Values are ints or register names.
``condition``
    ``{"quantifier": "exists" | "~exists" | "forall", "expr": "P1:r1 == 1 /\\ x != 2"}``,
    optionally with ``"filter"`` (a proposition) and ``"locations"`` (a list
    of terms, or herd's ``"[x; 1:r0;]"``); or herd's whole final section as
    one string: ``"locations [x; 1:r0;] filter (1:r0 = 1) exists (1:r1 = 0 /\\ x = 2)"``.
    ``filter``/``locations`` may also be fields of the test. The
    proposition language is herd's and Dat3M's: ``/\\`` ``\\/`` ``~``
    (also ``&&`` ``||`` ``!`` ``not``), ``=>``, parentheses, ``true`` /
    ``false``; comparisons ``=`` ``==`` ``!=`` ``<>`` ``<`` ``<=`` ``>``
    ``>=`` between terms: a final register value ``P1:r0`` / ``1:r0`` /
    ``P1:%r0``, a final memory value ``x`` / ``[x]`` / ``*x``, an integer.
``expected``
    ``"allowed"`` or ``"forbidden"``: whether the *outcome* is reachable. The
    outcome is ``filter /\\ expr`` for ``exists``/``~exists`` and
    ``filter /\\ ~expr`` for ``forall`` (herd: executions that fail the
    filter are discarded before the quantifier); ``locations`` only adds
    values to the witness. Optional: a test without it has its outcome
    reported and nothing to agree with (``collsim litmus`` does not fail on it).

A test that uses a construct the model does not cover (an access through a
texture, surface or constant proxy alias, a proxy fence other than
``fence.proxy.alias`` and ``fence.proxy.async``, an asynchronous-proxy
operation other than ``cp.async.bulk``, irreducible control flow) is
reported ``unsupported`` with that construct by
:func:`load_jsonl` / :func:`evaluate`, and the other tests of the file still
run; :func:`parse_test` raises :class:`~collsim.errors.UnsupportedError`.

Qualifiers: ``sem`` ``weak | relaxed | acquire | release | acq_rel`` (and
``volatile`` = relaxed.sys, ``mmio`` = relaxed); strong operations without a
scope get ``gpu`` (PTX's default for ``atom``/``red``). Fences: ``sc``,
``acq_rel`` (``acquire``/``release``), ``proxy.alias`` for
``fence.proxy.alias`` and ``proxy.async`` for ``fence.proxy.async``; other
proxies are not modelled (UnsupportedError).

The async proxy: ``{"op": "cp.async.bulk", "reg": "r0", "loc": "x"}`` is a
bulk async copy of ``x`` (into shared memory, completing on an mbarrier the
thread waits on) whose result the thread then holds in ``r0``. The model
(the protocol verifier's, :mod:`collsim.verify.lower`) gives the copy an
engine thread of its own in the issuer's CTA: handed the copy with a
relaxed mailbox store, it reads ``x`` (weak), then releases a completion the
issuer acquires; a ``fence.proxy.async`` of the issuer is a release store
the engines of its later copies acquire. Only through that fence are the
issuer's earlier generic accesses (and what they observed) ordered before
the copy's read (PTX ISA, memory consistency model, proxies).

Execution convention (as Dartagnan's, which produced the suite): only
executions in which every thread finishes count. Loops are unrolled
``bound`` times (default 1); an execution that would need another iteration
does not finish, so a side-effect-free spin loop contributes exactly its final,
exiting iteration ("wait until"). Events after a conditional branch depend
(control dependency) on the reads its registers came from.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import z3

from collsim.errors import CollsimError, InputError, UnsupportedError
from collsim.verify.events import Event, Placement, Program, value_const
from collsim.verify.models import DEFAULT_CAUSALITY, check_model
from collsim.verify.solver import DEFAULT_TIMEOUT_S, exists

__all__ = [
    "OPS",
    "LitmusTest",
    "LitmusResult",
    "load_jsonl",
    "parse_test",
    "evaluate",
    "run_file",
    "parse_condition",
]

#: Operation kinds and the fields each requires (optional ones in brackets).
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ld": (("loc", "reg"), ("sem", "scope")),
    "st": (("loc", "val"), ("sem", "scope")),
    "rmw": (("kind", "reg", "loc", "val"), ("sem", "scope", "cmp")),
    "red": (("kind", "loc", "val"), ("sem", "scope")),
    "fence": (("sem",), ("scope",)),
    "cp.async.bulk": (("reg", "loc"), ()),
    "bar": (("instance",), ("mode", "scope", "id", "quorum")),
    "mov": (("reg", "val"), ()),
    "local": (("kind", "reg", "a", "b"), ()),
    "label": (("name",), ()),
    "branch": (("cond", "a", "b", "target"), ()),
    "goto": (("target",), ()),
}
#: Operations of other proxies (texture, surface, constant, the asynchronous proxy): known PTX, not modelled,
#: so a test that uses one is reported unsupported rather than rejected as malformed.
PROXY_OPS: dict[str, str] = {
    "tex": "texture", "tld4": "texture", "txq": "texture", "suld": "surface", "sust": "surface",
    "sured": "surface", "suq": "surface", "ldu": "constant", "cp.async": "async",
    "cp.async.bulk.tensor": "async", "cp.reduce.async.bulk": "async", "cp.reduce.async.bulk.tensor": "async",
    "st.async": "async", "red.async": "async", "cp.async.bulk.prefetch": "async", "wgmma.mma_async": "async",
    "tcgen05.cp": "async", "tensormap.replace": "tensormap",
}
MEM_SEMS = ("weak", "relaxed", "acquire", "release", "acq_rel", "sc", "volatile", "mmio")
FENCE_SEMS = ("sc", "acq_rel", "acquire", "release", "proxy.alias", "alias", "proxy", "proxy.async")
SCOPES = ("cta", "gpu", "sys")
RMW_KINDS = ("add", "sub", "mul", "div", "exch", "cas", "min", "max", "and", "or", "xor", "inc", "dec")
LOCAL_KINDS = ("add", "sub", "mul", "div", "and", "or", "xor")
BRANCH_CONDS = ("eq", "ne", "lt", "le", "gt", "ge")
QUANTIFIERS = ("exists", "~exists", "forall")
EXPECTED = ("allowed", "forbidden")
_BITWISE = {"and", "or", "xor"}
_DEFAULT_SCOPE = "gpu"  # PTX default scope of atom/red; used for any strong op without one


@dataclass
class LitmusTest:
    """A parsed test: its program, register terms and the outcome to decide."""

    name: str
    program: Program
    registers: dict[tuple[str, str], Any]
    quantifier: str
    expr: str
    outcome: Any
    expected: str | None
    file: str = ""
    line: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    #: Caveats of the lowering (e.g. loops with side effects cut at the bound).
    notes: list[str] = field(default_factory=list)
    #: herd's filter proposition (its text), already conjoined into ``outcome``.
    filter: str | None = None
    #: herd's ``locations``: terms the witness reports, by their text.
    locations: dict[str, Any] = field(default_factory=dict)
    #: Set (and ``program`` None) when the test uses a construct the model does not cover: what it is.
    unsupported: str | None = None

    def register_terms(self) -> dict[str, Any]:
        return {**{f"{t}:{r}": v for (t, r), v in self.registers.items()}, **self.locations}


@dataclass
class LitmusResult:
    """Outcome of one test under one model."""

    name: str
    model: str
    expected: str | None
    observed: str  # "allowed" | "forbidden" | "unknown" | "unsupported" (``reason``: the construct)
    seconds: float
    quantifier: str
    expr: str
    reason: str | None = None
    witness: str | None = None
    line: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool | None:
        if self.expected is None or self.observed in ("unknown", "unsupported"):
            return None
        return self.expected == self.observed

    @property
    def decided_without_expectation(self) -> bool:
        """A test that states no expectation, decided: its outcome is reported, there is nothing to agree with."""
        return self.expected is None and self.observed in ("allowed", "forbidden")

    @property
    def passes(self) -> bool:
        """Whether this result lets a run succeed: it agrees, or it had no expectation and was decided."""
        return self.agrees is True or self.decided_without_expectation

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "model": self.model, "expected": self.expected,
            "observed": self.observed, "agrees": self.agrees, "seconds": round(self.seconds, 4),
            "quantifier": self.quantifier, "condition": self.expr, "reason": self.reason,
            "witness": self.witness, "line": self.line, "notes": self.notes,
        }


# --------------------------------------------------------------------- parsing
class _Ctx:
    """Where we are, for error messages."""

    def __init__(self, file: str, line: int, name: str = "") -> None:
        self.file, self.line, self.name = file, line, name

    def error(self, message: str, fld: str | None = None, choices: Iterable[str] | None = None,
              unsupported: bool = False) -> CollsimError:
        cls = UnsupportedError if unsupported else InputError
        prefix = f"test '{self.name}': " if self.name else ""
        return cls(prefix + message, file=self.file, line=self.line, field=fld, choices=choices)


def load_jsonl(path: str | Path, *, bound: int = 1) -> list[LitmusTest]:
    """Parse every test of a JSONL file (blank lines are skipped)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read litmus file: {exc.strerror or exc}", file=str(path)) from None
    tests = []
    names: set[str] = set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        ctx = _Ctx(str(path), lineno)
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ctx.error(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise ctx.error("a test must be a JSON object")
        try:
            test = parse_test(row, file=str(path), line=lineno, bound=bound)
        except UnsupportedError as exc:  # this test is reported; the others still run
            test = _unsupported_test(row, exc, str(path), lineno)
        if test.name in names:
            raise ctx.error(f"duplicate test name '{test.name}'", "name")
        names.add(test.name)
        tests.append(test)
    return tests


def _unsupported_test(row: dict[str, Any], exc: UnsupportedError, file: str, line: int) -> LitmusTest:
    """The record of a test whose construct the model does not cover (``program`` None)."""
    name = row.get("name") if isinstance(row.get("name"), str) else f"line {line}"
    cond = row.get("condition")
    quant = cond.get("quantifier", "?") if isinstance(cond, dict) else str(cond or "?").split("(")[0].strip()
    expr = str(cond.get("expr", "")) if isinstance(cond, dict) else str(cond or "")
    construct = exc.message.split(": ", 1)[1] if exc.message.startswith(f"test '{name}': ") else exc.message
    expected = row.get("expected") if row.get("expected") in EXPECTED else None
    return LitmusTest(name=name, program=None, registers={}, quantifier=quant, expr=expr, outcome=None,  # type: ignore[arg-type]
                      expected=expected, file=file, line=line, unsupported=construct)


def _require(ctx: _Ctx, obj: dict, key: str, types: tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise ctx.error(f"missing field '{key}'", f"{where}{key}" if where else key)
    val = obj[key]
    if not isinstance(val, types) or (isinstance(val, bool) and bool not in types):
        tn = " or ".join(t.__name__ for t in types)
        raise ctx.error(f"field '{key}' must be {tn}, got {type(val).__name__}",
                        f"{where}{key}" if where else key)
    return val


def parse_test(row: dict[str, Any], *, file: str = "<memory>", line: int = 0, bound: int = 1) -> LitmusTest:
    """Build a :class:`LitmusTest` from one decoded JSON row."""
    ctx = _Ctx(file, line)
    name = _require(ctx, row, "name", (str,), "")
    ctx.name = name
    init = row.get("init", {})
    if not isinstance(init, dict):
        raise ctx.error("field 'init' must be an object", "init")
    placement_rows = _require(ctx, row, "placement", (list,), "")
    threads = _require(ctx, row, "threads", (list,), "")
    if len(placement_rows) != len(threads):
        raise ctx.error(f"{len(threads)} threads but {len(placement_rows)} placements", "placement")
    placement: dict[str, Placement] = {}
    for i, p in enumerate(placement_rows):
        where = f"placement[{i}]."
        if not isinstance(p, dict):
            raise ctx.error("a placement must be an object", f"placement[{i}]")
        tname = _require(ctx, p, "thread", (str,), where)
        cta = _require(ctx, p, "cta", (int,), where)
        gpu = p.get("gpu", 0)
        if not isinstance(gpu, int) or isinstance(gpu, bool):
            raise ctx.error("field 'gpu' must be int", where + "gpu")
        if tname in placement:
            raise ctx.error(f"thread '{tname}' placed twice", f"placement[{i}].thread")
        placement[tname] = Placement(cta=cta, gpu=gpu)
    thread_names = list(placement)

    # aliases: name -> (physical location, proxy)
    aliases: dict[str, tuple[str, str]] = {}
    for i, a in enumerate(row.get("aliases") or []):
        where = f"aliases[{i}]."
        if not isinstance(a, dict):
            raise ctx.error("an alias must be an object", f"aliases[{i}]")
        aname = _require(ctx, a, "name", (str,), where)
        of = _require(ctx, a, "of", (str,), where)
        proxy = a.get("proxy", "generic")
        aliases[aname] = (of, str(proxy))

    mem_init: dict[str, int] = {}
    reg_init: dict[tuple[str, str], int] = {}
    for key, val in init.items():
        if not isinstance(val, int) or isinstance(val, bool):
            raise ctx.error(f"initial value of '{key}' must be an int", f"init.{key}")
        if ":" in key:
            t, r = (s.strip() for s in key.split(":", 1))
            reg_init[(_thread_ref(ctx, t, thread_names, f"init.{key}"), r)] = val
        else:
            mem_init[_physical(ctx, key, aliases, f"init.{key}")[0]] = val

    all_ops = [op for t in threads if isinstance(t, list) for op in t if isinstance(op, dict)]
    bits = 64 if any(op.get("kind") in _BITWISE for op in all_ops) else None

    events: list[Event] = []
    assumptions: list[Any] = []
    notes: list[str] = []
    registers: dict[tuple[str, str], Any] = {}
    ctrl: dict[str, set[str]] = {}
    ids: dict[str, int] = {}
    sort = z3.IntSort() if bits is None else z3.BitVecSort(bits)
    engines: list[tuple[str, str]] = []  # (engine thread, issuing thread) of every bulk async copy
    for ti, ops in enumerate(threads):
        if not isinstance(ops, list):
            raise ctx.error("a thread must be a list of operations", f"threads[{ti}]")
        tname = thread_names[ti]
        lowering = _ThreadLowering(ctx, ti, tname, ops, aliases, reg_init, sort, bits, bound, ids, engines,
                                   len(thread_names))
        lowering.run()
        events += lowering.events
        assumptions += lowering.assumptions
        notes += lowering.notes
        ctrl.update(lowering.new_ctrl)
        for r, v in lowering.final_regs.items():
            registers[(tname, r)] = v
    for (t, r), v in reg_init.items():
        registers.setdefault((t, r), _const(v, bits))
    for engine, issuer in engines:  # a copy engine runs in its issuer's CTA
        placement[engine] = Placement(cta=placement[issuer].cta, gpu=placement[issuer].gpu)
    locs_used = {e.loc for e in events if e.loc}
    for loc in locs_used:
        mem_init.setdefault(loc, 0)
    program = Program.from_events(events, placement, mem_init, assumptions, bits, name, ctrl=ctrl)

    quant, expr, filt, shown = _final_section(ctx, row)
    known_locs = set(mem_init) | set(aliases)

    def prop(text: str, fld: str) -> Any:
        return parse_condition(text, ctx=ctx, threads=thread_names, registers=registers, reg_init=reg_init,
                               locations=known_locs, aliases=aliases, program=program, fld=fld)

    formula = prop(expr, "condition.expr")
    outcome = z3.Not(formula) if quant == "forall" else formula
    if filt is not None:
        outcome = z3.And(prop(filt, "condition.filter"), outcome)
    location_terms = {t: _term(ctx, t, thread_names, registers, reg_init, known_locs, aliases, program,
                               "condition.locations", program.value_bits) for t in shown}
    expected = row.get("expected")
    if expected is not None and expected not in EXPECTED:
        raise ctx.error(f"unknown expectation '{expected}'", "expected", EXPECTED)
    meta = {k: v for k, v in row.items() if k not in ("threads", "placement", "init", "condition")}
    return LitmusTest(name=name, program=program, registers=registers, quantifier=quant, expr=expr,
                      outcome=outcome, expected=expected, file=file, line=line, meta=meta, notes=notes,
                      filter=filt, locations=location_terms)


_FINAL = re.compile(r"\s*(~\s*exists|exists|forall)\b", re.IGNORECASE)


def _final_section(ctx: _Ctx, row: dict[str, Any]) -> tuple[str, str, str | None, list[str]]:
    """``(quantifier, proposition, filter or None, locations)`` of a test's condition (module doc)."""
    cond = row.get("condition")
    if cond is None:
        raise ctx.error("missing field 'condition'", "condition")
    filt = row.get("filter")
    shown: Any = row.get("locations")
    if isinstance(cond, str):
        text = cond.strip()
        m = re.match(r"locations\s*\[([^\]]*)\]", text)
        if m:
            shown = m.group(1)
            text = text[m.end():].strip()
        if text.startswith("filter"):
            body = text[len("filter"):]
            at = _top_level_quantifier(body)
            if at is None:
                raise ctx.error(f"condition {cond!r}: a filter must be followed by exists, ~exists or forall",
                                "condition", QUANTIFIERS)
            filt, text = body[:at].strip(), body[at:].strip()
        m = _FINAL.match(text)
        if m is None:
            raise ctx.error(f"condition {cond!r}: expected exists, ~exists or forall", "condition", QUANTIFIERS)
        quant = re.sub(r"\s+", "", m.group(1)).lower()
        expr = text[m.end():].strip()
        if not expr:
            raise ctx.error(f"condition {cond!r}: no proposition after {quant}", "condition")
    elif isinstance(cond, dict):
        quant = _require(ctx, cond, "quantifier", (str,), "condition.")
        if quant not in QUANTIFIERS:
            raise ctx.error(f"unknown quantifier '{quant}'", "condition.quantifier", QUANTIFIERS)
        expr = _require(ctx, cond, "expr", (str,), "condition.")
        filt = cond.get("filter", filt)
        shown = cond.get("locations", shown)
    else:
        raise ctx.error(f"field 'condition' must be an object or a string, got {type(cond).__name__}",
                        "condition")
    if filt is not None and not isinstance(filt, str):
        raise ctx.error("a filter must be a string (a proposition)", "condition.filter")
    if shown is None:
        shown = []
    if isinstance(shown, str):
        shown = [t.strip() for t in shown.split(";") if t.strip()]
    if not isinstance(shown, list) or not all(isinstance(t, str) for t in shown):
        raise ctx.error("locations must be a list of terms or herd's '[x; 1:r0;]'", "condition.locations")
    return quant, expr, filt, shown


def _top_level_quantifier(text: str) -> int | None:
    """Where the quantifier after a filter's proposition starts (outside parentheses), or None."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and _FINAL.match(text, i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            return i
    return None


def _thread_ref(ctx: _Ctx, t: str, threads: list[str], fld: str) -> str:
    t = t.strip()
    if t in threads:
        return t
    if t.isdigit() and int(t) < len(threads):
        return threads[int(t)]
    if t.upper().startswith("P") and t[1:].isdigit() and int(t[1:]) < len(threads):
        return threads[int(t[1:])]
    raise ctx.error(f"unknown thread '{t}'", fld, threads)


def _physical(ctx: _Ctx, name: str, aliases: dict[str, tuple[str, str]], fld: str) -> tuple[str, str]:
    """``(physical location, virtual address)`` of a location name."""
    if name in aliases:
        of, proxy = aliases[name]
        if proxy != "generic":
            raise ctx.error(f"location '{name}' is a {proxy}-proxy alias; only the generic proxy "
                            "is modelled", fld, unsupported=True)
        seen = {name}
        while of in aliases:  # alias of an alias
            if of in seen:
                raise ctx.error(f"alias cycle through '{of}'", fld)
            seen.add(of)
            of = aliases[of][0]
        return of, name
    return name, name


def _const(v: int, bits: int | None) -> z3.ExprRef:
    return z3.IntVal(v) if bits is None else z3.BitVecVal(v, bits)


# ------------------------------------------------------------------- lowering
@dataclass
class _Path:
    guard: Any
    regs: dict[str, Any]
    taint: dict[str, frozenset[str]]


class _ThreadLowering:
    """Symbolic execution of one thread's (unrolled, loop-free) code."""

    def __init__(self, ctx: _Ctx, index: int, thread: str, ops: list[Any],
                 aliases: dict[str, tuple[str, str]], reg_init: dict[tuple[str, str], int],
                 sort: z3.SortRef, bits: int | None, bound: int, ids: dict[str, int],
                 engines: list[tuple[str, str]] | None = None, nthreads: int = 0) -> None:
        self.ctx, self.index, self.thread = ctx, index, thread
        #: the copy engines of the test's bulk async copies, shared by its threads (they follow the test's threads)
        self.engines = engines if engines is not None else []
        self.nthreads = nthreads
        self.proxy_fence: str | None = None  # the mailbox of this thread's last fence.proxy.async
        self.ids = ids  # event name -> provisional id, shared by every thread of the test
        self.new_ctrl: dict[str, set[str]] = {}
        self._ctrl_seen: set[str] = set()
        self.aliases, self.reg_init, self.sort, self.bits = aliases, reg_init, sort, bits
        self.ops = [self._check_op(i, op) for i, op in enumerate(ops)]
        self.notes: list[str] = []
        self.ops = _unroll(ctx, index, self.ops, bound, self.notes)
        self.events: list[Event] = []
        self.assumptions: list[Any] = []
        self.final_regs: dict[str, Any] = {}
        self.ctrl: set[str] = set()
        self.po = 0

    # validation ---------------------------------------------------------------
    def _check_op(self, i: int, op: Any) -> dict[str, Any]:
        where = f"threads[{self.index}][{i}]"
        if not isinstance(op, dict):
            raise self.ctx.error("an operation must be an object", where)
        kind = op.get("op")
        if kind in PROXY_OPS:
            raise self.ctx.error(f"{kind} ({PROXY_OPS[kind]} proxy)", where + ".op", unsupported=True)
        if kind not in OPS:
            raise self.ctx.error(f"unknown op kind {kind!r}", where + ".op", sorted(OPS))
        proxy = op.get("proxy")
        if kind in ("ld", "st", "rmw", "red") and proxy not in (None, "generic"):
            raise self.ctx.error(f"{kind} through the {proxy} proxy", where + ".proxy", unsupported=True)
        required, _ = OPS[kind]
        for key in required:
            if key not in op or (op[key] is None and key not in ("val",)):
                raise self.ctx.error(f"'{kind}' needs field '{key}'", f"{where}.{key}")
        def choice(key: str, valid: tuple[str, ...]) -> None:
            if op.get(key) is not None and op[key] not in valid:
                raise self.ctx.error(f"unknown {key} {op[key]!r} for '{kind}'", f"{where}.{key}", valid)
        if kind in ("ld", "st", "rmw", "red"):
            choice("sem", MEM_SEMS)
            choice("scope", SCOPES)
        if kind in ("rmw", "red"):
            choice("kind", RMW_KINDS)
            if op["kind"] == "cas" and op.get("cmp") is None:
                raise self.ctx.error("'cas' needs field 'cmp'", f"{where}.cmp")
        if kind == "fence":
            choice("sem", FENCE_SEMS)
            choice("scope", SCOPES)
        if kind == "bar":
            choice("mode", ("sync", "arrive"))
            choice("scope", ("cta",))
        if kind == "local":
            choice("kind", LOCAL_KINDS)
        if kind == "branch":
            choice("cond", BRANCH_CONDS)
        for key in ("reg", "name", "target", "loc"):
            if key in op and op[key] is not None and not isinstance(op[key], str):
                raise self.ctx.error(f"field '{key}' must be a string", f"{where}.{key}")
        out = dict(op)
        out["_where"] = where
        return out

    # values -------------------------------------------------------------------
    def _value(self, path: _Path, v: Any, where: str) -> tuple[Any, frozenset[str]]:
        if isinstance(v, bool) or v is None:
            raise self.ctx.error(f"bad value {v!r}", where)
        if isinstance(v, int):
            return _const(v, self.bits), frozenset()
        if isinstance(v, str):
            s = v.strip()
            if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", s):
                return _const(int(s, 0), self.bits), frozenset()
            if s in path.regs:
                return path.regs[s], path.taint.get(s, frozenset())
            return _const(self.reg_init.get((self.thread, s), 0), self.bits), frozenset()
        raise self.ctx.error(f"bad value {v!r} (an int or a register name)", where)

    def _sem_scope(self, op: dict[str, Any], default_sem: str) -> tuple[str, str | None]:
        sem = op.get("sem") or default_sem
        scope = op.get("scope")
        if sem == "volatile":
            return "relaxed", "sys"
        if sem == "mmio":  # a strong operation for the model (PTX ISA: mmio operation)
            return "relaxed", scope or "sys"
        if sem == "weak":
            return "weak", None
        return sem, scope or _DEFAULT_SCOPE

    def _event(self, path: _Path, idx: int, kind: str, tag: str, deps: frozenset[str] = frozenset(),
               **kw: Any) -> Event:
        name = f"{self.thread}.i{idx}.{tag}"
        if "vloc" in kw and kw["vloc"] == kw.get("loc"):
            kw["vloc"] = None
        guard = None if z3.is_true(path.guard) else path.guard
        fresh = set(self.ctrl) - self._ctrl_seen
        if fresh:
            self.new_ctrl[name] = fresh
            self._ctrl_seen |= fresh
        e = Event(id=len(self.ids), kind=kind, thread=self.index, instr=self.po, name=name, guard=guard,
                  deps=frozenset(self.ids[d] for d in deps), **kw)
        self.ids[name] = e.id
        self.po += 1
        self.events.append(e)
        return e

    def _read_var(self, eid: str) -> Any:
        return value_const(eid, self.sort)

    def _bulk_copy(self, path: _Path, idx: int, op: dict[str, Any]) -> tuple[Any, frozenset[str]]:
        """``cp.async.bulk`` on a copy engine of its own (see the module docstring); returns the register's value."""
        loc, vloc = self._loc(op)
        engine = len(self.engines)
        name = f"{self.thread}.bulk{engine}"
        self.engines.append((name, self.thread))
        thread, one = self.nthreads + engine, _const(1, self.bits)
        guard = None if z3.is_true(path.guard) else path.guard
        stem = f"{self.thread}.i{idx}.{self.po}"
        issued, done = f"__async_issue.{stem}", f"__async_done.{stem}"
        steps: list[Event] = []

        def engine_event(tag: str, kind: str, **kw: Any) -> Event:
            e = Event(id=len(self.ids), kind=kind, thread=thread, instr=len(steps), name=f"{name}.{tag}",
                      guard=guard, label=f"cp.async.bulk {op['reg']}, [{op['loc']}]", **kw)
            self.ids[e.name] = e.id
            steps.append(e)
            self.events.append(e)
            return e

        def completes(e: Event) -> None:  # a wait that ends: only finishing executions count
            self.assumptions.append(z3.Implies(path.guard, self._read_var(e.name) == one))

        self._event(path, idx, "W", "bulk_issue", loc=issued, sem="relaxed", scope="cta", value=one,
                    label=f"cp.async.bulk {op['reg']}, [{op['loc']}] (issue)")
        completes(engine_event("handed", "R", loc=issued, sem="relaxed", scope="cta"))
        if self.proxy_fence is not None:
            completes(engine_event("fenced", "R", loc=self.proxy_fence, sem="acquire", scope="cta"))
        copied = engine_event("read", "R", loc=loc, vloc=None if vloc == loc else vloc, sem="weak", scope=None)
        engine_event("complete", "W", loc=done, sem="release", scope="cta", value=one)
        wait = self._event(path, idx, "R", "mbarrier_wait", loc=done, sem="acquire", scope="cta",
                           label="mbarrier.try_wait (cp.async.bulk complete)")
        completes(wait)
        # no data dependency across threads: the acquire of the completion orders the issuer's later accesses
        return self._read_var(copied.name), frozenset()

    # control flow -------------------------------------------------------------
    def _merge(self, incoming: list[_Path]) -> _Path | None:
        if not incoming:
            return None
        if len(incoming) == 1:
            return incoming[0]
        guard = z3.Or([p.guard for p in incoming])
        keys = set().union(*(p.regs for p in incoming))
        regs, taint = {}, {}
        for k in keys:
            vals = [(p.guard, p.regs.get(k, _const(self.reg_init.get((self.thread, k), 0), self.bits)))
                    for p in incoming]
            term = vals[-1][1]
            for g, v in reversed(vals[:-1]):
                term = term if v.eq(term) else z3.If(g, v, term)
            regs[k] = term
            taint[k] = frozenset().union(*(p.taint.get(k, frozenset()) for p in incoming))
        return _Path(guard=z3.simplify(guard), regs=regs, taint=taint)

    def _cond(self, path: _Path, op: dict[str, Any]) -> tuple[Any, frozenset[str]]:
        a, ta = self._value(path, op["a"], op["_where"] + ".a")
        b, tb = self._value(path, op["b"], op["_where"] + ".b")
        c = op["cond"]
        fn = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
              "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[c]
        return fn(a, b), ta | tb

    def run(self) -> None:
        labels = {op["name"]: i for i, op in enumerate(self.ops) if op["op"] == "label"}
        pending: dict[int, list[_Path]] = {}
        start = _Path(guard=z3.BoolVal(True), regs={}, taint={})
        fall: _Path | None = start
        n = len(self.ops)
        for i, op in enumerate(self.ops):
            path = self._merge(pending.pop(i, []) + ([fall] if fall is not None else []))
            fall = None
            if path is None:
                continue  # unreachable code
            kind = op["op"]
            where = op["_where"]
            if kind == "label":
                fall = path
            elif kind in ("branch", "goto", "__block"):
                if kind == "goto" or (kind == "__block" and op.get("cond") is None):
                    cond, deps = z3.BoolVal(True), frozenset()
                else:
                    cond, deps = self._cond(path, op)
                self.ctrl |= deps
                taken = z3.simplify(z3.And(path.guard, cond))
                stay = z3.simplify(z3.And(path.guard, z3.Not(cond)))
                if kind == "__block":
                    self.assumptions.append(z3.Not(taken))
                else:
                    target = labels[op["target"]]
                    if not z3.is_false(taken):
                        pending.setdefault(target, []).append(
                            _Path(guard=taken, regs=path.regs, taint=path.taint))
                if not z3.is_false(stay):
                    fall = _Path(guard=stay, regs=path.regs, taint=path.taint)
            else:
                fall = self._instruction(path, i, op, where)
        end = self._merge(pending.pop(n, []) + ([fall] if fall is not None else []))
        if end is None:
            self.assumptions.append(z3.BoolVal(False))
            return
        # every thread must finish: the paths that reach the end cover the execution
        self.assumptions.append(end.guard)
        self.final_regs = dict(end.regs)

    def _loc(self, op: dict[str, Any]) -> tuple[str, str]:
        return _physical(self.ctx, op["loc"], self.aliases, op["_where"] + ".loc")

    def _instruction(self, path: _Path, i: int, op: dict[str, Any], where: str) -> _Path:
        kind = op["op"]
        regs, taint = dict(path.regs), dict(path.taint)
        if kind == "ld":
            loc, vloc = self._loc(op)
            sem, scope = self._sem_scope(op, "weak")
            e = self._event(path, i, "R", f"ld_{op['loc']}", loc=loc, vloc=vloc, sem=sem, scope=scope,
                            label=_label(op))
            regs[op["reg"]] = self._read_var(e.name)
            taint[op["reg"]] = frozenset({e.name})
        elif kind == "st":
            loc, vloc = self._loc(op)
            sem, scope = self._sem_scope(op, "weak")
            v, t = self._value(path, op["val"], where + ".val")
            self._event(path, i, "W", f"st_{op['loc']}", deps=t, loc=loc, vloc=vloc, sem=sem,
                        scope=scope, value=v, label=_label(op))
        elif kind in ("rmw", "red"):
            loc, vloc = self._loc(op)
            sem, scope = self._sem_scope(op, "relaxed")
            v, t = self._value(path, op["val"], where + ".val")
            cmp_t, tc = (None, frozenset())
            if op.get("cmp") is not None:
                cmp_t, tc = self._value(path, op["cmp"], where + ".cmp")
            tag = ("atom_" if kind == "rmw" else "red_") + f"{op['kind']}_{op['loc']}"
            e = self._event(path, i, "RMW", tag, deps=t | tc, loc=loc, vloc=vloc, sem=sem, scope=scope,
                            rmw_op=op["kind"], operand=v, compare=cmp_t,
                            returns_value=(kind == "rmw"), label=_label(op))
            if kind == "rmw":
                regs[op["reg"]] = self._read_var(e.name)
                taint[op["reg"]] = frozenset({e.name})
        elif kind == "fence":
            sem = op["sem"]
            if sem == "proxy.async" or (sem == "proxy" and (op.get("proxy") or op.get("kind")) == "async"):
                # fence.proxy.async: a release the engines of this thread's later bulk copies acquire
                self.proxy_fence = f"__async_fence.{self.thread}.i{i}.{self.po}"
                self._event(path, i, "W", "fence_proxy_async", loc=self.proxy_fence, sem="release", scope="cta",
                            value=_const(1, self.bits), label="fence.proxy.async")
            elif sem in ("proxy.alias", "alias", "proxy"):
                proxy = op.get("proxy") or op.get("kind") or ("alias" if sem != "proxy" else None)
                if proxy != "alias":
                    raise self.ctx.error(f"proxy fence for proxy {proxy!r}: only the generic proxy "
                                         "and alias proxy fences are modelled", where + ".sem",
                                         unsupported=True)
                self._event(path, i, "F", "fence_proxy_alias", sem="proxy_alias", scope=None,
                            label="fence.proxy.alias")
            else:
                self._event(path, i, "F", f"fence_{sem}_{op.get('scope') or _DEFAULT_SCOPE}",
                            sem=sem, scope=op.get("scope") or _DEFAULT_SCOPE, label=_label(op))
        elif kind == "cp.async.bulk":
            regs[op["reg"]], taint[op["reg"]] = self._bulk_copy(path, i, op)
        elif kind == "bar":
            bid, tb = (None, frozenset())
            if op.get("id") is not None:
                bid, tb = self._value(path, op["id"], where + ".id")
            quorum, tq = (None, frozenset())
            if op.get("quorum") is not None:
                quorum, tq = self._value(path, op["quorum"], where + ".quorum")
            self._event(path, i, "BAR", f"bar{op['instance']}", deps=tb | tq, scope="cta",
                        bar=op["instance"], bar_id=bid, bar_quorum=quorum,
                        bar_arrive=(op.get("mode") == "arrive"), label=_label(op))
        elif kind == "mov":
            v, t = self._value(path, op["val"], where + ".val")
            regs[op["reg"]], taint[op["reg"]] = v, t
        elif kind == "local":
            a, ta = self._value(path, op["a"], where + ".a")
            b, tb = self._value(path, op["b"], where + ".b")
            fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
                  "div": lambda x, y: x / y, "and": lambda x, y: x & y, "or": lambda x, y: x | y,
                  "xor": lambda x, y: x ^ y}[op["kind"]]
            regs[op["reg"]], taint[op["reg"]] = z3.simplify(fn(a, b)), ta | tb
        return _Path(guard=path.guard, regs=regs, taint=taint)


def _label(op: dict[str, Any]) -> str:
    kind = op["op"]
    sem = op.get("sem")
    q = f".{sem}" if sem else ""
    s = f".{op['scope']}" if op.get("scope") else ""
    if kind == "ld":
        return f"ld{q}{s} {op['reg']}, [{op['loc']}]"
    if kind == "st":
        return f"st{q}{s} [{op['loc']}], {op['val']}"
    if kind == "rmw":
        cmp_ = f", {op['cmp']}" if op.get("cmp") is not None else ""
        return f"atom{q}{s}.{op['kind']} {op['reg']}, [{op['loc']}]{cmp_}, {op['val']}"
    if kind == "red":
        return f"red{q}{s}.{op['kind']} [{op['loc']}], {op['val']}"
    if kind == "fence":
        return f"fence.{op['sem']}.{op.get('scope') or _DEFAULT_SCOPE}"
    if kind == "bar":
        extra = "".join(f", {op[k]}" for k in ("id", "quorum") if op.get(k) is not None)
        return f"bar.cta.{op.get('mode') or 'sync'} {op['instance']}{extra}"
    return kind


_uid = [0]


def _unroll(ctx: _Ctx, index: int, ops: list[dict[str, Any]], bound: int,
            notes: list[str] | None = None) -> list[dict[str, Any]]:
    """Unroll every loop ``bound`` times; the last copy's back jump blocks.

    A loop is a jump to a label at or before it. Its body (label .. jump) is
    copied ``bound`` times; in copy ``m < bound`` the back jump goes to the
    next copy, in the last copy it becomes a ``__block`` (the execution would
    need another iteration, so it does not finish within the bound).
    """
    if bound < 1:
        raise ctx.error("the unroll bound must be at least 1", "bound")
    ops = list(ops)

    def labels_of(seq: list[dict[str, Any]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, op in enumerate(seq):
            if op["op"] == "label":
                if op["name"] in out:
                    raise ctx.error(f"label '{op['name']}' defined twice", op["_where"] + ".name")
                out[op["name"]] = i
        return out

    labels = labels_of(ops)
    for op in ops:
        if op["op"] in ("branch", "goto") and op["target"] not in labels:
            raise ctx.error(f"jump to undefined label '{op['target']}'", op["_where"] + ".target",
                            sorted(labels))
    for _ in range(10_000):
        labels = labels_of(ops)
        back = next(((j, labels[op["target"]]) for j, op in enumerate(ops)
                     if op["op"] in ("branch", "goto") and labels[op["target"]] <= j), None)
        if back is None:
            return ops
        j, i = back
        head = ops[i]["name"]
        body = ops[i:j + 1]
        effects = [op["op"] for op in body
                   if op["op"] in ("st", "red", "bar") or (op["op"] == "rmw" and op.get("kind") != "cas")]
        if effects and notes is not None:
            notes.append(f"threads[{index}]: loop at label '{head.split('#')[0]}' has side effects "
                         f"({', '.join(sorted(set(effects)))}); executions needing more than "
                         f"{bound} iteration(s) are not explored")
        inner = {op["name"] for op in body if op["op"] == "label"}
        _uid[0] += 1
        tag = _uid[0]
        copies: list[dict[str, Any]] = []
        for m in range(1, bound + 1):
            def rename(name: str, copy: int = m) -> str:
                return f"{name}#{tag}.{copy}"
            for op in body:
                new = dict(op)
                if op["op"] == "label":
                    new["name"] = rename(op["name"])
                elif op["op"] in ("branch", "goto") and op["target"] in inner:
                    if op["target"] == head:  # a back jump of this loop
                        if m < bound:
                            new["target"] = rename(head, m + 1)
                        else:
                            new = dict(op)
                            new["op"] = "__block"
                            if op["op"] == "goto":
                                new["cond"] = None
                    else:
                        new["target"] = rename(op["target"])
                copies.append(new)
        ops = ops[:i] + copies + ops[j + 1:]
        labels = labels_of(ops)
        for op in ops:
            if op["op"] in ("branch", "goto") and op["target"] not in labels:
                raise ctx.error("jump into the middle of a loop (irreducible control flow)",
                                op["_where"] + ".target", unsupported=True)
    raise ctx.error("loop unrolling did not terminate", f"threads[{index}]", unsupported=True)


# ------------------------------------------------------------------ conditions
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<and>/\\|&&)
  | (?P<or>\\/|\|\|)
  | (?P<implies>=>)
  | (?P<cmp>==|!=|<>|<=|>=|<|>|=)
  | (?P<not>~|!|\bnot\b)
  | (?P<lp>\()
  | (?P<rp>\))
  | (?P<reg>(?:P?\d+)\s*:\s*%?[A-Za-z_][\w]*)
  | (?P<num>-?(?:0x[0-9a-fA-F]+|\d+))
  | (?P<mem>\[\s*[A-Za-z_][\w.]*\s*\]|\*\s*[A-Za-z_][\w.]*)
  | (?P<name>[A-Za-z_][\w.\[\]]*)
""", re.VERBOSE)

_COMPARE = {"==": lambda a, b: a == b, "=": lambda a, b: a == b, "!=": lambda a, b: a != b,
            "<>": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
            ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _tokens(ctx: _Ctx, text: str, fld: str = "condition.expr") -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ctx.error(f"cannot parse condition at {text[pos:pos + 12]!r}", fld)
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group()))  # type: ignore[arg-type]
    return out


def _term(ctx: _Ctx, text: str, threads: list[str], registers: dict[tuple[str, str], Any],
          reg_init: dict[tuple[str, str], int], locations: set[str], aliases: dict[str, tuple[str, str]],
          program: Program, fld: str, bits: int | None, kind: str | None = None) -> Any:
    """The z3 term of one condition term: ``P1:r0`` / ``1:r0`` / ``P1:%r0`` (a final register value),
    ``x`` / ``[x]`` / ``*x`` (a final memory value) or an integer."""
    text = text.strip()
    if kind is None:
        toks = _tokens(ctx, text, fld)
        if len(toks) != 1 or toks[0][0] not in ("num", "reg", "mem", "name"):
            raise ctx.error(f"{text!r} is not a register, a location or a value", fld)
        kind, text = toks[0]
    if kind == "num":
        return _const(int(text, 0), bits)
    if kind == "reg":
        t, r = (part.strip() for part in text.split(":", 1))
        thread = _thread_ref(ctx, t, threads, fld)
        for name in (r, r.lstrip("%"), "%" + r.lstrip("%")):
            if (thread, name) in registers:
                return registers[(thread, name)]
        return _const(reg_init.get((thread, r), reg_init.get((thread, r.lstrip("%")), 0)), bits)
    name = text.strip("[]* \t") if kind == "mem" else text
    if name not in locations:
        raise ctx.error(f"unknown location '{name}'", fld, sorted(locations))
    return program.final_var(_physical(ctx, name, aliases, fld)[0])


def parse_condition(text: str, *, ctx: _Ctx | None = None, threads: list[str],
                    registers: dict[tuple[str, str], Any], reg_init: dict[tuple[str, str], int],
                    locations: set[str], aliases: dict[str, tuple[str, str]],
                    program: Program, fld: str = "condition.expr") -> Any:
    """The z3 formula of a proposition such as ``P1:r1 == 1 /\\ ~(x = 2)`` (herd's and Dat3M's language).

    Terms: ``Pn:reg`` / ``n:reg`` / ``Pn:%reg`` a final register value, ``x`` /
    ``[x]`` / ``*x`` a final memory value, integers. Connectives by
    increasing binding: ``=>`` (right-associative), ``\\/`` (``||``), ``/\\``
    (``&&``), ``~`` (``!``, ``not``); parentheses; ``true``/``false``;
    comparisons ``= == != <> < <= > >=``.
    """
    ctx = ctx or _Ctx("<condition>", 0)
    toks = _tokens(ctx, text, fld)
    pos = 0
    bits = program.value_bits

    def peek() -> tuple[str, str] | None:
        return toks[pos] if pos < len(toks) else None

    def take(kind: str | None = None) -> tuple[str, str]:
        nonlocal pos
        tok = peek()
        if tok is None or (kind is not None and tok[0] != kind):
            want = kind or "more input"
            got = tok[1] if tok else "end of condition"
            raise ctx.error(f"condition {text!r}: expected {want}, got {got!r}", fld)
        pos += 1
        return tok

    def term() -> Any:
        kind, val = take()
        if kind not in ("num", "reg", "mem", "name"):
            raise ctx.error(f"condition {text!r}: expected a value, got {val!r}", fld)
        return _term(ctx, val, threads, registers, reg_init, locations, aliases, program, fld, bits, kind)

    def atom() -> Any:
        tok = peek()
        if tok is None:
            take()
        assert tok is not None
        if tok[0] == "not":
            take()
            return z3.Not(atom())
        if tok[0] == "lp":
            take()
            e = implication()
            take("rp")
            return e
        if tok[0] == "name" and tok[1] in ("true", "false"):
            take()
            return z3.BoolVal(tok[1] == "true")
        left = term()
        _, op = take("cmp")
        right = term()
        return _COMPARE[op](left, right)

    def conjunction() -> Any:
        parts = [atom()]
        while peek() is not None and peek()[0] == "and":  # type: ignore[index]
            take()
            parts.append(atom())
        return parts[0] if len(parts) == 1 else z3.And(parts)

    def disjunction() -> Any:
        parts = [conjunction()]
        while peek() is not None and peek()[0] == "or":  # type: ignore[index]
            take()
            parts.append(conjunction())
        return parts[0] if len(parts) == 1 else z3.Or(parts)

    def implication() -> Any:
        left = disjunction()
        if peek() is not None and peek()[0] == "implies":  # type: ignore[index]
            take()
            return z3.Implies(left, implication())
        return left

    if not toks:
        raise ctx.error("empty condition", fld)
    formula = implication()
    if pos != len(toks):
        raise ctx.error(f"condition {text!r}: unexpected {toks[pos][1]!r}", fld)
    return formula


# ------------------------------------------------------------------ evaluation
def evaluate(test: LitmusTest, model: str = "ptx", timeout_s: float | None = DEFAULT_TIMEOUT_S,
             want_witness: bool = True, causality: str = DEFAULT_CAUSALITY) -> LitmusResult:
    """Decide whether the test's outcome is reachable under ``model`` (encoded with ``causality``)."""
    check_model(model)
    if test.unsupported is not None:
        return LitmusResult(name=test.name, model=model, expected=test.expected, observed="unsupported",
                            seconds=0.0, quantifier=test.quantifier, expr=test.expr, reason=test.unsupported,
                            line=test.line)
    try:
        res = exists(test.program, test.outcome, model=model, timeout_s=timeout_s,
                     extra=test.register_terms() if want_witness else None, causality=causality)
    except UnsupportedError as exc:  # the model refuses a construct the reader accepted
        return LitmusResult(name=test.name, model=model, expected=test.expected, observed="unsupported",
                            seconds=0.0, quantifier=test.quantifier, expr=test.expr, reason=exc.message,
                            line=test.line, notes=list(test.notes))
    observed = {"sat": "allowed", "unsat": "forbidden"}.get(res.status, "unknown")
    witness = res.witness.format() if (res.witness is not None and want_witness) else None
    return LitmusResult(name=test.name, model=model, expected=test.expected, observed=observed,
                        seconds=res.seconds, quantifier=test.quantifier, expr=test.expr,
                        reason=res.reason, witness=witness, line=test.line, notes=list(test.notes))


def run_file(path: str | Path, model: str = "ptx", timeout_s: float | None = DEFAULT_TIMEOUT_S,
             bound: int = 1, causality: str = DEFAULT_CAUSALITY) -> list[LitmusResult]:
    """Parse and evaluate every test of a JSONL file."""
    return [evaluate(t, model=model, timeout_s=timeout_s, causality=causality)
            for t in load_jsonl(path, bound=bound)]


def summary(results: list[LitmusResult]) -> dict[str, Any]:
    """Counts for reports: tests, agreements, allowed/forbidden/unknown/unsupported, seconds."""
    return {
        "tests": len(results),
        "agree": sum(1 for r in results if r.agrees is True),
        "disagree": sum(1 for r in results if r.agrees is False),
        "unknown": sum(1 for r in results if r.observed == "unknown"),
        "unsupported": sum(1 for r in results if r.observed == "unsupported"),
        "no_expectation": sum(1 for r in results if r.decided_without_expectation),
        "allowed": sum(1 for r in results if r.observed == "allowed"),
        "forbidden": sum(1 for r in results if r.observed == "forbidden"),
        "seconds": round(sum(r.seconds for r in results), 3),
    }


def timed_run(path: str | Path, model: str = "ptx", timeout_s: float | None = DEFAULT_TIMEOUT_S,
              bound: int = 1) -> tuple[list[LitmusResult], float]:
    """:func:`run_file` plus the wall-clock seconds of the whole run (parsing included)."""
    start = time.perf_counter()
    results = run_file(path, model=model, timeout_s=timeout_s, bound=bound)
    return results, time.perf_counter() - start
