"""Classic litmus shapes under the PTX and SC models, built directly as events.

Expected outcomes follow from the PTX ISA memory consistency model (release and
acquire patterns, morally strong operations, Fence-SC order, Coherence,
Causality, Atomicity, No-Thin-Air, SC-per-Location) and from the ASPLOS'19
paper's figures; SC outcomes from interleaving semantics.
"""
from __future__ import annotations

import pytest
import z3

from collsim.errors import InputError
from collsim.verify.events import Event, Placement, Program, ProgramBuilder, volatile
from collsim.verify.solver import always, encode, exists, outcomes


def reachable(prog: Program, cond, model: str = "ptx") -> bool:
    res = exists(prog, cond, model=model, timeout_s=30)
    assert res.status in ("sat", "unsat"), res.describe()
    return res.status == "sat"


def two_threads(same_cta: bool = False, same_gpu: bool = True) -> ProgramBuilder:
    b = ProgramBuilder()
    b.thread("P0", cta=0, gpu=0)
    b.thread("P1", cta=0 if same_cta else 1, gpu=0 if same_gpu else 1)
    return b


# ----------------------------------------------------------------- message passing
def mp(flag_w: dict, flag_r: dict, *, same_cta: bool = False, same_gpu: bool = True,
       fence_w: dict | None = None, fence_r: dict | None = None):
    b = two_threads(same_cta, same_gpu)
    b.st("P0", "data", 1)
    if fence_w:
        b.fence("P0", **fence_w)
    b.st("P0", "flag", 1, **flag_w)
    rf = b.ld("P1", "flag", **flag_r)
    if fence_r:
        b.fence("P1", **fence_r)
    rd = b.ld("P1", "data")
    p = b.build()
    return p, z3.And(p.value_var(rf) == 1, p.value_var(rd) == 0)


def test_mp_release_acquire_gpu_forbidden():
    p, stale = mp(dict(sem="release", scope="gpu"), dict(sem="acquire", scope="gpu"))
    assert not reachable(p, stale)


def test_mp_relaxed_flag_allowed():
    p, stale = mp(dict(sem="relaxed", scope="gpu"), dict(sem="relaxed", scope="gpu"))
    assert reachable(p, stale)
    assert not reachable(p, stale, model="sc")


def test_mp_weak_flag_allowed():
    p, stale = mp({}, {})
    assert reachable(p, stale)


def test_mp_fences_acq_rel_forbidden():
    p, stale = mp(dict(sem="relaxed", scope="gpu"), dict(sem="relaxed", scope="gpu"),
                  fence_w=dict(sem="acq_rel", scope="gpu"), fence_r=dict(sem="acq_rel", scope="gpu"))
    assert not reachable(p, stale)


def test_mp_fence_only_on_writer_allowed():
    p, stale = mp(dict(sem="relaxed", scope="gpu"), dict(sem="relaxed", scope="gpu"),
                  fence_w=dict(sem="acq_rel", scope="gpu"))
    assert reachable(p, stale)


def test_cta_scope_release_acquire_across_ctas_does_not_synchronize():
    p, stale = mp(dict(sem="release", scope="cta"), dict(sem="acquire", scope="cta"), same_cta=False)
    assert reachable(p, stale)
    p, stale = mp(dict(sem="release", scope="cta"), dict(sem="acquire", scope="cta"), same_cta=True)
    assert not reachable(p, stale)


def test_gpu_scope_across_gpus_does_not_synchronize_but_sys_does():
    p, stale = mp(dict(sem="release", scope="gpu"), dict(sem="acquire", scope="gpu"), same_gpu=False)
    assert reachable(p, stale)
    p, stale = mp(dict(sem="release", scope="sys"), dict(sem="acquire", scope="sys"), same_gpu=False)
    assert not reachable(p, stale)


def test_mp_volatile_is_relaxed_sys_and_allows_stale_data():
    p, stale = mp(volatile(), volatile(), same_gpu=False)
    assert reachable(p, stale)


