"""The simulator, the verifier and the emitter read the same IR: on tiny instances they agree on what runs.

For every shipped program, rank 0's memory operations of one launch are
counted by kind three ways: from the IR itself (``Program.flatten``), from
the simulator's binding (what it schedules before any aggregation), and
from the verifier's unrolling (its instructions). The emitter must print
exactly one marked block per IR operation (loops included). A consumer that quietly drifts
from the IR (drops a fence, adds a poll) fails here.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest

from collsim.algorithms import generate
from collsim.ir.effects import effects
from collsim.ir.program import walk
from collsim.ir.registry import list_protocols, load_protocol
from collsim.ir.types import Scope, Sem
from collsim.ir.visit import OpVisitor
from collsim.sim.lower import KIND_NAMES
from collsim.sim.lower import SimProgram
from collsim.verify.instance import Bounds, InstrKind
from collsim.verify.lower import lower_instance

PROGRAMS = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]


class MemoryInstruction(OpVisitor):
    """The verifier instruction each IR operation becomes (None: no memory instruction of its own)."""

    consumer = "the consumers' agreement test"

    def visit_store(self, op):
        return InstrKind.STORE

    def visit_load(self, op):
        return InstrKind.LOAD

    def visit_poll_until(self, op):
        return InstrKind.POLL

    def visit_fence(self, op):
        return InstrKind.FENCE

    def visit_atomic(self, op):
        return InstrKind.RMW

    def visit_kernel_boundary(self, op):
        return InstrKind.FENCE  # stream order: fence.sc.sys in every thread

    def visit_reduce(self, op):
        return None

    def visit_write_output(self, op):
        return None

    def visit_sync_group(self, op):
        return None  # a bar.sync among the rank's threads, none with one thread

    def visit_loop(self, op):
        return None

    # a multimem op is one instruction whose events are every copy's elements
    def visit_multimem_load_reduce(self, op):
        return InstrKind.LOAD

    def visit_multimem_store(self, op):
        return InstrKind.STORE

    def visit_multimem_red(self, op):
        return InstrKind.RMW

    # host actions (no shipped protocol has one): a memset is a store per line; the hosts' rendezvous is the
    # verifier's mailbox picture of an ordering, no memory instruction of the program
    def visit_host_memset(self, op):
        return InstrKind.STORE

    def visit_bulk_load(self, op):
        return InstrKind.LOAD

    def visit_proxy_fence(self, op):
        return None

    def visit_proxy_thread(self, op):
        return None  # its body's instructions are the proxy thread's, not the rank's

    def visit_host_barrier(self, op):
        return None

    def visit_when(self, op):
        return None  # a branch (no shipped protocol has one): its body's ops are instructions of their own


def _counts(ops) -> Counter:
    """Memory instructions by kind: the verifier issues one per line of a range (each line its own access)."""
    counts: Counter = Counter()
    for op, lines in ops:
        kind = MemoryInstruction().visit(op)
        if kind is not None:
            counts[kind] += lines
    return counts


def _lines(op) -> int:
    ref = effects(op).ref
    return int(ref.lines) if ref is not None else 1


@pytest.mark.parametrize("name,algorithm", PROGRAMS)
def test_simulator_and_verifier_unroll_what_the_ir_says(name, algorithm):
    protocol = load_protocol(name)
    program = generate(protocol, algorithm)
    verifier = lower_instance(protocol, algorithm, Bounds(ranks=3, iterations=1))
    env = {"RANK": 0, "NRANKS": 3, "ITER": 0, "MSG": verifier.msg}

    ir = _counts((f.op, _lines(f.op)) for f in program.flatten(env))
    bound = SimProgram(program).flat(env)
    assert all(KIND_NAMES[b.kind] == type(b.op).__name__ for b in bound)  # the simulator's kind is the IR's class
    sim = _counts((b.op, b.ref[5] if b.ref is not None else 1) for b in bound)
    rank0 = {t for t, p in enumerate(verifier.placement) if p.rank == 0}
    ver = Counter(i.kind for i in verifier.instrs
                  if i.thread in rank0 and i.iteration == 0 and i.kind != InstrKind.BARRIER)

    assert sum(ir.values()) > 0
    assert sim == ir
    assert ver == ir


@pytest.mark.parametrize("name,algorithm", PROGRAMS)
def test_emitter_prints_one_marked_block_per_ir_operation(name, algorithm):
    from collsim.emit import prepare

    protocol = load_protocol(name)
    program = generate(protocol, algorithm)
    emitted = prepare(protocol, algorithm, unverified=True)
    source = "\n".join(text for file, text in emitted.files.items() if file.endswith((".cu", ".cuh", ".h")))
    marked = Counter(int(m) for m in re.findall(r"// IR #(\d+) ", source))
    ops = list(walk(program.ops))  # loops are numbered and marked too
    assert len(marked) == len(ops)
    assert sorted(marked) == list(range(1, len(ops) + 1))
    assert set(marked.values()) == {1}


class _GpuScopedVolatileLL(load_protocol("ll").__class__):
    """LL with its volatile stores and polls declared at GPU scope (the ISA makes a volatile access system-scoped
    whatever scope it names)."""

    name = "ll-volatile-gpu"

    def exchange(self, b, ex):
        emit = b.emit

        def rescoped(op):
            return emit(dataclasses.replace(op, scope=Scope.GPU) if getattr(op, "sem", None) is Sem.VOLATILE else op)

        b.emit = rescoped
        try:
            super().exchange(b, ex)
        finally:
            del b.emit


def test_every_consumer_sees_a_volatile_access_at_system_scope():
    from collsim.emit.cuda import ptx_atomic_qualifiers
    from collsim.emit.plan import plan_for
    from collsim.emit.ptxcheck import expected_instructions

    protocol = _GpuScopedVolatileLL()
    program = generate(protocol, "ring")
    volatile = [op for op in walk(program.ops) if getattr(op, "sem", None) is Sem.VOLATILE]
    assert volatile and {op.scope for op in volatile} == {Scope.GPU}
    low = lower_instance(protocol, "ring", Bounds(ranks=2, iterations=1))
    assert {e.scope for e in low.events if e.sem == "relaxed"} == {"sys"}  # every access of the volatile ops
    demands = expected_instructions(plan_for(protocol, "ring"), "fp32")
    assert {d.scope for d in demands.values() if d.opcodes in (("st",), ("ld",))} == {"sys"}
    assert ptx_atomic_qualifiers(Sem.VOLATILE, Scope.GPU, True, "op") == ("atom", ".relaxed.sys")
