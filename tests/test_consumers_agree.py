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
from collsim.ir import Atomic, Fence, KernelBoundary, Load, PollUntil, Store
from collsim.ir.program import walk
from collsim.ir.registry import list_protocols, load_protocol

KIND = {Store: "store", Load: "load", PollUntil: "poll", Fence: "fence", Atomic: "rmw", KernelBoundary: "fence"}
SIM_KIND = {"Store": "store", "Load": "load", "PollUntil": "poll", "Fence": "fence", "Atomic": "rmw",
            "KernelBoundary": "fence"}
PROGRAMS = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]


def _ir_counts(program, env) -> Counter:
    return Counter(KIND[type(f.op)] for f in program.flatten(env) if type(f.op) in KIND)


@pytest.mark.parametrize("name,algorithm", PROGRAMS)
def test_simulator_and_verifier_unroll_what_the_ir_says(name, algorithm):
    from collsim.sim.lower import KIND_NAMES, SimProgram
    from collsim.verify.lower import Bounds, lower

    protocol = load_protocol(name)
    program = generate(protocol, algorithm)
    verifier = lower(protocol, algorithm, Bounds(ranks=3, iterations=1))
    env = {"RANK": 0, "NRANKS": 3, "ITER": 0, "MSG": verifier.msg}

    ir = _ir_counts(program, env)
    sim = Counter(SIM_KIND[KIND_NAMES[op.kind]] for op in SimProgram(program).flat(env)
                  if KIND_NAMES[op.kind] in SIM_KIND)
    rank0 = {t for t, (rank, _cta, _gpu) in enumerate(verifier.placement) if rank == 0}
    ver = Counter(i.kind for i in verifier.instrs if i.thread in rank0 and i.iteration == 0 and i.kind != "bar")

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