def test_mp_through_rmw_chain_forbidden():
    # observation order runs through atomic RMWs: release st -> atom.add -> acquire ld
    b = ProgramBuilder()
    for t in ("P0", "P1", "P2"):
        b.thread(t, cta=int(t[1]))
    b.st("P0", "data", 1)
    b.st("P0", "flag", 1, sem="release", scope="gpu")
    b.rmw("P1", "flag", "add", 1, sem="relaxed", scope="gpu")
    rf = b.ld("P2", "flag", sem="acquire", scope="gpu")
    rd = b.ld("P2", "data")
    p = b.build()
    assert not reachable(p, z3.And(p.value_var(rf) == 2, p.value_var(rd) == 0))
    assert reachable(p, z3.And(p.value_var(rf) == 2, p.value_var(rd) == 1))


def test_red_then_fence_acquire_is_not_an_acquire_pattern():
    b = two_threads()
    b.st("P0", "data", 1)
    b.st("P0", "flag", 1, sem="release", scope="gpu")
    b.red("P1", "flag", "add", 1, sem="relaxed", scope="gpu")
    b.fence("P1", sem="acq_rel", scope="gpu")
    rd = b.ld("P1", "data")
    p = b.build()
    # the red read 1 (final flag 2) but its read does not acquire
    assert reachable(p, z3.And(p.final_var("flag") == 2, p.value_var(rd) == 0))


# ---------------------------------------------------------------- store buffering
def sb(fence: dict | None, same_cta: bool = False, sem: str = "weak", scope=None):
    b = two_threads(same_cta)
    regs = []
    for t, (w, r) in (("P0", ("x", "y")), ("P1", ("y", "x"))):
        b.st(t, w, 1, sem=sem, scope=scope)
        if fence:
            b.fence(t, **fence)
        regs.append(b.ld(t, r, sem="relaxed" if sem != "weak" else "weak", scope=scope))
    p = b.build()
    return p, z3.And(p.value_var(regs[0]) == 0, p.value_var(regs[1]) == 0)


def test_sb_without_fence_allowed_ptx_forbidden_sc():
    p, both0 = sb(None)
    assert reachable(p, both0)
    assert not reachable(p, both0, model="sc")


def test_sb_with_fence_sc_forbidden():
    p, both0 = sb(dict(sem="sc", scope="gpu"))
    assert not reachable(p, both0)


def test_sb_with_fence_acq_rel_allowed():
    p, both0 = sb(dict(sem="acq_rel", scope="gpu"), sem="relaxed", scope="gpu")
    assert reachable(p, both0)


def test_sb_with_cta_fence_sc_across_ctas_allowed():
    p, both0 = sb(dict(sem="sc", scope="cta"))
    assert reachable(p, both0)
    p, both0 = sb(dict(sem="sc", scope="cta"), same_cta=True)
    assert not reachable(p, both0)


# ---------------------------------------------------------------------- coherence
def test_corr_relaxed_forbidden_weak_allowed():
    for sem, scope, allowed in (("relaxed", "gpu", False), ("weak", None, True)):
        b = two_threads()
        b.st("P0", "x", 1, sem=sem, scope=scope)
        r1 = b.ld("P1", "x", sem=sem, scope=scope)
        r2 = b.ld("P1", "x", sem=sem, scope=scope)
        p = b.build()
        assert reachable(p, z3.And(p.value_var(r1) == 1, p.value_var(r2) == 0)) is allowed, sem


def test_coww_final_value_follows_program_order():
    b = ProgramBuilder()
    b.thread("P0")
    b.st("P0", "x", 1)
    b.st("P0", "x", 2)
    p = b.build()
    assert not reachable(p, p.final_var("x") == 1)
    assert always(p, p.final_var("x") == 2).status == "unsat"


