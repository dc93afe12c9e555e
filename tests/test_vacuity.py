"""No vacuous "holds": ill-formed polls are refused by verify and review alike, and every property
verdict rests on a premise the solver found satisfiable."""
from __future__ import annotations

import textwrap

import pytest

#: the issue's example: the barrier protocol whose epilogue polls a plain data buffer (no flag word) for a
#: count nobody writes; its predicate, checked on no word at all, was vacuously true
VACUOUS_POLL = '''
    from collsim.ir import ITER, RANK, AtLeast, PollUntil, Ref, Scope, Sem
    from protocols.barrier import Barrier


    class VacuousPoll(Barrier):
        """Barrier, plus an epilogue poll on staging data for AtLeast(ITER + 12345)."""

        name = "vacuous-poll"
        algorithms = ("one-shot",)

        def epilogue(self, b, launch):
            super().epilogue(b, launch)
            b.emit(PollUntil(Ref("staging", RANK), AtLeast(ITER + 12345), Sem.ACQUIRE, Scope.SYS, label="never"))
'''

#: a counter that only data stores reach: its flag word is written by nobody, though its line is
FLAG_NOBODY_WRITES = '''
    from collsim.ir import RANK, AtLeast, Buffer, Input, LineLayout, PollUntil, Ref, Scope, Sem, Store, Word
    from collsim.ir import WordRole, plain_layout
    from protocols.barrier import Barrier

    MIXED = LineLayout("data-and-flag", (Word(WordRole.DATA, 4), Word(WordRole.FLAG, 4)), 8)


    class DataOnly(Barrier):
        name = "data-only-flag"
        algorithms = ("one-shot",)

        def buffers(self, transfer_bytes):
            return super().buffers(transfer_bytes) + (Buffer("mixed", MIXED, depth=1, regions=1, lines=1),)

        def epilogue(self, b, launch):
            super().epilogue(b, launch)
            b.emit(Store(Ref("mixed", RANK), Input(0), Sem.RELEASE, Scope.SYS, label="data_only"))
            b.emit(PollUntil(Ref("mixed", RANK), AtLeast(1), Sem.ACQUIRE, Scope.SYS, label="wait_flag"))
'''


def _write(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


@pytest.mark.parametrize("command", ["verify", "review"])
def test_vacuous_poll_is_refused_by_verify_and_review(collsim_cli, tmp_path, command):
    path = _write(tmp_path, "vacuous_poll", VACUOUS_POLL)
    extra = ("--ranks", "2", "--sizes", "1K", "--out", str(tmp_path / "out")) if command == "review" else ()
    code, out, err = collsim_cli(command, str(path), *extra)
    assert code == 2, out + err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("collsim review:")]
    assert len(lines) == 1, err
    assert f"{path}:13:" in lines[0] and "vacuously" in lines[0] and "never" in lines[0], lines[0]
    assert "hold" not in out


def test_poll_on_a_flag_word_only_data_reaches_is_refused(collsim_cli, tmp_path):
    path = _write(tmp_path, "data_only", FLAG_NOBODY_WRITES)
    code, out, err = collsim_cli("verify", str(path))
    assert code == 2, out + err
    assert f"{path}:18:" in err and "flag word(s) of mixed" in err and "no rank writes" in err, err


#: well formed (the polled flag word is written), but no execution ever writes the count it waits for
UNREACHABLE_COUNT = '''
    from collsim.ir import ITER, PEER, PEER_INDEX, NRANKS, RANK, AtLeast, PollUntil, Ref, Scope, Sem, Issuer
    from protocols.barrier import Barrier


    class UnreachableCount(Barrier):
        """Barrier, plus an epilogue wait for an inbox epoch no rank ever stores."""

        name = "unreachable-count"
        algorithms = ("one-shot",)

        def epilogue(self, b, launch):
            super().epilogue(b, launch)
            b.emit(PollUntil(Ref("inbox", RANK, region=(RANK + 1) % NRANKS), AtLeast(ITER + 12345), Sem.ACQUIRE,
                             Scope.SYS, issuer=Issuer.LEADER, label="wait_unreachable"))
'''


def test_a_premise_no_execution_reaches_is_unknown_vacuous_never_holds(tmp_path):
    from collsim.verify import verify

    path = _write(tmp_path, "unreachable_count", UNREACHABLE_COUNT)
    r = verify(str(path), ranks=2, dependencies=False, use_cache=False)
    assert r.properties["hang"].violated and not r.ok
    cex = r.properties["hang"].counterexample
    assert "wait_unreachable" in cex.reason
    others = {p: res for p, res in r.properties.items() if p != "hang"}
    assert others and all(res.vacuous for res in others.values()), {p: res.status for p, res in others.items()}
    assert all(res.reason.startswith("vacuous: no execution in which every thread finishes") for res in others.values())
    assert not any(res.holds for res in r.properties.values())


def test_review_reports_the_vacuous_premise_too(tmp_path):
    from collsim.review import review

    path = _write(tmp_path, "unreachable_count", UNREACHABLE_COUNT)
    rev = review(str(path), against=["barrier"], ranks="2", sizes="1KiB", algorithm="one-shot", verify_ranks=2,
                 compile=False, use_cache=False, out_dir=tmp_path / "rev")
    assert rev.exit_code == 1
    verdicts = [res for v in rev.verifications for res in v.result.properties.values()]
    assert any(res.vacuous for res in verdicts) and not any(res.holds for res in verdicts)


def test_no_holds_without_a_recorded_satisfiable_premise():
    from collsim.verify.verifier import Bound, PropertyResult

    bound = Bound(2, 2, 1, 1, "ptx", (), False)
    with pytest.raises(ValueError, match="premise"):
        PropertyResult("hang", "holds", bound, 0.0)
    ok = PropertyResult("hang", "holds", bound, 0.0, premise="an execution in which every thread finishes")
    assert PropertyResult.from_json(ok.to_json()).premise == ok.premise
    with pytest.raises(ValueError, match="premise"):  # a stored verdict without its premise is refused as well
        PropertyResult.from_json({**ok.to_json(), "premise": None})


@pytest.mark.parametrize("name", ["simple", "ll", "sentinel", "mutant-ll-depth1"])
def test_every_holding_property_records_its_premise(name):
    from collsim.verify import verify

    r = verify(name, ranks=2, use_cache=False)
    results = list(r.properties.values()) + [res for d in r.dependencies for res in d.results.values()]
    held = [res for res in results if res.holds]
    assert held, name
    for res in held:
        assert res.premise and "every thread finishes" in res.premise, (name, res.property)
