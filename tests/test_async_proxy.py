"""The async proxy: bulk async copies (cp.async.bulk) and fence.proxy.async, in every consumer."""
from __future__ import annotations

from pathlib import Path

import pytest

from collsim.ir.registry import load_protocol_file
from collsim.verify import verify
from collsim.verify.instance import Bounds, EventKind
from collsim.verify.lower import ASYNC_MAILBOX, lower_instance

ROOT = Path(__file__).resolve().parents[1]
BULK = ROOT / "examples" / "protocols" / "barrier_bulk.py"
NO_FENCE = ROOT / "examples" / "protocols" / "barrier_bulk_no_proxy_fence.py"


def _bulk(**params):
    return type(load_protocol_file(str(BULK)))(**params)


def test_a_bulk_copy_runs_on_a_copy_engine_of_the_ctas_own():
    low = lower_instance(_bulk(), "one-shot", Bounds(ranks=2, iterations=1, threads=2))
    engines = [t for t, role in low.roles.items() if role == "bulk"]
    assert len(engines) == 2  # one copy per peer per rank, one launch
    for t in engines:
        here, leader = low.placement[t], low.placement[low.placement[t].rank * 2]
        assert (here.gpu, here.cta) == (leader.gpu, leader.cta)  # in the CTA: cta scope includes it
        events = [e for instr in low.threads[t] for e in instr.events]
        mailbox = [(e.kind, e.sem) for e in events if e.loc[0] == ASYNC_MAILBOX]
        # handed the copy (relaxed), the proxy fence (acquire), then the completion (release)
        assert mailbox == [(EventKind.READ, "relaxed"), (EventKind.READ, "acquire"), (EventKind.WRITE, "release")]
        assert {e.sem for e in events if e.loc[0] == "staging"} == {"weak"}
    unfenced = lower_instance(_bulk(proxy_fence=False), "one-shot", Bounds(ranks=2, iterations=1, threads=2))
    for t in (t for t, role in unfenced.roles.items() if role == "bulk"):
        sems = [e.sem for instr in unfenced.threads[t] for e in instr.events if e.loc[0] == ASYNC_MAILBOX]
        assert sems == ["relaxed", "release"]  # nothing orders the generic proxy's accesses before the copy


def test_bulk_copies_after_a_proxy_fence_hold():
    r = verify(str(BULK), ranks=2, dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


def test_a_bulk_copy_without_the_proxy_fence_reads_stale_data():
    r = verify(str(NO_FENCE), ranks=2, properties=["stale-read"], dependencies=False, use_cache=False)
    assert r.caught
    cex = r.properties["stale-read"].counterexample
    assert "bulk copy engine (bulk_load_peer" in cex.reason and "barrier_bulk.py:" in cex.reason


def test_a_bulk_copy_moves_whole_data_lines_only():
    from collsim.algorithms import generate
    from collsim.errors import ProtocolDefinitionError
    from collsim.ir import RANK, BulkLoad, Ref
    from collsim.ir.checks import check_protocol_program

    class FromFlags(type(_bulk())):
        name = "bulk-from-flags"

        def epilogue(self, b, launch):
            super().epilogue(b, launch)
            b.emit(BulkLoad("recv", Ref("inbox", RANK), label="copies_flags"))

    proto = FromFlags()
    with pytest.raises(ProtocolDefinitionError, match="cp.async.bulk moves whole 16-byte units of data"):
        check_protocol_program(generate(proto, "one-shot"), proto)


def test_simulated_bulk_copy_costs_a_load_the_cta_waits_for():
    from collsim.models import simulate
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    bulk = simulate(topo, 8, "one-shot", _bulk(), 1 << 20, model="des")
    plain = simulate(topo, 8, "one-shot", load_protocol_file(str(ROOT / "protocols" / "barrier.py")), 1 << 20,
                     model="des")
    # the same bytes over the same links; the CTA waits for each copy (the mbarrier) instead of streaming on
    assert plain.latency_us <= bulk.latency_us < 1.2 * plain.latency_us


def test_emitted_bulk_copy_is_tma_behind_an_mbarrier():
    from collsim.emit import prepare
    from collsim.errors import InputError

    kernel = prepare(str(BULK), "one-shot", unverified=True, arch="sm_90").files["kernel.cu"]
    assert "fence.proxy.async;" in kernel
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in kernel
    assert "mbarrier.try_wait.parity.shared::cta.b64" in kernel
    assert "uses cp.async.bulk (PTX ISA 8.0: sm_90 or newer)" in kernel
    with pytest.raises(InputError, match="needs sm_90 or newer \\(cp.async.bulk\\)"):
        prepare(str(BULK), "one-shot", unverified=True, arch="sm_80")


@pytest.mark.cuda
def test_emitted_bulk_copy_compiles_for_sm90_and_its_ptx_checks(tmp_path):
    from collsim.emit import prepare
    from cuda_build import build_and_check

    ptx = build_and_check(prepare(str(BULK), "one-shot", unverified=True, arch="sm_90"), tmp_path)
    assert "fence.proxy.async" in ptx and "cp.async.bulk.shared::cluster.global" in ptx


# -- litmus: the same picture of the async proxy ------------------------------------------------------------
def _litmus(name, p1, expected, p0=None):
    p0 = p0 if p0 is not None else [{"op": "st", "loc": "x", "val": 1},
                                    {"op": "st", "loc": "flag", "val": 1, "sem": "release", "scope": "gpu"}]
    return {"name": name, "init": {"x": 0, "flag": 0},
            "placement": [{"thread": "P0", "cta": 0, "gpu": 0}, {"thread": "P1", "cta": 1, "gpu": 0}],
            "threads": [p0, p1], "condition": {"quantifier": "exists", "expr": "P1:r1 == 1 /\\ P1:r2 == 0"},
            "expected": expected}


ACQUIRE = {"op": "ld", "loc": "flag", "reg": "r1", "sem": "acquire", "scope": "gpu"}
BULK_COPY = {"op": "cp.async.bulk", "loc": "x", "reg": "r2"}
PROXY_FENCE = {"op": "fence", "sem": "proxy.async"}


@pytest.mark.parametrize("row", [
    # message passing into a bulk copy: the acquire orders the generic proxy only
    _litmus("MP+acq+bulk", [ACQUIRE, BULK_COPY], "allowed"),
    _litmus("MP+acq+proxyfence+bulk", [ACQUIRE, PROXY_FENCE, BULK_COPY], "forbidden"),
    _litmus("MP+acq+proxyfence(sem proxy, proxy async)+bulk",
            [ACQUIRE, {"op": "fence", "sem": "proxy", "proxy": "async"}, BULK_COPY], "forbidden"),
    # a fence before the acquire orders nothing the acquire brings in
    _litmus("MP+proxyfence+acq+bulk", [PROXY_FENCE, ACQUIRE, BULK_COPY], "allowed"),
    # the thread's own generic store, then its bulk copy of the same location
    _litmus("CoWR+bulk", [{"op": "mov", "reg": "r1", "val": 1}, {"op": "st", "loc": "x", "val": 1}, BULK_COPY],
            "allowed", p0=[]),
    _litmus("CoWR+proxyfence+bulk", [{"op": "mov", "reg": "r1", "val": 1}, {"op": "st", "loc": "x", "val": 1},
                                     PROXY_FENCE, BULK_COPY], "forbidden", p0=[]),
], ids=lambda r: r["name"])
def test_litmus_bulk_copies_need_the_proxy_fence(row):
    from collsim.verify.litmus import evaluate, parse_test

    result = evaluate(parse_test(row))
    assert result.observed == row["expected"], result