def test_iriw_relaxed_allowed_with_fence_sc_forbidden():
    for fence, allowed in ((None, True), (dict(sem="sc", scope="gpu"), False)):
        b = ProgramBuilder()
        for i in range(4):
            b.thread(f"P{i}", cta=i)
        b.st("P0", "x", 1, sem="relaxed", scope="gpu")
        b.st("P1", "y", 1, sem="relaxed", scope="gpu")
        regs = []
        for t, (a, c) in (("P2", ("x", "y")), ("P3", ("y", "x"))):
            regs.append(b.ld(t, a, sem="relaxed", scope="gpu"))
            if fence:
                b.fence(t, **fence)
            regs.append(b.ld(t, c, sem="relaxed", scope="gpu"))
        p = b.build()
        v = [p.value_var(r) for r in regs]
        cond = z3.And(v[0] == 1, v[1] == 0, v[2] == 1, v[3] == 0)
        assert reachable(p, cond) is allowed


def test_wrc_release_acquire_is_cumulative():
    b = ProgramBuilder()
    for i in range(3):
        b.thread(f"P{i}", cta=i)
    b.st("P0", "x", 1, sem="relaxed", scope="gpu")
    r1 = b.ld("P1", "x", sem="acquire", scope="gpu")
    b.st("P1", "y", 1, sem="release", scope="gpu")
    r2 = b.ld("P2", "y", sem="acquire", scope="gpu")
    r3 = b.ld("P2", "x", sem="relaxed", scope="gpu")
    p = b.build()
    assert not reachable(p, z3.And(p.value_var(r1) == 1, p.value_var(r2) == 1, p.value_var(r3) == 0))


# --------------------------------------------------------------- thin air, atomicity
def test_lb_plain_allowed_but_thin_air_with_data_dependencies_forbidden():
    b = two_threads()
    r0 = b.ld("P0", "x", sem="relaxed", scope="gpu")
    b.st("P0", "y", 1, sem="relaxed", scope="gpu")
    r1 = b.ld("P1", "y", sem="relaxed", scope="gpu")
    b.st("P1", "x", 1, sem="relaxed", scope="gpu")
    p = b.build()
    assert reachable(p, z3.And(p.value_var(r0) == 1, p.value_var(r1) == 1))
    assert not reachable(p, z3.And(p.value_var(r0) == 1, p.value_var(r1) == 1), model="sc")

    b = two_threads()
    r0 = b.ld("P0", "x")
    b.st("P0", "y", b.value(r0))
    r1 = b.ld("P1", "y")
    b.st("P1", "x", b.value(r1))
    p = b.build()
    assert not reachable(p, z3.And(p.value_var(r0) == 42, p.value_var(r1) == 42))


def test_lb_through_spin_loops_is_forbidden_by_control_dependencies():
    # each thread waits for the other's flag before raising its own: no execution finishes
    b = two_threads()
    b.wait_until("P0", "y", 1, sem="relaxed", scope="gpu")
    b.st("P0", "x", 1, sem="relaxed", scope="gpu")
    b.wait_until("P1", "x", 1, sem="relaxed", scope="gpu")
    b.st("P1", "y", 1, sem="relaxed", scope="gpu")
    p = b.build()
    assert not reachable(p, True)
    # without the control dependency (the same reads and exit conditions as plain loads) the cycle would be allowed
    b = two_threads()
    ry = b.ld("P0", "y", sem="relaxed", scope="gpu")
    b.st("P0", "x", 1, sem="relaxed", scope="gpu")
    rx = b.ld("P1", "x", sem="relaxed", scope="gpu")
    b.st("P1", "y", 1, sem="relaxed", scope="gpu")
    b.assumptions += [b.value(ry) == 1, b.value(rx) == 1]
    assert reachable(b.build(), True)


def test_rmw_atomicity_two_increments_never_lost():
    b = two_threads()
    b.rmw("P0", "x", "add", 1, sem="relaxed", scope="gpu")
    b.rmw("P1", "x", "add", 1, sem="relaxed", scope="gpu")
    p = b.build()
    assert always(p, p.final_var("x") == 2).status == "unsat"
    assert always(p, p.final_var("x") == 2, model="sc").status == "unsat"


