"""Print a planned program as CUDA: one kernel per (protocol, algorithm), one block of code per IR op.

The mapping is one to one. Every IR memory operation on a symmetric buffer
becomes exactly one inline-PTX instruction per line (per lane), with the
semantics and scope the IR states, and carries a PTX comment
``// collsim-ir op=N label`` inside the asm block so the translation check
(:mod:`collsim.emit.ptxcheck`) can find it in the compiled PTX:

======================  ====================================================
IR                      PTX
======================  ====================================================
Store weak              ``st.global{.vN}.uW``
Store relaxed/release   ``st.{relaxed|release}.{scope}.global{.vN}.uW``
Store volatile          ``st.volatile.global{.vN}.uW``
Load / PollUntil        ``ld.{weak|volatile|relaxed.S|acquire.S}.global...``
                        (PollUntil: inside a spin loop with a timeout)
Fence                   ``fence.{sc|acq_rel}.{scope}``
Atomic, no ``into``     ``red.{sem}.{scope}.global.{op}...`` (vector data:
                        ``red...add.v4.f32`` / ``.noftz.v4.bf16x2``, sm_90)
Atomic with ``into``    ``atom.{sem}.{scope}.global.{op}...``
Atomic with a ``flag``  the data words' vector ``red`` and one ``red.add`` per
                        flag word, in one asm block per lane
MultimemLoadReduce      ``multimem.ld_reduce{.sem.scope}.global.add...``
MultimemStore           ``multimem.st{.sem.scope}.global...``
MultimemRed             ``multimem.red.{sem}.{scope}.global.add...``
                        (multimem ops address the buffer's multicast mapping;
                        single-GPU mode issues one per copy, see EMIT.md)
SyncGroup               ``__syncthreads()``
KernelBoundary          end of the kernel (next part is the next launch)
Reduce / WriteOutput    plain loads and stores of rank-local memory
======================  ====================================================

Registers are per-(rank, channel) scratch in global memory; see
:mod:`collsim.emit.plan` for the hand-off barriers the emitter adds between
threads. No protocol is special-cased: everything printed is derived from
the program's ops, buffers and layouts.
"""
from __future__ import annotations

import functools
from typing import Callable

from collsim.emit.layouts import EmitError, LaneRun, LayoutPlan, lane_runs, narrow_form
from collsim.emit.plan import BULK_CHUNK_BYTES, EmitNode, ProgramPlan, iter_nodes
from collsim.ir import multimem
from collsim.ir.expr import BinOp, Expr, Loaded, loaded_registers
from collsim.ir.ops import (Atomic, Fence, Fill, HostBarrier, HostMemset, Input, KernelBoundary, Load, Loop,
                            BulkLoad, ProxyFence, ProxyThread,
                            MulticastRef, MultimemLoadReduce, MultimemRed, MultimemStore, NotEqual, Op, PollUntil,
                            Reduce, Ref, Reg, Store, SyncGroup, When, WriteOutput)
from collsim.ir.floats import Compare
from collsim.ir.types import FillPattern, Issuer, RmwOp, Scope, Sem
from collsim.ir.visit import OpVisitor

__all__ = ["generate_kernel_source", "describe_op", "ptx_store_qualifiers", "ptx_load_qualifiers",
           "ptx_atomic_qualifiers", "ptx_multimem_qualifiers", "reduction_instructions", "ELEMENT_TYPES", "MARKER"]

#: The comment every emitted IR instruction carries inside its asm block.
MARKER = "collsim-ir op="


# ---------------------------------------------------------------------------
# Semantics -> PTX qualifiers
# ---------------------------------------------------------------------------

def _memory_qualifiers(sem: Sem, scope: Scope, where: str, access: str, mnemonic: str, ordering: Sem) -> str:
    """``ld``/``st`` qualifiers before ``.global``: PTX takes weak, volatile, relaxed and one ordering (acquire
    for a load, release for a store), scoped when relaxed or ordered."""
    if sem is Sem.WEAK:
        return ""
    if sem is Sem.VOLATILE:
        return ".volatile"
    if sem in (Sem.RELAXED, ordering):
        return f".{sem.value}.{scope.value}"
    raise EmitError(f"{where}: a {access} cannot have {sem.value} semantics (PTX {mnemonic} takes weak, volatile, "
                    f"relaxed or {ordering.value})")


def ptx_store_qualifiers(sem: Sem, scope: Scope, where: str) -> str:
    """``st`` qualifiers before ``.global`` for an IR store."""
    return _memory_qualifiers(sem, scope, where, "store", "st", Sem.RELEASE)


def ptx_load_qualifiers(sem: Sem, scope: Scope, where: str) -> str:
    """``ld`` qualifiers before ``.global`` for an IR load or poll."""
    return _memory_qualifiers(sem, scope, where, "load", "ld", Sem.ACQUIRE)


def ptx_atomic_qualifiers(sem: Sem, scope: Scope, returns: bool, where: str) -> tuple[str, str]:
    """(mnemonic, qualifiers) for an IR atomic: ``red`` when nothing is returned and the semantics allow it."""
    if sem is Sem.WEAK:
        raise EmitError(f"{where}: an atomic cannot be weak")
    model = Sem(sem.model_sem)  # PTX has no volatile atomics: print what the memory model sees, relaxed.sys
    scope_q = sem.model_scope(scope)
    if not returns and model in (Sem.RELAXED, Sem.RELEASE):
        return "red", f".{model.value}.{scope_q.value}"
    return "atom", f".{model.value}.{scope_q.value}"


def ptx_multimem_qualifiers(instruction: str, sem: Sem, scope: Scope) -> str:
    """``multimem.<instruction>`` qualifiers before ``.global``: none for weak, else ``.sem.scope``."""
    multimem.check_semantics(instruction, sem)
    return "" if sem is Sem.WEAK else f".{sem.value}.{scope.value}"


#: The element types every kernel is instantiated for: (C++ template argument, collsim dtype).
ELEMENT_TYPES = (("float", "float32"), ("collsim_bf16", "bfloat16"), ("int", "int32"))


