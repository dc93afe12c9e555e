"""Each verification builds its terms in a z3 context of its own, passed explicitly; z3's main context is untouched."""
from __future__ import annotations

import z3

from collsim.ir.registry import load_protocol
from collsim.verify.events import ProgramBuilder
from collsim.verify.instance import Bounds
from collsim.verify.lower import lower_instance
from collsim.verify.models import encode as encode_instance
from collsim.verify.properties import data_race, hang, postcondition, sentinel_collision
from collsim.verify.solver import encode
from collsim.verify.verifier import verify


def _contexts(terms) -> set[int]:
    return {id(t.ctx) for t in terms}


def test_an_execution_builds_every_term_in_its_context():
    low = lower_instance(load_protocol("sentinel"), "one-shot", Bounds(ranks=2, iterations=2))
    ctx = z3.Context()
    for liveness in (False, True):
        ex = encode_instance(low, "ptx", liveness=liveness, symbolic_inputs=liveness, ctx=ctx)
        queries = [hang(ex), sentinel_collision(ex, True)] if liveness else [data_race(ex), postcondition(ex)[0]]
        assert _contexts(ex.cons) == {id(ctx)}
        assert _contexts(q.formula for q in queries) == {id(ctx)}
        assert ex.solver(1.0).ctx is ctx


def test_verdicts_do_not_depend_on_what_the_process_solved_before():
    main = z3.main_ctx()
    first = verify("mutant-ll-depth1", dependencies=False, use_cache=False).to_json()
    # fill z3's main context with unrelated terms and solve them
    xs = [z3.Int(f"noise{i}") for i in range(200)]
    noise = z3.Solver()
    noise.add(z3.Distinct(xs), *[x > 0 for x in xs])
    assert noise.check() == z3.sat
    again = verify("mutant-ll-depth1", dependencies=False, use_cache=False).to_json()
    for doc in (first, again):
        doc["seconds"] = 0
        for r in doc["properties"].values():
            r["seconds"] = 0
    assert first == again
    assert first["caught"] is True
    assert z3.main_ctx() is main  # never swapped


def test_the_model_layer_encodes_in_the_programs_context():
    b = ProgramBuilder()
    b.thread("P0", cta=0)
    b.thread("P1", cta=1)
    b.st("P0", "x", 1)
    b.ld("P1", "x")
    program = b.build()
    enc, solver = encode(program, "ptx")
    assert solver.ctx is program.sort.ctx and enc.ctx is solver.ctx
    assert _contexts(solver.assertions()) <= {id(solver.ctx)}
