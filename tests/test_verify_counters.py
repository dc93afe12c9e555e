"""The counter sums the PTX encoding states (PTXEncoding._counter_sums) are implied: they exclude no execution.

Each program's outcomes (every read value and the final value) are enumerated with and without them; they must
agree, and the constraints must exist where the location is a counter (else the comparison proves nothing).
"""
from __future__ import annotations

import pytest

from collsim.verify.events import ProgramBuilder
from collsim.verify.models import encode
from collsim.verify.models.ptx import PTXEncoding
from collsim.verify.solver import outcomes


def _counter(sem: str = "relaxed", scope: str = "gpu", plain_store: bool = False):
    b = ProgramBuilder()
    for t in ("P0", "P1", "P2"):
        b.thread(t, cta=int(t[1]))
    reads = [b.rmw("P0", "x", "add", 1, sem=sem, scope=scope), b.ld("P0", "x", sem=sem, scope=scope)]
    reads.append(b.rmw("P1", "x", "add", 2, sem=sem, scope=scope))
    if plain_store:
        b.st("P1", "x", 10, sem=sem, scope=scope)
    reads.append(b.ld("P2", "x", sem=sem, scope=scope))
    reads.append(b.rmw("P2", "x", "add", 4, sem=sem, scope=scope))
    reads.append(b.ld("P2", "x", sem=sem, scope=scope))
    return b.build(), reads


def _outcomes(program, reads):
    terms = {r: program.value_var(r) for r in reads} | {"x": program.final_var("x")}
    found = outcomes(program, terms, model="ptx")
    assert found.complete
    return found.values


@pytest.mark.parametrize("sem,scope,plain_store,applies", [
    ("relaxed", "gpu", False, True),
    ("relaxed", "cta", False, False),  # threads in different CTAs: not morally strong, no single chain
    ("relaxed", "gpu", True, False),   # a plain store: not a counter
])
def test_counter_sums_exclude_no_execution(monkeypatch, sem, scope, plain_store, applies):
    program, reads = _counter(sem, scope, plain_store)
    with_sums = _outcomes(program, reads)
    n_with = len(encode(program, "ptx").cons)
    monkeypatch.setattr(PTXEncoding, "_counter_sums", lambda self: None)
    without = _outcomes(program, reads)
    n_without = len(encode(program, "ptx").cons)
    assert with_sums == without
    assert (n_with > n_without) == applies
    assert len(without) > 1  # the reads can see several counts
