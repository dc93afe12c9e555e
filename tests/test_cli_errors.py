"""Every kind of bad input is one line naming file, line and field; exit 2; nothing written."""
from __future__ import annotations

import subprocess
import sys

import pytest

GOOD = """\
topology: hgx-h100
ranks: [2, 4]
sizes: 8B..1KiB
protocols: [ll, simple]
algorithms: [one-shot, ring]
"""

# (id, scenario text, line, field, text the message must contain)
CASES = [
    ("malformed-yaml", "topology: hgx-h100\nranks: [2, 4\nsizes: 8B\n", 3, None, "malformed YAML"),
    ("unknown-key", GOOD + "colour: red\n", 6, "colour", "unknown key 'colour' (valid: name,"),
    ("unknown-preset", GOOD.replace("hgx-h100", "hgx-h900"), 1, "topology", "hgx-h100"),
    ("unknown-protocol", GOOD.replace("[ll, simple]", "[ll, lll]"), 4, "protocols[1]", "unknown protocol 'lll' (valid: atomic-counter, barrier"),
    ("protocol-file", GOOD.replace("[ll, simple]", "[ll, mine.py]"), 4, "protocols[1]",
     "'mine.py' is a protocol file: a scenario sweeps shipped protocols; simulate a file with "
     "`collsim simulate -p mine.py` and compare it with the shipped ones with `collsim review mine.py`"),
    ("unknown-algorithm", GOOD.replace("[one-shot, ring]", "[one-shot, tree]"), 5, "algorithms[1]", "(valid: one-shot, two-shot, ring)"),
    ("too-many-ranks", GOOD.replace("[2, 4]", "[2, 16]"), 2, "ranks[1]", "16 ranks requested but topology 'hgx-h100' has 8 GPUs"),
    ("too-many-ranks-range", GOOD.replace("[2, 4]", "2..9"), 2, "ranks", "9 ranks"),
    ("zero-size", GOOD.replace("8B..1KiB", "[8, 0]"), 3, "sizes[1]", "positive"),
    ("negative-size", GOOD.replace("8B..1KiB", "[-8]"), 3, "sizes[0]", "positive"),
    ("fractional-size", GOOD.replace("8B..1KiB", "[8, 1.5B]"), 3, "sizes[1]", "whole number of bytes"),
    ("float-size", GOOD.replace("8B..1KiB", "[8, 2.5]"), 3, "sizes[1]", "whole number of bytes"),
    ("float-ranks", GOOD.replace("[2, 4]", "[2, 2.5]"), 2, "ranks[1]", "whole number"),
    ("bool-size", GOOD.replace("8B..1KiB", "[true]"), 3, "sizes", "expected a size"),
    ("bad-range", GOOD.replace("8B..1KiB", "1KiB..8B"), 3, "sizes", "ends before it starts"),
    ("size-not-elements", GOOD.replace("8B..1KiB", "[8, 6]"), 3, "sizes[1]", "float32 elements"),
    ("zero-ranks", GOOD.replace("[2, 4]", "[0]"), 2, "ranks[0]", "positive"),
    ("unknown-dtype", GOOD + "dtype: float128\n", 6, "dtype", "valid: int8"),
    ("unknown-op", GOOD + "op: xor\n", 6, "op", "valid: sum"),
    ("unknown-launch", GOOD + "launch: [graph, lazy]\n", 6, "launch[1]", "valid: eager, graph"),
    ("unknown-model", GOOD + "model: quantum\n", 6, "model", "valid: "),
    ("unknown-cost", GOOD + "costs:\n  launch_overhead_us: 3\n  warp_speed: 9\n", 8, "costs.warp_speed", "valid: "),
    ("bad-cost-value", GOOD + "model: analytic\ncosts:\n  base_latency_us: {ll: fast}\n", 8, "costs.base_latency_us.ll", "expected a number"),
    ("bad-sweep", GOOD + "sweep:\n  launch_overhead_us: [1, -2]\n", 7, "sweep.launch_overhead_us[1]", "negative"),
    ("bad-channels", GOOD + "channels: 0\n", 6, "channels", "at least 1"),
    ("wrong-type", GOOD.replace("[2, 4]", "{a: 1}"), 2, "ranks", "expected a rank count"),
    ("missing-topology", GOOD.replace("topology: hgx-h100\n", ""), 1, None, "missing required key 'topology'"),
    (
        "unreachable-gpu",
        """\
topology:
  name: broken
  gpu: H100
  nodes:
    - {id: gpu0, kind: gpu}
    - {id: gpu1, kind: gpu}
    - {id: gpu2, kind: gpu}
    - {id: sw, kind: nvswitch}
  edges:
    - {between: [gpu0, sw], link_type: nvlink4, count: 18}
    - {between: [gpu1, sw], link_type: nvlink4, count: 18}
ranks: [2]
sizes: [8]
""",
        7,
        "topology.nodes[2]",
        "unreachable",
    ),
]


