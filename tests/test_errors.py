"""The error hierarchy: bad input exits 2, a limitation of collsim exits 1, each as one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from collsim.emit.layouts import EmitError
from collsim.errors import CollsimError, InputError, ProtocolDefinitionError, UnsupportedError, VerificationRefused

REPO = Path(__file__).resolve().parents[1]


def test_a_limitation_is_not_an_input_error():
    assert not issubclass(UnsupportedError, InputError)
    assert issubclass(EmitError, UnsupportedError) and not issubclass(EmitError, InputError)
    assert issubclass(ProtocolDefinitionError, InputError)
    assert InputError.exit_code == 2 and ProtocolDefinitionError.exit_code == 2
    assert UnsupportedError.exit_code == EmitError.exit_code == VerificationRefused.exit_code == 1
    assert all(issubclass(cls, CollsimError) for cls in (InputError, UnsupportedError, VerificationRefused))


def test_every_error_names_where_and_the_choices():
    err = UnsupportedError("no formula for algorithm 'tree'", field="algorithm", choices=["ring"])
    assert str(err) == "algorithm: no formula for algorithm 'tree' (valid: ring)"
    assert err.message == "no formula for algorithm 'tree'" and err.choices == ["ring"]
    assert str(CollsimError("plain")) == "plain"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_emitter_limitation_exits_1(collsim_cli, tmp_path):
    source = (REPO / "examples" / "protocols" / "simple_ra.py").read_text(encoding="utf-8")
    path = tmp_path / "acquire_store.py"
    path.write_text(source.replace('"post_sem": Sem.RELEASE', '"post_sem": Sem.ACQUIRE')
                    .replace('name = "simple-ra"', 'name = "acquire-store"'), encoding="utf-8")
    code, _, err = collsim_cli("emit", path, "--unverified", "-o", tmp_path / "out")
    assert code == 1
    assert "a store cannot have acquire semantics" in _one_line(err)


@pytest.mark.parametrize("argv, needle", [
    (["emit", "ll", "--arch", "sm_70"], "--arch: unknown architecture 'sm_70' (valid: sm_80, sm_90, sm_100)"),
    (["emit", "atomic-counter", "--arch", "sm_80"], "needs sm_90 or newer (vector red/atom) (valid: sm_90, sm_100)"),
    (["emit", "atomic-counter", "-a", "ring"], "--algorithm: protocol 'atomic-counter' has no ring program (valid: one-shot)"),
])
def test_emit_requests_that_cannot_be_met_are_bad_input(argv, needle, collsim_cli, tmp_path):
    code, _, err = collsim_cli(*argv, "--unverified", "-o", tmp_path / "out")
    assert code == 2
    assert needle in _one_line(err)
    assert not (tmp_path / "out").exists()


def test_verify_pair_without_a_program_is_bad_input(collsim_cli):
    code, _, err = collsim_cli("verify", "barrier", "-a", "ring", "--no-cache")
    assert code == 2
    assert "--algorithm: protocol 'barrier' has no ring program (valid: one-shot, two-shot)" in _one_line(err)


def test_litmus_feature_the_model_lacks_exits_1(collsim_cli, tmp_path):
    test = {"name": "surface", "init": {"x": 0}, "placement": [{"thread": "P0", "cta": 0, "gpu": 0}],
            "threads": [[{"op": "ld", "loc": "s", "reg": "r0"}]],
            "condition": {"quantifier": "exists", "expr": "P0:r0 == 0"}, "expected": "allowed",
            "aliases": [{"name": "s", "proxy": "surface", "of": "x"}]}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(test) + "\n", encoding="utf-8")
    code, out, err = collsim_cli("litmus", path)
    assert code == 1  # reported for that test (the file's other tests would still run), not an error
    assert err == ""
    assert "- surface (line 1): unsupported: " in out and "surface-proxy alias" in out
