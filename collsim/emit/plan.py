"""What the emitter decides before printing: op numbering, layouts, granule, register hand-offs.

Registers (the IR's per-rank byte vectors) become per-(rank, channel)
scratch in global memory. Each IR operation spreads its work over the
rank's threads in a fixed way (line ``l``, lane ``j`` of a layout-shaped op
goes to thread ``(l*lanes + j) % nthreads``; vector ``v`` of a reduce or
copy to thread ``v % nthreads``; a leader op to thread 0). When one op writes
register bytes that a later op reads (or the reverse) on a *different*
thread, with no ``SyncGroup`` in between, the emitter must put a
``__syncthreads()`` before the later op. :func:`register_sync_points` finds
those places by running the symbolic program on small instances (several
rank counts, message sizes, thread counts, every rank) and tracking, per
4-byte register word, which thread last wrote it and which threads read it
since the last barrier. A hand-off barrier is an emitter artefact, not an IR
operation; it only adds ordering inside one rank's thread block.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import gcd
from typing import Iterator, Mapping

from collsim.algorithms import generate
from collsim.emit.layouts import EmitError, LayoutPlan, lcm, plan_layout
from collsim.ir.effects import effects
from collsim.ir.ops import (Atomic, Fence, Fill, HostBarrier, HostMemset, Input, KernelBoundary, Load, Loop,
                            BulkLoad, ProxyFence, ProxyThread,
                            MultimemLoadReduce, MultimemRed, MultimemStore, Op, PollUntil, Reduce, Reg, Store,
                            SyncGroup, When, WriteOutput, bind)
from collsim.ir.origin import shown_path
from collsim.ir.program import Program
from collsim.ir.protocol import Protocol
from collsim.ir.types import Issuer
from collsim.ir.visit import OpVisitor
from collsim.lru import LRUCache

#: bytes of shared memory one bulk async copy stages at a time (the emitted copy loops over chunks)
BULK_CHUNK_BYTES = 4096

__all__ = ["BULK_CHUNK_BYTES", "EmitNode", "ProgramPlan", "plan_program", "plan_for", "register_sync_points", "iter_nodes",
           "device_nodes"]


@dataclass(frozen=True)
class EmitNode:
    """An IR operation with its number in program order (1-based, loops included)."""

    id: int
    op: Op
    body: tuple["EmitNode", ...] = ()


def _number(ops: tuple[Op, ...], start: int = 1) -> tuple[tuple[EmitNode, ...], int]:
    nodes = []
    next_id = start
    for op in ops:
        my_id = next_id
        next_id += 1
        body, next_id = _number(op.children(), next_id)
        nodes.append(EmitNode(my_id, op, body))
    return tuple(nodes), next_id


def iter_nodes(nodes: tuple[EmitNode, ...]) -> Iterator[EmitNode]:
    """Every node, depth first, in program order."""
    for node in nodes:
        yield node
        yield from iter_nodes(node.body)


def device_nodes(nodes: tuple[EmitNode, ...]) -> Iterator[EmitNode]:
    """The nodes the kernels run, depth first: :func:`iter_nodes` without the bodies of host proxy threads."""
    for node in nodes:
        yield node
        if not isinstance(node.op, ProxyThread):
            yield from device_nodes(node.body)


@dataclass
class ProgramPlan:
    """The emitter's view of one program."""

    program: Program
    nodes: tuple[EmitNode, ...]
    #: the top-level nodes of each kernel (split at KernelBoundary)
    kernels: list[tuple[EmitNode, ...]]
    layouts: dict[str, LayoutPlan]
    buffer_index: dict[str, int]
    register_index: dict[str, int]
    #: the message granule: every per-channel message is a multiple of it
    granule: int
    #: vector width (bytes) of reduce/copy loops
    vec_bytes: int
    sync_before: set[int] = field(default_factory=set)
    needs_vector_atomics: bool = False
    #: the program has multimem ops: its harness binds buffers to multicast objects (sm_90, NVLink SHARP)
    uses_multicast: bool = False
    #: the program has bulk async copies (cp.async.bulk, TMA: sm_90)
    uses_bulk_copies: bool = False
    #: the host actions that come before the launch (memsets, host barriers), in program order
    host_actions: tuple[EmitNode, ...] = ()
    #: the protocol's hardware assumptions (names in collsim.ir.assumptions): a narrow layout's store is printed
    #: as one packed access only where one of them makes it a single access
    assumptions: tuple[str, ...] = ()

    @property
    def host_barrier(self) -> bool:
        """Whether the host meets the other ranks' hosts before every launch (a :class:`HostBarrier`)."""
        return any(isinstance(node.op, HostBarrier) for node in self.host_actions)

    @property
    def min_sm(self) -> int:
        """The oldest architecture (compute capability × 10) the program compiles for: vector red/atom and
        multimem instructions need sm_90."""
        return 90 if self.needs_vector_atomics or self.uses_multicast or self.uses_bulk_copies else 70

    @property
    def sentinel_word(self) -> int | None:
        """The program's sentinel pattern (:attr:`collsim.ir.program.Program.sentinel_word`)."""
        return self.program.sentinel_word

    @property
    def op_count(self) -> int:
        return sum(1 for node in iter_nodes(self.nodes) if not isinstance(node.op, Loop))


