"""The simulator's fast binding agrees with the IR's reference ``Program.flatten``, op for op."""
from __future__ import annotations

from dataclasses import fields

import pytest

from collsim.algorithms import generate
from collsim.ir.ops import Fill, Input, MulticastRef, Reg
from collsim.ir.registry import list_protocols, load_protocol
from collsim.sim.lower import EVERY_COPY, Block, SimOp, lower_for_sim

SHIPPED = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]
INSTANCES = [(2, 0, 64), (3, 1, 96), (4, 2, 4096), (8, 5, 1 << 20)]


def _source(value):
    if isinstance(value, Input):
        return ("input", value.offset)
    if isinstance(value, Reg):
        return ("reg", value.name, value.offset, value.count, value.stride)
    if isinstance(value, Fill):
        return ("fill", value.pattern)
    return value


def _expected(op) -> dict:
    """The fields the simulator reads, taken from flatten()'s bound op."""
    out = {"label": op.label, "kind": type(op).__name__}
    ref = getattr(op, "dst", None)
    if ref is None and hasattr(getattr(op, "src", None), "buffer"):
        ref = op.src
    if ref is not None:
        owner = EVERY_COPY if isinstance(ref, MulticastRef) else ref.rank  # a multimem op reaches every copy
        out["ref"] = (ref.buffer, owner, ref.slot, ref.region, ref.line, ref.lines)
    for name in ("flag", "into", "into_offset", "nbytes"):
        if hasattr(op, name):
            out[name] = getattr(op, name)
    if hasattr(op, "until"):
        out["pred"] = (type(op.until).__name__, op.until.value)
    if type(op).__name__ in ("Store", "WriteOutput", "MultimemStore"):
        out["src"] = _source(op.src)
    if hasattr(op, "srcs"):
        out["srcs"] = tuple(_source(s) for s in op.srcs)
    if hasattr(op, "output_offset"):
        out["offset"] = op.output_offset
    if type(op).__name__ == "WriteOutput":
        out["offset"] = op.offset
    if type(op).__name__ in ("Atomic", "MultimemRed"):
        out["operand"] = _source(op.operand)
    return out


def _actual(bound: SimOp) -> dict:
    op = bound.op
    kind = type(op).__name__
    out = {"label": bound.label, "kind": kind}
    if bound.ref is not None:
        out["ref"] = bound.ref
    for name in ("flag", "into", "into_offset", "nbytes"):
        if hasattr(op, name):
            out[name] = getattr(bound, name)
    if bound.pred is not None:
        out["pred"] = (type(bound.pred).__name__, bound.pred.value)
    if kind in ("Store", "WriteOutput", "MultimemStore"):
        out["src"] = bound.src
    if bound.srcs is not None:
        out["srcs"] = bound.srcs
    if kind in ("Reduce", "WriteOutput"):
        out["offset"] = bound.offset
    if kind in ("Atomic", "MultimemRed"):
        out["operand"] = bound.operand
    return out


@pytest.mark.parametrize("name,algorithm", SHIPPED)
def test_fast_binding_matches_flatten(name, algorithm):
    """Every shipped program binds to the same ops, in the same order, with the same values and names."""
    program = generate(load_protocol(name), algorithm)
    lowered = lower_for_sim(program)
    for nranks, iteration, msg in INSTANCES:
        for rank in range(nranks):
            env = {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}
            reference = program.flatten(env)
            fast = lowered.flat(env)
            assert len(fast) == len(reference)
            for ref_op, bound in zip(reference, fast):
                assert bound.name == ref_op.name
                assert _actual(bound) == _expected(ref_op.op), ref_op.name


def test_loops_without_a_group_sync_are_lanes():
    """A peer loop with no SyncGroup inside runs its iterations as concurrent lanes; one with a sync does not."""
    ll = lower_for_sim(generate(load_protocol("ll"), "one-shot")).bind({"RANK": 0, "NRANKS": 4, "ITER": 0, "MSG": 64})
    assert [item.lanes for item in ll if isinstance(item, Block)] == [True, True]
    simple = lower_for_sim(generate(load_protocol("simple"), "one-shot")).bind(
        {"RANK": 0, "NRANKS": 4, "ITER": 0, "MSG": 64})
    assert False in [item.lanes for item in simple if isinstance(item, Block)]


def test_bound_ops_carry_their_layout_facts():
    """Wire bytes come from the buffer layout: LL lines are 16 B carrying 8 B of data."""
    ops = lower_for_sim(generate(load_protocol("ll"), "one-shot")).flat({"RANK": 0, "NRANKS": 2, "ITER": 0, "MSG": 64})
    store = next(op for op in ops if type(op.op).__name__ == "Store")
    assert (store.line_bytes, store.data_bytes, store.polls_flags) == (16, 8, True)
    assert store.ref[5] * store.data_bytes == 64
    assert {f.name for f in fields(type(store.op))} >= {"dst", "src", "flag"}


def test_both_walks_of_the_simulator_are_checked_op_visitors():
    """The lowering and the rank process walk the op set through OpVisitor, so an operation class either
    lacks is refused when the module is imported; the rank's dispatch table covers every bound op kind."""
    from collsim.ir.ops import OP_TYPES
    from collsim.ir.visit import OpVisitor, missing_rules
    from collsim.sim.folded import FoldedRank
    from collsim.sim.lower import SimKind, _Compiler
    from collsim.sim.rank import Rank

    for walk in (_Compiler, Rank, FoldedRank):
        assert issubclass(walk, OpVisitor) and missing_rules(walk) == []
    assert [OP_TYPES[kind].__name__ for kind in SimKind] == [t.__name__ for t in OP_TYPES if t.__name__ != "Loop"]
