"""The litmus condition language (herd's and Dat3M's), tests the model does not cover, and two corners of the
PTX model re-derived from the PTX ISA (RMWs in load-buffering shapes; named barriers in different orders)."""
from __future__ import annotations

import json

import pytest

import collsim.cli.litmus_cmd  # noqa: F401  (registers `collsim litmus`)
from collsim.errors import InputError, UnsupportedError
from collsim.verify.litmus import evaluate, load_jsonl, parse_test, summary

LD = lambda loc, reg, sem="weak", scope=None: {"op": "ld", "loc": loc, "reg": reg, "sem": sem, "scope": scope}  # noqa: E731
ST = lambda loc, val, sem="weak", scope=None: {"op": "st", "loc": loc, "val": val, "sem": sem, "scope": scope}  # noqa: E731


def RMW(kind, loc, reg, val, sem="relaxed", scope="gpu"):
    return {"op": "rmw", "kind": kind, "loc": loc, "reg": reg, "val": val, "sem": sem, "scope": scope}


def BAR(bar_id, quorum=None, mode="sync"):
    return {"op": "bar", "instance": 1, "id": bar_id, "quorum": quorum, "mode": mode, "scope": "cta"}


def row(threads, condition, *, expected=None, same_cta=False, name="t", **extra):
    placement = [{"thread": f"P{i}", "cta": 0 if same_cta else i, "gpu": 0} for i in range(len(threads))]
    out = {"name": name, "init": {}, "placement": placement, "threads": threads, "condition": condition, **extra}
    if expected:
        out["expected"] = expected
    return out


def observed(threads, expr, quantifier="exists", **kw):
    return evaluate(parse_test(row(threads, {"quantifier": quantifier, "expr": expr}, **kw))).observed


# message passing with a relaxed flag: r0 == 1 /\ r1 == 0 is allowed, with release/acquire forbidden
MP = [[ST("x", 1), ST("f", 1, "relaxed", "gpu")], [LD("f", "r0", "relaxed", "gpu"), LD("x", "r1")]]
MP_RA = [[ST("x", 1), ST("f", 1, "release", "gpu")], [LD("f", "r0", "acquire", "gpu"), LD("x", "r1")]]


# ---------------------------------------------------------------------------------------- condition language
@pytest.mark.parametrize("expr", ["1:r0 = 1 /\\ 1:r1 = 0", "P1:r0 == 1 && P1:r1 == 0", "P1:%r0 = 1 /\\ P1:%r1 <> 1",
                                  "~(P1:r0 = 0 \\/ P1:r1 != 0)", "not (P1:r0 != 1) /\\ ([x] = 1 /\\ P1:r1 < 1)",
                                  "(P1:r0 = 1) /\\ (P1:r1 = 1 => false)", "*x = 1 /\\ P1:r0 >= 1 /\\ P1:r1 <= 0"])
def test_herd_and_dat3m_spellings_of_one_outcome(expr):
    assert observed(MP, expr) == "allowed"
    assert observed(MP_RA, expr) == "forbidden"


def test_implication_is_right_associative_and_binds_loosest():
    # false => (false => false) is true; (false => false) => false would be false
    assert observed(MP, "false => false => false", "forall") == "forbidden"  # holds in every execution
    assert observed(MP, "P1:r0 = 1 \\/ P1:r0 = 0 => P1:r0 = 1", "forall") == "allowed"  # r0 = 0 refutes it


@pytest.mark.parametrize("condition", [
    "exists (1:r0 = 1 /\\ 1:r1 = 0)",
    "  exists(1:r0=1 /\\ 1:r1=0)",
    "~exists (1:r0 = 1 /\\ 1:r1 = 0)",
    "~ exists (1:r0 = 1 /\\ 1:r1 = 0)",
    "forall (1:r0 = 0 \\/ 1:r1 = 1)",
    "locations [x; 1:r0;] exists (1:r0 = 1 /\\ 1:r1 = 0)",
    "filter (1:r0 = 1) exists (1:r1 = 0)",
    "locations [f;] filter (1:r0 = 1 /\\ ~(1:r1 = 1)) forall (x = 0)",
])
def test_herd_final_section_as_one_string(condition):
    """The outcome is the same in each spelling: reachable without synchronisation, not with it."""
    for threads, outcome in ((MP, "allowed"), (MP_RA, "forbidden")):
        test = parse_test(row(threads, condition))
        assert evaluate(test).observed == outcome, condition
    assert parse_test(row(MP, condition)).quantifier in ("exists", "~exists", "forall")


