"""Cross-check: the z3 SC encoding gives exactly the final states of all interleavings.

Small random straight-line programs (2-3 threads, at most 3 operations each,
2 locations) go through the litmus lowering and ``outcomes(..., model="sc")``;
``tests/interleave.py`` runs every interleaving. The two sets must be equal.
The same programs under PTX must allow at least the SC outcomes.
"""
from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleave import final_states, written_registers  # noqa: E402

from collsim.verify.litmus import parse_test  # noqa: E402
from collsim.verify.solver import outcomes  # noqa: E402

LOCS = ("x", "y")
VALUES = st.integers(min_value=1, max_value=2)
QUALS = st.sampled_from([("weak", None), ("relaxed", "gpu"), ("relaxed", "sys"), ("relaxed", "cta")])


@st.composite
def operation(draw, reg: str):
    kind = draw(st.sampled_from(["ld", "st", "rmw", "fence"]))
    loc = draw(st.sampled_from(LOCS))
    sem, scope = draw(QUALS)
    if kind == "ld":
        return {"op": "ld", "loc": loc, "reg": reg, "sem": sem, "scope": scope}
    if kind == "st":
        return {"op": "st", "loc": loc, "val": draw(VALUES), "sem": sem, "scope": scope}
    if kind == "rmw":
        rk = draw(st.sampled_from(["add", "exch", "cas"]))
        op = {"op": "rmw", "kind": rk, "reg": reg, "loc": loc, "val": draw(VALUES),
              "sem": "relaxed", "scope": scope or "gpu"}
        if rk == "cas":
            op["cmp"] = draw(st.integers(min_value=0, max_value=2))
        return op
    return {"op": "fence", "sem": draw(st.sampled_from(["sc", "acq_rel"])), "scope": "gpu"}


@st.composite
def program(draw):
    n = draw(st.integers(min_value=2, max_value=3))
    threads = []
    for _ in range(n):
        k = draw(st.integers(min_value=1, max_value=3))
        threads.append([draw(operation(f"r{i}")) for i in range(k)])
    init = {loc: draw(st.integers(min_value=0, max_value=1)) for loc in LOCS}
    ctas = [draw(st.integers(min_value=0, max_value=1)) for _ in range(n)]
    return threads, init, ctas


def z3_states(threads, init, ctas, model: str):
    row = {
        "name": "random", "init": init,
        "placement": [{"thread": f"P{i}", "cta": c, "gpu": 0} for i, c in enumerate(ctas)],
        "threads": threads, "condition": {"quantifier": "exists", "expr": "true"},
    }
    test = parse_test(row)
    regs = written_registers(threads)
    terms = {name: test.register_terms()[name] for name in regs}
    for loc in LOCS:
        terms[loc] = test.program.final_var(loc)
    res = outcomes(test.program, terms, model=model, timeout_s=30)
    assert res.complete, res.reason
    return {tuple(sorted(zip(res.names, vals))) for vals in res.values}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program())
def test_sc_encoding_matches_interleavings(prog):
    threads, init, ctas = prog
    expected = final_states(threads, init)
    assert z3_states(threads, init, ctas, "sc") == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program())
def test_ptx_allows_every_sc_outcome(prog):
    threads, init, ctas = prog
    assert final_states(threads, init) <= z3_states(threads, init, ctas, "ptx")
