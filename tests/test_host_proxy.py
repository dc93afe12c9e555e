"""A host proxy thread per rank: the IR, its well-formedness rules, the verifier's verdicts, what other consumers do."""
from __future__ import annotations

from pathlib import Path

import pytest

from collsim.algorithms import generate
from collsim.errors import ProtocolDefinitionError
from collsim.ir import (RANK, Buffer, Input, Load, PollUntil, ProxyThread, Ref, Scope, Sem, Store, AtLeast, counter_layout)
from collsim.ir.checks import check_protocol_program, host_scope_findings
from collsim.ir.registry import load_protocol_file
from collsim.verify import verify
from collsim.verify.instance import Bounds
from collsim.verify.lower import lower_instance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "protocols"
FIFO = EXAMPLES / "proxy_fifo.py"


def _fifo(**params):
    return type(load_protocol_file(str(FIFO)))(**params)


def test_the_proxy_body_is_one_flat_op_with_its_own_unrolled_ops():
    flat = [f for f in generate(_fifo(), "one-shot").flatten({"RANK": 0, "NRANKS": 3, "ITER": 1, "MSG": 64})]
    proxies = [f for f in flat if isinstance(f.op, ProxyThread)]
    assert len(proxies) == 1
    names = [inner.name for inner in proxies[0].body]
    assert names == ["proxy_poll_head", "proxy_read_request", "proxy_ack", "proxy_forward[k=0]",
                     "proxy_post_arrival[k=0]", "proxy_forward[k=1]", "proxy_post_arrival[k=1]"]
    # bound: the epoch of launch 1, the peers 1 and 2
    assert proxies[0].op.body[0].until.value == 2
    assert [op.dst.rank for op in proxies[0].op.body[3::2]] == [1, 2]
    with pytest.raises(TypeError, match="proxy"):
        from collsim.ir.ops import bind
        bind(proxies[0].op, {})


def test_the_verifier_runs_the_proxy_as_a_host_thread_on_no_gpu():
    low = lower_instance(_fifo(), "one-shot", Bounds(ranks=2, iterations=2, threads=2))
    hosts = [t for t, p in enumerate(low.placement) if p.gpu < 0]
    assert len(hosts) == 2 and len(low.threads) == 2 * 2 + 2
    for rank, t in enumerate(hosts):
        p = low.placement[t]
        assert p.rank == rank and not p.includes("gpu", low.placement[rank * 2]) and p.includes("sys", low.placement[0])
        events = [e for instr in low.threads[t] for e in instr.events]
        # x86-TSO (the named host ordering): the host's loads are acquires and its stores releases, at sys scope
        assert {(e.kind.value, e.sem, e.scope) for e in events} == {("R", "acquire", "sys"), ("W", "release", "sys")}
        assert {instr.iteration for instr in low.threads[t]} == {0, 1}  # one round per launch, in order
    assert low.thread_names[hosts[0]] == "rank0.proxy"
    assert any(n.startswith("host ordering assumed") and "x86-TSO" in n for n in low.notes)


