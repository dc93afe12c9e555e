"""Symmetries the verifier uses to look for violations at one representative only (collsim.verify.symmetry).

A symmetry is only used where it is checked to map the instance onto itself; these tests hold the word
rotation to that: found where the lanes of every access are handled alike, refused where one lane differs,
and a violation at a lane other than the first is still found (a wrongly assumed rotation would miss it).
"""
from __future__ import annotations

import z3

import collsim.verify.verifier as verifier
from collsim.verify.reference import reference_run
from collsim.verify.symmetry import anchored, first_word, rank_rotation, word_rotation
from collsim.verify.terms import Lin


def _plan(name: str = "atomic-counter"):
    return verifier._plan(name, None, ranks=3, iterations=2, dependencies=False, properties=["postcondition"])


def _postcondition(plan) -> str:
    results, _ = verifier._check_all(plan.proto, plan.algorithm, plan.bounds, plan.low, "ptx", plan.active,
                                     plan.domain, 60.0, plan.props, False, z3.Context())
    return results["postcondition"].status


def _skew_one_lane(low) -> None:
    """Rank 0's first reduction into word 1 adds its input twice: one lane of one rank differs."""
    e = next(e for e in low.events if e.rank == 0 and e.word == 1 and e.label.startswith("red_add_data"))
    key = next(k for k in e.value.terms if k[0] == "in")
    e.value = e.value + Lin.atom(key)


def test_word_rotation_of_a_vector_access_protocol_is_an_automorphism():
    low = _plan().low
    ref = reference_run(low)
    rot = word_rotation(low, ref)
    assert rot is not None and rank_rotation(low, ref) is not None
    assert sorted(rot.values()) == sorted(rot) == [e.id for e in low.events]  # a permutation of the events
    for x, y in ((low.events[a], low.events[b]) for a, b in rot.items()):
        assert (x.thread, x.instr, x.rank, x.label) == (y.thread, y.instr, y.rank, y.label)
    # one orbit per access: four 4-byte words of a 16-byte line, each its own representative only at word 0
    line = [e for e in low.events if e.label == "load_sum" and e.rank == 0 and e.instr == low.events[
        next(i for i in rot if low.events[i].label == "load_sum")].instr and e.thread == 0]
    assert sorted(e.word for e in line) == [0, 1, 2, 3]
    assert [first_word(low, e) for e in sorted(line, key=lambda e: e.word)] == [True, False, False, False]
    orbit, e = set(), line[0].id
    while e not in orbit:
        orbit.add(e)
        e = rot[e]
    assert orbit == {x.id for x in line}


def test_a_lane_handled_differently_gets_no_word_rotation():
    low = _plan().low
    _skew_one_lane(low)
    ref = reference_run(low)
    assert ref.completed
    assert word_rotation(low, ref) is None
    assert rank_rotation(low, ref) is None


def test_a_violation_at_one_lane_only_is_still_found(monkeypatch):
    plan = _plan()
    assert _postcondition(plan) == "holds"
    skewed = _plan()
    _skew_one_lane(skewed.low)
    assert _postcondition(skewed) == "violated"
    # the test is sensitive: with a word rotation assumed (that of the unskewed instance), the violation at
    # word 1 would be missed, since only outputs made of first-word reads would be asked
    clean = _plan().low
    wrong = word_rotation(clean, reference_run(clean))
    monkeypatch.setattr(verifier, "word_rotation", lambda low, ref: wrong)
    monkeypatch.setattr(verifier, "rank_rotation", lambda low, ref: None)
    assert _postcondition(skewed) == "holds"


def test_anchoring_keeps_one_representative_per_orbit_and_every_rank_anchor():
    low = _plan().low
    reads = [e for e in low.events if e.label == "load_sum" and e.iteration == 0]
    witnesses = [(None, {"read": r}) for r in reads] + [(None, {"rank": k}) for k in range(3)]

    def anchor(d):
        return [d["read"]] if "read" in d else [d["rank"]]

    kept = anchored(low, witnesses, anchor, ranks=True, words=True)
    kept_reads = [d["read"] for _, d in kept if "read" in d]
    assert kept_reads and all(r.rank == 0 and first_word(low, r) for r in kept_reads)
    assert len(kept_reads) * 3 * 4 == len(reads)  # 3 ranks x 4 words per line
    assert [d["rank"] for _, d in kept if "rank" in d] == [0]
    assert len(anchored(low, witnesses, anchor, ranks=False, words=False)) == len(witnesses)
