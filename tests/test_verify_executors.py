"""``verify_all`` on executors: the same verdicts in the same order serially and on a process pool.

A small, fast subset of protocols and mutants (``only=``) keeps the module
to a few seconds; one 2-process pool is started per ``verify_all`` call.
"""
from __future__ import annotations

import json

import pytest

from collsim.errors import InputError
from collsim.verify.verifier import verify_all

#: Fast runs (well under a second each): two shipped protocols, three mutants.
SUBSET = ["simple", "ll128", "mutant-ll-split-flag", "mutant-ll-flag-bits1", "mutant-ll128-unordered"]

BROKEN = '''\
from protocols.simple import Simple


class Broken(Simple):
    """Simple whose program cannot be built: every run of it raises."""

    name = "broken"

    def exchange(self, b, ex):
        raise RuntimeError("no program here")
'''


@pytest.fixture(autouse=True)
def _private_cwd(tmp_path, monkeypatch):
    """Run in a scratch directory, with the verdict cache where the workers (same cwd) look for it."""
    monkeypatch.delenv("COLLSIM_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


def _verdicts(result) -> str:
    """A summary or one result as JSON without timings: what must not depend on the executor."""

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "seconds"}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return json.dumps(strip(result.to_json()), sort_keys=True)


@pytest.fixture(scope="module")
def serial():
    return verify_all(only=SUBSET, use_cache=False)


def test_processes_give_the_serial_verdicts_in_order(serial, tmp_path):
    assert serial.ok and not serial.failed
    assert [r.protocol for r in serial.protocols] == ["simple", "ll128"]
    assert [r.protocol for r in serial.mutants] == SUBSET[2:]
    pooled = verify_all(only=SUBSET, use_cache=True, executor="processes", workers=2)
    assert _verdicts(pooled) == _verdicts(serial)  # counterexamples included
    # The workers filled this directory's cache (atomically); a serial run answers from it.
    assert len(list((tmp_path / ".collsim-cache" / "verify").glob("*.json"))) == len(SUBSET)
    assert not list((tmp_path / ".collsim-cache" / "verify").glob(".*"))  # no temporary files left
    cached = verify_all(only=SUBSET)
    assert all(r.cached for r in cached.protocols + cached.mutants)
    assert _verdicts(cached) == _verdicts(serial)


def test_a_failing_run_is_reported_and_the_others_kept(serial, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    only = ["simple", str(broken), *SUBSET[2:4]]
    summary = verify_all(only=only, use_cache=False, executor="processes", workers=2)
    assert not summary.ok
    assert [r.protocol for r in summary.protocols] == ["simple"]
    assert [r.protocol for r in summary.mutants] == SUBSET[2:4]
    [failed] = summary.failed
    assert (failed.protocol, failed.algorithm, failed.kind, failed.status, failed.attempts) == (
        str(broken), "one-shot", "protocol", "error", 2)
    # the protocol's own error, named with its file and line as every command names it
    assert failed.error.endswith("broken.py:10: one-shot: RuntimeError: no program here"), failed.error
    assert summary.to_json()["failed"][0]["status"] == "error" and summary.to_json()["ok"] is False
    kept = {r.protocol: r for r in serial.protocols + serial.mutants}
    for r in summary.protocols + summary.mutants:
        assert _verdicts(r) == _verdicts(kept[r.protocol])


def test_verify_all_refuses_bad_options():
    with pytest.raises(InputError, match="unknown protocol 'nope'.*valid: atomic-counter, barrier"):
        verify_all(only=["nope"])
    with pytest.raises(InputError) as err:
        verify_all(only=SUBSET, executor="threads")
    assert err.value.field == "--executor" and "valid: auto, local, processes, dask" in str(err.value)


@pytest.mark.parametrize("argv, field, needle", [
    (["--all", "--executor", "threads"], "--executor", "(valid: auto, local, processes, dask)"),
    (["--all", "-x", "processes", "--workers", "0"], "--workers", "positive whole number"),
    (["--all", "--scheduler", "tcp://127.0.0.1:8786"], "--scheduler", "needs --executor dask"),
    (["ll", "--executor", "processes"], "--executor", "only applies with --all"),
])
def test_cli_bad_executor_options_are_one_line(collsim_cli, argv, field, needle):
    code, out, err = collsim_cli("verify", *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"collsim: error: {field}: ") and needle in lines[0], err


def test_cli_prints_failed_runs(capsys):
    from collsim.cli.verify_cmd import _print_summary
    from collsim.verify.verifier import FailedRun, Summary

    _print_summary(Summary([], [], 1.0, [FailedRun("x.py", "ring", "protocol", "RuntimeError: boom", 2),
                                         FailedRun("m.py", "one-shot", "mutant", "ValueError: bad", 2)]))
    out = capsys.readouterr().out
    assert "x.py/ring: ERROR after 2 attempts: RuntimeError: boom" in out
    assert "m.py/one-shot: ERROR after 2 attempts: ValueError: bad" in out
    assert out.count("ERROR") >= 4  # in both tables and in the lines below them
    assert "2 run(s) failed with an error" in out
