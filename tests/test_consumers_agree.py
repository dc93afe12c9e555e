"""The simulator, the verifier and the emitter read the same IR: on tiny instances they agree on what runs.

For every shipped program, rank 0's memory operations of one launch are
counted by kind three ways: from the IR itself (``Program.flatten``), from
the simulator's binding (what it schedules before any aggregation), and
from the verifier's unrolling (its instructions). The emitter must print
exactly one marked block per IR operation (loops included). A consumer that quietly drifts
from the IR (drops a fence, adds a poll) fails here.
"""
from __future__ import annotations

import re
from collections import Counter

import pytest

from collsim.algorithms import generate
from collsim.ir.program import walk
from collsim.ir.registry import list_protocols, load_protocol
from collsim.ir.visit import OpVisitor
from collsim.sim.lower import KIND_NAMES
from collsim.sim.lower import Lowered as SimLowered
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


def _counts(ops) -> Counter:
    kinds = (MemoryInstruction().visit(op) for op in ops)
    return Counter(kind for kind in kinds if kind is not None)


@pytest.mark.parametrize("name,algorithm", PROGRAMS)
def test_simulator_and_verifier_unroll_what_the_ir_says(name, algorithm):
    protocol = load_protocol(name)
    program = generate(protocol, algorithm)
    verifier = lower_instance(protocol, algorithm, Bounds(ranks=3, iterations=1))
    env = {"RANK": 0, "NRANKS": 3, "ITER": 0, "MSG": verifier.msg}

    ir = _counts(f.op for f in program.flatten(env))
    bound = SimLowered(program).flat(env)
    assert all(KIND_NAMES[b.kind] == type(b.op).__name__ for b in bound)  # the simulator's kind is the IR's class
    sim = _counts(b.op for b in bound)
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