def test_rmw_not_morally_strong_can_lose_an_update():
    # cta-scope atomics in different CTAs are not morally strong (ISA: "Atom-plus-location-weak")
    b = two_threads()
    b.rmw("P0", "x", "add", 1, sem="relaxed", scope="cta")
    b.rmw("P1", "x", "add", 1, sem="relaxed", scope="cta")
    p = b.build()
    assert reachable(p, p.final_var("x") == 1)


def test_cas_lock_only_one_winner():
    b = two_threads()
    a = b.rmw("P0", "m", "cas", 1, compare=0, sem="acquire", scope="gpu")
    c = b.rmw("P1", "m", "cas", 1, compare=0, sem="acquire", scope="gpu")
    p = b.build()
    assert not reachable(p, z3.And(p.value_var(a) == 0, p.value_var(c) == 0))


# ------------------------------------------------------------------------ barriers
def test_barrier_orders_within_cta_only():
    for same_cta, allowed in ((True, False), (False, True)):
        b = two_threads(same_cta)
        b.st("P0", "x", 1)
        b.bar("P0", instance=0)
        b.bar("P1", instance=0)
        r = b.ld("P1", "x")
        p = b.build()
        assert reachable(p, p.value_var(r) == 0) is allowed


def test_barrier_that_never_completes_excludes_the_execution():
    b = ProgramBuilder()
    b.thread("P0")
    b.thread("P1")
    b.bar("P0", instance=0, bar_id=1, quorum=3)
    b.bar("P1", instance=0, bar_id=1, quorum=3)
    p = b.build()
    assert not reachable(p, True)


# -------------------------------------------------------------------- atomic groups
def vector_mp(group: str | None, reader_group: str | None):
    """P0 stores a 2-element vector {data, flag} = {1, 1}; P1 loads both elements."""
    b = two_threads(same_gpu=False)
    b.st("P0", "v.data", 1, **volatile(), atomic_group=group)
    b.st("P0", "v.flag", 1, **volatile(), atomic_group=group)
    rf = b.ld("P1", "v.flag", **volatile(), atomic_group=reader_group)
    rd = b.ld("P1", "v.data", **volatile(), atomic_group=reader_group)
    p = b.build()
    return p, z3.And(p.value_var(rf) == 1, p.value_var(rd) == 0)


def test_vector_store_without_atomic_group_can_be_seen_torn():
    p, torn = vector_mp(None, None)
    assert reachable(p, torn)


def test_vector_store_with_atomic_group_is_never_torn():
    p, torn = vector_mp("st.v2@P0", "ld.v2@P1")
    assert not reachable(p, torn)
    assert not reachable(p, torn, model="sc")
    # the whole vector, old or new, is still readable
    vals = outcomes(p, {e.name: p.value_var(e.name) for e in p.events if e.kind == "R"})
    assert vals.complete and vals.values == {(0, 0), (1, 1)}


def test_atomic_group_two_successive_vectors_no_mixing():
    b = two_threads(same_gpu=False)
    for k in (1, 2):
        b.st("P0", "a", k, **volatile(), atomic_group=f"w{k}")
        b.st("P0", "b", k, **volatile(), atomic_group=f"w{k}")
    ra = b.ld("P1", "a", **volatile(), atomic_group="r")
    rb = b.ld("P1", "b", **volatile(), atomic_group="r")
    p = b.build()
    vals = outcomes(p, {"a": p.value_var(ra), "b": p.value_var(rb)})
    assert vals.complete and vals.values == {(0, 0), (1, 1), (2, 2)}


# ------------------------------------------------------------------------ solver API
def test_witness_names_the_writes_read():
    p, stale = mp(dict(sem="relaxed", scope="gpu"), dict(sem="relaxed", scope="gpu"))
    res = exists(p, stale)
    assert res.status == "sat" and res.witness is not None
    w = res.witness
    flag_read = next(e.name for e in p.events if e.kind == "R" and e.loc == "flag")
    data_read = next(e.name for e in p.events if e.kind == "R" and e.loc == "data")
    assert w.rf[flag_read].startswith("P0.") and w.rf[data_read] == "init:data"
    assert w.values[flag_read] == 1 and w.co_order["flag"][0] == "init:flag"
    assert "reads 0 from init:data" in w.format()


