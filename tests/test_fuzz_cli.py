"""Random scenario documents and command lines: whatever they hold, collsim exits 0, 1 or 2 and never prints a
traceback.

Hypothesis draws scenario files from the keys a scenario may hold, with values good and bad (sizes past any
GPU's memory, ranks of zero, unknown names, lists of the wrong type, YAML that is not a mapping), and command
lines for the commands that take values directly. Everything runs in-process, on the analytic model, without a
report, so an example costs milliseconds; the default run tries a few dozen, ``make test-slow`` many more.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collsim.cli import main

FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_SIZES = ["8B", "8", "4KiB", "1MiB", "64MiB", "0", "-8", "3", "8XB", "1TiB", "1180591620717411303424", "8B..1KiB x4",
          "1KiB..8B", "2.5", "80GiB", "81GiB", "", "8B..64MiB +8B", "nan"]
_RANKS = [2, 4, 8, 0, -1, 1, 9, 72, 2.5, "2..8", "2..72 x2", "8..2", "x", True, None]
_NAMES = ["ll", "ll128", "simple", "barrier", "sentinel", "ll128-atomic", "lll", "", "one-shot", "ring"]
_ALGORITHMS = ["one-shot", "two-shot", "ring", "tree", "", 3]
_TOPOLOGIES = ["hgx-h100", "dgx-a100", "gb200-nvl72", "pcie-gen4", "hgx-h900", "missing.yaml", ".", "",
               {"gpu": "H100", "topology": ["switch"], "npus": [4], "bandwidth": [400], "latency": [500]},
               {"gpu": "H100", "topology": ["ring"], "npus": [0], "bandwidth": [-1]}, 7, None]

scalars = st.one_of(st.integers(-10, 10**25), st.floats(allow_nan=True), st.text(max_size=12), st.booleans(),
                    st.none())


def _one_or_list(values):
    one = st.sampled_from(values)
    return st.one_of(one, st.lists(one, max_size=3), scalars)


scenario_docs = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["s", "a b", "../x", "x" * 300, ""]), scalars),
        "topology": st.one_of(st.sampled_from(_TOPOLOGIES), scalars),
        "ranks": _one_or_list(_RANKS),
        "sizes": _one_or_list(_SIZES),
        "protocols": _one_or_list(_NAMES),
        "algorithms": _one_or_list(_ALGORITHMS),
        "launch": _one_or_list(["graph", "eager", "lazy"]),
        "channels": st.one_of(st.sampled_from([None, 1, 8, 0, -3, 64, 65, 10000]), scalars),
        "dtype": st.one_of(st.sampled_from(["float32", "float16", "int8", "float128"]), scalars),
        "op": st.one_of(st.sampled_from(["sum", "max", "xor"]), scalars),
        "costs": st.one_of(st.dictionaries(st.sampled_from(["launch_overhead_us", "warp_speed", "base_latency_us"]),
                                           scalars, max_size=2), scalars),
        "output": st.one_of(st.sampled_from(["out", "/proc/x", "taken", "taken/sub", "x" * 300]), scalars),
        "colour": scalars,
    },
)
documents = st.one_of(scenario_docs.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
                      st.text(max_size=60),  # not even YAML, or YAML that is not a mapping
                      st.sampled_from(["", "- 1\n- 2\n", "topology: [hgx-h100\n", "a: 1\na: 2\n"]))


def _invoke(argv, where: str | Path) -> int:
    """``collsim ARGV`` in-process with ``where`` as the working directory; its exit status."""
    cwd = os.getcwd()
    os.chdir(where)
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(cwd)


def _run(argv, capsys) -> tuple[int, str, str]:
    """``collsim ARGV`` in a directory of its own (whatever it writes goes there)."""
    with tempfile.TemporaryDirectory() as d:
        code = _invoke(argv, d)
    out, err = capsys.readouterr()
    return code, out, err


def _check(code: int, out: str, err: str, argv) -> None:
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert "internal error" not in err, (argv, err)
    if code == 2:
        assert err.strip().startswith("collsim: error: ") and len(err.strip().splitlines()) == 1, (argv, err)


def _scenario_example(text: str, capsys) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "taken").write_text("x")
        (root / "s.yaml").write_text(text, encoding="utf-8")
        code = _invoke(["run", root / "s.yaml", "--model", "analytic", "--no-report", "-q", "--executor", "local"],
                       root)
        out, err = capsys.readouterr()
        _check(code, out, err, text)
        if code == 2:  # bad input writes nothing
            assert sorted(p.name for p in root.iterdir()) == ["s.yaml", "taken"], text


_FLAG_VALUES = {
    "--topology": st.sampled_from(["hgx-h100", "dgx1-v100", "pcie-gen5", "nope", ".", "missing.yaml"]),
    "--ranks": st.sampled_from(["2", "8", "0", "-1", "9", "x", "2.5"]),
    "--algorithm": st.sampled_from(_ALGORITHMS[:-1]),
    "--protocol": st.sampled_from(_NAMES),
    "--size": st.sampled_from(_SIZES),
    "--launch": st.sampled_from(["graph", "eager", "lazy"]),
    "--channels": st.sampled_from(["1", "8", "0", "-1", "65", "10000", "x"]),
    "--dtype": st.sampled_from(["float32", "bfloat16", "float128"]),
    "--op": st.sampled_from(["sum", "avg", "xor"]),
}
simulate_argv = st.lists(st.sampled_from(sorted(_FLAG_VALUES)), max_size=5, unique=True).flatmap(
    lambda flags: st.tuples(*[st.tuples(st.just(f), _FLAG_VALUES[f]) for f in flags])).map(
    lambda pairs: ["simulate", "--model", "analytic", *[x for pair in pairs for x in pair]])
other_argv = st.one_of(
    st.tuples(st.just("topology"), st.just("show"), st.sampled_from(["hgx-h100", "nope", ".", "x.yaml"])).map(list),
    st.lists(st.sampled_from(["run", "verify", "emit", "review", "report", "ingest", "--help", "-x", "--all",
                              "--out", "/proc/x", "0", "--lines", "--ranks", "frob"]), min_size=1, max_size=4).filter(
        # a command that would do real work (verify --all, a review) is not this test's business
        lambda a: not ({"verify", "review", "emit", "run"} & set(a)) or any(x.startswith("-") and x not in ("--all",)
                                                                          for x in a)),
)


@FEW
@given(documents)
def test_random_scenario_documents(capsys, text):
    _scenario_example(text, capsys)


@FEW
@given(simulate_argv)
def test_random_simulate_command_lines(capsys, argv):
    _check(*_run(argv, capsys), argv)


@FEW
@given(other_argv)
@example(["review", "run", "--ranks", "run"])  # found: a progress line printed before the one error line
def test_random_command_lines(capsys, argv):
    _check(*_run(argv, capsys), argv)


@pytest.mark.slow
@MANY
@given(documents)
def test_many_random_scenario_documents(capsys, text):
    _scenario_example(text, capsys)


@pytest.mark.slow
@MANY
@given(simulate_argv)
def test_many_random_simulate_command_lines(capsys, argv):
    _check(*_run(argv, capsys), argv)
