"""Translation check: the compiled PTX holds, for every synchronization op of the IR, the instruction it demands.

``nvcc -ptx kernel.cu`` keeps the text of every inline-asm block, and every
IR memory op's block carries ``// collsim-ir op=N label``. For each kernel
instantiation (``.entry``: one per kernel part and element type) this module

* finds every marked block and parses its instructions;
* derives, *from the IR op alone* (not from the emitter's tables), what the
  op demands: opcode (``st``/``ld``/``fence``/``red``/``atom``), memory
  semantics and scope, state space ``.global``, vector shape;
* reports an op that is missing (the emitter or the compiler dropped it), a
  block with the wrong number of instructions, an instruction weaker than the
  IR (``st.relaxed`` for a release store, ``.gpu`` for ``.sys``, no
  ``.volatile`` …), a vector width that differs from the layout's store width
  (which would change what the atomicity assumptions are about), and a poll
  whose load is not inside a loop;
* over a layout of byte-wide or 16-bit words, demands the access the
  verifier modelled: a store of each word at its width (``.v4.b16``,
  ``.v4.b8``, scalar ``.b16``/``.b8`` for a partial store), a load at the
  layout's ``load_bytes`` where declared (``.v4.u32``), and one packed
  ``.b128``/``.b64`` access of the whole instruction only where a hardware
  assumption makes that instruction one access (PTX has no 16-byte vector of
  16-bit elements);
* counts IR ops and PTX instructions by (opcode, semantics, scope) so the
  totals can be compared, and rejects synchronization instructions in a
  kernel body that no IR op accounts for.

Strength order: weak < relaxed = volatile (relaxed at sys scope, PTX ISA
§8.4.2) < acquire, release < acq_rel; scopes cta < gpu < sys. An instruction
stronger than demanded is reported as a note, weaker as an error.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from collsim.emit.cuda import MARKER
from collsim.emit.plan import ProgramPlan, device_nodes, iter_nodes
from collsim.ir import multimem
from collsim.ir.assumptions import store_is_one_access
from collsim.ir.layout import LineLayout, WordRole
from collsim.ir.ops import (Atomic, Fence, Fill, HostBarrier, HostMemset, Input, KernelBoundary, Load, Loop,
                            BulkLoad, ProxyFence, ProxyThread,
                            MultimemLoadReduce, MultimemRed, MultimemStore, PollUntil, Reduce, Reg, Store, SyncGroup,
                            When, WriteOutput)
from collsim.ir.types import Sem
from collsim.ir.visit import OpVisitor

__all__ = ["PtxInstruction", "PtxFinding", "PtxReport", "check_ptx", "expected_instructions", "parse_entries"]

_SEMS = ("relaxed", "acquire", "release", "acq_rel", "volatile", "weak", "sc")
_SCOPES = ("cta", "cluster", "gpu", "sys")
_RANK = {"weak": 0, "relaxed": 1, "volatile": 1, "acquire": 2, "release": 2, "acq_rel": 3, "sc": 4}
_SCOPE_RANK = {"cta": 0, "cluster": 1, "gpu": 2, "sys": 3}
_SYNC_OPCODES = ("fence", "membar", "red", "atom", "multimem")
_MEMORY_OPCODES = ("st", "ld", "fence", "red", "atom", "membar", "multimem", "cp")
#: collsim's element types, as the mangled template argument of a kernel names them and as collsim names them
_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "int32": "int32"}


@dataclass(frozen=True)
class PtxInstruction:
    """One PTX instruction: opcode and dotted qualifiers, e.g. ``st`` + (``relaxed``, ``sys``, ``global``, ``v4``, ``u32``)."""

    opcode: str
    qualifiers: tuple[str, ...]
    text: str
    line: int

    @property
    def sem(self) -> str:
        for q in self.qualifiers:
            if q in _SEMS:
                return q
        return "weak"

    @property
    def scope(self) -> str:
        if self.sem == "volatile":
            return "sys"
        for q in self.qualifiers:
            if q in _SCOPES:
                return q
        # PTX defaults: ld/st strong ops need an explicit scope; red/atom default to .gpu
        return "gpu" if self.opcode in ("red", "atom") else ""

    @property
    def vector(self) -> str:
        for q in self.qualifiers:
            if re.fullmatch(r"v\d+", q):
                return q
        return ""

    @property
    def type(self) -> str:
        return self.qualifiers[-1] if self.qualifiers else ""


@dataclass(frozen=True)
class Expectation:
    """What one IR op demands of each instruction in its block."""

    op_id: int
    label: str
    opcodes: tuple[str, ...]
    sem: str
    scope: str
    vector: str
    types: tuple[str, ...]  # acceptable final type qualifiers
    count: int
    in_loop: bool = False
    extra: tuple[str, ...] = ()  # further qualifiers that must appear (e.g. "sc", "noftz", "global")
    blocks: int = 1  # marked asm blocks the op produces (a partial store: one per covered word of a line)
    #: when lanes differ (a line's last lane carries a count): each block's instructions as (vector, type)
    #: pairs, one entry per block; the blocks must match these shapes one to one (vector/types/count unused)
    shapes: tuple[tuple[tuple[str, str], ...], ...] = ()

    @property
    def instructions(self) -> int:
        """IR-demanded instructions of the whole op (every block)."""
        return sum(len(shape) for shape in self.shapes) if self.shapes else self.count * self.blocks

@dataclass(frozen=True)
class PtxFinding:
    entry: str
    op_id: int | None
    severity: str  # "error" or "note"
    message: str

    def __str__(self) -> str:
        where = f"op #{self.op_id}" if self.op_id is not None else "kernel"
        return f"{self.severity}: {self.entry}: {where}: {self.message}"


@dataclass
class PtxReport:
    entries: list[str] = field(default_factory=list)
    findings: list[PtxFinding] = field(default_factory=list)
    #: per entry: Counter of (opcode, sem, scope) for IR ops and for the PTX
    ir_counts: dict[str, Counter] = field(default_factory=dict)
    ptx_counts: dict[str, Counter] = field(default_factory=dict)
    checked_ops: int = 0

    @property
    def errors(self) -> list[PtxFinding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return bool(self.entries) and not self.errors

    def summary(self) -> str:
        lines = [f"{len(self.entries)} kernel instantiation(s), {self.checked_ops} IR op blocks checked, "
                 f"{len(self.errors)} error(s)"]
        lines += [str(f) for f in self.findings]
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# PTX parsing
# ---------------------------------------------------------------------------
_ENTRY = re.compile(r"^\s*(?:\.visible\s+)?\.entry\s+([A-Za-z0-9_$]+)")
_INSN = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*)((?:\.[A-Za-z0-9_:]+)*)")


def parse_entries(ptx: str) -> dict[str, list[str]]:
    """The body lines of every ``.entry`` function, by mangled name."""
    entries: dict[str, list[str]] = {}
    lines = ptx.splitlines()
    i = 0
    while i < len(lines):
        m = _ENTRY.match(lines[i])
        if not m:
            i += 1
            continue
        name = m.group(1)
        depth = 0
        body: list[str] = []
        started = False
        while i < len(lines):
            line = lines[i]
            if "{" in line:
                depth += line.count("{")
                started = True
            if started:
                body.append(line)
            if "}" in line:
                depth -= line.count("}")
                if started and depth <= 0:
                    break
            i += 1
        entries[name] = body
        i += 1
    return entries


def _instruction(line: str, number: int) -> PtxInstruction | None:
    text = line.split("//", 1)[0].strip()
    if not text or text.startswith(".") or text.endswith(":") or text in ("{", "}"):
        return None
    m = _INSN.match(text)
    if not m:
        return None
    quals = tuple(q for q in m.group(2).split(".") if q)
    return PtxInstruction(m.group(1), quals, text, number)


@dataclass
class _Block:
    op_id: int | None  # None: an unmarked asm block
    infra: bool
    start: int
    instructions: list[PtxInstruction]


def _blocks(body: list[str]) -> tuple[list[_Block], list[PtxInstruction]]:
    """Inline-asm blocks and the instructions outside any block."""
    blocks: list[_Block] = []
    outside: list[PtxInstruction] = []
    current: _Block | None = None
    for number, line in enumerate(body):
        stripped = line.strip()
        if stripped.startswith("// begin inline asm"):
            current = _Block(None, False, number, [])
            continue
        if stripped.startswith("// end inline asm"):
            if current is not None:
                blocks.append(current)
            current = None
            continue
        if current is not None:
            if MARKER in stripped:
                m = re.search(re.escape(MARKER) + r"(\d+)", stripped)
                current.op_id = int(m.group(1)) if m else None
                continue
            if "collsim-infra" in stripped:
                current.infra = True
                continue
        insn = _instruction(line, number)
        if insn is None:
            continue
        (current.instructions if current is not None else outside).append(insn)
    return blocks, outside


def _in_loop(body: list[str], start: int) -> bool:
    """True if some branch after ``start`` jumps back to a label at or before it."""
    labels: dict[str, int] = {}
    for number, line in enumerate(body):
        m = re.match(r"^\s*(\$?[A-Za-z0-9_$]+):", line)
        if m:
            labels[m.group(1)] = number
    for number in range(start, len(body)):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z0-9_$]+);", body[number])
        if m and labels.get(m.group(1), len(body)) <= start:
            return True
    return False


# ---------------------------------------------------------------------------
# Expectations from the IR
# ---------------------------------------------------------------------------
def _vec(n: int) -> str:
    return f"v{n}" if n > 1 else ""


def _word_types(elem_bytes: int) -> tuple[str, ...]:
    return ("u32", "b32", "s32") if elem_bytes == 4 else ("u64", "b64", "s64")


def _lane_patterns(layout: LineLayout) -> list[tuple[WordRole, ...]]:
    """The distinct word-role sequences of the layout's lanes (one asm block each), in lane order."""
    seen: list[tuple[WordRole, ...]] = []
    for lane in range(layout.lanes):
        roles = tuple(w.role for i, w in enumerate(layout.words) if layout.lane_of(i) == lane)
        if roles not in seen:
            seen.append(roles)
    return seen


