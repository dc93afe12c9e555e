"""The problem-size estimate, the warning before a bound that will not finish, and progress of long runs."""
from __future__ import annotations

import collsim.verify.verifier as verifier
from collsim.ir.registry import load_protocol
from collsim.verify.instance import Bounds
from collsim.verify.lower import lower_instance
from collsim.verify.verifier import ProblemSize, estimate, problem_size, verify


def test_problem_size_counts_the_lowered_instance():
    low = lower_instance(load_protocol("ll"), "one-shot", Bounds(ranks=2, iterations=1))
    size = problem_size(low)
    reads = [e for e in low.events if e.is_read]
    assert size.events == len(low.events) and size.reads == len(reads)
    assert size.rf_choices == sum(1 + len(low.writes_at(e.loc)) for e in reads)  # the initial value and each write
    assert size.unknowns == size.rf_choices + size.co_pairs
    assert str(size).startswith(f"{size.events} events, about {size.unknowns} unknowns")


def test_the_estimate_grows_with_the_bound_and_is_what_verify_solves():
    small, large = estimate("barrier", ranks=3, iterations=2), estimate("barrier", ranks=8, iterations=3)
    assert isinstance(small, ProblemSize) and large.events > 9 * small.events and large.unknowns > small.unknowns
    narrow = estimate("barrier", ranks=3, iterations=2, threads=1, lines=1)  # the data path's default is 2 x 2
    assert narrow.events < small.events
    seen: list[str] = []
    verify("ll", ranks=2, iterations=1, use_cache=False, progress=seen.append)
    assert seen[0] == f"ll (one-shot) at 2x1: {estimate('ll', ranks=2, iterations=1)}"
    assert any("solving" in line for line in seen[1:]) and any("re-checking without" in line for line in seen)


def test_a_bound_that_will_not_finish_is_warned_about_before_solving(collsim_cli, monkeypatch):
    monkeypatch.setattr(verifier, "SLOW_UNKNOWNS", 10)
    monkeypatch.setattr(verifier, "LONG_UNKNOWNS", 10)
    code, out, err = collsim_cli("verify", "ll", "--ranks", "2", "--iterations", "1", "--no-cache")
    assert code == 0
    lines = err.splitlines()
    assert lines[0].startswith("collsim: warning: ") and "unknowns" in lines[0] and "minutes" in lines[0]
    # off a terminal, a long run's progress is one line per step on stderr
    assert lines[1] == f"collsim: ll (one-shot) at 2x1: {estimate('ll', ranks=2, iterations=1)}"
    assert any(line.startswith("collsim: ") and "solving" in line for line in lines[2:])


def test_the_default_bound_and_small_bounds_say_nothing(collsim_cli):
    assert collsim_cli("verify", "ll", "--no-cache")[2] == ""
    assert collsim_cli("verify", "ll", "--ranks", "2", "--iterations", "1", "--no-cache")[2] == ""


def test_counted_increments_predict_the_hard_counter_queries(collsim_cli, monkeypatch):
    # one multicast barrier per launch: each rank's copy gets every rank's increment of every launch, and each
    # rank polls its copy once per launch: 4 x 3 polls, each over 4 x 3 increments
    assert estimate("nvls", ranks=4, iterations=3).counted == 144
    assert estimate("nvls", ranks=2, iterations=3).counted == 36
    assert estimate("ll", ranks=4, iterations=3).counted == 0  # flags, not counters
    assert "counted increments" in str(estimate("nvls", ranks=2, iterations=1))
    assert "counted" not in str(estimate("ll", ranks=2, iterations=1))
    monkeypatch.setattr(verifier, "SLOW_COUNTED", 3)
    code, out, err = collsim_cli("verify", "nvls", "--ranks", "2", "--iterations", "1", "--no-cache")
    assert code == 0
    first = err.splitlines()[0]
    assert first.startswith("collsim: warning: ") and "counters" in first and "increments" in first