def test_unknown_is_reported_not_turned_into_no():
    b = ProgramBuilder()
    b.thread("P0")
    b.ld("P0", "x")
    p = b.build()
    a, c, d = z3.Ints("a c d")
    # Fermat's cubes: z3 cannot settle this within the limit
    hard = z3.And(a > 1, c > 1, d > 1, a * a * a + c * c * c == d * d * d)
    res = exists(p, hard, model="ptx", timeout_s=0.3)
    assert res.status == "unknown"
    assert res.found is None and res.reason and res.witness is None
    assert "unknown" in res.describe()


def test_encoding_api_exposes_rf_and_co():
    p, stale = mp(dict(sem="relaxed", scope="gpu"), dict(sem="relaxed", scope="gpu"))
    enc, solver = encode(p, "ptx")
    flag_read = next(e.name for e in p.events if e.kind == "R" and e.loc == "flag")
    rf = enc.rf_vars(flag_read)
    assert set(rf) == {"init:flag", "P0.1.st_flag"}
    solver.add(rf["P0.1.st_flag"])
    assert solver.check() == z3.sat
    assert z3.is_true(solver.model().eval(enc.co_names("init:flag", "P0.1.st_flag")))


def test_program_validation_errors():
    with pytest.raises(InputError, match="needs a scope"):
        Program.from_events([Event(0, "W", 0, 0, name="e", loc="x", sem="relaxed", value=1)], {"P0": Placement(0)})
    with pytest.raises(InputError, match="valid: R, W, RMW, F, BAR"):
        Program.from_events([Event(0, "X", 0, 0, name="e")], {"P0": Placement(0)})
    with pytest.raises(InputError, match="not earlier"):
        Program.from_events([Event(0, "W", 0, 0, name="w", loc="x", value=1, deps=frozenset({1})),
                             Event(1, "R", 0, 1, name="r", loc="y")], {"P0": Placement(0)})


def test_fence_sc_is_also_a_release_and_acquire_fence():
    # PTX atomics ABI: a seq_cst store is fence.sc; st.relaxed -- it must release
    p, stale = mp(dict(sem="relaxed", scope="gpu"), dict(sem="acquire", scope="gpu"),
                  fence_w=dict(sem="sc", scope="gpu"))
    assert not reachable(p, stale)


def test_bar_arrive_does_not_wait_but_publishes_to_bar_sync():
    b = two_threads(same_cta=True)
    b.st("P0", "x", 1)
    b.bar("P0", instance=1, arrive=True)
    b.bar("P1", instance=1)
    r = b.ld("P1", "x")
    p = b.build()
    assert not reachable(p, p.value_var(r) == 0)
    # a lone bar.arrive lets its thread finish
    b = ProgramBuilder()
    b.thread("P0")
    b.bar("P0", instance=3, arrive=True)
    b.st("P0", "x", 1)
    assert reachable(b.build(), True)


def test_rmw_with_custom_update_function():
    # a saturating increment written as a function of the old value
    b = two_threads()
    for t in ("P0", "P1"):
        b.rmw_fn(t, "c", lambda old: (z3.If(old >= 1, old, old + 1), old < 1),
                 sem="relaxed", scope="gpu")
    p = b.build()
    assert always(p, p.final_var("c") == 1).status == "unsat"


def test_barrier_then_release_publishes_other_threads_writes():
    # cumulativity: P0's data reaches P2 through P0 -bar-> P1 -release/acquire-> P2
    b = ProgramBuilder()
    b.thread("P0", cta=0)
    b.thread("P1", cta=0)
    b.thread("P2", cta=1)
    b.st("P0", "data", 1)
    b.bar("P0", instance=0)
    b.bar("P1", instance=0)
    b.st("P1", "flag", 1, sem="release", scope="gpu")
    b.wait_until("P2", "flag", 1, sem="acquire", scope="gpu")
    rd = b.ld("P2", "data")
    p = b.build()
    assert not reachable(p, p.value_var(rd) == 0)
    assert reachable(p, p.value_var(rd) == 1)
