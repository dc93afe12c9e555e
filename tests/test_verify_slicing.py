"""Slicing an instance to the locations a query needs (collsim.verify.slicing): same verdicts, fewer events."""
from __future__ import annotations

import pytest

import collsim.verify.verifier as verifier_module
from collsim.ir.registry import list_mutants, list_protocols, load_protocol
from collsim.verify.instance import Bounds, InstrKind
from collsim.verify.lower import lower_instance
from collsim.verify.reference import reference_run
from collsim.verify.slicing import slice_instance
from collsim.verify.verifier import verify


def _statuses(result) -> tuple:
    data = result.to_json()
    props = {name: p["status"] for name, p in data["properties"].items()}
    deps = [(d["name"], sorted((k, v["status"]) for k, v in d["results"].items())) for d in data["dependencies"]]
    return props, deps


def _sliced_premises(result) -> int:
    return sum("sliced to" in (p.get("premise") or "") for p in result.to_json()["properties"].values())


def _instance(name: str, ranks: int = 3, iterations: int = 2):
    proto = load_protocol(name)
    return lower_instance(proto, proto.algorithms[0], Bounds(ranks=ranks, iterations=iterations, lines=2, threads=2))


def test_slice_keeps_synchronisation_polls_and_seeds_whole_locations() -> None:
    low = _instance("atomic-counter")
    seed = next(e for e in low.events if e.consumer and e.rank == 0)
    sl = slice_instance(low, [seed.id])
    sub = sl.instance
    assert 0 < sl.dropped < len(low.events)
    assert len(sub.events) + sl.dropped == len(low.events)
    # every instruction is kept (thread positions and the reference schedule unchanged)
    assert [len(t) for t in sub.threads] == [len(t) for t in low.threads]
    kept_locs = set(sub.locs)
    for loc, events in low.locs.items():
        if any(e.role != "data" or e.polled for e in events) or loc == seed.loc:
            assert loc in kept_locs, loc
        if loc in kept_locs:  # a kept location keeps all its events
            assert len(sub.locs[loc]) == len(events)
    # a kept event depends on kept reads only, and names and fields survive the renumbering
    for e in sub.events:
        assert all(sub.events[d].is_read for d in sub.deps_of(e))
        old = low.event(e.name)
        assert (old.loc, old.kind, old.sem, old.label, old.thread, old.instr) == \
            (e.loc, e.kind, e.sem, e.label, e.thread, e.instr)
    # a vector access that lost elements still counts as several (its elements stay unordered)
    shrunk = [i for i in sub.instrs if i.events and len(i.events) < (i.elements or 0)]
    assert shrunk and all(not i.single_element for i in shrunk if (i.elements or 0) > 1)


def test_slice_reference_run_is_the_instance_run_restricted() -> None:
    low = _instance("signal-pad")
    seeds = [e.id for e in low.events if e.consumer and e.rank == 0]
    sl = slice_instance(low, seeds)
    assert sl.dropped > 0
    full, part = reference_run(low), reference_run(sl.instance)
    assert full.completed and part.completed
    for old_id, new_id in sl.to_slice.items():
        if old_id in full.read_values:
            assert part.read_values[new_id] == full.read_values[old_id]


def test_slice_without_seeds_keeps_only_synchronisation() -> None:
    low = _instance("barrier")
    sl = slice_instance(low, ())
    for loc, events in sl.instance.locs.items():
        assert any(e.role != "data" or e.polled for e in events)
    polls = [i for i in low.instrs if i.kind is InstrKind.POLL]
    assert sum(1 for i in sl.instance.instrs if i.kind is InstrKind.POLL) == len(polls)


SHIPPED = ["atomic-counter", "barrier", "signal-pad", "simple"]
# mutant-atomic-counter-no-reset: the last test below
MUTANTS = ["mutant-barrier-unsynced-publish", "mutant-barrier-relaxed-arrive", "mutant-nvls-relaxed-arrive",
           "mutant-signal-pad-relaxed-put", "mutant-simple-no-fence", "mutant-simple-early-signal"]


@pytest.mark.parametrize("name", SHIPPED + MUTANTS)
def test_sliced_verdicts_equal_whole_verdicts(name: str) -> None:
    whole = verify(name, use_cache=False, slicing=False)
    sliced = verify(name, use_cache=False, slicing=True)
    assert _statuses(sliced) == _statuses(whole)
    assert _sliced_premises(whole) == 0
    # the slices did the work: something was proven on one (a violation is always asked on the whole)
    assert _sliced_premises(sliced) > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in list_protocols() + list_mutants()
                                  if n not in SHIPPED + MUTANTS + ["mutant-atomic-counter-no-reset"]])
def test_sliced_verdicts_equal_whole_verdicts_everywhere(name: str) -> None:
    assert _statuses(verify(name, use_cache=False, slicing=True)) == \
        _statuses(verify(name, use_cache=False, slicing=False))


def test_slicing_is_automatic_above_the_size_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _sliced_premises(verify("atomic-counter", use_cache=False)) == 0  # the default bound is small
    monkeypatch.setattr(verifier_module, "SLICE_UNKNOWNS", 100)
    result = verify("atomic-counter", use_cache=False)
    assert result.ok and _sliced_premises(result) > 0


def test_a_violation_found_on_a_slice_is_the_whole_instances() -> None:
    """The mutant's violation comes from the whole instance: its counterexample names events of the instance."""
    sliced = verify("mutant-atomic-counter-no-reset", use_cache=False, slicing=True)
    whole = verify("mutant-atomic-counter-no-reset", use_cache=False, slicing=False)
    assert sliced.violated == whole.violated and sliced.violated
    for prop in sliced.violated:
        assert "sliced to" not in (sliced.properties[prop].premise or "")
        assert sliced.properties[prop].counterexample is not None


@pytest.mark.parametrize("name", ["atomic-counter", "sentinel", "simple"])
def test_candidates_listed_without_solving_equal_the_whole_encodings(name: str) -> None:
    """The seeding encoding (reads-from candidates only, causality a placeholder) lists the same candidates."""
    import z3

    from collsim.verify.properties import PROPERTIES
    from collsim.verify.verifier import _Checker, _witness_key

    low = _instance(name)
    checker = _Checker(low, "ptx", 10.0, z3.Context(), slicing=True)
    assert checker.slicing and checker._enc is None
    for prop in PROPERTIES:
        dry, whole = checker._query(prop, dry=True), checker._query(prop)
        assert [_witness_key(d, None) for _, d in dry.witnesses] == [_witness_key(d, None) for _, d in whole.witnesses]
        assert dry.note == whole.note


@pytest.mark.parametrize("name", ["sentinel", "mutant-simple-release-head", "mutant-sentinel-bf16-pair"])
def test_violation_hints_keep_statuses(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a large instance a later query is tried first under the last violation's reads-from: same statuses."""
    plain = _statuses(verify(name, use_cache=False))
    monkeypatch.setattr(verifier_module, "SLICE_UNKNOWNS", 1)
    hits = []
    original = verifier_module._Checker._check_hinted

    def counting(self, lits, sset):
        before = self.hint_hits
        result = original(self, lits, sset)
        hits.append(self.hint_hits - before)
        return result

    monkeypatch.setattr(verifier_module._Checker, "_check_hinted", counting)
    hinted = verify(name, use_cache=False)
    assert _statuses(hinted) == plain
    assert sum(hits) > 0  # some violation was found under an earlier one's reads-from
