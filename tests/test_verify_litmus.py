"""Litmus tests and random programs under both encodings of the one PTX model.

The litmus runner and the protocol verifier share one event form and one
encoding (:func:`collsim.verify.models.encode`); causality is encoded with
vector clocks (the default) or relationally. Here

* every training litmus test gives its expected outcome under each encoding;
* random small programs (2-3 threads, CTA/GPU placements, all scopes and
  qualifiers, fences, RMWs, ``cas``, ``red``, barriers, data dependencies)
  have the same set of outcomes (every read value and every final value)
  under both encodings, under ``ptx`` and ``sc``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsim.verify.events import Program, ProgramBuilder
from collsim.verify.litmus import evaluate, parse_test
from collsim.verify.solver import outcomes

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO.parent / "shared" / "data" / "litmus" / "ptx_generic_train.jsonl"


def _rows() -> list[dict]:
    if not TRAIN.exists():
        return []
    return [json.loads(line) for line in TRAIN.read_text().splitlines() if line.strip()]


ROWS = _rows()


@pytest.mark.skipif(not ROWS, reason="training litmus suite not found at ../shared/data/litmus/")
@pytest.mark.parametrize("causality", ["vector-clock", "relational"])
@pytest.mark.parametrize("n", range(len(ROWS)), ids=[r["name"] for r in ROWS])
def test_litmus_under_each_encoding(n, causality):
    test = parse_test(ROWS[n], file=str(TRAIN), line=n + 1)
    result = evaluate(test, timeout_s=120, want_witness=False, causality=causality)
    assert result.observed == test.expected, f"{test.name}: expected {test.expected}, {causality} says {result.observed}"


# ----------------------------------------------------------- random programs
LOCS = ("x", "y")
SCOPES = ("cta", "gpu", "sys")

op_strategy = st.one_of(
    st.tuples(st.just("ld"), st.sampled_from(LOCS), st.sampled_from(("weak", "relaxed", "acquire")),
              st.sampled_from(SCOPES)),
    st.tuples(st.just("st"), st.sampled_from(LOCS), st.sampled_from(("weak", "relaxed", "release")),
              st.sampled_from(SCOPES), st.booleans()),
    st.tuples(st.just("fence"), st.sampled_from(("sc", "acq_rel")), st.sampled_from(SCOPES)),
    st.tuples(st.just("rmw"), st.sampled_from(LOCS), st.sampled_from(("add", "exch", "cas")),
              st.sampled_from(("relaxed", "acquire", "release", "acq_rel")), st.sampled_from(SCOPES)),
    st.tuples(st.just("red"), st.sampled_from(LOCS), st.sampled_from(("relaxed", "release", "acq_rel")),
              st.sampled_from(SCOPES)),
    st.tuples(st.just("bar")),
)

program_strategy = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 1), st.lists(op_strategy, min_size=1, max_size=3)),
    min_size=2, max_size=3)


def build(spec) -> tuple[Program, dict]:
    """A program from ``[(cta, gpu, ops)]``: distinct store values, optional data dependencies."""
    b = ProgramBuilder()
    terms: dict = {}
    value = 0
    for t, (cta, gpu, _) in enumerate(spec):
        b.thread(f"P{t}", cta=cta, gpu=gpu)
    for t, (_, _, ops) in enumerate(spec):
        th = f"P{t}"
        last_read = None
        bars = 0
        for op in ops:
            if op[0] == "ld":
                _, loc, sem, scope = op
                last_read = b.ld(th, loc, sem=sem, scope=None if sem == "weak" else scope)
                terms[last_read] = b.value(last_read)
            elif op[0] == "st":
                _, loc, sem, scope, dep = op
                value += 1
                v = value if not (dep and last_read) else b.value(last_read) + 10 * value
                b.st(th, loc, v, sem=sem, scope=None if sem == "weak" else scope)
            elif op[0] == "fence":
                b.fence(th, sem=op[1], scope=op[2])
            elif op[0] == "rmw":
                _, loc, kind, sem, scope = op
                value += 1
                compare = (value - 1) % 3 if kind == "cas" else None  # sometimes the initial 0
                last_read = b.rmw(th, loc, kind, value, compare=compare, sem=sem, scope=scope)
                terms[last_read] = b.value(last_read)
            elif op[0] == "red":
                _, loc, sem, scope = op
                value += 1
                b.red(th, loc, "add", value, sem=sem, scope=scope)
            else:  # the k-th barrier of every thread of a CTA is one instance
                b.bar(th, instance=bars)
                bars += 1
    prog = b.build()
    for loc in prog.locations:
        terms[f"final {loc}"] = prog.final_var(loc)
    return prog, terms


def _agree(spec, model: str) -> None:
    prog, terms = build(spec)
    relational = outcomes(prog, terms, model=model, timeout_s=120, causality="relational")
    assert relational.complete, relational.reason
    clocks = outcomes(prog, terms, model=model, timeout_s=120, causality="vector-clock")
    assert clocks.complete, clocks.reason
    assert clocks.values == relational.values, (spec, sorted(clocks.values ^ relational.values))


def _prunes_nothing(spec, model: str) -> None:
    prog, terms = build(spec)
    full = outcomes(prog, terms, model=model, timeout_s=120, prune=False)
    assert full.complete, full.reason
    pruned = outcomes(prog, terms, model=model, timeout_s=120)
    assert pruned.values == full.values, (spec, sorted(pruned.values ^ full.values))


_FEW = settings(max_examples=8, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
_MANY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("model", ["ptx", "sc"])
@_FEW
@given(spec=program_strategy)
def test_random_programs_agree_under_both_encodings(spec, model):
    _agree(spec, model)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["ptx", "sc"])
@_MANY
@given(spec=program_strategy)
def test_many_random_programs_agree_under_both_encodings(spec, model):
    _agree(spec, model)


@pytest.mark.parametrize("model", ["ptx", "sc"])
@_FEW
@given(spec=program_strategy)
def test_random_programs_lose_no_outcome_to_static_pruning(spec, model):
    _prunes_nothing(spec, model)
