"""One configuration model: the same rule gives the same message from Python, the CLI and a scenario file."""
from __future__ import annotations

import pytest

import collsim
from collsim.config import RunConfig, check_channels, check_ranks, check_size
from collsim.errors import InputError, UnsupportedError
from collsim.models import checked_request

GOOD = "topology: hgx-h100\nranks: [2, 4]\nsizes: [8, 64]\nprotocols: [ll]\nalgorithms: [one-shot]\n"

# (simulate() keyword, its value, the scenario text that says the same, the CLI flags, the shared message)
SAME_RULE = [
    ("channels", 0, GOOD + "channels: 0\n", ["--channels", "0"],
     "channels must be at least 1 (or unset, to choose like NCCL), got 0"),
    ("ranks", 0, GOOD.replace("[2, 4]", "[0]"), ["--ranks", "0"], "rank count must be positive, got 0"),
    ("ranks", 16, GOOD.replace("[2, 4]", "[2, 16]"), ["--ranks", "16"],
     "16 ranks requested but topology 'hgx-h100' has 8 GPUs"),
    ("size_bytes", 6, GOOD.replace("[8, 64]", "[8, 6]"), ["--size", "6"],
     "size 6 B is not a whole number of float32 elements (4 B each)"),
    ("size_bytes", "1.5B", GOOD.replace("[8, 64]", "[1.5B]"), ["--size", "1.5B"],
     "size must be a whole number of bytes, got '1.5B' = 1.5 bytes"),
    ("algorithm", "tree", GOOD.replace("[one-shot]", "[tree]"), ["--algorithm", "tree"],
     "unknown algorithm 'tree' (valid: one-shot, two-shot, ring)"),
    ("launch", "lazy", GOOD + "launch: lazy\n", ["--launch", "lazy"], "unknown launch mode 'lazy' (valid: eager, graph, host-loop, events, single-call)"),
    ("dtype", "float128", GOOD + "dtype: float128\n", ["--dtype", "float128"], "unknown dtype 'float128' (valid: int8,"),
    ("op", "xor", GOOD + "op: xor\n", ["--op", "xor"], "unknown reduction op 'xor' (valid: sum,"),
    ("model", "quantum", GOOD + "model: quantum\n", ["--model", "quantum"], "unknown model 'quantum' (valid: "),
]


@pytest.mark.parametrize("keyword, value, scenario, flags, message", SAME_RULE,
                         ids=[f"{c[0]}={c[1]}" for c in SAME_RULE])
def test_one_rule_one_message(keyword, value, scenario, flags, message, write_scenario, collsim_cli, tmp_path,
                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    field = "size" if keyword == "size_bytes" else keyword
    with pytest.raises(InputError) as python:
        collsim.simulate(**{"model": "analytic", keyword: value})
    assert str(python.value).startswith(f"{field}: {message}"), python.value

    code, _, err = collsim_cli("simulate", *flags)
    assert code == 2 and err.startswith(f"collsim: error: --{field}: {message}"), err

    path = write_scenario(scenario)
    code, _, err = collsim_cli("run", path)
    assert code == 2, err
    location, _, text = err.strip().partition(f": {field}")
    assert location.startswith(f"collsim: error: {path}:") and message in text, err


def test_cost_overrides_are_checked_by_the_model_wherever_they_come_from(write_scenario, collsim_cli, tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    message = "a cost parameter cannot be negative, got -1"
    with pytest.raises(InputError, match=message):
        collsim.simulate(model="des", costs={"poll_period_us": -1})
    code, _, err = collsim_cli("explain", "--cost", "poll_period_us=-1")
    assert code == 2 and err.startswith("collsim: error: --cost poll_period_us: " + message), err
    code, _, err = collsim_cli("run", write_scenario(GOOD + "model: des\ncosts: {poll_period_us: -1}\n"))
    assert code == 2 and ": costs.poll_period_us: " + message in err, err


def test_run_config_resolves_and_checks_in_order():
    config = RunConfig(topology="hgx-h100", protocol="ll128", algorithm="ring", ranks=8, size_bytes="1MiB",
                       dtype="float16")
    assert config.topology.num_gpus == 8 and config.protocol.name == "ll128"
    assert (config.size_bytes, config.elem_bytes, config.channels, config.launch) == (1 << 20, 2, None, "graph")
    assert config.unsupported_reason() is None
    # the first field that fails is the one reported (topology before ranks before size)
    with pytest.raises(InputError, match="^topology: unknown topology preset"):
        RunConfig(topology="nope", protocol="ll", algorithm="ring", ranks=99, size_bytes=3)
    with pytest.raises(InputError, match="^ranks: 99 ranks requested"):
        RunConfig(topology="hgx-h100", protocol="ll", algorithm="ring", ranks=99, size_bytes=3)
    with pytest.raises(InputError, match="^size: size 3 B"):
        RunConfig(topology="hgx-h100", protocol="ll", algorithm="ring", ranks=2, size_bytes=3)
    with pytest.raises(Exception):  # frozen: a checked configuration stays checked
        config.ranks = 99  # type: ignore[misc]


def test_checked_request_refuses_what_the_protocol_cannot_run():
    barrier_ring = RunConfig(topology="hgx-h100", protocol="barrier", algorithm="ring", ranks=8, size_bytes=8)
    with pytest.raises(InputError, match="^algorithm: cannot run barrier ring on 8 ranks") as err:
        checked_request(barrier_ring, model="quantum")  # what cannot run is said before the model is looked up
    assert err.value.choices == ["one-shot", "two-shot"]
    ll_ring = RunConfig(topology="hgx-h100", protocol="ll", algorithm="ring", ranks=4, size_bytes="4KiB")
    entry, request = checked_request(ll_ring, model="analytic", costs={"launch_overhead_us": 3.0})
    assert entry.name == "analytic" and request.size_bytes == 4096 and request.costs == {"launch_overhead_us": 3.0}
    assert entry.fn(request).latency_us > 0


@pytest.mark.parametrize("rule, value, message", [
    (check_channels, True, "channels must be a positive whole number or unset, got True"),
    (check_channels, 1.5, "channels must be a positive whole number or unset, got 1.5"),
    (check_ranks, True, "expected a rank count, got True"),
    (check_ranks, "4", "expected a rank count, got '4'"),
    (check_ranks, 2.5, "expected a whole number of ranks, got 2.5"),
])
def test_rules_reject_the_wrong_type(rule, value, message):
    with pytest.raises(InputError) as err:
        rule(value)
    assert err.value.message == message


def test_size_rule_takes_numbers_and_sizes():
    assert check_size(8, "float32") == 8 and check_size("4KiB", "float64") == 4096
    with pytest.raises(InputError, match="^size: expected a size in bytes, got True"):
        check_size(True, "float32")