def _host_prefix(nodes: tuple[EmitNode, ...]) -> int:
    """How many leading nodes are host actions (collsim.ir.checks keeps host actions before every device op)."""
    count = 0
    while count < len(nodes) and effects(nodes[count].op).host:
        count += 1
    for node in nodes[count:]:
        for inner in iter_nodes((node,)):
            if effects(inner.op).host:
                raise EmitError(f"op #{inner.id}: host action {inner.op.label} follows a device operation; host "
                                "actions come first in a program")
    return count


def _split_kernels(nodes: tuple[EmitNode, ...]) -> list[tuple[EmitNode, ...]]:
    kernels: list[tuple[EmitNode, ...]] = []
    current: list[EmitNode] = []
    for node in nodes[_host_prefix(nodes):]:
        if effects(node.op).ends_launch:
            current.append(node)
            kernels.append(tuple(current))
            current = []
        else:
            for inner in iter_nodes(node.body):
                if effects(inner.op).ends_launch:
                    raise EmitError(f"op #{inner.id}: a KernelBoundary inside a loop cannot be emitted "
                                    "(a kernel ends only at the top level of a program)")
            current.append(node)
    if current:
        kernels.append(tuple(current))
    return kernels


#: Plans by protocol identity (:attr:`Protocol.key`) and algorithm: emitting, checking the PTX and choosing an
#: architecture each ask for the same plan. Keyed by the class too: a protocol file loaded twice in one process
#: may define a changed class under the same name. Room for every shipped protocol and mutant under every
#: algorithm it has.
_PLANS: "LRUCache[ProgramPlan]" = LRUCache(maxsize=128)


def plan_for(protocol: Protocol, algorithm: str) -> ProgramPlan:
    """Generate and plan ``protocol`` under ``algorithm`` (memoized per :attr:`Protocol.key` and algorithm)."""
    return _PLANS.get((type(protocol), protocol.key, algorithm),
                      lambda: plan_program(generate(protocol, algorithm), protocol.assumptions))


def plan_program(program: Program, assumptions: tuple[str, ...] = ()) -> ProgramPlan:
    """Number the ops, plan every buffer's layout (under the protocol's hardware ``assumptions``) and find the
    register hand-off barriers."""
    nodes, _ = _number(program.ops)
    _refuse_narrow_words(program, nodes)
    layouts = {buf.name: plan_layout(buf.layout, assumptions) for buf in program.buffers}
    granule = 0
    for buf in program.buffers:
        if buf.layout.data_bytes:
            granule = lcm(granule, buf.layout.data_bytes)
    granule = lcm(granule or 16, 4)
    vec_bytes = gcd(granule, 16)
    needs_vector = False
    multicast = False
    for node in iter_nodes(nodes):
        touch = effects(node.op)
        if touch.atomic and touch.sources and layouts[touch.ref.buffer].store_bytes > 4:
            needs_vector = True  # a data atomic wider than one word: red.add.v4 and friends
        multicast = multicast or touch.multicast
    plan = ProgramPlan(
        program=program,
        nodes=nodes,
        kernels=_split_kernels(nodes),
        host_actions=nodes[:_host_prefix(nodes)],
        layouts=layouts,
        buffer_index={buf.name: i for i, buf in enumerate(program.buffers)},
        register_index={name: i for i, name in enumerate(program.registers)},
        granule=granule,
        vec_bytes=vec_bytes,
        needs_vector_atomics=needs_vector,
        uses_multicast=multicast,
        uses_bulk_copies=any(isinstance(node.op, BulkLoad) for node in iter_nodes(nodes)),
        assumptions=tuple(assumptions),
    )
    plan.sync_before = register_sync_points(plan)
    return plan