@pytest.mark.parametrize("case_id, text, line, field, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_scenario_is_one_line(case_id, text, line, field, needle, write_scenario, collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_scenario(text)
    code, out, err = collsim_cli("run", path)
    assert code == 2, err
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    message = lines[0]
    assert message.startswith(f"collsim: error: {path}:"), message
    if line is not None:
        assert message.startswith(f"collsim: error: {path}:{line}: "), message
    else:
        assert f"{path}:" in message
    if field is not None:
        assert f": {field}" in message, message
    assert needle in message, message
    assert not (tmp_path / "reports").exists()


def test_missing_file(collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = collsim_cli("run", tmp_path / "nope.yaml")
    assert code == 2
    assert "nope.yaml" in err and "not found" in err
    assert len(err.strip().splitlines()) == 1


def test_empty_file(write_scenario, collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = collsim_cli("run", write_scenario("# nothing\n"))
    assert code == 2 and "empty" in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run"], "Missing argument"),
        (["simulate", "--bogus"], "No such option: --bogus"),
        (["simulate", "--ranks", "x"], "--ranks"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_are_one_line(argv, needle, collsim_cli):
    code, out, err = collsim_cli(*argv)
    assert code == 2
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("collsim: error: ") and needle in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--protocol", "barrier", "--algorithm", "ring"], "(valid: one-shot, two-shot)"),
        (["--protocol", "ll", "--ranks", "1"], "at least 2 ranks"),
        (["--protocol", "lll"], "unknown protocol"),
        (["--algorithm", "tree"], "(valid: one-shot, two-shot, ring)"),
        (["--ranks", "9"], "has 8 GPUs"),
        (["--size", "0"], "--size"),
        (["--size", "3"], "float32 elements"),
        (["--topology", "nope"], "hgx-h100"),
        (["--launch", "lazy"], "valid: eager, graph"),
        (["--model", "quantum"], "valid: "),
    ],
)
def test_simulate_errors(argv, needle, collsim_cli):
    code, out, err = collsim_cli("simulate", *argv)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err
    assert "Traceback" not in err


def test_end_to_end_subprocess(write_scenario, tmp_path):
    """The installed entry point: a bad scenario exits 2 with one line, no traceback."""
    path = write_scenario(GOOD.replace("[ll, simple]", "[ll, lll]"))
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from collsim.cli import console; sys.exit(console())", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"collsim: error: {path}:4: protocols[1]: unknown protocol 'lll' "
        "(valid: atomic-counter, barrier, ll, ll128, ll128-atomic, ll128-atomic-nvls, nvls, nvls-poison, sentinel, "
        "signal-pad, simple)"
    ]
    assert proc.stdout == ""
    assert not (tmp_path / "reports").exists()


def test_entry_point_succeeds_with_status_0(tmp_path):
    """The installed entry point (collsim.cli:console) on a good command: its output and status 0."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from collsim.cli import console; sys.exit(console())", "topologies"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "hgx-h100" in proc.stdout and "gb200-nvl72" in proc.stdout
