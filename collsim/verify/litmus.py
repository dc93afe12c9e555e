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
    ``{"quantifier": "exists" | "~exists" | "forall", "expr": "P1:r1 == 1 /\\ x != 2"}``.
``expected``
    ``"allowed"`` or ``"forbidden"``: whether the *outcome* is reachable. The
    outcome is ``expr`` for ``exists``/``~exists`` and ``~expr`` for
    ``forall``.

Qualifiers: ``sem`` ``weak | relaxed | acquire | release | acq_rel`` (and
``volatile`` = relaxed.sys, ``mmio`` = relaxed); strong operations without a
scope get ``gpu`` (PTX's default for ``atom``/``red``). Fences: ``sc``,
``acq_rel`` (``acquire``/``release``), and ``proxy.alias`` for
``fence.proxy.alias``; other proxies are not modelled (UnsupportedError).

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
from collsim.verify.models import MEMORY_MODELS
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
    "bar": (("instance",), ("mode", "scope", "id", "quorum")),
    "mov": (("reg", "val"), ()),
    "local": (("kind", "reg", "a", "b"), ()),
    "label": (("name",), ()),
    "branch": (("cond", "a", "b", "target"), ()),
    "goto": (("target",), ()),
}
MEM_SEMS = ("weak", "relaxed", "acquire", "release", "acq_rel", "sc", "volatile", "mmio")
FENCE_SEMS = ("sc", "acq_rel", "acquire", "release", "proxy.alias", "alias", "proxy")
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

    def register_terms(self) -> dict[str, Any]:
        return {f"{t}:{r}": v for (t, r), v in self.registers.items()}