def _refuse_narrow_words(program: Program, nodes: tuple[EmitNode, ...]) -> None:
    """Byte-wide and mixed-size accesses (a layout with a word narrower than 32 bits) are printed for stores,
    loads and polls of a layout of one word width (:func:`collsim.emit.layouts.narrow_form`); anything else
    that touches such a buffer (atomics, CAS loops, multimem, bulk copies, the host proxy) or a layout mixing
    narrow and wider words is refused naming the operation and where protocol code emitted it."""
    narrow = {buf.name: buf.layout for buf in program.buffers if buf.layout.narrow_words}
    if not narrow:
        return
    in_kernel = {id(node) for node in device_nodes(nodes)}
    for node in iter_nodes(nodes):
        touch = effects(node.op)
        if touch.ref is None or touch.ref.buffer not in narrow:
            continue
        layout = narrow[touch.ref.buffer]
        mixed = len({word.nbytes for word in layout.words}) > 1
        printable = isinstance(node.op, (Store, Load)) or (isinstance(node.op, PollUntil) and not node.op.cas)
        if printable and not mixed and id(node) in in_kernel:
            continue
        origin = getattr(node.op, "origin", None)
        where = f" at {shown_path(origin.file)}:{origin.line}" if origin is not None else ""
        label = getattr(node.op, "label", type(node.op).__name__)
        kind = f"an {type(node.op).__name__}" if type(node.op).__name__[0] in "AEIOU" else f"a {type(node.op).__name__}"
        if id(node) not in in_kernel:
            kind += " of a host proxy thread"
        why = ("mixes words of different widths in one instruction" if mixed else
               f"has words narrower than 32 bits: the emitter prints the kernel's stores, loads and polls over "
               f"them, not {kind}")
        raise EmitError(f"{label}{where} accesses buffer {touch.ref.buffer}, whose layout {layout.name} {why}")


# ---------------------------------------------------------------------------
# Register hand-off analysis
# ---------------------------------------------------------------------------

#: (NRANKS, message sizes in granules (times NRANKS where marked), thread counts) sampled
_SAMPLE_RANKS = (2, 3, 4)
_SAMPLE_THREADS = (32, 64)
_SAMPLE_ITERS = (0, 1)


def _sample_messages(granule: int, nranks: int) -> tuple[int, ...]:
    return (granule, 5 * granule, 3 * nranks * granule)


Access = tuple[str, str, dict[int, int]]  # (register, "r"|"w", {word: thread})


def _thread(index: int, issuer: Issuer, nthreads: int) -> int:
    return 0 if issuer.leads else index % nthreads