def test_proxy_fifo_holds():
    r = verify(str(FIFO), ranks=2, dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


# -- the host's ordering: the named assumption host-tso, and the re-check without it -----------------------------
FENCED = EXAMPLES / "proxy_fifo_fenced.py"


def test_host_tso_is_a_named_ordering_assumption_that_joins_no_writes():
    from collsim.ir.assumptions import ASSUMPTIONS, get_assumption
    from collsim.ir.ops import HOST_ORDERING
    from collsim.ir.layout import plain_layout
    from collsim.verify.granules import atomic_groups

    a = get_assumption(HOST_ORDERING)
    assert a is ASSUMPTIONS["host-tso"] and a.kind == "host-ordering" and not a.is_granule
    assert not any(a.joins(kind) for kind in ("store", "red", "multimem.st", "multimem.red"))
    assert atomic_groups(plain_layout(), range(4), [a]) == []  # it makes nothing atomic
    assert "acquire" in a.statement and "release" in a.statement and "sys scope" in a.statement
    assert "Intel SDM" in a.source and "AMD APM" in a.source and "Arm" in a.source
    assert _fifo().assumptions == ("host-tso",)
    assert type(load_protocol_file(str(FENCED))).assumptions == ()


def test_without_host_tso_the_hosts_accesses_are_relaxed_and_ordered_by_its_fences_only():
    low = lower_instance(_fifo(), "one-shot", Bounds(ranks=2, iterations=2, threads=2), assumptions=())
    hosts = [t for t, p in enumerate(low.placement) if p.gpu < 0]
    for t in hosts:
        events = [e for instr in low.threads[t] for e in instr.events]
        assert {(e.kind.value, e.sem, e.scope) for e in events} == {("R", "relaxed", "sys"), ("W", "relaxed", "sys")}
    assert any(n.startswith("host ordering not assumed") for n in low.notes)
    fenced = lower_instance(load_protocol_file(str(FENCED)), "one-shot", Bounds(ranks=2, iterations=2, threads=2))
    fences = {(e.sem, e.scope) for t, p in enumerate(fenced.placement) if p.gpu < 0
              for instr in fenced.threads[t] for e in instr.events if e.kind.value == "F"}
    assert fences == {("acq_rel", "sys")}
    # assumed where nothing runs on the host, it is said to order nothing
    from collsim.ir.registry import load_protocol
    plain = lower_instance(load_protocol("simple"), "one-shot", Bounds(ranks=2), assumptions=("host-tso",))
    assert any("no proxy thread: it orders nothing" in n for n in plain.notes)
    # the two orderings are told apart in the cache key
    assert low.flat_signature != lower_instance(_fifo(), "one-shot", Bounds(ranks=2, iterations=2, threads=2)
                                                ).flat_signature


def test_proxy_fifo_depends_on_host_tso_the_fenced_variant_does_not():
    r = verify(str(FIFO), ranks=2, use_cache=False)
    assert r.ok, r.render(counterexamples=False)
    dep = next(d for d in r.dependencies if d.name == "host-tso")
    assert dep.kind == "assumption" and {"stale-read", "early-overwrite", "postcondition"} <= set(dep.results)
    cex = dep.results["stale-read"].counterexample
    # the proxy's relaxed poll of the head orders nothing after it: its read of the payload may see the old slot
    assert "proxy thread (proxy_read_request" in cex.reason and "proxy_poll_head" in cex.render()
    assert any(n.startswith("host ordering not assumed") for n in dep.results["stale-read"].bound.notes)
    assert "depends on host-tso" in r.render(counterexamples=False)
    fenced = verify(str(FENCED), ranks=2, use_cache=False)
    assert fenced.ok and fenced.dependencies == [], fenced.render(counterexamples=False)
    assert any(n.startswith("host ordering not assumed") for n in fenced.bound.notes)


@pytest.mark.parametrize("dropped, caught", [("after_head", "stale-read"), ("before_ack", "early-overwrite"),
                                             ("before_arrival", "stale-read")])
def test_each_host_fence_of_the_fenced_variant_is_needed(dropped, caught):
    fenced = type(load_protocol_file(str(FENCED)))
    keep = tuple(f for f in fenced.default_params["host_fences"] if f != dropped)
    r = verify(fenced(host_fences=keep), ranks=2, properties=[caught], dependencies=False, use_cache=False)
    assert r.properties[caught].violated


def test_a_request_published_at_gpu_scope_is_a_stale_read_of_the_payload():
    r = verify(str(EXAMPLES / "proxy_fifo_gpu_scope.py"), ranks=2, properties=["stale-read"], dependencies=False,
               use_cache=False)
    assert r.caught
    cex = r.properties["stale-read"].counterexample
    assert cex.reason.startswith("rank 0 proxy thread (proxy_read_request") or "proxy thread" in cex.reason
    assert "proxy" in cex.render()
    # the scope is reported where the protocol wrote it
    assert any("proxy_fifo.py:" in n and "post_head" in n and "gpu scope" in n for n in r.bound.notes)


def test_an_ack_before_the_payload_read_lets_the_next_launch_overwrite_it():
    r = verify(str(EXAMPLES / "proxy_fifo_early_ack.py"), ranks=2, properties=["early-overwrite"],
               dependencies=False, use_cache=False)
    assert r.caught
    assert "proxy_read_request" in r.properties["early-overwrite"].counterexample.reason


def test_host_scope_findings_name_the_kernel_side_only():
    assert host_scope_findings(generate(_fifo(), "one-shot")) == []
    found = host_scope_findings(generate(_fifo(request_scope=Scope.GPU), "one-shot"))
    assert [op.label for op, _ in found] == ["post_head"]


class _Broken(type(load_protocol_file(str(FIFO)))):
    name = "proxy-fifo-broken"
    default_params = {**type(load_protocol_file(str(FIFO))).default_params, "mistake": ""}

    def buffers(self, transfer_bytes):
        return super().buffers(transfer_bytes) + (Buffer("device_flag", counter_layout(8), depth=1, regions=1,
                                                         lines=1, role="flags"),)

    def epilogue(self, b, launch):
        mistake = self.params["mistake"]
        if mistake == "device":
            with b.proxy("bad_proxy"):
                b.emit(Store(Ref("device_flag", RANK), None, Sem.RELEASE, Scope.SYS, flag=1, label="host_to_hbm"))
        elif mistake == "scope":
            with b.proxy("bad_proxy"):
                b.emit(Load("x", Ref("tail", RANK), Sem.ACQUIRE, Scope.GPU, label="narrow"))
        elif mistake == "input":
            with b.proxy("bad_proxy"):
                b.emit(Store(Ref("fifo", RANK), Input(0), Sem.RELEASE, Scope.SYS, label="reads_hbm"))
        elif mistake == "loop":
            with b.loop("j", 2):
                with b.proxy("looped_proxy"):
                    b.emit(PollUntil(Ref("tail", RANK), AtLeast(1), Sem.ACQUIRE, Scope.SYS, label="p"))


@pytest.mark.parametrize("mistake, message", [
    ("device", "uses buffer 'device_flag' in device memory"),
    ("scope", "at gpu scope, but the proxy is a host thread"),
    ("loop", "proxy thread looped_proxy is inside loop"),
    ("input", "stores the kernel's input, which is in device memory"),
])
def test_ill_formed_proxy_threads_are_refused_with_the_protocol_line(mistake, message):
    proto = _Broken(mistake=mistake)
    with pytest.raises(ProtocolDefinitionError, match=message) as err:
        check_protocol_program(generate(proto, "one-shot"), proto)
    assert err.value.line is not None and "test_host_proxy.py" in str(err.value.file)


def test_a_proxy_body_holds_host_operations_only():
    from collsim.ir import SyncGroup
    proxy = ProxyThread(body=(SyncGroup(label="bar"),), label="p")
    with pytest.raises(ProtocolDefinitionError, match="SyncGroup 'bar'.*holds Store, Load, PollUntil, Fence, Loop"):
        from collsim.ir.checks import check_program
        from collsim.ir.program import Program
        check_program(Program("p", "one-shot", (proxy,), ()))


# -- the simulator: the host link and the proxy's own costs ----------------------------------------------------
def test_simulated_proxy_pays_the_host_link_and_the_cpu_copies():
    from collsim.models import simulate
    from collsim.sim.costs import load_costs
    from collsim.sim.host import host_link
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    link = host_link(topo, 0)
    assert link.link_type == "pcie5" and link.latency == pytest.approx(1.0)  # 2 PCIe5 links + a PCIe switch
    pcie = load_costs("hopper").pcie
    small = simulate(topo, 2, "one-shot", _fifo(), 1024, model="des")
    # after the launch: the request lands in host memory, then the arrival poll, the inbox load and the tail
    # poll each take at least one round trip over the host link
    chain = (link.latency + pcie.remote_write_us) + 3 * (2 * link.latency + pcie.remote_read_us)
    assert small.latency_us > chain
    big = simulate(topo, 2, "one-shot", _fifo(), 1 << 20, model="des")
    # the proxy copies the payload out of the request slot and into the peer's inbox on one core
    copy_gbps = load_costs("hopper").nvlink.host_copy_gbps
    assert big.latency_us - small.latency_us > 2 * (1 << 20) / (copy_gbps * 1e3) * 0.95
    eight = simulate(topo, 8, "one-shot", _fifo(), 1 << 20, model="des")
    assert eight.latency_us > big.latency_us * 3  # one copy per peer


def test_host_costs_are_cost_parameters_of_every_generation():
    from collsim.models import simulate
    from collsim.sim.costs import GENERATIONS, parameter_table
    from collsim.topology import load_topology

    for generation in GENERATIONS:
        table = parameter_table(generation)
        for name in ("host_poll_period_us", "host_copy_gbps"):
            assert table[name]["value"] > 0 and table[name]["source"].startswith("assumed")
    topo = load_topology("hgx-h100")
    base = simulate(topo, 2, "one-shot", _fifo(), 1 << 20, model="des").latency_us
    # the proxy copies 1 MiB out of the request slot and 1 MiB into the peer's inbox on one core: twice as fast a
    # core saves half of those copies
    faster = simulate(topo, 2, "one-shot", _fifo(), 1 << 20, model="des", costs={"host_copy_gbps": 20.0}).latency_us
    saved = 2 * (1 << 20) / (10.0 * 1e3) / 2
    assert base - faster == pytest.approx(saved, rel=0.05)
    # the proxy's poll of the head samples once per period: a slower sample delays the small message
    small = simulate(topo, 2, "one-shot", _fifo(), 1024, model="des").latency_us
    slow = simulate(topo, 2, "one-shot", _fifo(), 1024, model="des", costs={"host_poll_period_us": 2.0}).latency_us
    assert slow > small + 0.5


def test_host_memory_is_never_folded_to_one_rank():
    from collsim.models import SimRequest
    from collsim.sim.model import symmetry_of
    from collsim.topology import load_topology

    request = SimRequest(load_topology("hgx-h100"), 4, "one-shot", _fifo(), 4096)
    assert "host memory" in symmetry_of(request)


# -- the emitter: host memory, proxy threads, a harness that builds ----------------------------------------------
def test_emitted_proxy_is_host_code_with_the_assumed_orders():
    from collsim.emit import prepare

    emitted = prepare(str(FIFO), "one-shot", unverified=True, arch="sm_90")
    kernel, main = emitted.files["kernel.cu"], emitted.files["main.cu"]
    proxy = kernel[kernel.index("bool proxy_round("):]
    # the host's accesses: acquire loads, release stores, nothing weaker (HOST_ORDERING)
    assert "__ATOMIC_ACQUIRE" in proxy and "__ATOMIC_RELEASE" in proxy and "__ATOMIC_RELAXED" not in proxy
    assert "g_proxies.threads.emplace_back(proxy_main, p, rank, chan)" in kernel
    assert "cudaHostAlloc(&host, (size_t)bytes, cudaHostAllocMapped | cudaHostAllocPortable)" in main
    assert "collsim_proxy_start(params_for(h, g, 0, 0));" in main and "collsim_proxy_stop();" in main
    # the kernel side of a host buffer is the same PTX at sys scope
    assert "ld.acquire.sys.global.u64" in kernel and "st.release.sys.global.u64" in kernel


def test_a_proxy_without_host_tso_is_emitted_with_relaxed_accesses_and_its_fences():
    from collsim.emit import prepare

    kernel = prepare(str(FENCED), "one-shot", unverified=True, arch="sm_90").files["kernel.cu"]
    proxy = kernel[kernel.index("bool proxy_round("):]
    # what the verifier proved it under: relaxed host accesses, the body's three fences between them
    assert "__ATOMIC_RELAXED" in proxy and "__ATOMIC_ACQUIRE" not in proxy and "__ATOMIC_RELEASE" not in proxy
    assert [line.split()[-1] for line in proxy.splitlines() if "__atomic_thread_fence" in line] == [
        "proxy_fence_after_head", "proxy_fence_before_ack", "proxy_fence_before_arrival"]


def test_programs_without_host_memory_get_the_plain_harness():
    from collsim.emit import prepare
    from collsim.emit.package import _template

    emitted = prepare("simple", "one-shot", unverified=True, arch="sm_90")
    assert emitted.files["main.cu"].endswith(_template("main.cu")) and "proxy" not in emitted.files["kernel.cu"]


@pytest.mark.cuda
# the fenced variant prints the same host C++ with relaxed accesses and fences: its build is a long check
@pytest.mark.parametrize("path", [FIFO, pytest.param(FENCED, marks=pytest.mark.slow)], ids=["host-tso", "fenced"])
def test_emitted_proxy_program_builds_with_werror_and_its_ptx_checks(tmp_path, path):
    from collsim.emit import prepare
    from cuda_build import build_and_check

    build_and_check(prepare(str(path), "one-shot", unverified=True, arch="sm_90"), tmp_path, ("kernel.cu", "main.cu"))
