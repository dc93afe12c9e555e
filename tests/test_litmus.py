"""The litmus reader, runner and CLI; the training suite under the PTX model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import collsim.cli.litmus_cmd  # noqa: F401  (registers `collsim litmus` until cli/__init__ imports it)
from collsim.errors import InputError, UnsupportedError
from collsim.verify.litmus import evaluate, load_jsonl, parse_test, run_file, summary

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO.parent / "shared" / "data" / "litmus" / "ptx_generic_train.jsonl"


def train_file() -> Path:
    if not TRAIN.exists():
        pytest.skip(f"training litmus suite not found at ../shared/data/litmus/{TRAIN.name} "
                    "(relative to the repository root)")
    return TRAIN


def row(threads, condition, *, expected="allowed", init=None, placement=None, name="t", **extra):
    placement = placement or [{"thread": f"P{i}", "cta": i, "gpu": 0} for i in range(len(threads))]
    return {"name": name, "init": init or {}, "placement": placement, "threads": threads,
            "condition": condition, "expected": expected, **extra}


def write_rows(tmp_path: Path, rows, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


LD = lambda loc, reg, sem="weak", scope=None: {"op": "ld", "loc": loc, "reg": reg, "sem": sem, "scope": scope}  # noqa: E731
ST = lambda loc, val, sem="weak", scope=None: {"op": "st", "loc": loc, "val": val, "sem": sem, "scope": scope}  # noqa: E731


# -------------------------------------------------------------------- training suite
def test_training_suite_agrees_under_ptx():
    results = run_file(train_file(), model="ptx", timeout_s=30)
    rows = [json.loads(line) for line in train_file().read_text().splitlines() if line.strip()]
    assert len(results) == len(rows)
    bad = [(r.name, r.expected, r.observed, r.reason) for r in results if not r.agrees]
    assert not bad
    s = summary(results)
    assert s["allowed"] == sum(1 for r in rows if r["expected"] == "allowed")
    assert s["forbidden"] == sum(1 for r in rows if r["expected"] == "forbidden")


def test_training_suite_is_not_sequentially_consistent():
    # sanity of the runner: SC forbids every weak behaviour the suite allows
    results = run_file(train_file(), model="sc", timeout_s=30)
    assert any(r.agrees is False and r.expected == "allowed" for r in results)
    assert all(r.observed != "allowed" or r.expected == "allowed" for r in results)


def test_cli_litmus_table_and_exit_codes(collsim_cli, tmp_path):
    code, out, err = collsim_cli("litmus", str(train_file()))
    assert code == 0, err
    assert "61 tests: 61 agree" in out and "allowed" in out
    code, out, _ = collsim_cli("litmus", str(train_file()), "--model", "sc", "--no-witness")
    assert code == 1 and "do not agree" in out and "SB-weak" in out


def test_cli_litmus_json(collsim_cli, tmp_path):
    path = write_rows(tmp_path, [
        row([[ST("x", 1), ST("y", 1)], [LD("y", "r0"), LD("x", "r1")]],
            {"quantifier": "exists", "expr": "P1:r0 == 1 /\\ P1:r1 == 0"}, name="mp-weak"),
        row([[ST("x", 1), ST("y", 1)], [LD("y", "r0"), LD("x", "r1")]],
            {"quantifier": "exists", "expr": "P1:r0 == 1 /\\ P1:r1 == 0"}, name="mp-weak-wrong",
            expected="forbidden"),
    ])
    code, out, _ = collsim_cli("litmus", str(path), "--json")
    data = json.loads(out)
    assert code == 1
    assert data["summary"]["tests"] == 2 and data["summary"]["disagree"] == 1
    wrong = next(r for r in data["results"] if r["name"] == "mp-weak-wrong")
    assert wrong["observed"] == "allowed" and "reads 0 from init:x" in wrong["witness"]


def test_cli_litmus_reports_a_test_without_an_expectation_and_does_not_fail_on_it(collsim_cli, tmp_path):
    # herd files often state a condition and no expected outcome: its outcome is the answer, not a disagreement
    path = write_rows(tmp_path, [
        row([[ST("x", 1), ST("y", 1)], [LD("y", "r0"), LD("x", "r1")]],
            {"quantifier": "exists", "expr": "P1:r0 == 1 /\\ P1:r1 == 0"}, name="mp-asked", expected=None),
        row([[ST("x", 1), ST("y", 1)], [LD("y", "r0"), LD("x", "r1")]],
            {"quantifier": "exists", "expr": "P1:r0 == 1 /\\ P1:r1 == 0"}, name="mp-weak"),
    ])
    code, out, err = collsim_cli("litmus", str(path))
    assert code == 0, out + err
    assert "do not agree" not in out
    assert "2 tests: 1 agree, 0 disagree, 0 unknown, 0 unsupported, 1 without an expectation" in out
    asked = next(line for line in out.splitlines() if line.strip().startswith("mp-asked"))
    assert asked.split()[2:5] == ["-", "allowed", "-"]
    code, out, _ = collsim_cli("litmus", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and data["summary"]["no_expectation"] == 1
    assert next(r for r in data["results"] if r["name"] == "mp-asked")["agrees"] is None


def test_cli_bad_input_is_one_line_exit_2(collsim_cli, tmp_path):
    path = write_rows(tmp_path, [row([[{"op": "ldd", "loc": "x"}]], {"quantifier": "exists", "expr": "x == 0"})])
    code, out, err = collsim_cli("litmus", str(path))
    assert code == 2
    assert f"{path}:1: threads[0][0].op: test 't': unknown op kind 'ldd'" in err
    assert "(valid: bar, branch, cp.async.bulk, fence" in err


# ------------------------------------------------------------------- input errors
@pytest.mark.parametrize("text, field, message", [
    ("{not json", None, "not valid JSON"),
    (json.dumps({"name": "a"}), "placement", "missing field 'placement'"),
    (json.dumps(row([[LD("x", "r0")]], {"quantifier": "sometimes", "expr": "x == 0"})),
     "condition.quantifier", "unknown quantifier 'sometimes'"),
    (json.dumps(row([[LD("x", "r0", sem="strongest")]], {"quantifier": "exists", "expr": "x == 0"})),
     "threads[0][0].sem", "unknown sem 'strongest'"),
    (json.dumps(row([[{"op": "st", "loc": "x"}]], {"quantifier": "exists", "expr": "x == 0"})),
     "threads[0][0].val", "'st' needs field 'val'"),
    (json.dumps(row([[LD("x", "r0")]], {"quantifier": "exists", "expr": "P0:r0 === 1"})),
     "condition.expr", "condition"),
    (json.dumps(row([[LD("x", "r0")]], {"quantifier": "exists", "expr": "z == 1"})),
     "condition.expr", "unknown location 'z'"),
    (json.dumps(row([[LD("x", "r0")]], {"quantifier": "exists", "expr": "P5:r0 == 1"})),
     "condition.expr", "unknown thread 'P5'"),
    (json.dumps(row([[{"op": "goto", "target": "L9"}]], {"quantifier": "exists", "expr": "true"})),
     "threads[0][0].target", "undefined label 'L9'"),
    (json.dumps(row([[LD("x", "r0")]], {"quantifier": "exists", "expr": "x == 0"}, expected="maybe")),
     "expected", "unknown expectation 'maybe'"),
])
def test_malformed_rows_name_file_line_and_field(tmp_path, text, field, message):
    path = write_rows(tmp_path, ["", text])
    with pytest.raises(InputError) as info:
        load_jsonl(path)
    err = info.value
    assert err.file == str(path) and err.line == 2
    assert err.field == field
    assert message in str(err)


def test_unknown_op_lists_valid_choices():
    with pytest.raises(InputError) as info:
        parse_test(row([[{"op": "prefetch", "loc": "x"}]], {"quantifier": "exists", "expr": "true"}))
    assert info.value.choices == ["bar", "branch", "cp.async.bulk", "fence", "goto", "label", "ld", "local", "mov",
                                  "red", "rmw", "st"]


def test_non_generic_alias_access_is_unsupported():
    r = row([[LD("s", "r0")]], {"quantifier": "exists", "expr": "P0:r0 == 0"}, init={"x": 0},
            aliases=[{"name": "s", "proxy": "surface", "of": "x"}])
    with pytest.raises(UnsupportedError, match="surface-proxy alias"):
        parse_test(r)


# ----------------------------------------------------------- control flow, loops
def test_spin_loop_is_wait_until_and_forward_branches_guard_events():
    flag_wait = [{"op": "label", "name": "L"}, LD("f", "r0", "acquire", "gpu"),
                 {"op": "branch", "cond": "ne", "a": "r0", "b": 1, "target": "L"}, LD("d", "r1")]
    producer = [ST("d", 7), ST("f", 1, "release", "gpu")]
    t = parse_test(row([producer, flag_wait], {"quantifier": "exists", "expr": "P1:r1 != 7"},
                       expected="forbidden"))
    assert evaluate(t).observed == "forbidden"
    t = parse_test(row([producer, flag_wait], {"quantifier": "exists", "expr": "P1:r0 == 1"}))
    assert evaluate(t).observed == "allowed"
    # the consumer cannot finish unless it reads the flag: no execution has r0 == 0
    t = parse_test(row([producer, flag_wait], {"quantifier": "exists", "expr": "P1:r0 == 0"},
                       expected="forbidden"))
    assert evaluate(t).observed == "forbidden"
    # a forward branch: the load runs only when r0 == 1
    skip = [LD("f", "r0"), {"op": "branch", "cond": "ne", "a": "r0", "b": 1, "target": "E"},
            {"op": "mov", "reg": "r1", "val": 5}, {"op": "label", "name": "E"}]
    t = parse_test(row([producer, skip], {"quantifier": "exists", "expr": "P1:r0 == 0 /\\ P1:r1 == 5"},
                       expected="forbidden"))
    assert evaluate(t).observed == "forbidden"
    t = parse_test(row([producer, skip], {"quantifier": "exists", "expr": "P1:r0 == 1 /\\ P1:r1 == 5"}))
    assert evaluate(t).observed == "allowed"


def test_loop_bound_two_sees_a_second_iteration():
    # increment until the counter reads 1: needs two iterations when the first reads 0
    loop = [{"op": "label", "name": "L"},
            {"op": "rmw", "kind": "add", "reg": "r0", "loc": "c", "val": 1, "sem": "relaxed", "scope": "gpu"},
            {"op": "branch", "cond": "ne", "a": "r0", "b": 1, "target": "L"}]
    cond = {"quantifier": "exists", "expr": "c == 2"}
    t = parse_test(row([loop], cond), bound=1)
    assert evaluate(t).observed == "forbidden" and "side effects" in t.notes[0]
    assert evaluate(parse_test(row([loop], cond), bound=2)).observed == "allowed"


def test_condition_syntax():
    threads = [[{"op": "mov", "reg": "r0", "val": 3}, ST("x", "r0")]]
    for expr, observed in [("P0:r0 == 3 /\\ x == 3", "allowed"), ("~(x == 3)", "forbidden"),
                           ("x != 3 \\/ 0:r0 >= 3", "allowed"), ("(x < 3) /\\ true", "forbidden"),
                           ("P0: r0 == x", "allowed")]:
        t = parse_test(row(threads, {"quantifier": "exists", "expr": expr}))
        assert evaluate(t).observed == observed, expr
    t = parse_test(row(threads, {"quantifier": "forall", "expr": "x == 3"}, expected="forbidden"))
    assert evaluate(t).agrees is True


def test_generic_alias_needs_an_alias_proxy_fence():
    aliases = [{"name": "y", "proxy": "generic", "of": "x"}]
    plain = [ST("x", 1), LD("y", "r0")]
    fenced = [ST("x", 1), {"op": "fence", "sem": "proxy.alias"}, LD("y", "r0")]
    stale = {"quantifier": "exists", "expr": "P0:r0 == 0"}
    t = parse_test(row([plain], stale, init={"x": 0}, aliases=aliases))
    assert evaluate(t).observed == "allowed"
    t = parse_test(row([fenced], stale, init={"x": 0}, aliases=aliases, expected="forbidden"))
    assert evaluate(t).observed == "forbidden"
    # the same location through the same address needs no fence
    t = parse_test(row([[ST("x", 1), LD("x", "r0")]], stale, init={"x": 0}))
    assert evaluate(t).observed == "forbidden"