def _layout_accesses(plan: ProgramPlan, ref, issuer: Issuer, nthreads: int,
                     reg: str, offset: int, kind: str) -> Access:
    lp = plan.layouts[ref.buffer]
    words: dict[int, int] = {}
    for line in range(ref.lines):
        for lane in range(lp.lanes):
            thread = _thread(line * lp.lanes + lane, issuer, nthreads)
            start = offset + line * lp.data_bytes + lp.lane_data_start[lane]
            # narrow data words: a line's data need not start on a 32-bit word (the word it starts in counts)
            for byte in range(start - start % 4, start + lp.lane_data_bytes[lane], 4):
                words[byte // 4] = thread
    return (reg, kind, words)


def _vector_accesses(plan: ProgramPlan, name: str, offset: int, count: int, stride: int, nbytes: int,
                     nthreads: int, kind: str) -> list[Access]:
    out = []
    vw = plan.vec_bytes
    for c in range(count):
        words: dict[int, int] = {}
        base = offset + c * stride
        for v in range(nbytes // vw):
            for byte in range(base + v * vw, base + (v + 1) * vw, 4):
                words[byte // 4] = v % nthreads
        out.append((name, kind, words))
    return out


class _RegisterAccesses(OpVisitor):
    """The register words a *bound* op reads or writes, each with the thread that touches it."""

    consumer = "the emitter's register hand-off analysis"

    def __init__(self, plan: ProgramPlan, nthreads: int) -> None:
        self.plan = plan
        self.nthreads = nthreads

    def layout_access(self, ref, issuer: Issuer, reg: str, offset: int, kind: str) -> Access:
        return _layout_accesses(self.plan, ref, issuer, self.nthreads, reg, offset, kind)

    def vector_access(self, src: Reg, nbytes: int) -> list[Access]:
        return _vector_accesses(self.plan, src.name, src.offset, src.count, src.stride, nbytes, self.nthreads, "r")

    def visit_store(self, op: Store) -> list[Access]:
        if isinstance(op.src, Reg):
            return [self.layout_access(op.dst, op.issuer, op.src.name, op.src.offset, "r")]
        return []

    def visit_load(self, op: Load) -> list[Access]:
        return [self.layout_access(op.src, op.issuer, op.into, op.into_offset, "w")] if op.into else []

    def visit_poll_until(self, op: PollUntil) -> list[Access]:
        out = [self.layout_access(op.src, op.issuer, op.into, op.into_offset, "w")] if op.into else []
        if op.until.loaded:  # the wait target: the register word, read by every thread that polls
            threads = {0} if op.issuer is Issuer.LEADER else set(range(min(self.nthreads, op.src.lines)))
            out += self.word_reads(op.until.value.register, op.until.value.offset, op.until.value.nbytes, threads)
        return out

    def word_reads(self, register: str, offset: int, nbytes: int, threads: set[int]) -> list[Access]:
        """Reads of one register word by each of ``threads``."""
        return [(register, "r", {byte // 4: t for byte in range(offset, offset + nbytes, 4)}) for t in sorted(threads)]

    def visit_when(self, op: When) -> list[Access]:
        leader = all(getattr(inner, "issuer", Issuer.ALL) is Issuer.LEADER for inner in op.body)
        threads = {0} if leader else set(range(self.nthreads))
        out = self.word_reads(op.register, op.offset, op.nbytes, threads)
        for inner in op.body:
            out += self.visit(inner)
        return out

    def visit_atomic(self, op: Atomic) -> list[Access]:
        out: list[Access] = []
        if isinstance(op.operand, Reg):
            out.append(self.layout_access(op.dst, op.issuer, op.operand.name, op.operand.offset, "r"))
        if op.into:
            if isinstance(op.operand, (Input, Reg, Fill)):
                out.append(self.layout_access(op.dst, op.issuer, op.into, op.into_offset, "w"))
            else:  # counter atomics return one word per line word
                lp = self.plan.layouts[op.dst.buffer]
                words = {}
                for line in range(op.dst.lines):
                    for w in range(len(lp.layout.words)):
                        thread = _thread(line * len(lp.layout.words) + w, op.issuer, self.nthreads)
                        start = op.into_offset + (line * len(lp.layout.words) + w) * lp.elem_bytes
                        for byte in range(start, start + lp.elem_bytes, 4):
                            words[byte // 4] = thread
                out.append((op.into, "w", words))
        return out

    def visit_multimem_load_reduce(self, op: MultimemLoadReduce) -> list[Access]:
        return [self.layout_access(op.src, op.issuer, op.into, op.into_offset, "w")]

    def visit_multimem_store(self, op: MultimemStore) -> list[Access]:
        if isinstance(op.src, Reg):
            return [self.layout_access(op.dst, op.issuer, op.src.name, op.src.offset, "r")]
        return []

    def visit_multimem_red(self, op: MultimemRed) -> list[Access]:
        if isinstance(op.operand, Reg):
            return [self.layout_access(op.dst, op.issuer, op.operand.name, op.operand.offset, "r")]
        return []

    def visit_reduce(self, op: Reduce) -> list[Access]:
        out: list[Access] = []
        for src in op.srcs:
            if isinstance(src, Reg):
                out.extend(self.vector_access(src, op.nbytes))
        out.extend(_vector_accesses(self.plan, op.into, 0, 1, 0, op.nbytes, self.nthreads, "w"))
        return out

    def visit_write_output(self, op: WriteOutput) -> list[Access]:
        return self.vector_access(op.src, op.nbytes) if isinstance(op.src, Reg) else []

    def visit_fence(self, op: Fence) -> list[Access]:
        return []

    def visit_sync_group(self, op: SyncGroup) -> list[Access]:
        return []

    def visit_kernel_boundary(self, op: KernelBoundary) -> list[Access]:
        return []

    def visit_host_memset(self, op: HostMemset) -> list[Access]:
        return []  # memory only, before the kernel starts

    def visit_host_barrier(self, op: HostBarrier) -> list[Access]:
        return []

    def visit_bulk_load(self, op: BulkLoad) -> list[Access]:
        return []  # the emitted copy writes the register between two __syncthreads() of its own

    def visit_proxy_fence(self, op: ProxyFence) -> list[Access]:
        return []

    def visit_proxy_thread(self, op: ProxyThread) -> list[Access]:
        return []  # the proxy's registers are the host thread's, none of the kernel's

    def visit_loop(self, op: Loop) -> list[Access]:
        raise TypeError("register accesses are those of bound ops: _run walks a loop's body")


class _State:
    def __init__(self) -> None:
        self.writer: dict[tuple[str, int], int] = {}
        self.readers: dict[tuple[str, int], set[int]] = {}

    def reset(self) -> None:
        self.writer.clear()
        self.readers.clear()

    def conflicts(self, accesses: list[Access]) -> bool:
        for reg, kind, words in accesses:
            for word, thread in words.items():
                key = (reg, word)
                w = self.writer.get(key)
                if w is not None and w != thread:
                    return True  # read-after-write or write-after-write on another thread
                if kind == "w":
                    readers = self.readers.get(key)
                    if readers and (readers - {thread}):
                        return True  # write-after-read on another thread
        return False

    def apply(self, accesses: list[Access]) -> None:
        for reg, kind, words in accesses:
            for word, thread in words.items():
                key = (reg, word)
                if kind == "w":
                    self.writer[key] = thread
                    self.readers.pop(key, None)
                else:
                    self.readers.setdefault(key, set()).add(thread)


def _run(plan: ProgramPlan, nodes: tuple[EmitNode, ...], env: dict[str, int], nthreads: int,
         state: _State, marks: set[int]) -> bool:
    """Walk ``nodes`` under ``env``; add to ``marks`` where a hand-off is needed. True if marks grew."""
    grew = False
    accesses_of = _RegisterAccesses(plan, nthreads)
    for node in nodes:
        op = node.op
        if isinstance(op, Loop):
            count = op.count.evaluate(env)
            for value in range(count):
                if _run(plan, node.body, {**env, op.var: value}, nthreads, state, marks):
                    grew = True
            continue
        touch = effects(op)
        if touch.orders_group:
            state.reset()
            continue
        if node.id in marks:
            state.reset()
        if not touch.touches_registers:
            continue
        accesses = accesses_of.visit(bind(op, env))
        if accesses and state.conflicts(accesses):
            marks.add(node.id)
            state.reset()
            grew = True
        state.apply(accesses)
    return grew


def register_sync_points(plan: ProgramPlan) -> set[int]:
    """Op ids before which a ``__syncthreads()`` hands register bytes between threads."""
    marks: set[int] = set()
    changed = True
    while changed:
        changed = False
        for nranks in _SAMPLE_RANKS:
            for msg in _sample_messages(plan.granule, nranks):
                for nthreads in _SAMPLE_THREADS:
                    for iteration in _SAMPLE_ITERS:
                        for rank in range(nranks):
                            env: Mapping[str, int] = {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}
                            for cta in range(plan.program.ctas):  # registers are a CTA's own
                                if _run(plan, plan.nodes, plan.program.cta_env(env, cta), nthreads, _State(), marks):
                                    changed = True
    return marks