def test_filter_discards_executions_before_the_quantifier():
    # every execution with r0 = 1 sees x = 1 under release/acquire: forall holds only under the filter
    assert observed(MP_RA, "P1:r1 = 1", "forall") == "allowed"  # r0 = 0, r1 = 0 refutes it unfiltered
    t = parse_test(row(MP_RA, {"quantifier": "forall", "expr": "P1:r1 = 1", "filter": "P1:r0 = 1"}))
    assert t.filter == "P1:r0 = 1" and evaluate(t).observed == "forbidden"
    # a filter no execution passes leaves nothing to exist
    t = parse_test(row(MP_RA, {"quantifier": "exists", "expr": "true"}, filter="P1:r0 = 2"))
    assert evaluate(t).observed == "forbidden"


def test_locations_are_reported_in_the_witness():
    t = parse_test(row(MP, "locations [x; 1:r0;] exists (1:r0 = 1 /\\ 1:r1 = 0)"))
    assert set(t.locations) == {"x", "1:r0"}
    witness = evaluate(t).witness
    assert witness is not None and "x=1" in witness.split("values:")[1] and "1:r0=1" in witness


@pytest.mark.parametrize("condition,message", [
    ("exists", "no proposition"), ("maybe (1:r0 = 1)", "expected exists"), ("filter (1:r0 = 1)", "followed by"),
    ({"quantifier": "exists", "expr": "1:r0 = 1", "filter": 3}, "filter must be a string"),
    ({"quantifier": "exists", "expr": "1:r0 = 1", "locations": [1]}, "locations must be"),
    ("exists (1:r0 = 1 /\\ y = 0)", "unknown location 'y'"), ("exists (1:r0 = = 1)", "expected a value"),
])
def test_bad_conditions_are_one_input_error(condition, message):
    with pytest.raises(InputError, match=message):
        parse_test(row(MP, condition))


# ---------------------------------------------------------------------------------------- unsupported tests
PROXY_ROWS = [
    ("surface alias", row([[ST("x", 1), ST("f", 1, "release", "gpu")], [LD("f", "r0", "acquire", "gpu"), LD("s", "r1")]],
                          "exists (1:r0 = 1 /\\ 1:r1 = 0)", aliases=[{"name": "s", "proxy": "surface", "of": "x"}],
                          init={"x": 0}, name="surface-alias"), "surface-proxy alias"),
    # cp.async.bulk and fence.proxy.async are modelled (tests/test_async_proxy.py); the tensor copy and the
    # tensormap proxy are not
    ("async copy", row([[{"op": "cp.async.bulk.tensor", "loc": "x"}], [LD("x", "r0")]], "exists (1:r0 = 0)",
                       name="async-copy"), "cp.async.bulk.tensor (async proxy)"),
    ("async fence", row([[ST("x", 1), {"op": "fence", "sem": "proxy", "proxy": "tensormap"}], [LD("x", "r0")]],
                        "exists (1:r0 = 0)", name="async-fence"), "proxy fence for proxy 'tensormap'"),
    ("texture load", row([[{"op": "ld", "loc": "x", "reg": "r0", "proxy": "texture"}]], "exists (0:r0 = 0)",
                         name="texture-load"), "ld through the texture proxy"),
]


@pytest.mark.parametrize("label,test_row,construct", PROXY_ROWS)
def test_a_mixed_proxy_test_is_unsupported_not_malformed(label, test_row, construct):
    with pytest.raises(UnsupportedError, match=construct.replace("(", r"\(").replace(")", r"\)")):
        parse_test(test_row)