def reduction_instructions(kind: str, run: LaneRun, elem_bytes: int, dtype: str) -> list[tuple[str, int, int]]:
    """The instructions that reduce one lane run: ``(type qualifiers, byte offset in the lane, 32-bit words)``.

    ``kind`` is ``red`` (unicast data reduction), ``multimem.red`` or ``multimem.ld_reduce``. A data run
    is reduced as the collective's element type (one vector instruction for floats, one per 32-bit word
    for integers); a flag run is an unsigned add of its word (the count it carries).

    >>> reduction_instructions("multimem.red", LaneRun("data", 0, 4, 0), 4, "bfloat16")
    [('.add.v4.bf16x2', 0, 4)]
    >>> reduction_instructions("red", LaneRun("data", 0, 1, 0), 8, "float32")
    [('.add.v2.f32', 0, 2)]
    >>> reduction_instructions("multimem.red", LaneRun("flag", 1, 1, 8), 8, "int32")
    [('.add.u64', 8, 2)]
    """
    nbytes = run.count * elem_bytes
    if run.role == "flag":
        return [(f".add.{multimem.counter_type(elem_bytes)}", run.byte, elem_bytes // 4)]
    ptx_type = multimem.data_type(dtype)
    if ptx_type in multimem.INTEGER_TYPES:
        return [(f".add.{ptx_type}", run.byte + 4 * k, 1) for k in range(nbytes // 4)]
    if kind == "red":
        vec = multimem.vector_qualifier(ptx_type, nbytes)
        noftz = ".noftz" if ptx_type in ("bf16x2", "f16x2") else ""
        return [(f".add{noftz}{vec}.{ptx_type}", run.byte, nbytes // 4)]
    return [(multimem.qualifiers(kind.split(".")[1], "add", ptx_type, nbytes), run.byte, nbytes // 4)]


# ---------------------------------------------------------------------------
# Descriptions (comments, op tables)
# ---------------------------------------------------------------------------

def _src_text(src) -> str:
    if src is None:
        return "none"
    if isinstance(src, Input):
        return f"Input(+{src.offset!r})"
    if isinstance(src, Reg):
        extra = f", count {src.count!r}, stride {src.stride!r}" if repr(src.count) != "1" else ""
        return f"Reg {src.name}(+{src.offset!r}{extra})"
    if isinstance(src, Fill):
        return f"Fill({src.pattern})"
    return repr(src)


def _ref_text(ref: Ref | MulticastRef) -> str:
    owner = "multicast" if isinstance(ref, MulticastRef) else f"rank {ref.rank!r}"
    return (f"{ref.buffer}@{owner} [slot {ref.slot!r}, region {ref.region!r}, "
            f"lines {ref.line!r}+{ref.lines!r}]")


def _pred_text(pred) -> str:
    if isinstance(pred, NotEqual):
        return f"NotEqual 0x{pred.value:x}" + (" (ieee)" if pred.compare is Compare.IEEE else "")
    return f"{type(pred).__name__} {pred.value!r}"


class _Description(OpVisitor):
    """One line naming an IR op, its semantics and operands."""

    consumer = "the CUDA emitter's op descriptions"

    @staticmethod
    def who(op: Op) -> str:
        return f", {op.issuer.value}"  # type: ignore[attr-defined]

    def visit_store(self, op: Store) -> str:
        flag = f", flag {op.flag!r}" if op.flag is not None else ""
        return (f"Store {op.sem.value}.{op.scope.value}{self.who(op)}: {_ref_text(op.dst)} <- "
                f"{_src_text(op.src)}{flag}")

    def visit_load(self, op: Load) -> str:
        return (f"Load {op.sem.value}.{op.scope.value}{self.who(op)}: {op.into}(+{op.into_offset!r}) <- "
                f"{_ref_text(op.src)}")

    def visit_poll_until(self, op: PollUntil) -> str:
        into = f" -> {op.into}(+{op.into_offset!r})" if op.into else ""
        cas = f" by cas, swap {op.swap!r}" if op.cas else ""
        return (f"PollUntil {_pred_text(op.until)}{cas} {op.sem.value}.{op.scope.value}{self.who(op)}: "
                f"{_ref_text(op.src)}{into}")

    def visit_fence(self, op: Fence) -> str:
        return f"Fence {op.kind.value}.{op.scope.value}{self.who(op)}"

    def visit_atomic(self, op: Atomic) -> str:
        operand = _src_text(op.operand) if isinstance(op.operand, (Input, Reg, Fill)) else repr(op.operand)
        into = f" -> {op.into}" if op.into else ""
        flag = f", flag += {op.flag!r}" if op.flag is not None else ""
        return (f"Atomic {op.op.value} {op.sem.value}.{op.scope.value}{self.who(op)}: {_ref_text(op.dst)} "
                f"+= {operand}{flag}{into}")

    def visit_multimem_load_reduce(self, op: MultimemLoadReduce) -> str:
        return (f"MultimemLoadReduce {op.op.value} {op.sem.value}.{op.scope.value}{self.who(op)}: "
                f"{op.into}(+{op.into_offset!r}) <- {_ref_text(op.src)}")

    def visit_multimem_store(self, op: MultimemStore) -> str:
        flag = f", flag {op.flag!r}" if op.flag is not None else ""
        return (f"MultimemStore {op.sem.value}.{op.scope.value}{self.who(op)}: {_ref_text(op.dst)} <- "
                f"{_src_text(op.src)}{flag}")

    def visit_multimem_red(self, op: MultimemRed) -> str:
        operand = _src_text(op.operand) if isinstance(op.operand, (Input, Reg, Fill)) else repr(op.operand)
        flag = f", flag += {op.flag!r}" if op.flag is not None else ""
        return (f"MultimemRed {op.op.value} {op.sem.value}.{op.scope.value}{self.who(op)}: {_ref_text(op.dst)} "
                f"+= {operand}{flag}")

    def visit_reduce(self, op: Reduce) -> str:
        srcs = ", ".join(_src_text(s) for s in op.srcs)
        out = f", output +{op.output_offset!r}" if op.output_offset is not None else ""
        return f"Reduce {op.op} into {op.into} ({op.nbytes!r} B): {srcs}{out}"

    def visit_write_output(self, op: WriteOutput) -> str:
        return f"WriteOutput +{op.offset!r} ({op.nbytes!r} B) <- {_src_text(op.src)}"

    def visit_sync_group(self, op: SyncGroup) -> str:
        return "SyncGroup"

    def visit_kernel_boundary(self, op: KernelBoundary) -> str:
        return "KernelBoundary"

    def visit_host_memset(self, op: HostMemset) -> str:
        return f"host memset {_ref_text(op.dst)} := {op.pattern.value}"

    def visit_host_barrier(self, op: HostBarrier) -> str:
        return "host barrier (every rank's stream drained, hosts meet)"

    def visit_loop(self, op: Loop) -> str:
        return f"Loop {op.var} < {op.count!r}"

    def visit_bulk_load(self, op: BulkLoad) -> str:
        return f"BulkLoad cp.async.bulk (async proxy): {op.into}(+{op.into_offset!r}) <- {_ref_text(op.src)}"

    def visit_proxy_fence(self, op: ProxyFence) -> str:
        return f"ProxyFence fence.proxy.async{self.who(op)}"

    def visit_proxy_thread(self, op: ProxyThread) -> str:
        return f"host proxy thread {op.label} ({len(op.body)} ops, concurrent with the kernel)"

    def visit_when(self, op: When) -> str:
        return f"When {op.register}[{op.offset}] {_pred_text(op.cond)}"


_DESCRIPTION = _Description()


def describe_op(op: Op) -> str:
    """One line naming an IR op, its semantics and operands (used in comments and timeout messages)."""
    return _DESCRIPTION.visit(op)


class _CWord:
    """A polled element in emitted C: comparing it prints the C condition.

    :meth:`collsim.ir.ops.Predicate.holds` is evaluated over these, so the emitted spin loop
    tests exactly the condition every other consumer evaluates. Equality compares in the
    element's unsigned type; ordering (counters) compares as signed 64-bit values.
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str, ctype: str) -> None:
        self.name = name
        self.ctype = ctype

    def __eq__(self, want: object) -> str:  # type: ignore[override]
        return f"{self.name} == ({self.ctype}){want}"

    def __ne__(self, want: object) -> str:  # type: ignore[override]
        return f"{self.name} != ({self.ctype}){want}"

    def __ge__(self, want: object) -> str:
        return f"(long long){self.name} >= {want}"

    def ieee_not_equal(self, want: object) -> str:
        """``!=`` as an f32 compare of each 32-bit word (``-0.0 == +0.0``, NaN unequal to all), as declared."""
        halves = [self.name] if self.ctype == "unsigned int" else [self.name, f"({self.name} >> 32)"]
        return " || ".join(f"__uint_as_float((unsigned int){h}) != __uint_as_float((unsigned int){want})"
                           for h in halves)


def _c(expr: Expr) -> str:
    return f"(long long)({expr.to_c()})"


def _comment_safe(text: str) -> str:
    return text.replace("*/", "* /").replace("\n", " ").replace("\\", "/")


# ---------------------------------------------------------------------------
# The writer
# ---------------------------------------------------------------------------

class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, text: str = "") -> None:
        if not text:
            self.lines.append("")
            return
        for line in text.split("\n"):
            self.lines.append(("  " * self.depth + line) if line else "")

    def open(self, text: str) -> None:
        self(text)
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self(text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _scoped(rule: Callable[..., None]) -> Callable[..., None]:
    """Print an op's code inside its own C block, so its local names do not collide with the next op's."""

    @functools.wraps(rule)
    def scoped(self: "KernelGenerator", op: Op, node: EmitNode) -> None:
        self.out.open("{")
        rule(self, op, node)
        self.out.close()

    return scoped


class KernelGenerator(OpVisitor):
    """Prints the device code of one planned program: one ``visit_<op>`` rule per IR operation."""

    consumer = "the CUDA emitter"

    def __init__(self, plan: ProgramPlan) -> None:
        self.plan = plan
        self.program = plan.program
        self.out = _Out()

    # -- helpers -------------------------------------------------------------
    def where(self, node: EmitNode) -> str:
        return f"{self.program.protocol}/{self.program.algorithm} op #{node.id} ({getattr(node.op, 'label', '')})"

    def buf(self, name: str) -> int:
        try:
            return self.plan.buffer_index[name]
        except KeyError:
            raise EmitError(f"{self.program.protocol}/{self.program.algorithm}: op uses undeclared buffer {name!r}") from None

    def reg(self, name: str) -> int:
        try:
            return self.plan.register_index[name]
        except KeyError:
            raise EmitError(f"{self.program.protocol}/{self.program.algorithm}: register {name!r} is not declared "
                            "in Program.registers, so the emitter cannot size its scratch") from None

    def ref_base(self, ref: Ref | MulticastRef, node: EmitNode) -> str:
        """Declare o_slot/o_region/o_line0/o_lines and the address of ``ref``'s first line: ``o_base`` in its
        owner's copy (``o_owner``), or ``o_mc`` through the buffer's multicast mapping."""
        multicast = isinstance(ref, MulticastRef)
        b = self.buf(ref.buffer)
        lp = self.plan.layouts[ref.buffer]
        o = self.out
        if not multicast:
            o(f"const long long o_owner = {_c(ref.rank)};")
        o(f"const long long o_slot = {_c(ref.slot)};")
        o(f"const long long o_region = {_c(ref.region)};")
        o(f"const long long o_line0 = {_c(ref.line)};")
        o(f"const long long o_lines = {_c(ref.lines)};")
        depth = self.program.buffer(ref.buffer).depth
        owner, owners = ("0", "1") if multicast else ("o_owner", "nranks")
        o(f"COLLSIM_CHECK_REF({node.id}, {owner}, {owners}, o_slot, {depth}, o_region, R_{b}, o_line0, o_lines, L_{b});")
        name, mapping = ("o_mc", f"p.mc[{b}]") if multicast else ("o_base", f"p.buf[{b}][o_owner]")
        # a channel's own copy; the CTAs of a program of several CTAs per rank share one (copy 0), except
        # in a per-CTA buffer
        copy = f" + (long long)chan * p.buf_stride[{b}]"
        if self.program.ctas > 1 and not self.program.buffer(ref.buffer).per_cta:
            copy = ""
        o(f"char* const {name} = {mapping}{copy}"
          f" + ((o_slot * R_{b} + o_region) * L_{b} + o_line0) * {lp.line_bytes};")
        return name

    def source_ptr(self, src, node: EmitNode) -> str | None:
        if isinstance(src, Input):
            return f"in_bytes + {_c(src.offset)}"
        if isinstance(src, Reg):
            if repr(src.count) != "1":
                raise EmitError(f"{self.where(node)}: a store/atomic source must be one register slice "
                                "(count > 1 is only meaningful in Reduce)")
            return f"reg_{self.reg(src.name)} + {_c(src.offset)}"
        return None

    def fill_value(self, src, lp: LayoutPlan, node: EmitNode) -> str:
        if src is None or (isinstance(src, Fill) and src.pattern is FillPattern.ZERO):
            return "0u" if lp.elem_bytes <= 4 else "0ull"
        if isinstance(src, Fill) and src.pattern is FillPattern.SENTINEL:
            word = self.sentinel(node)
            if lp.narrow:  # the sentinel's low bytes, as the verifier's narrow word holds them
                return f"0x{word & _mask(lp.elem_bytes):x}u"
            if lp.elem_bytes == 4:
                return f"0x{word:08x}u"
            return f"0x{word:08x}{word:08x}ull"
        raise EmitError(f"{self.where(node)}: unsupported source {src!r}")

    def fill_word(self, src, node: EmitNode) -> str:
        """A fill pattern as one 32-bit word (the words of a data run, whatever the layout's word width)."""
        if isinstance(src, Fill) and src.pattern is FillPattern.SENTINEL:
            return f"0x{self.sentinel(node):08x}u"
        if isinstance(src, Fill):
            return "0u"
        raise EmitError(f"{self.where(node)}: unsupported source {src!r}")

    def sentinel(self, node: EmitNode) -> int:
        if self.plan.sentinel_word is None:
            raise EmitError(f"{self.where(node)}: Fill('sentinel') needs the protocol's data_domain.forbidden_word "
                            "(the sentinel pattern), which this protocol does not declare")
        return self.plan.sentinel_word

    def marker(self, node: EmitNode) -> str:
        label = getattr(node.op, "label", type(node.op).__name__)
        return f"// {MARKER}{node.id} {label}\\n\\t"

    def item_loop(self, issuer: Issuer, total: str) -> None:
        """Open the loop over ``total`` (line, lane) items for ``issuer``."""
        o = self.out
        if issuer.leads:
            o.open(f"{self.leader_guard(issuer)} {{")
            o("#pragma unroll 1")
            o.open(f"for (long long o_i = 0; o_i < {total}; ++o_i) {{")
        else:
            o("#pragma unroll 1")
            o.open(f"for (long long o_i = tid; o_i < {total}; o_i += nthreads) {{")

    def close_item_loop(self, issuer: Issuer) -> None:
        self.out.close()
        if issuer.leads:
            self.out.close()

    def leader_guard(self, issuer: Issuer) -> str:
        """``if (tid == 0)``, and of CTA 0 alone for ``Issuer.GRID_LEADER`` in a program of several CTAs."""
        if issuer is Issuer.GRID_LEADER and self.program.ctas > 1:
            return "if (tid == 0 && cta == 0)"
        return "if (tid == 0)"

    def line_lane(self, lp: LayoutPlan) -> None:
        o = self.out
        if lp.lanes == 1:
            o("const long long ln = o_i;")
        else:
            o(f"const long long ln = o_i / {lp.lanes};")
            o(f"const int lane = (int)(o_i % {lp.lanes});")

    def lane_addr(self, lp: LayoutPlan, base: str) -> str:
        lane = f" + (long long)lane * {lp.store_bytes}" if lp.lanes > 1 else ""
        return f"{base} + ln * {lp.line_bytes}{lane}"

    def pattern_switch(self, lp: LayoutPlan, body: Callable[[object], None]) -> None:
        """Emit ``body(pattern)`` for each lane pattern, selected by lane."""
        o = self.out
        if len(lp.patterns) == 1:
            body(lp.patterns[0])
            return
        for i, pattern in enumerate(lp.patterns):
            if i == 0:
                o.open(f"if ({pattern.condition(lp.lanes)}) {{")
            elif i == len(lp.patterns) - 1:
                o.close("} else {")
                o.depth += 1
            else:
                o.close(f"}} else if ({pattern.condition(lp.lanes)}) {{")
                o.depth += 1
            body(pattern)
        o.close()

    # -- program ---------------------------------------------------------------
    def kernel_name(self, part: int) -> str:
        return f"collsim_kernel_part{part}"

    def generate(self) -> str:
        o = self.out
        for part, nodes in enumerate(self.plan.kernels):
            last = part == len(self.plan.kernels) - 1
            self.kernel(part, nodes, last)
            o()
        return o.text()

    def kernel(self, part: int, nodes: tuple[EmitNode, ...], last: bool) -> None:
        o = self.out
        o(f"// Kernel part {part} of {len(self.plan.kernels)}: IR ops "
          f"#{nodes[0].id}..#{max(n.id for n in iter_nodes(nodes))}. One block per (rank, channel).")
        o("template <typename T>")
        o("// __grid_constant__: peer pointer tables are indexed at run time straight from parameter space,")
        o("// without a per-thread copy of the parameters to local memory.")
        o.open(f"__global__ void __launch_bounds__(COLLSIM_MAX_THREADS) {self.kernel_name(part)}"
               f"(const __grid_constant__ CollsimParams p) {{")
        o("[[maybe_unused]] const int tid = (int)threadIdx.x;")
        o("[[maybe_unused]] const int nthreads = (int)blockDim.x;")
        o("[[maybe_unused]] const long long rank = (long long)p.first_rank + (long long)(blockIdx.x / p.ctas);")
        o("[[maybe_unused]] const int chan = (int)(blockIdx.x % p.ctas);")
        o("[[maybe_unused]] const long long nranks = (long long)p.nranks;")
        if self.program.ctas > 1:
            o(f"// {self.program.ctas} CTAs per rank (one per channel) run the program together on the whole message:")
            o("// each takes its slice by CTA; they share every buffer not declared per-CTA (copy 0)")
            o("[[maybe_unused]] const long long msg_bytes = p.msg_bytes;")
            o("[[maybe_unused]] const long long cta = (long long)chan;")
            o("[[maybe_unused]] const long long nctas = (long long)p.ctas;")
        else:
            o("[[maybe_unused]] const long long msg_bytes = collsim_channel_msg(p, chan);")
        o("// ITER: this (rank, channel)'s launch counter, kept in device memory across launches")
        o("__shared__ long long s_iter;")
        o("if (tid == 0) s_iter = p.ctrl[rank][chan];")
        o("__syncthreads();  // emitter: publish ITER to the block (not an IR op)")
        o("[[maybe_unused]] const long long iter = s_iter;")
        channel = "" if self.program.ctas > 1 else " + (long long)chan * p.chan_bytes"
        o(f"[[maybe_unused]] const char* const in_bytes = p.input[rank]{channel};")
        o(f"[[maybe_unused]] char* const out_bytes = p.output[rank]{channel};")
        for name, index in self.plan.register_index.items():
            o(f"[[maybe_unused]] char* const reg_{index} = p.reg[{index}][rank] + (long long)chan * p.reg_stride[{index}];"
              f"  // register {name}")
        for buf in self.program.buffers:
            b = self.buf(buf.name)
            o(f"[[maybe_unused]] const long long R_{b} = {_c(buf.regions)};  // {buf.name}: regions")
            o(f"[[maybe_unused]] const long long L_{b} = {_c(buf.lines)};  // {buf.name}: lines per region")
        o()
        self.nodes(nodes)
        if last:
            o("// emitter: advance ITER for the next launch (stream order publishes it)")
            o("if (tid == 0) p.ctrl[rank][chan] = iter + 1;")
        o.close()

    def nodes(self, nodes: tuple[EmitNode, ...]) -> None:
        for node in nodes:
            self.node(node)

    def node(self, node: EmitNode) -> None:
        o = self.out
        if node.id in self.plan.sync_before:
            o("__syncthreads();  // emitter: register hand-off between threads (not an IR op)")
        label = getattr(node.op, "label", "")
        o(f"// IR #{node.id} {label} [{_comment_safe(describe_op(node.op))}]")
        self.visit(node.op, node)

    def visit_loop(self, op: Loop, node: EmitNode) -> None:
        o = self.out
        o("#pragma unroll 1")
        o.open(f"for (long long {op.var} = 0; {op.var} < {_c(op.count)}; ++{op.var}) {{")
        self.nodes(node.body)
        o.close()

    def visit_when(self, op: When, node: EmitNode) -> None:
        """The branch: the threads that run its body test the register word (thread 0 alone for a leader-only
        body, which reads what thread 0 wrote; other threads read nothing and skip it)."""
        o = self.out
        o.open("{")
        word = f"collsim_ld_u{op.nbytes * 8}(reg_{self.reg(op.register)} + {op.offset})"
        if all(getattr(inner, "issuer", Issuer.ALL) is Issuer.LEADER for inner in op.body):
            word = f"(tid == 0 ? {word} : ~0ull)"
        o(f"const unsigned long long o_cond = {word};")
        o.open(f"if ({op.cond.holds(_CWord('o_cond', 'unsigned long long'), f'({self._value_c(op.cond.value)})')}) {{")
        self.nodes(node.body)
        o.close()
        o.close()

    def visit_sync_group(self, op: SyncGroup, node: EmitNode) -> None:
        self.out("__syncthreads();")

    def visit_kernel_boundary(self, op: KernelBoundary, node: EmitNode) -> None:
        self.out("// end of launch: the next kernel part (or the next collective) starts after this kernel")

    def visit_host_memset(self, op: HostMemset, node: EmitNode) -> None:
        raise EmitError(f"op #{node.id}: host action {op.label} inside a kernel (host actions are emitted by "
                        "collsim_launch before the kernels: collsim.emit.package)")

    def visit_host_barrier(self, op: HostBarrier, node: EmitNode) -> None:
        raise EmitError(f"op #{node.id}: host action {op.label} inside a kernel")

    def visit_proxy_fence(self, op: ProxyFence, node: EmitNode) -> None:
        guard = "if (tid == 0) " if op.issuer is Issuer.LEADER else ""
        self.out(f'{guard}asm volatile("{self.marker(node)}fence.proxy.async;" ::: "memory");')

    @_scoped
    def visit_bulk_load(self, op: BulkLoad, node: EmitNode) -> None:
        """``cp.async.bulk`` of the source lines into shared memory, ``BULK_CHUNK_BYTES`` at a time: the leader
        arms the mbarrier with the chunk's bytes and issues the copy, every thread waits for the phase
        (``mbarrier.try_wait.parity``, acquire at cta scope) and copies its words into the register's scratch.
        A block barrier before the first chunk frees the shared buffer, one after each chunk publishes the
        register bytes to every thread (so the op needs no hand-off barrier of the plan)."""
        o = self.out
        lp = self.plan.layouts[op.src.buffer]
        base = self.ref_base(op.src, node)
        o(f"char* const o_into = reg_{self.reg(op.into)} + {_c(op.into_offset)};")
        o(f"const long long o_bytes = o_lines * {lp.line_bytes}LL;")
        o(f"__shared__ alignas(128) unsigned char s_bulk[{BULK_CHUNK_BYTES}];")
        o("__shared__ alignas(8) unsigned long long s_bulk_bar;")
        o("const unsigned int o_bar = (unsigned int)__cvta_generic_to_shared(&s_bulk_bar);")
        o("const unsigned int o_smem = (unsigned int)__cvta_generic_to_shared(s_bulk);")
        o("__syncthreads();")
        o('if (tid == 0) asm volatile("// collsim-infra\\n\\tmbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(o_bar) : '
          '"memory");')
        o("__syncthreads();")
        o("unsigned int o_phase = 0;")
        o("#pragma unroll 1")
        o.open(f"for (long long o_off = 0; o_off < o_bytes; o_off += {BULK_CHUNK_BYTES}) {{")
        o(f"const unsigned int o_n = (unsigned int)(o_bytes - o_off < {BULK_CHUNK_BYTES} ? o_bytes - o_off : "
          f"{BULK_CHUNK_BYTES});")
        o.open("if (tid == 0) {")
        o('asm volatile("// collsim-infra\\n\\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(o_bar), '
          '"r"(o_n) : "memory");')
        o(f'asm volatile("{self.marker(node)}cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes '
          f'[%0], [%1], %2, [%3];" :: "r"(o_smem), "l"({base} + o_off), "r"(o_n), "r"(o_bar) : "memory");')
        o.close()
        o("unsigned int o_done = 0;")
        o('while (!o_done) asm volatile("// collsim-infra\\n\\t{\\n\\t.reg .pred o_p;\\n\\t'
          'mbarrier.try_wait.parity.shared::cta.b64 o_p, [%1], %2;\\n\\tselp.u32 %0, 1, 0, o_p;\\n\\t}" : '
          '"=r"(o_done) : "r"(o_bar), "r"(o_phase) : "memory");')
        o("for (long long o_i = (long long)tid * 4; o_i < (long long)o_n; o_i += (long long)nthreads * 4)")
        o("  collsim_st_u32(o_into + o_off + o_i, *reinterpret_cast<const unsigned int*>(s_bulk + o_i));")
        o("o_phase ^= 1u;")
        o("__syncthreads();")
        o.close()
        o('if (tid == 0) asm volatile("// collsim-infra\\n\\tmbarrier.inval.shared::cta.b64 [%0];" :: "r"(o_bar) : '
          '"memory");')

    def visit_proxy_thread(self, op: ProxyThread, node: EmitNode) -> None:
        """Nothing in the kernel: the body runs on the host's proxy thread (collsim.emit.proxy prints it)."""
        self.out(f"// IR #{node.id} {op.label}: host proxy thread ({len(node.body)} ops), concurrent with this "
                 "kernel: see proxy_round() below")

    # -- ops -------------------------------------------------------------------
    @_scoped
    def visit_store(self, op: Store, node: EmitNode) -> None:
        """A store writes the data words when it has a source and the flag words when it has a flag.

        When it covers every word of the layout (the usual case) each lane is
        one vector instruction of the layout's store width. A store that
        covers only some words (data only, or flag only) cannot be one
        instruction: each covered word gets its own scalar store, with the
        same semantics and scope.
        """
        o = self.out
        lp = self.plan.layouts[op.dst.buffer]
        quals = ptx_store_qualifiers(op.sem, op.scope, self.where(node))
        writes_data = op.src is not None
        writes_flag = op.flag is not None
        if not writes_data and not writes_flag:
            raise EmitError(f"{self.where(node)}: a store with neither a source nor a flag writes nothing")
        full = all((el.role == "data" and writes_data) or (el.role == "flag" and writes_flag)
                   for pat in lp.patterns for el in pat.elements)
        base = self.ref_base(op.dst, node)
        value = self._open_store_lanes(op, lp, node)
        o(f"char* const o_addr = {self.lane_addr(lp, base)};")
        if full:
            names = [f"e{i}" for i in range(lp.n_elems)]
            o(f"{lp.ctype} {', '.join(names)};")

            def fill(pattern) -> None:
                for i, el in enumerate(pattern.elements):
                    o(f"e{i} = {value(i, el)};")

            self.pattern_switch(lp, fill)
            if lp.narrow:
                self._narrow_asm(node, lp, "st", quals, names, "o_addr")
            else:
                operands = ", ".join(f"%{i + 1}" for i in range(lp.n_elems))
                vec = "{" + operands + "}" if lp.n_elems > 1 else operands
                args = ", ".join(f'"{lp.constraint}"({n})' for n in names)
                o(f'asm volatile("{self.marker(node)}st{quals}.global{lp.ptx_type} [%0], {vec};"')
                o(f'             :: "l"(o_addr), {args} : "memory");')
        else:
            # a narrow word is stored at its own width (st.b16 / st.b8 from a 32-bit register)
            scalar = f".b{lp.elem_bytes * 8}" if lp.narrow else ".u32" if lp.elem_bytes == 4 else ".u64"

            def partial(pattern) -> None:
                covered = [(i, el) for i, el in enumerate(pattern.elements)
                           if (el.role == "data" and writes_data) or (el.role == "flag" and writes_flag)]
                if not covered:
                    o("// this lane holds no word the store covers")
                for i, el in covered:
                    o(f'asm volatile("{self.marker(node)}st{quals}.global{scalar} [%0], %1;"')
                    o(f'             :: "l"(o_addr + {i * lp.elem_bytes}), "{lp.constraint}"({value(i, el)}) '
                      ': "memory");')

            self.pattern_switch(lp, partial)
        self.close_item_loop(op.issuer)

    def _open_lane_items(self, op: Store | MultimemStore | Atomic | MultimemRed, lp: LayoutPlan, src: str | None,
                         *, data_offset: bool) -> None:
        """Open the issuer's loop over (line, lane) items of a data write: the source pointer ``o_src`` (when
        there is one), the flag value ``o_flag``, ``ln``/lane and, with ``data_offset``, the lane's data offset
        ``o_d``."""
        o = self.out
        if src is not None:
            o(f"const char* const o_src = {src};")
        if op.flag is not None:
            o(f"const {lp.ctype} o_flag = ({lp.ctype})({op.flag.to_c()});")
        self.item_loop(op.issuer, f"o_lines * {lp.lanes}")
        self.line_lane(lp)
        if data_offset:
            o(f"const long long o_d = ln * {lp.data_bytes} + {lp.lane_data_start_c()};")

    def _open_store_lanes(self, op: Store | MultimemStore, lp: LayoutPlan, node: EmitNode):
        """Open the lane loop of a store (plain or multimem) and return the C value of each word.

        Emits the source pointer and flag value, the issuer's item loop over
        lines × lanes and the lane's data offset ``o_d``; the returned
        function gives the expression a word of the lane is stored as.
        """
        src = self.source_ptr(op.src, node) if op.src is not None else None
        self._open_lane_items(op, lp, src, data_offset=src is not None and lp.has_data())

        def value(i: int, el) -> str:
            if el.role == "flag":
                return "o_flag"
            if src is not None:
                return _load_c(f"o_src + o_d + {el.data_offset}", lp.elem_bytes)
            return self.fill_value(op.src, lp, node)

        return value

    def _load_asm(self, node: EmitNode, lp: LayoutPlan, quals: str, names: list[str], addr: str) -> None:
        o = self.out
        if lp.narrow:
            self._narrow_asm(node, lp, "ld", quals, names, addr)
            return
        outs = ", ".join(f"%{i}" for i in range(lp.n_elems))
        vec = "{" + outs + "}" if lp.n_elems > 1 else outs
        results = ", ".join(f'"={lp.constraint}"({n})' for n in names)
        o(f'asm volatile("{self.marker(node)}ld{quals}.global{lp.ptx_type} {vec}, [%{lp.n_elems}];"')
        o(f'             : {results} : "l"({addr}) : "memory");')

    def _narrow_asm(self, node: EmitNode, lp: LayoutPlan, opcode: str, quals: str, names: list[str],
                    addr: str) -> None:
        """One lane's store (``opcode`` ``st``, of elements ``names``) or load (``ld``, into them) over a narrow
        layout, in the form :func:`~collsim.emit.layouts.narrow_form` gives: packed into ``.b32``/``.b64``
        registers (a ``.b128`` access moves two ``.b64`` halves through a local ``.b128`` register) or at the
        words' own width; loaded elements are masked to their width."""
        o = self.out
        load = opcode == "ld"
        form = narrow_form(lp, load)
        mask = f"0x{_mask(lp.elem_bytes):x}u"
        ctype, cons = ("unsigned int", "r") if form.container_bytes <= 4 else ("unsigned long long", "l")
        places = [form.place(i, lp.elem_bytes) for i in range(lp.n_elems)]
        containers = names if form.kind == "native" else [f"o_w{k}" for k in range(form.containers)]
        if form.kind != "native":
            if load:
                o(f"{ctype} {', '.join(containers)};")
            else:
                for k, name in enumerate(containers):
                    parts = [f"(({ctype})({names[i]} & {mask}) << {shift})" if shift else f"({ctype})({names[i]} & {mask})"
                             for i, (c, shift) in enumerate(places) if c == k]
                    o(f"const {ctype} {name} = {' | '.join(parts)};")
        n = len(containers)
        base = n if load else 0  # the address operand: after the outputs of a load, first for a store
        first_value = 0 if load else 1
        texts = []
        for suffix, byte, first, count in form.instructions:
            at = f"[%{base}+{byte}]" if byte else f"[%{base}]"
            regs = [f"%{first_value + first + k}" for k in range(count)]
            if suffix == ".b128":
                pair = "{" + ", ".join(regs) + "}"
                texts += ["{", ".reg .b128 o_t;"]
                texts += ([f"ld{quals}.global.b128 o_t, {at};", f"mov.b128 {pair}, o_t;"] if load else
                          [f"mov.b128 o_t, {pair};", f"st{quals}.global.b128 {at}, o_t;"])
                texts.append("}")
                continue
            vec = "{" + ", ".join(regs) + "}" if count > 1 else regs[0]
            texts.append(f"{opcode}{quals}.global{suffix} {vec}, {at};" if load else
                         f"{opcode}{quals}.global{suffix} {at}, {vec};")
        o(f'asm volatile("{self.marker(node)}{_join_asm(texts)}"')
        if load:
            outs = ", ".join(f'"={cons}"({c})' for c in containers)
            o(f'             : {outs} : "l"({addr}) : "memory");')
            for i, (c, shift) in enumerate(places):
                if form.kind == "native":
                    o(f"{names[i]} &= {mask};")
                else:
                    shifted = f"({containers[c]} >> {shift})" if shift else containers[c]
                    o(f"{names[i]} = (unsigned int)({shifted} & {mask});")
        else:
            ins = ", ".join(f'"{cons}"({c})' for c in containers)
            o(f'             :: "l"({addr}), {ins} : "memory");')

    def _write_data(self, lp: LayoutPlan, names: list[str], into: str | None) -> None:
        """Write the data elements of one lane to register ``into`` at o_d; a counter word (a layout without
        data) at its place in the line, for a poll that waits for it (:class:`~collsim.ir.expr.Loaded`)."""
        if into is None:
            return
        o = self.out
        if not lp.has_data():
            if lp.lanes != 1:
                raise EmitError(f"a counter layout of {lp.lanes} lanes ({lp.name}) cannot fill a register")
            bits = lp.elem_bytes * 8
            for i in range(lp.n_elems):
                ptr = f"{into} + ln * {lp.layout.line_bytes} + {i * lp.elem_bytes}"
                o(_store_c(ptr, names[i], lp.elem_bytes) if lp.narrow else
                  f"collsim_st_u{bits}({ptr}, (unsigned long long){names[i]});")
            return

        def write(pattern) -> None:
            for i, el in enumerate(pattern.elements):
                if el.role == "data":
                    ptr = f"o_into + o_d + {el.data_offset}"
                    o(_store_c(ptr, names[i], lp.elem_bytes) if lp.narrow else
                      f"collsim_st_u{lp.elem_bytes * 8}({ptr}, {names[i]});")

        self.pattern_switch(lp, write)

    @_scoped
    def visit_load(self, op: Load, node: EmitNode) -> None:
        o = self.out
        lp = self.plan.layouts[op.src.buffer]
        quals = ptx_load_qualifiers(op.sem, op.scope, self.where(node))
        base = self.ref_base(op.src, node)
        o(f"char* const o_into = reg_{self.reg(op.into)} + {_c(op.into_offset)};")
        self.item_loop(op.issuer, f"o_lines * {lp.lanes}")
        self.line_lane(lp)
        if lp.has_data():
            o(f"const long long o_d = ln * {lp.data_bytes} + {lp.lane_data_start_c()};")
        names = [f"e{i}" for i in range(lp.n_elems)]
        o(f"{lp.ctype} {', '.join(names)};")
        self._load_asm(node, lp, quals, names, self.lane_addr(lp, base))
        self._write_data(lp, names, "o_into")
        self.close_item_loop(op.issuer)

    def _predicate(self, node: EmitNode, op: PollUntil, lp: LayoutPlan, pattern, names: list[str]) -> tuple[str, str]:
        """(condition that the lane's polled elements satisfy, the first polled element's name)."""
        polled = [names[i] for i, el in enumerate(pattern.elements) if el.polled]
        if not polled:
            return "true", "0ull"
        return " && ".join(op.until.holds(_CWord(name, lp.ctype), "o_want") for name in polled), polled[0]

    def _want(self, node: EmitNode, op: PollUntil, lp: LayoutPlan) -> str:
        pred = op.until
        if isinstance(pred, NotEqual):
            value = pred.value
            if lp.elem_bytes == 8 and value < (1 << 32):
                value = (value << 32) | value
            return f"(long long){value}ull"
        return f"(long long)({self._value_c(pred.value)})"

    def _value_c(self, expr: Expr) -> str:
        """``expr`` as C, a loaded register word (:class:`~collsim.ir.expr.Loaded`) read from its scratch."""
        if isinstance(expr, Loaded):
            return (f"(long long)collsim_ld_u{expr.nbytes * 8}(reg_{self.reg(expr.register)} + {expr.offset})"
                    f" /* {expr.register} */")
        if isinstance(expr, BinOp) and loaded_registers(expr):
            op = "/" if expr.op == "//" else expr.op  # as BinOp.to_c spells it
            return f"({self._value_c(expr.left)} {op} {self._value_c(expr.right)})"
        return expr.to_c()

    @_scoped
    def visit_poll_until(self, op: PollUntil, node: EmitNode) -> None:
        o = self.out
        lp = self.plan.layouts[op.src.buffer]
        if op.cas:
            self._cas_loop(node, op, lp)
            return
        if not lp.layout.poll_words:
            raise EmitError(f"{self.where(node)}: polls layout {lp.name}, which has no polled word")
        quals = ptx_load_qualifiers(op.sem, op.scope, self.where(node))
        base = self.ref_base(op.src, node)
        o(f"const long long o_want = {self._want(node, op, lp)};")
        into = None
        if op.into:
            into = "o_into"
            o(f"char* const o_into = reg_{self.reg(op.into)} + {_c(op.into_offset)};")
        names = [f"e{i}" for i in range(lp.n_elems)]
        if lp.lanes == 1 or op.issuer.leads:
            self._poll_per_thread(node, op, lp, quals, base, names, into)
        else:
            self._poll_lane_group(node, op, lp, quals, base, names, into)

    def _cas_loop(self, node: EmitNode, op: PollUntil, lp: LayoutPlan) -> None:
        """A CAS loop: each item (a counter word) spins on ``atom.cas`` until it returns the compare value."""
        o = self.out
        if lp.has_data() or lp.lanes != 1:
            raise EmitError(f"{self.where(node)}: a CAS loop works on counter words; {lp.name} has data or lanes")
        _, quals = ptx_atomic_qualifiers(op.sem, op.scope, True, self.where(node))
        bits, words = lp.elem_bytes * 8, len(lp.layout.words)
        base = self.ref_base(op.src, node)
        o(f"const long long o_want = {self._want(node, op, lp)};")
        o(f"const {lp.ctype} o_cmp = ({lp.ctype})o_want;")
        o(f"const {lp.ctype} o_swap = ({lp.ctype})({_c(op.swap)});")
        self.item_loop(op.issuer, f"o_lines * {words}")
        o(f"const long long ln = o_i / {words};")
        o(f"{lp.ctype} o_old;")
        o("unsigned int o_spins = 0; unsigned long long o_t0 = 0;")
        o.open("while (true) {")
        o(f'asm volatile("{self.marker(node)}atom{quals}.global.cas.b{bits} %0, [%1], %2, %3;"')
        o(f'             : "={lp.constraint}"(o_old) : "l"({base} + o_i * {lp.elem_bytes}), "{lp.constraint}"(o_cmp), '
          f'"{lp.constraint}"(o_swap) : "memory");')
        o("if (o_old == o_cmp) break;  // the CAS succeeded: it wrote o_swap")
        o(f"if (collsim_poll_timeout(COLLSIM_TIMEOUT_ARGS(p), o_spins, o_t0, rank, chan, {node.id}, ln, "
          "(unsigned long long)o_old, o_want)) break;")
        o.close()
        self.close_item_loop(op.issuer)

    def _poll_per_thread(self, node, op, lp, quals, base, names, into) -> None:
        """One thread spins on each of its items; a leader walks all of them."""
        o = self.out
        self.item_loop(op.issuer, f"o_lines * {lp.lanes}")
        self.line_lane(lp)
        if into and lp.has_data():
            o(f"const long long o_d = ln * {lp.data_bytes} + {lp.lane_data_start_c()};")
        o(f"{lp.ctype} {', '.join(names)};")
        o("unsigned int o_spins = 0; unsigned long long o_t0 = 0;")
        o.open("while (true) {")
        self._load_asm(node, lp, quals, names, self.lane_addr(lp, base))

        def check(pattern) -> None:
            cond, first = self._predicate(node, op, lp, pattern, names)
            o(f"if ({cond}) break;")
            o(f"if (collsim_poll_timeout(COLLSIM_TIMEOUT_ARGS(p), o_spins, o_t0, rank, chan, {node.id}, ln, "
              f"(unsigned long long){first}, o_want)) break;")

        self.pattern_switch(lp, check)
        o.close()
        self._write_data(lp, names, into)
        self.close_item_loop(op.issuer)

    def _poll_lane_group(self, node, op, lp, quals, base, names, into) -> None:
        """The lanes of a line are consecutive threads of one warp; each round every lane loads its
        part with one instruction, the group votes, and the round in which every polled word of the
        line holds ends the spin: each lane keeps the data of that round's load."""
        o = self.out
        L = lp.lanes
        group = "0xffffffffu" if L == 32 else f"((1u << {L}) - 1u)"
        o("const long long o_n = o_lines * %d;" % L)
        o("#pragma unroll 1")
        o.open("for (long long o_w = tid - (tid & 31); o_w < o_n; o_w += nthreads) {")
        o("const long long o_i = o_w + (tid & 31);")
        o("const unsigned int o_active = __ballot_sync(0xffffffffu, o_i < o_n);")
        o("if (o_i >= o_n) continue;")
        self.line_lane(lp)
        o(f"const unsigned int o_group = {group} << ((tid & 31) - lane);")
        if into and lp.has_data():
            o(f"const long long o_d = ln * {lp.data_bytes} + {lp.lane_data_start_c()};")
        o(f"{lp.ctype} {', '.join(n + ' = 0' for n in names)};")
        o("unsigned int o_spins = 0; unsigned long long o_t0 = 0;")
        o("bool o_done = false;")
        o.open("while (true) {")
        o("bool o_ok = true;")
        o("bool o_polls = false;  // does this lane hold a polled word?")
        o("unsigned long long o_seen = 0;")
        o.open("if (!o_done) {")
        self._load_asm(node, lp, quals, names, self.lane_addr(lp, base))

        def check(pattern) -> None:
            if not any(el.polled for el in pattern.elements):
                o("o_ok = true;")
                return
            cond, first = self._predicate(node, op, lp, pattern, names)
            o(f"o_ok = {cond};")
            o("o_polls = true;")
            o(f"o_seen = (unsigned long long){first};")

        self.pattern_switch(lp, check)
        o.close()
        o("const unsigned int o_vote = __ballot_sync(o_active, o_done || o_ok);")
        o.open("if (!o_done && (o_vote & o_group) == o_group) {")
        o("o_done = true;")
        self._write_data(lp, names, into)
        o.close()
        o("if (__all_sync(o_active, o_done)) break;")
        o("// only lanes that poll count time; the others finish with their line's vote")
        o(f"if (!o_done && o_polls && collsim_poll_timeout(COLLSIM_TIMEOUT_ARGS(p), o_spins, o_t0, rank, chan, {node.id}, ln, o_seen, "
          "o_want)) o_done = true;")
        o.close()
        o.close()

    @_scoped
    def visit_fence(self, op: Fence, node: EmitNode) -> None:
        o = self.out
        guard = f"{self.leader_guard(op.issuer)} " if op.issuer.leads else ""
        o(f'{guard}asm volatile("{self.marker(node)}fence.{op.kind.value}.{op.scope.value};" ::: "memory");')

    @_scoped
    def visit_atomic(self, op: Atomic, node: EmitNode) -> None:
        lp = self.plan.layouts[op.dst.buffer]
        if isinstance(op.operand, (Input, Reg, Fill)):
            if op.flag is not None or lp.elem_bytes != 4:
                self._atomic_line(node, op, lp)
            else:
                self._atomic_data(node, op, lp)
        else:
            self._atomic_scalar(node, op, lp)

    def _atomic_line(self, node: EmitNode, op: Atomic, lp: LayoutPlan) -> None:
        """A data reduction into lines that carry flag words or 8-byte words: per lane, one vector ``red`` per
        run of data words and one ``red.add`` per flag word (the count), in one asm block."""
        if op.op is not RmwOp.ADD or op.into is not None:
            raise EmitError(f"{self.where(node)}: a reduction into a line with a count is a red.add without a "
                            "result (got {op.op.value}{', into' if op.into else ''})")
        mnemonic, quals = ptx_atomic_qualifiers(op.sem, op.scope, False, self.where(node))
        base = self.ref_base(op.dst, node)
        self._reduction_lines(node, op, lp, "red", f"{mnemonic}{quals}", lambda: self.lane_addr(lp, base), None)

    # -- multimem -------------------------------------------------------------
    def open_copies(self, ref: MulticastRef, lp: LayoutPlan, offset: str | None = None) -> None:
        """Open the loop over the multicast addresses of one item: one with a switch that reaches every copy
        (multi-GPU), one per copy where the harness emulates the switch (single-GPU).

        The item is the (line, lane) of the layout, or the byte ``offset`` given (a C expression)."""
        o = self.out
        copy = f"o_mc + (long long)o_c * p.mc_stride[{self.buf(ref.buffer)}]"
        o("#pragma unroll 1")
        o.open("for (int o_c = 0; o_c < p.mc_copies; ++o_c) {")
        o(f"char* const o_addr = {self.lane_addr(lp, copy) if offset is None else f'{copy} + {offset}'};")

    def element_branches(self, body: Callable[[str, str], None]) -> None:
        """Print ``body(c_type, dtype)`` once per element type the kernel is instantiated for."""
        o = self.out
        for i, (ctype, dtype) in enumerate(ELEMENT_TYPES):
            if i == 0:
                o.open(f"if constexpr (collsim::is_same<T, {ctype}>::value) {{")
            elif i == len(ELEMENT_TYPES) - 1:
                o.close("} else {")
                o.depth += 1
            else:
                o.close(f"}} else if constexpr (collsim::is_same<T, {ctype}>::value) {{")
                o.depth += 1
            body(ctype, dtype)
        o.close()

    def _reduction_lines(self, node: EmitNode, op: Atomic | MultimemRed, lp: LayoutPlan, kind: str, prefix: str,
                         address: Callable[[], str], ref: MulticastRef | None) -> None:
        """Every (line, lane) item of a data reduction: the lane's data words from the source, its flag words
        ``op.flag``; one asm block per lane pattern and element type (``kind`` as
        :func:`reduction_instructions` takes it)."""
        o = self.out
        src = self.source_ptr(op.operand, node)
        self._open_lane_items(op, lp, src, data_offset=True)
        if ref is None:
            o(f"char* const o_addr = {address()};")
        else:
            self.open_copies(ref, lp)

        def lane(pattern) -> None:
            runs = lane_runs(pattern, lp.elem_bytes)
            words: dict[int, list[str]] = {}
            for r, run in enumerate(runs):
                if run.role == "data":
                    names = [f"w{r}_{k}" for k in range(run.count * lp.elem_bytes // 4)]
                    for k, name in enumerate(names):
                        value = (f"collsim_ld_u32(o_src + o_d + {run.data_offset + 4 * k})" if src is not None
                                 else self.fill_word(op.operand, node))
                        o(f"const unsigned int {name} = {value};")
                    words[r] = names
                elif op.flag is None:
                    raise EmitError(f"{self.where(node)}: a data reduction into {lp.name} needs a flag value for "
                                    "its flag words")

            def typed(ctype: str, dtype: str) -> None:
                texts, inputs = [], ['"l"(o_addr)']
                for r, run in enumerate(runs):
                    for quals, byte, count in reduction_instructions(kind, run, lp.elem_bytes, dtype):
                        first = len(inputs)
                        if run.role == "flag":
                            inputs.append(f'"{lp.constraint}"(o_flag)')
                            operands = f"%{first}"
                        else:
                            start = (byte - run.byte) // 4
                            inputs += [f'"r"({name})' for name in words[r][start:start + count]]
                            operands = ", ".join(f"%{first + k}" for k in range(count))
                            operands = "{" + operands + "}" if count > 1 else operands
                        texts.append(f"{prefix}.global{quals} [%0+{byte}], {operands};")
                o(f'asm volatile("{self.marker(node)}{_join_asm(texts)}"')
                o(f'             :: {", ".join(inputs)} : "memory");')

            self.element_branches(typed)

        self.pattern_switch(lp, lane)
        if ref is not None:
            o.close()
        self.close_item_loop(op.issuer)

    @_scoped
    def visit_multimem_red(self, op: MultimemRed, node: EmitNode) -> None:
        o = self.out
        lp = self.plan.layouts[op.dst.buffer]
        quals = ptx_multimem_qualifiers("red", op.sem, op.scope)
        self.ref_base(op.dst, node)
        if isinstance(op.operand, (Input, Reg, Fill)):
            self._reduction_lines(node, op, lp, "multimem.red", f"multimem.red{quals}", lambda: "", op.dst)
            return
        if any(el.role == "data" for pat in lp.patterns for el in pat.elements):
            raise EmitError(f"{self.where(node)}: a counter multimem.red into {lp.name}, whose words hold data")
        ptx_op = multimem.qualifiers("red", op.op.value, multimem.counter_type(lp.elem_bytes), lp.elem_bytes)
        o(f"const {lp.ctype} o_val = ({lp.ctype})({op.operand.to_c()});")
        self.item_loop(op.issuer, f"o_lines * {len(lp.layout.words)}")
        self.open_copies(op.dst, lp, f"o_i * {lp.elem_bytes}")
        o(f'asm volatile("{self.marker(node)}multimem.red{quals}.global{ptx_op} [%0], %1;"')
        o(f'             :: "l"(o_addr), "{lp.constraint}"(o_val) : "memory");')
        o.close()
        self.close_item_loop(op.issuer)

    @_scoped
    def visit_multimem_store(self, op: MultimemStore, node: EmitNode) -> None:
        o = self.out
        lp = self.plan.layouts[op.dst.buffer]
        quals = ptx_multimem_qualifiers("st", op.sem, op.scope)
        writes_data, writes_flag = op.src is not None, op.flag is not None
        if not all((el.role == "data" and writes_data) or (el.role == "flag" and writes_flag)
                   for pat in lp.patterns for el in pat.elements):
            raise EmitError(f"{self.where(node)}: a multimem.st must cover every word of {lp.name} (data and flags)")
        self.ref_base(op.dst, node)
        value = self._open_store_lanes(op, lp, node)
        names = [f"e{i}" for i in range(lp.n_elems)]
        o(f"{lp.ctype} {', '.join(names)};")

        def fill(pattern) -> None:
            for i, el in enumerate(pattern.elements):
                o(f"e{i} = {value(i, el)};")

        self.pattern_switch(lp, fill)
        self.open_copies(op.dst, lp)
        args = ", ".join(f'"{lp.constraint}"({n})' for n in names)
        if lp.elem_bytes == 4:  # the bits of 32-bit words, stored as one f32 vector (PTX has no integer vectors)
            operands = ", ".join(f"%{i + 1}" for i in range(lp.n_elems))
            vec = "{" + operands + "}" if lp.n_elems > 1 else operands
            form = multimem.qualifiers("st", None, "f32", lp.store_bytes)
            o(f'asm volatile("{self.marker(node)}multimem.st{quals}.global{form} [%0], {vec};"')
        else:
            texts = [f"multimem.st{quals}.global.u64 [%0+{8 * i}], %{i + 1};" for i in range(lp.n_elems)]
            o(f'asm volatile("{self.marker(node)}{_join_asm(texts)}"')
        o(f'             :: "l"(o_addr), {args} : "memory");')
        o.close()
        self.close_item_loop(op.issuer)

    @_scoped
    def visit_multimem_load_reduce(self, op: MultimemLoadReduce, node: EmitNode) -> None:
        """One ``multimem.ld_reduce`` per lane returns the sum of every copy (with the emulated switch of
        single-GPU mode, one per copy, summed as the element type adds)."""
        o = self.out
        lp = self.plan.layouts[op.src.buffer]
        if lp.elem_bytes != 4 or any(el.role != "data" for pat in lp.patterns for el in pat.elements):
            raise EmitError(f"{self.where(node)}: multimem.ld_reduce needs a layout of 4-byte data words only "
                            f"({lp.name} is not)")
        if op.op is not RmwOp.ADD:
            raise EmitError(f"{self.where(node)}: multimem.ld_reduce {op.op.value} of data is not emitted (add is)")
        quals = ptx_multimem_qualifiers("ld_reduce", op.sem, op.scope)
        self.ref_base(op.src, node)
        o(f"char* const o_into = reg_{self.reg(op.into)} + {_c(op.into_offset)};")
        self.item_loop(op.issuer, f"o_lines * {lp.lanes}")
        self.line_lane(lp)
        o(f"const long long o_d = ln * {lp.data_bytes} + {lp.lane_data_start_c()};")
        n = lp.n_elems
        sums = [f"w{k}" for k in range(n)]
        o(f"unsigned int {', '.join(s + ' = 0' for s in sums)};")
        self.open_copies(op.src, lp)
        got = [f"r{k}" for k in range(n)]
        o(f"unsigned int {', '.join(got)};")
        run = LaneRun("data", 0, n, 0)

        def typed(ctype: str, dtype: str) -> None:
            texts = []
            for quals_t, byte, count in reduction_instructions("multimem.ld_reduce", run, 4, dtype):
                first = byte // 4
                outs = ", ".join(f"%{first + k}" for k in range(count))
                outs = "{" + outs + "}" if count > 1 else outs
                texts.append(f"multimem.ld_reduce{quals}.global{quals_t} {outs}, [%{n}+{byte}];")
            o(f'asm volatile("{self.marker(node)}{_join_asm(texts)}"')
            o(f'             : {", ".join(f"{chr(34)}=r{chr(34)}({g})" for g in got)} : "l"(o_addr) : "memory");')

        self.element_branches(typed)
        for w, g in zip(sums, got):
            o(f"{w} = o_c == 0 ? {g} : collsim_mc_add<T>({w}, {g});")
        o.close()
        for k, w in enumerate(sums):
            o(f"collsim_st_u32(o_into + o_d + {4 * k}, {w});")
        self.close_item_loop(op.issuer)

    def _atomic_scalar(self, node: EmitNode, op: Atomic, lp: LayoutPlan) -> None:
        """A counter atomic: one scalar instruction per word of each line."""
        o = self.out
        mnemonic, quals = ptx_atomic_qualifiers(op.sem, op.scope, op.into is not None, self.where(node))
        if op.op is RmwOp.CAS:
            mnemonic = "atom"  # a CAS has no red form
        bits = lp.elem_bytes * 8
        ptx_op = {RmwOp.ADD: f"add.u{bits}", RmwOp.EXCH: f"exch.b{bits}", RmwOp.MIN: f"min.u{bits}",
                  RmwOp.MAX: f"max.u{bits}", RmwOp.CAS: f"cas.b{bits}"}[op.op]
        words = len(lp.layout.words)
        base = self.ref_base(op.dst, node)
        o(f"const {lp.ctype} o_val = ({lp.ctype})({op.operand.to_c()});")
        if op.into:
            o(f"char* const o_into = reg_{self.reg(op.into)} + {_c(op.into_offset)};")
        self.item_loop(op.issuer, f"o_lines * {words}")
        addr = f"{base} + o_i * {lp.elem_bytes}"
        if mnemonic == "red":
            o(f'asm volatile("{self.marker(node)}red{quals}.global.{ptx_op} [%0], %1;"')
            o(f'             :: "l"({addr}), "{lp.constraint}"(o_val) : "memory");')
        else:
            o(f"{lp.ctype} o_old;")
            if op.op is RmwOp.CAS:  # atom.cas d, [a], compare, swap: a failed one writes nothing
                o(f"const {lp.ctype} o_cmp = ({lp.ctype})({op.compare.to_c()});")
                o(f'asm volatile("{self.marker(node)}atom{quals}.global.{ptx_op} %0, [%1], %2, %3;"')
                o(f'             : "={lp.constraint}"(o_old) : "l"({addr}), "{lp.constraint}"(o_cmp), '
                  f'"{lp.constraint}"(o_val) : "memory");')
            else:
                o(f'asm volatile("{self.marker(node)}atom{quals}.global.{ptx_op} %0, [%1], %2;"')
                o(f'             : "={lp.constraint}"(o_old) : "l"({addr}), "{lp.constraint}"(o_val) : "memory");')
            if op.into:
                o(f"collsim_st_u{bits}(o_into + o_i * {lp.elem_bytes}, o_old);")
            else:
                o("(void)o_old;")
        self.close_item_loop(op.issuer)

    def _atomic_data(self, node: EmitNode, op: Atomic, lp: LayoutPlan) -> None:
        """A data atomic: one vector instruction per lane (element type from the run's dtype)."""
        o = self.out
        if op.op is not RmwOp.ADD:
            raise EmitError(f"{self.where(node)}: data atomics support add only (got {op.op.value})")
        if lp.elem_bytes != 4 or any(el.role != "data" for pat in lp.patterns for el in pat.elements):
            raise EmitError(f"{self.where(node)}: vector atomics need a layout of 4-byte data words only "
                            f"({lp.name} is not)")
        mnemonic, quals = ptx_atomic_qualifiers(op.sem, op.scope, op.into is not None, self.where(node))
        n = lp.n_elems
        base = self.ref_base(op.dst, node)
        src = self.source_ptr(op.operand, node)
        if src is not None:
            o(f"const char* const o_src = {src};")
        if op.into:
            o(f"char* const o_into = reg_{self.reg(op.into)} + {_c(op.into_offset)};")
        self.item_loop(op.issuer, f"o_lines * {lp.lanes}")
        self.line_lane(lp)
        o(f"const long long o_d = ln * {lp.data_bytes} + {lp.lane_data_start_c()};")
        o(f"char* const o_addr = {self.lane_addr(lp, base)};")
        names = [f"e{i}" for i in range(n)]
        for i, name in enumerate(names):
            value = (f"collsim_ld_u32(o_src + o_d + {4 * i})" if src is not None
                     else self.fill_value(op.operand, lp, node))
            o(f"const unsigned int {name} = {value};")
        ins = ", ".join(f'"r"({nm})' for nm in names)
        vec = "{" + ", ".join(f"%{i + 1}" for i in range(n)) + "}"
        vsuffix = f".v{n}" if n > 1 else ""
        marker = self.marker(node)
        returns = mnemonic == "atom"
        if returns:
            o(f"unsigned int {', '.join('r' + str(i) for i in range(n))};")
            outs = ", ".join(f'"=r"(r{i})' for i in range(n))
            rvec = "{" + ", ".join(f"%{i}" for i in range(n)) + "}" if n > 1 else "%0"
            ivec = "{" + ", ".join(f"%{n + 1 + i}" for i in range(n)) + "}" if n > 1 else f"%{n + 1}"
        # fp32: vector f32 add; bf16: packed bf16x2 (noftz); int32: one scalar add per word.
        o.open("if constexpr (collsim::is_same<T, float>::value) {")
        if returns:
            o(f'asm volatile("{marker}atom{quals}.global.add{vsuffix}.f32 {rvec}, [%{n}], {ivec};"')
            o(f'             : {outs} : "l"(o_addr), {ins} : "memory");')
        else:
            o(f'asm volatile("{marker}red{quals}.global.add{vsuffix}.f32 [%0], {vec};"')
            o(f'             :: "l"(o_addr), {ins} : "memory");')
        o.close("} else if constexpr (collsim::is_same<T, collsim_bf16>::value) {")
        o.depth += 1
        if returns:
            o(f'asm volatile("{marker}atom{quals}.global.add.noftz{vsuffix}.bf16x2 {rvec}, [%{n}], {ivec};"')
            o(f'             : {outs} : "l"(o_addr), {ins} : "memory");')
        else:
            o(f'asm volatile("{marker}red{quals}.global.add.noftz{vsuffix}.bf16x2 [%0], {vec};"')
            o(f'             :: "l"(o_addr), {ins} : "memory");')
        o.close("} else {")
        o.depth += 1
        if returns:
            lines = "\\n\\t".join(f"atom{quals}.global.add.u32 %{i}, [%{n}+{4 * i}], %{n + 1 + i};" for i in range(n))
            o(f'asm volatile("{marker}{lines}"')
            o(f'             : {outs} : "l"(o_addr), {ins} : "memory");')
        else:
            lines = "\\n\\t".join(f"red{quals}.global.add.u32 [%0+{4 * i}], %{i + 1};" for i in range(n))
            o(f'asm volatile("{marker}{lines}"')
            o(f'             :: "l"(o_addr), {ins} : "memory");')
        o.close()
        if returns and op.into:
            for i in range(n):
                o(f"collsim_st_u32(o_into + o_d + {4 * i}, r{i});")
        elif returns:
            o(f"(void){', (void)'.join('r' + str(i) for i in range(n))};")
        self.close_item_loop(op.issuer)

    def _vec_sources(self, node: EmitNode, srcs) -> list[tuple[str, str | None, str | None]]:
        """(pointer expression, count, stride) for each reduce source; Fill('zero') contributes nothing."""
        out = []
        for src in srcs:
            if isinstance(src, Input):
                out.append((f"in_bytes + {_c(src.offset)}", None, None))
            elif isinstance(src, Reg):
                ptr = f"reg_{self.reg(src.name)} + {_c(src.offset)}"
                if repr(src.count) == "1":
                    out.append((ptr, None, None))
                else:
                    out.append((ptr, _c(src.count), _c(src.stride)))
            elif isinstance(src, Fill) and src.pattern is FillPattern.ZERO:
                continue
            else:
                raise EmitError(f"{self.where(node)}: cannot reduce over {src!r}")
        return out

    @_scoped
    def visit_reduce(self, op: Reduce, node: EmitNode) -> None:
        o = self.out
        if op.op != "sum":
            raise EmitError(f"{self.where(node)}: reduce op {op.op!r} is not supported (sum only)")
        vw = self.plan.vec_bytes
        o(f"const long long o_nb = {_c(op.nbytes)};")
        o(f"COLLSIM_CHECK_MULTIPLE({node.id}, o_nb, {vw});")
        o(f"char* const o_into = reg_{self.reg(op.into)};")
        if op.output_offset is not None:
            o(f"char* const o_out = out_bytes + {_c(op.output_offset)};")
        sources = self._vec_sources(node, op.srcs)
        for i, (ptr, count, stride) in enumerate(sources):
            o(f"const char* const o_s{i} = {ptr};")
            if count is not None:
                o(f"const long long o_s{i}_count = {count};")
                o(f"const long long o_s{i}_stride = {stride};")
        o("#pragma unroll 1")
        o.open(f"for (long long v = tid; v < o_nb / {vw}; v += nthreads) {{")
        o(f"collsim::Pack<T, {vw}> acc;")
        o("acc.zero();")
        for i, (ptr, count, stride) in enumerate(sources):
            if count is None:
                o(f"acc.add(o_s{i} + v * {vw});")
            else:
                o("#pragma unroll 1")
                o(f"for (long long c = 0; c < o_s{i}_count; ++c) acc.add(o_s{i} + c * o_s{i}_stride + v * {vw});")
        o(f"acc.store(o_into + v * {vw});")
        if op.output_offset is not None:
            o(f"acc.store(o_out + v * {vw});")
        o.close()

    @_scoped
    def visit_write_output(self, op: WriteOutput, node: EmitNode) -> None:
        o = self.out
        vw = self.plan.vec_bytes
        o(f"const long long o_nb = {_c(op.nbytes)};")
        o(f"COLLSIM_CHECK_MULTIPLE({node.id}, o_nb, {vw});")
        o(f"char* const o_out = out_bytes + {_c(op.offset)};")
        if isinstance(op.src, Fill):
            word = 0 if op.src.pattern is FillPattern.ZERO else self.sentinel(node)
            o("#pragma unroll 1")
            o.open("for (long long v = tid; v < o_nb / 4; v += nthreads) {")
            o(f"collsim_st_u32(o_out + v * 4, 0x{word:08x}u);")
            o.close()
            return
        sources = self._vec_sources(node, (op.src,))
        ptr, count, _ = sources[0]
        if count is not None:
            raise EmitError(f"{self.where(node)}: WriteOutput copies one register slice (count must be 1)")
        o(f"const char* const o_s0 = {ptr};")
        o("#pragma unroll 1")
        o.open(f"for (long long v = tid; v < o_nb / {vw}; v += nthreads) {{")
        o(f"collsim_copy<{vw}>(o_out + v * {vw}, o_s0 + v * {vw});")
        o.close()


def _mask(nbytes: int) -> int:
    return (1 << 8 * nbytes) - 1


def _load_c(ptr: str, nbytes: int) -> str:
    """C reading the ``nbytes`` at ``ptr`` (rank-local memory) as an unsigned value: the collsim_ld helpers for
    32- and 64-bit words, a plain narrow load (widened to 32 bits) for a byte or half-word."""
    if nbytes >= 4:
        return f"collsim_ld_u{nbytes * 8}({ptr})"
    narrow = "unsigned short" if nbytes == 2 else "unsigned char"
    return f"(unsigned int)*reinterpret_cast<const {narrow}*>({ptr})"


def _store_c(ptr: str, value: str, nbytes: int) -> str:
    """A C statement writing the low ``nbytes`` (1 or 2) of ``value`` to rank-local ``ptr``."""
    narrow = "unsigned short" if nbytes == 2 else "unsigned char"
    return f"*reinterpret_cast<{narrow}*>({ptr}) = ({narrow}){value};"


def _join_asm(texts: list[str]) -> str:
    """Instructions of one asm block, as the C string literal's content."""
    return "\\n\\t".join(texts)


def generate_kernel_source(plan: ProgramPlan) -> str:
    """The device code (kernels only) of ``plan``."""
    return KernelGenerator(plan).generate()
