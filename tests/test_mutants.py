"""Every deliberately broken protocol is caught with the property it breaks, and a counterexample."""
from __future__ import annotations

import pytest

from collsim.algorithms import generate
from collsim.ir.checks import check_program
from collsim.ir.registry import list_mutants, list_protocols, load_protocol
from collsim.verify import verify
from collsim.verify.properties import PROPERTIES, normalize_property
from test_counterexamples import source_line

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
    # every step of protocol code names its op in source terms: file:line of the emitting protocol line
    sourced = [step for step in cex.steps if step.source]
    assert sourced, name
    assert all(source_line(step.source).strip() for step in sourced)
    assert all(step.source for step in cex.steps if step.mark and step.action in ("writes", "reads", "polls", "rmw"))


def test_group_synchronization_bugs_need_more_than_one_thread():
    name = "mutant-simple-early-signal"
    caught = verify(name, properties=["data-race"], dependencies=False, use_cache=False)
    assert caught.bound.threads == 2 and caught.properties["data-race"].violated
    one = verify(name, threads=1, properties=["data-race"], dependencies=False, use_cache=False)
    assert one.properties["data-race"].holds


@pytest.mark.parametrize("name", ["mutant-barrier-unsynced-publish", "mutant-simple-release-head"])
def test_lane_bugs_are_caught_at_the_default_bound_and_the_bound_says_why(name):
    caught = verify(name, properties=["data-race"], dependencies=False, use_cache=False)
    assert caught.bound.threads == 2 and caught.bound.lines == 2
    assert caught.properties["data-race"].violated
    assert any("default bound of 2 threads x 2 lines" in note for note in caught.bound.notes)
    assert "2 thread(s) per rank" in caught.render(counterexamples=False)
    for threads, lines in ((1, 1), (1, 2), (2, 1)):  # invisible to a single thread, or a single line
        narrow = verify(name, threads=threads, lines=lines, properties=["data-race", "stale-read"],
                        dependencies=False, use_cache=False)
        assert all(r.holds for r in narrow.properties.values()), (threads, lines)
        assert not any("default bound" in note for note in narrow.bound.notes)


def test_the_default_bound_note_names_only_what_the_defaults_chose():
    # --lines given (or set by --sizes): the note is about the threads alone, and says which flag overrides it
    lines_given = verify("barrier", ranks=2, lines=1, properties=["hang"], dependencies=False, use_cache=False)
    sized = verify("barrier", ranks=2, iterations=1, sizes=[1], properties=["hang"], dependencies=False, use_cache=False)
    threads_given = verify("barrier", ranks=2, threads=1, properties=["hang"], dependencies=False, use_cache=False)
    for result, chosen, flag in ((lines_given, "default of 2 threads per rank", "(--threads overrides)"),
                                 (sized, "default of 2 threads per rank", "(--threads overrides)"),
                                 (threads_given, "default of 2 lines per chunk", "(--lines overrides)")):
        notes = [n for n in result.bound.notes if n.startswith("default")]
        assert len(notes) == 1 and notes[0].startswith(chosen) and notes[0].endswith(flag), notes
        assert "2 threads x 2 lines" not in notes[0]