def test_a_file_reports_each_unsupported_test_and_checks_the_rest(tmp_path, collsim_cli):
    rows = [row(MP, "exists (1:r0 = 1 /\\ 1:r1 = 0)", expected="allowed", name="mp")]
    rows += [r for _, r, _ in PROXY_ROWS]
    rows.append(row(MP_RA, "exists (1:r0 = 1 /\\ 1:r1 = 0)", expected="forbidden", name="mp-ra"))
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tests = load_jsonl(path)
    assert [t.name for t in tests] == ["mp", "surface-alias", "async-copy", "async-fence", "texture-load", "mp-ra"]
    results = [evaluate(t) for t in tests]
    assert [r.observed for r in results] == ["allowed"] + ["unsupported"] * 4 + ["forbidden"]
    assert [r.agrees for r in results] == [True, None, None, None, None, True]
    assert summary(results)["unsupported"] == 4
    code, out, err = collsim_cli("litmus", str(path))
    assert code == 1  # not every test agrees: four could not be decided
    for (_, _, construct), line in zip(PROXY_ROWS, range(2, 6)):
        name = rows[line - 1]["name"]
        assert f"- {name} (line {line}): unsupported: " in out and construct in out
    assert "6 tests: 2 agree, 0 disagree, 0 unknown, 4 unsupported" in out
    supported = tmp_path / "supported.jsonl"
    supported.write_text("\n".join(json.dumps(r) for r in (rows[0], rows[-1])) + "\n")
    assert collsim_cli("litmus", str(supported))[0] == 0


# ------------------------------------------------------------------------ RMWs in load-buffering shapes
# PTX ISA 8.10.4 (No Thin Air): the relation of reads-from and dependencies is acyclic; 8.9.5 (Causality order)
# and 8.10.6 (Causality): base causality needs a release pattern observed by an acquire pattern (8.8), so two
# relaxed atomics are not ordered by program order alone; 8.10.3 (Atomicity) only concerns one location.
def test_lb_with_relaxed_rmws_is_allowed():
    """Each RMW reads the other thread's later RMW: no dependency and no synchronisation orders them (8.10.4,
    8.10.6), and Atomicity (8.10.3) constrains each location on its own."""
    lb = [[RMW("add", "x", "r0", 1), RMW("add", "y", "r1", 1)], [RMW("add", "y", "r0", 1), RMW("add", "x", "r1", 1)]]
    assert observed(lb, "P0:r0 = 1 /\\ P1:r0 = 1") == "allowed"
    lb_st = [[RMW("add", "x", "r0", 1), ST("y", 1, "relaxed", "gpu")],
             [LD("y", "r0", "relaxed", "gpu"), ST("x", 1, "relaxed", "gpu")]]
    assert observed(lb_st, "P0:r0 = 1 /\\ P1:r0 = 1") == "allowed"


def test_lb_with_acq_rel_rmws_is_forbidden():
    """An acq_rel RMW is both a release and an acquire pattern (8.8): each observed write synchronises, the
    cycle is in base causality, and a read that precedes the write it reads violates Causality (8.10.6)."""
    lb = [[RMW("add", "x", "r0", 1, "acq_rel"), RMW("add", "y", "r1", 1, "acq_rel")],
          [RMW("add", "y", "r0", 1, "acq_rel"), RMW("add", "x", "r1", 1, "acq_rel")]]
    assert observed(lb, "P0:r0 = 1 /\\ P1:r0 = 1") == "forbidden"


def test_an_rmw_value_fed_around_a_load_buffering_cycle_is_no_thin_air():
    """The value an RMW returns and the value an add writes depend on its read (data dependency): a cycle of
    them with reads-from is out of thin air (8.10.4), whichever end the RMW is."""
    back = [[RMW("add", "y", "r0", 0), ST("x", "r0", "relaxed", "gpu")],
            [LD("x", "r1", "relaxed", "gpu"), ST("y", "r1", "relaxed", "gpu")]]
    assert observed(back, "P0:r0 = 42") == "forbidden"
    copy_in = [LD("y", "r0", "relaxed", "gpu"), ST("x", "r0", "relaxed", "gpu")]
    copy_out = [LD("x", "r2", "relaxed", "gpu"), ST("y", "r2", "relaxed", "gpu")]
    assert observed([copy_in, [RMW("add", "x", "r1", 0)], copy_out], "P0:r0 = 42 /\\ P2:r2 = 42") == "forbidden"