def _reduction_shape(roles: tuple[WordRole, ...], word_bytes: int, dtype: str, instruction: str | None
                     ) -> tuple[tuple[str, str], ...]:
    """The (vector, type) of each instruction one lane's reduction needs, per the PTX ISA: each run of data
    words one vector of the element type (one instruction per word for integers), each count word an
    unsigned add. ``instruction`` is the multimem instruction, or None for a unicast ``red``."""
    shape: list[tuple[str, str]] = []
    run = 0
    ptx_type = multimem.data_type(_DTYPE_NAMES[dtype])

    def flush() -> None:
        nonlocal run
        if not run:
            return
        if ptx_type in multimem.INTEGER_TYPES:
            shape.extend([("", ptx_type)] * (run // 4))
        else:
            shape.append((multimem.vector_qualifier(ptx_type, run).lstrip("."), ptx_type))
        run = 0

    for role in roles:
        if role is WordRole.DATA:
            run += word_bytes
        else:
            flush()
            shape.append(("", multimem.counter_type(word_bytes)))
    flush()
    return tuple(shape)

class _Demands(OpVisitor):
    """What one IR op demands of the PTX (None: the op is no synchronization-relevant instruction)."""

    consumer = "the PTX translation check"

    def __init__(self, plan: ProgramPlan, dtype: str) -> None:
        self.plan = plan
        self.dtype = dtype

    def memory(self, op: Store | Load | PollUntil, node_id: int, ref, opcode: str, blocks: int = 1,
               scalar: bool = False) -> Expectation:
        layout = self.plan.program.buffer(ref.buffer).layout
        elem = max(w.nbytes for w in layout.words)
        scope = op.sem.model_scope(op.scope).value if op.sem is not Sem.WEAK else ""
        vector, types, count = "" if scalar else _vec(layout.store_bytes // elem), _word_types(elem), 1
        if layout.narrow_words:
            vector, types, count = self._narrow_shape(layout, opcode, scalar)
        return Expectation(node_id, op.label, (opcode,), op.sem.value, scope, vector, types, count,
                           in_loop=isinstance(op, PollUntil), extra=("global",), blocks=blocks)

    def _narrow_shape(self, layout: LineLayout, opcode: str, scalar: bool) -> tuple[str, tuple[str, ...], int]:
        """(vector, types, instructions per lane) of an access to a layout of narrow words: the access the
        verifier modelled (see the module docstring)."""
        word = min(w.nbytes for w in layout.words)
        narrow_types = (f"b{word * 8}", f"u{word * 8}")
        if scalar:
            return "", narrow_types, 1
        if opcode == "ld" and layout.load_bytes is not None:
            return _vec(layout.store_bytes // layout.load_bytes), _word_types(layout.load_bytes), 1
        if store_is_one_access(layout.store_bytes, self.plan.assumptions):
            return "", (f"b{layout.store_bytes * 8}",), 1
        elements = layout.store_bytes // word
        per = min(4, elements)  # PTX vectors of 8- and 16-bit elements hold at most four
        return _vec(per), narrow_types, elements // per

    def visit_store(self, op: Store, node_id: int) -> Expectation:
        # a store covers the data words if it has a source, the flag words if it has a flag;
        # covering only some words of a line means one scalar store per covered word
        layout = self.plan.program.buffer(op.dst.buffer).layout

        def covers(role: WordRole) -> bool:
            return (role is WordRole.DATA and op.src is not None) or (role is WordRole.FLAG and op.flag is not None)

        if not all(covers(w.role) for w in layout.words):
            # one scalar store per covered word of each distinct lane (lanes alike share their code)
            blocks = sum(1 for roles in _lane_patterns(layout) for role in roles if covers(role))
            return self.memory(op, node_id, op.dst, "st", blocks=blocks, scalar=True)
        return self.memory(op, node_id, op.dst, "st")

    def visit_load(self, op: Load, node_id: int) -> Expectation:
        return self.memory(op, node_id, op.src, "ld")

    def visit_poll_until(self, op: PollUntil, node_id: int) -> Expectation:
        if op.cas:  # a CAS loop: atom.cas at the op's semantics, in a loop
            elem = max(w.nbytes for w in self.plan.program.buffer(op.src.buffer).layout.words)
            return Expectation(node_id, op.label, ("atom",), op.sem.model_sem, op.sem.model_scope(op.scope).value, "",
                               (f"b{elem * 8}",), 1, in_loop=True, extra=("global", "cas"))
        return self.memory(op, node_id, op.src, "ld")

    def visit_fence(self, op: Fence, node_id: int) -> Expectation:
        return Expectation(node_id, op.label, ("fence",), op.kind.value, op.scope.value, "", ("",), 1,
                           extra=(op.kind.value,))

    def visit_atomic(self, op: Atomic, node_id: int) -> Expectation:
        label = op.label
        returns = op.into is not None
        sem = op.sem.model_sem
        scope = op.sem.model_scope(op.scope).value
        allowed = ("atom",) if (returns or sem in ("acquire", "acq_rel")) else ("red",)
        layout = self.plan.program.buffer(op.dst.buffer).layout
        if isinstance(op.operand, (Input, Reg, Fill)) and (op.flag is not None or
                                                            max(w.nbytes for w in layout.words) != 4):
            return self._line_reduction(op, node_id, allowed, sem, scope, ("global", op.op.value), None)
        if isinstance(op.operand, (Input, Reg, Fill)):
            n = layout.store_bytes // 4
            if self.dtype == "fp32":
                return Expectation(node_id, label, allowed, sem, scope, _vec(n), ("f32",), 1,
                                   extra=("global", op.op.value))
            if self.dtype == "bf16":
                return Expectation(node_id, label, allowed, sem, scope, _vec(n), ("bf16x2",), 1,
                                   extra=("global", op.op.value, "noftz"))
            return Expectation(node_id, label, allowed, sem, scope, "", ("u32", "s32"), n,
                               extra=("global", op.op.value))
        elem = max(w.nbytes for w in layout.words)
        types = _word_types(elem) if op.op.value not in ("exch", "cas") else (("b32",) if elem == 4 else ("b64",))
        if op.op.value == "cas":
            allowed = ("atom",)
        return Expectation(node_id, label, allowed, sem, scope, "", types, 1, extra=("global", op.op.value))

    def _line_reduction(self, op: Atomic | MultimemRed, node_id: int, opcodes: tuple[str, ...], sem: str,
                        scope: str, extra: tuple[str, ...], instruction: str | None) -> Expectation:
        layout = self.plan.program.buffer(op.dst.buffer).layout
        word = max(w.nbytes for w in layout.words)
        shapes = tuple(_reduction_shape(roles, word, self.dtype, instruction) for roles in _lane_patterns(layout))
        return Expectation(node_id, op.label, opcodes, sem, scope, "", ("",), 1, extra=extra, blocks=len(shapes),
                           shapes=shapes)

    def visit_multimem_load_reduce(self, op: MultimemLoadReduce, node_id: int) -> Expectation:
        layout = self.plan.program.buffer(op.src.buffer).layout
        shapes = tuple(_reduction_shape(roles, 4, self.dtype, "ld_reduce") for roles in _lane_patterns(layout))
        return Expectation(node_id, op.label, ("multimem",), op.sem.value, "" if op.sem is Sem.WEAK else op.scope.value,
                           "", ("",), 1, extra=("ld_reduce", "global", op.op.value), blocks=len(shapes),
                           shapes=shapes)

    def visit_multimem_store(self, op: MultimemStore, node_id: int) -> Expectation:
        layout = self.plan.program.buffer(op.dst.buffer).layout
        word = max(w.nbytes for w in layout.words)
        # the bits of 32-bit words move as one f32 vector (no integer vectors); 8-byte words one u64 each
        shape = (((multimem.vector_qualifier("f32", layout.store_bytes).lstrip("."), "f32"),) if word == 4
                 else (("", "u64"),) * (layout.store_bytes // 8))
        return Expectation(node_id, op.label, ("multimem",), op.sem.value, "" if op.sem is Sem.WEAK else op.scope.value,
                           "", ("",), 1, extra=("st", "global"), shapes=(shape,))

    def visit_multimem_red(self, op: MultimemRed, node_id: int) -> Expectation:
        extra = ("red", "global", op.op.value)
        if isinstance(op.operand, (Input, Reg, Fill)):
            return self._line_reduction(op, node_id, ("multimem",), op.sem.value, op.scope.value, extra, "red")
        layout = self.plan.program.buffer(op.dst.buffer).layout
        word = max(w.nbytes for w in layout.words)
        return Expectation(node_id, op.label, ("multimem",), op.sem.value, op.scope.value, "",
                           (multimem.counter_type(word),), 1, extra=extra)

    def visit_reduce(self, op: Reduce, node_id: int) -> None:
        return None  # rank-local loads and stores

    def visit_write_output(self, op: WriteOutput, node_id: int) -> None:
        return None

    def visit_sync_group(self, op: SyncGroup, node_id: int) -> None:
        return None  # __syncthreads: bar.sync, counted apart

    def visit_kernel_boundary(self, op: KernelBoundary, node_id: int) -> None:
        return None

    def visit_host_memset(self, op: HostMemset, node_id: int) -> None:
        return None  # host code (a memset kernel before the launch), no instruction of the collective's kernels

    def visit_host_barrier(self, op: HostBarrier, node_id: int) -> None:
        return None  # host code

    def visit_bulk_load(self, op: BulkLoad, node_id: int) -> Expectation:
        # cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: one per chunk, in the chunk loop
        return Expectation(node_id, op.label, ("cp",), "weak", "", "", ("",), 1, extra=("async", "bulk", "global"))

    def visit_proxy_fence(self, op: ProxyFence, node_id: int) -> Expectation:
        return Expectation(node_id, op.label, ("fence",), "weak", "", "", ("",), 1, extra=("proxy", "async"))

    def visit_proxy_thread(self, op: ProxyThread, node_id: int) -> None:
        return None  # host code

    def visit_loop(self, op: Loop, node_id: int) -> None:
        return None  # its body's ops are nodes of their own

    def visit_when(self, op: When, node_id: int) -> None:
        return None  # a branch: its body's ops are nodes of their own


def expected_instructions(plan: ProgramPlan, dtype: str) -> dict[int, Expectation]:
    """What every synchronization-relevant IR op of ``plan`` demands, for element type ``dtype`` (fp32, bf16, int32)."""
    demands = _Demands(plan, dtype)
    out: dict[int, Expectation] = {}
    for node in device_nodes(plan.nodes):  # a proxy thread's ops are host code, not the kernel's PTX
        want = demands.visit(node.op, node.id)
        if want is not None:
            out[node.id] = want
    return out


def _sem_ok(actual: PtxInstruction, want: Expectation) -> tuple[bool, bool]:
    """(not weaker, exactly equal) for semantics and scope."""
    a_sem, a_scope = actual.sem, actual.scope
    if actual.opcode == "fence":
        a_sem = "sc" if "sc" in actual.qualifiers else ("acq_rel" if "acq_rel" in actual.qualifiers else a_sem)
    w_sem = want.sem
    if w_sem in ("acquire", "release") and a_sem in ("acquire", "release") and a_sem != w_sem:
        return False, False
    not_weaker = _RANK.get(a_sem, -1) >= _RANK.get(w_sem, 0)
    if w_sem != "weak":
        not_weaker = not_weaker and _SCOPE_RANK.get(a_scope, -1) >= _SCOPE_RANK.get(want.scope, 0)
    exact = a_sem == w_sem and (w_sem == "weak" or a_scope == want.scope)
    if w_sem == "weak":
        exact = a_sem == "weak"
    return not_weaker, exact


def check_ptx(plan: ProgramPlan, ptx: str) -> PtxReport:
    """Check the PTX of a whole ``kernel.cu`` against ``plan`` (see the module docstring)."""
    report = PtxReport()
    entries = {name: body for name, body in parse_entries(ptx).items() if "collsim_kernel_part" in name}
    # Itanium mangling of the template argument: float -> f, int -> i, collsim_bf16 -> 12collsim_bf16
    dtype_of = {"IfE": "fp32", "IiE": "int32", "I12collsim_bf16E": "bf16"}
    kernel_ops: list[set[int]] = []
    for nodes in plan.kernels:
        kernel_ops.append({n.id for n in iter_nodes(nodes)})
    for name, body in sorted(entries.items()):
        m = re.search(r"collsim_kernel_part(\d+)", name)
        part = int(m.group(1)) if m else 0
        dtype = next((d for key, d in dtype_of.items() if key in name), "fp32")
        report.entries.append(name)
        expectations = {i: e for i, e in expected_instructions(plan, dtype).items()
                        if part < len(kernel_ops) and i in kernel_ops[part]}
        blocks, outside = _blocks(body)
        by_op: dict[int, list[_Block]] = {}
        for block in blocks:
            if block.op_id is not None:
                by_op.setdefault(block.op_id, []).append(block)
        ir_count: Counter = Counter()
        ptx_count: Counter = Counter()
        for op_id, want in sorted(expectations.items()):
            ir_count[(want.opcodes[0], want.sem, want.scope)] += want.instructions
            found = by_op.get(op_id)
            if not found:
                report.findings.append(PtxFinding(name, op_id, "error",
                                                  f"{want.label}: no {'/'.join(want.opcodes)} instruction for this "
                                                  "IR op in the PTX (dropped by the emitter or the compiler)"))
                continue
            if len(found) != want.blocks:
                report.findings.append(PtxFinding(name, op_id, "error",
                                                  f"{want.label}: {len(found)} instruction block(s) in the PTX, "
                                                  f"expected {want.blocks}"))
            unmatched = list(want.shapes)
            for block in found:
                report.checked_ops += 1
                mem = [insn for insn in block.instructions if insn.opcode in _MEMORY_OPCODES]
                if want.shapes:
                    shape = tuple((insn.vector, insn.type) for insn in mem)
                    if shape in unmatched:
                        unmatched.remove(shape)
                    else:
                        report.findings.append(PtxFinding(name, op_id, "error",
                                                          f"{want.label}: a block's instructions "
                                                          f"{[f'.{v}.{t}' if v else f'.{t}' for v, t in shape]} "
                                                          f"are none of the lane shapes {list(want.shapes)} the "
                                                          "layout and element type demand"))
                elif len(mem) != want.count:
                    report.findings.append(PtxFinding(name, op_id, "error",
                                                      f"{want.label}: {len(mem)} memory instruction(s) in its block, "
                                                      f"expected {want.count}"))
                for insn in mem:
                    ptx_count[(insn.opcode, insn.sem if insn.opcode != "fence" else want.sem, insn.scope)] += 1
                    problems = []
                    if insn.opcode not in want.opcodes:
                        problems.append(f"opcode {insn.opcode}, expected {'/'.join(want.opcodes)}")
                    not_weaker, exact = _sem_ok(insn, want)
                    if not not_weaker:
                        problems.append(f"semantics {insn.sem}.{insn.scope or '-'} are weaker than the IR's "
                                        f"{want.sem}.{want.scope or '-'}")
                    if not want.shapes and insn.vector != want.vector:
                        problems.append(f"vector shape .{insn.vector or 'scalar'}, the layout stores "
                                        f".{want.vector or 'scalar'}")
                    if not want.shapes and want.types != ("",) and insn.type not in want.types:
                        problems.append(f"type .{insn.type}, expected .{'/.'.join(want.types)}")
                    for q in want.extra:
                        if q not in insn.qualifiers:
                            problems.append(f"missing .{q}")
                    if problems:
                        report.findings.append(PtxFinding(name, op_id, "error",
                                                          f"{want.label}: `{insn.text}`: " + "; ".join(problems)))
                    elif not exact:
                        report.findings.append(PtxFinding(name, op_id, "note",
                                                          f"{want.label}: `{insn.text}` is stronger than the IR's "
                                                          f"{want.sem}.{want.scope}"))
                if want.in_loop and not _in_loop(body, block.start):
                    report.findings.append(PtxFinding(name, op_id, "error",
                                                      f"{want.label}: the poll's load is not inside a loop"))
        for op_id in sorted(set(by_op) - set(expectations)):
            report.findings.append(PtxFinding(name, op_id, "error",
                                              "a marked block for an op that demands no memory instruction"))
        stray = [insn for insn in outside if insn.opcode in _SYNC_OPCODES or
                 (insn.opcode in ("st", "ld") and insn.sem not in ("weak",) and "param" not in insn.qualifiers)]
        stray += [insn for block in blocks if block.op_id is None and not block.infra for insn in block.instructions
                  if insn.opcode in _SYNC_OPCODES + ("st", "ld")]
        for insn in stray:
            report.findings.append(PtxFinding(name, None, "error",
                                              f"`{insn.text}`: a synchronization instruction no IR op accounts for"))
        report.ir_counts[name] = ir_count
        report.ptx_counts[name] = ptx_count
        if ir_count != ptx_count and not any(f.entry == name and f.severity == "error" for f in report.findings):
            report.findings.append(PtxFinding(name, None, "error",
                                              f"instruction counts differ: IR {dict(ir_count)} vs PTX {dict(ptx_count)}"))
    if not entries:
        report.findings.append(PtxFinding("(ptx)", None, "error", "no collsim kernel entry found in the PTX"))
    return report