@dataclass
class LitmusResult:
    """Outcome of one test under one model."""

    name: str
    model: str
    expected: str | None
    observed: str  # "allowed" | "forbidden" | "unknown"
    seconds: float
    quantifier: str
    expr: str
    reason: str | None = None
    witness: str | None = None
    line: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool | None:
        if self.expected is None or self.observed == "unknown":
            return None
        return self.expected == self.observed

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
        test = parse_test(row, file=str(path), line=lineno, bound=bound)
        if test.name in names:
            raise ctx.error(f"duplicate test name '{test.name}'", "name")
        names.add(test.name)
        tests.append(test)
    return tests


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
    sort = z3.IntSort() if bits is None else z3.BitVecSort(bits)
    for ti, ops in enumerate(threads):
        if not isinstance(ops, list):
            raise ctx.error("a thread must be a list of operations", f"threads[{ti}]")
        tname = thread_names[ti]
        lowering = _ThreadLowering(ctx, ti, tname, ops, aliases, reg_init, sort, bits, bound)
        lowering.run()
        events += lowering.events
        assumptions += lowering.assumptions
        notes += lowering.notes
        for r, v in lowering.final_regs.items():
            registers[(tname, r)] = v
    for (t, r), v in reg_init.items():
        registers.setdefault((t, r), _const(v, bits))
    locs_used = {e.loc for e in events if e.loc}
    for loc in locs_used:
        mem_init.setdefault(loc, 0)
    program = Program(events=events, placement=placement, init=mem_init, assumptions=assumptions,
                      value_bits=bits, name=name)

    cond = _require(ctx, row, "condition", (dict,), "")
    quant = _require(ctx, cond, "quantifier", (str,), "condition.")
    if quant not in QUANTIFIERS:
        raise ctx.error(f"unknown quantifier '{quant}'", "condition.quantifier", QUANTIFIERS)
    expr = _require(ctx, cond, "expr", (str,), "condition.")
    known_locs = set(mem_init) | set(aliases)
    formula = parse_condition(expr, ctx=ctx, threads=thread_names, registers=registers,
                              reg_init=reg_init, locations=known_locs, aliases=aliases,
                              program=program)
    outcome = z3.Not(formula) if quant == "forall" else formula
    expected = row.get("expected")
    if expected is not None and expected not in EXPECTED:
        raise ctx.error(f"unknown expectation '{expected}'", "expected", EXPECTED)
    meta = {k: v for k, v in row.items() if k not in ("threads", "placement", "init", "condition")}
    return LitmusTest(name=name, program=program, registers=registers, quantifier=quant, expr=expr,
                      outcome=outcome, expected=expected, file=file, line=line, meta=meta, notes=notes)


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
                 sort: z3.SortRef, bits: int | None, bound: int) -> None:
        self.ctx, self.index, self.thread = ctx, index, thread
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
        if kind not in OPS:
            raise self.ctx.error(f"unknown op kind {kind!r}", where + ".op", sorted(OPS))
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
        eid = f"{self.thread}.i{idx}.{tag}"
        e = Event(eid=eid, thread=self.thread, kind=kind, po_index=self.po, guard=path.guard,
                  deps=frozenset(deps) | frozenset(self.ctrl), **kw)
        self.po += 1
        self.events.append(e)
        return e

    def _read_var(self, eid: str) -> Any:
        return value_const(eid, self.sort)

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
            regs[op["reg"]] = self._read_var(e.eid)
            taint[op["reg"]] = frozenset({e.eid})
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
                regs[op["reg"]] = self._read_var(e.eid)
                taint[op["reg"]] = frozenset({e.eid})
        elif kind == "fence":
            sem = op["sem"]
            if sem in ("proxy.alias", "alias", "proxy"):
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
        elif kind == "bar":
            bid, tb = (None, frozenset())
            if op.get("id") is not None:
                bid, tb = self._value(path, op["id"], where + ".id")
            quorum, tq = (None, frozenset())
            if op.get("quorum") is not None:
                quorum, tq = self._value(path, op["quorum"], where + ".quorum")
            self._event(path, i, "BAR", f"bar{op['instance']}", deps=tb | tq, scope="cta",
                        bar_instance=op["instance"], bar_id=bid, bar_quorum=quorum,
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
  | (?P<cmp>==|!=|<=|>=|<|>)
  | (?P<not>~|!|\bnot\b)
  | (?P<lp>\()
  | (?P<rp>\))
  | (?P<reg>(?:P?\d+)\s*:\s*[A-Za-z_%][\w]*)
  | (?P<num>-?(?:0x[0-9a-fA-F]+|\d+))
  | (?P<name>[A-Za-z_][\w.\[\]]*)
""", re.VERBOSE)


def _tokens(ctx: _Ctx, text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ctx.error(f"cannot parse condition at {text[pos:pos + 12]!r}", "condition.expr")
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group()))  # type: ignore[arg-type]
    return out


def parse_condition(text: str, *, ctx: _Ctx | None = None, threads: list[str],
                    registers: dict[tuple[str, str], Any], reg_init: dict[tuple[str, str], int],
                    locations: set[str], aliases: dict[str, tuple[str, str]],
                    program: Program) -> Any:
    """The z3 formula of a condition such as ``P1:r1 == 1 /\\ ~(x == 2)``.

    ``Pn:reg`` is a final register value, a bare name a final memory value.
    Connectives: ``/\\`` ``\\/`` ``~`` (also ``&&`` ``||`` ``!``), parentheses,
    comparisons ``== != < <= > >=``, ``true``/``false``.
    """
    ctx = ctx or _Ctx("<condition>", 0)
    toks = _tokens(ctx, text)
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
            raise ctx.error(f"condition {text!r}: expected {want}, got {got!r}", "condition.expr")
        pos += 1
        return tok

    def term() -> Any:
        kind, val = take()
        if kind == "num":
            return _const(int(val, 0), bits)
        if kind == "reg":
            t, r = (s.strip() for s in val.split(":", 1))
            thread = _thread_ref(ctx, t, threads, "condition.expr")
            if (thread, r) in registers:
                return registers[(thread, r)]
            return _const(reg_init.get((thread, r), 0), bits)
        if kind == "name":
            if val not in locations:
                raise ctx.error(f"condition {text!r}: unknown location '{val}'", "condition.expr",
                                sorted(locations))
            loc = _physical(ctx, val, aliases, "condition.expr")[0]
            return program.final_var(loc)
        raise ctx.error(f"condition {text!r}: expected a value, got {val!r}", "condition.expr")

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
            e = disjunction()
            take("rp")
            return e
        if tok[0] == "name" and tok[1] in ("true", "false"):
            take()
            return z3.BoolVal(tok[1] == "true")
        left = term()
        _, op = take("cmp")
        right = term()
        return {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
                "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}[op](left, right)

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

    if not toks:
        raise ctx.error("empty condition", "condition.expr")
    formula = disjunction()
    if pos != len(toks):
        raise ctx.error(f"condition {text!r}: unexpected {toks[pos][1]!r}", "condition.expr")
    return formula


# ------------------------------------------------------------------ evaluation
def evaluate(test: LitmusTest, model: str = "ptx", timeout_s: float | None = DEFAULT_TIMEOUT_S,
             want_witness: bool = True) -> LitmusResult:
    """Decide whether the test's outcome is reachable under ``model``."""
    if model not in MEMORY_MODELS:
        raise InputError(f"unknown memory model '{model}'", field="model", choices=sorted(MEMORY_MODELS))
    res = exists(test.program, test.outcome, model=model, timeout_s=timeout_s,
                 extra=test.register_terms() if want_witness else None)
    observed = {"sat": "allowed", "unsat": "forbidden"}.get(res.status, "unknown")
    witness = res.witness.format() if (res.witness is not None and want_witness) else None
    return LitmusResult(name=test.name, model=model, expected=test.expected, observed=observed,
                        seconds=res.seconds, quantifier=test.quantifier, expr=test.expr,
                        reason=res.reason, witness=witness, line=test.line, notes=list(test.notes))


def run_file(path: str | Path, model: str = "ptx", timeout_s: float | None = DEFAULT_TIMEOUT_S,
             bound: int = 1) -> list[LitmusResult]:
    """Parse and evaluate every test of a JSONL file."""
    return [evaluate(t, model=model, timeout_s=timeout_s) for t in load_jsonl(path, bound=bound)]


def summary(results: list[LitmusResult]) -> dict[str, Any]:
    """Counts for reports: tests, agreements, allowed/forbidden/unknown, seconds."""
    return {
        "tests": len(results),
        "agree": sum(1 for r in results if r.agrees is True),
        "disagree": sum(1 for r in results if r.agrees is False),
        "unknown": sum(1 for r in results if r.observed == "unknown"),
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
