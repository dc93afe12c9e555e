"""Every deliberately broken protocol is caught with the property it breaks, and a counterexample."""
from __future__ import annotations

import pytest

from collsim.algorithms import generate
from collsim.ir.checks import check_program
from collsim.ir.registry import list_mutants, list_protocols, load_protocol
from collsim.verify import verify
from collsim.verify.properties import PROPERTIES, normalize_property

MUTANTS = list_mutants()


def test_at_least_twelve_mutants_with_unique_names():
    assert len(MUTANTS) >= 12
    assert len(set(MUTANTS)) == len(MUTANTS)
    assert not set(MUTANTS) & set(list_protocols())
    assert all(name.startswith("mutant-") for name in MUTANTS)


@pytest.mark.parametrize("name", MUTANTS)
def test_mutant_declares_what_it_breaks(name):
    proto = load_protocol(name)
    assert normalize_property(proto.expected_violation) in PROPERTIES
    assert len((type(proto).__doc__ or "").split()) > 15  # says what is broken and why
    for algorithm in proto.algorithms:
        check_program(generate(proto, algorithm))


@pytest.mark.parametrize("name", MUTANTS)
def test_mutant_is_caught(name):
    proto = load_protocol(name)
    expected = normalize_property(proto.expected_violation)
    r = verify(name, properties=[expected], dependencies=False, use_cache=False, timeout=120)
    result = r.properties[expected]
    assert result.violated, f"{name}: {result.describe()}"
    assert r.caught
    cex = result.counterexample
    assert cex is not None and cex.reason and cex.steps
    assert any(step.mark for step in cex.steps) or expected == "postcondition"


def test_group_synchronization_bugs_need_more_than_one_thread():
    name = "mutant-simple-early-signal"
    caught = verify(name, properties=["data-race"], dependencies=False, use_cache=False)
    assert caught.bound.threads == 2 and caught.properties["data-race"].violated
    one = verify(name, threads=1, properties=["data-race"], dependencies=False, use_cache=False)
    assert one.properties["data-race"].holds