def test_an_exch_write_does_not_depend_on_its_read():
    """atom.exch writes its operand whatever it read (9.7.13.5: 'exch'), so its write closes no dependency
    cycle (8.10.4): the constant it writes can travel around the load-buffering ring; no other value can."""
    copy_in = [LD("y", "r0", "relaxed", "gpu"), ST("x", "r0", "relaxed", "gpu")]
    copy_out = [LD("x", "r2", "relaxed", "gpu"), ST("y", "r2", "relaxed", "gpu")]
    ring = [copy_in, [RMW("exch", "x", "r1", 5)], copy_out]
    assert observed(ring, "P0:r0 = 5 /\\ P1:r1 = 5 /\\ P2:r2 = 5") == "allowed"
    assert observed(ring, "P0:r0 = 42") == "forbidden"


# ------------------------------------------------------------ named barriers used in different orders
# PTX ISA 9.7.13.1 (bar, barrier): sixteen barriers per CTA; bar.sync waits until the number of threads given
# (all of the CTA if none) have arrived at *that* barrier; bar.arrive arrives without waiting. 8.9.4 (Memory
# synchronization): a bar.sync / bar.red / bar.arrive synchronises with a bar.sync / bar.red on the same barrier.
def test_two_threads_waiting_at_two_barriers_in_opposite_orders_never_finish():
    """P0 waits at barrier 1 for P1, which waits at barrier 2 for P0: no execution finishes, so nothing is
    reachable (the suite's convention: only executions in which every thread finishes count)."""
    crossed = [[BAR(1, 2), BAR(2, 2)], [BAR(2, 2), BAR(1, 2)]]
    assert observed(crossed, "true", same_cta=True) == "forbidden"
    assert observed([[BAR(1, 2), BAR(2, 2)], [BAR(1, 2), BAR(2, 2)]], "true", same_cta=True) == "allowed"


def test_an_arrive_lets_the_other_order_finish_and_orders_only_what_precedes_it():
    """With bar.arrive on barrier 1 P0 does not wait there: both pass barrier 2, then P1's bar.sync 1 completes
    with P0's earlier arrival. The arrive publishes P0's writes before it to P1's bar.sync 1 (8.9.4); a write
    after the arrive is ordered only by the later barrier 2 that both reach."""
    threads = [[ST("x", 1), BAR(1, 2, "arrive"), ST("y", 1), BAR(2, 2)],
               [BAR(2, 2), LD("y", "r1"), BAR(1, 2), LD("x", "r0")]]
    assert observed(threads, "true", same_cta=True) == "allowed"
    assert observed(threads, "P1:r0 = 0 \\/ P1:r1 = 0", same_cta=True) == "forbidden"
    late = [[BAR(1, 2, "arrive"), ST("x", 1)], [BAR(1, 2), LD("x", "r0")]]
    assert observed(late, "P1:r0 = 0", same_cta=True) == "allowed"


def test_barrier_ids_from_registers_match_by_value_in_each_order():
    """Which barrier a bar.sync uses is its operand's value (9.7.13.1): ids read from memory match, or cross,
    according to the values read."""
    ids = [[LD("a", "r5"), LD("b", "r6"), BAR("r5", 2), BAR("r6", 2)], [BAR(1, 2), BAR(2, 2)]]
    t = parse_test(row(ids, "exists (P0:r5 = 2 /\\ P0:r6 = 1)", init={"a": 1, "b": 2}, same_cta=True))
    assert evaluate(t).observed == "forbidden"  # only the initial values are there to read: r5 = 1, r6 = 2
    t = parse_test(row(ids, "exists (P0:r5 = 1 /\\ P0:r6 = 2)", init={"a": 1, "b": 2}, same_cta=True))
    assert evaluate(t).observed == "allowed"
    crossed_ids = [[LD("a", "r5"), LD("b", "r6"), BAR("r5", 2), BAR("r6", 2)], [BAR(1, 2), BAR(2, 2)]]
    t = parse_test(row(crossed_ids, "exists true", init={"a": 2, "b": 1}, same_cta=True))
    assert evaluate(t).observed == "forbidden"  # P0 waits at 2 while P1 waits at 1
