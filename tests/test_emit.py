"""The CUDA emitter without a GPU or nvcc: what it generates, the verification gate, the CLI, the checks."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from collsim.cli import main as cli_main
from collsim.emit import EmitError, VerificationStatus, emit, emit_all, gate, prepare
from collsim.emit.cuda import MARKER
from collsim.emit.package import STATIC_FILES
from collsim.emit.plan import iter_nodes, plan_for
from collsim.emit.ptxcheck import check_ptx
from collsim.errors import InputError, VerificationRefused
from collsim.ir.ops import Atomic, Fence, Load, Loop, MultimemLoadReduce, MultimemRed, MultimemStore, PollUntil, Store
from collsim.ir.registry import list_mutants, list_protocols, load_protocol, load_protocol_file
from collsim.verify import verify

SHIPPED = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]
MEMORY_OPS = (Store, Load, PollUntil, Fence, Atomic, MultimemLoadReduce, MultimemStore, MultimemRed)
EMIT_DIR = Path(__file__).resolve().parents[1] / "collsim" / "emit"


@pytest.fixture
def verdict(monkeypatch):
    """Set what the verifier says: a dict (protocol, algorithm) -> verdict, default for the rest."""
    table: dict = {}

    def fake(protocol: object, algorithm: str, **_: object) -> VerificationStatus:
        name = getattr(protocol, "name", protocol)  # prepare passes the instance
        value = table.get((name, algorithm), table.get("default", "not verified"))
        return VerificationStatus(value, "test verdict")

    monkeypatch.setattr(gate, "verification_status", fake)
    return table


def _marked_ops(source: str) -> set[int]:
    return {int(m) for m in re.findall(re.escape(MARKER) + r"(\d+)", source)}


@pytest.mark.parametrize("name,algorithm", SHIPPED)
def test_every_shipped_program_emits_every_memory_op_once_marked(name, algorithm, verdict):
    verdict["default"] = "holds"
    emitted = prepare(name, algorithm)
    source = emitted.files["kernel.cu"]
    memory_ops = {node.id for node in iter_nodes(emitted.plan.nodes) if isinstance(node.op, MEMORY_OPS)}
    assert memory_ops, "every program synchronizes somehow"
    assert _marked_ops(source) == memory_ops
    # every op, loops included, has its IR comment
    for node in iter_nodes(emitted.plan.nodes):
        assert f"// IR #{node.id} " in source
    assert not any("*** UNVERIFIED ***" in text[:600] for text in emitted.files.values())


def test_emitted_directory_has_every_file(tmp_path, verdict):
    verdict["default"] = "holds"
    result = emit("ll", "one-shot", tmp_path / "ll")
    names = sorted(p.name for p in result.files)
    assert names == sorted(["kernel.cu", *STATIC_FILES, "Makefile", "README.md", "emit.json"])
    meta = json.loads((tmp_path / "ll" / "emit.json").read_text())
    assert meta["verification"] == "holds" and meta["archs"] == ["sm_80", "sm_90", "sm_100"]
    assert "ARCH ?= sm_90" in (tmp_path / "ll" / "Makefile").read_text()


def test_refused_without_a_verdict_that_holds(tmp_path, verdict):
    verdict["default"] = "not verified"
    with pytest.raises(VerificationRefused, match="not 'holds'"):
        emit("ll", "one-shot", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_refused_by_default_when_no_verdict_is_recorded(tmp_path, monkeypatch):
    """The real gate: a verifier without a cached verdict means 'not verified'."""
    from collsim.verify import verifier

    monkeypatch.setattr(verifier, "verdict_for", lambda *a, **k: None)
    status = gate.verification_status("ll", "one-shot")
    assert status.verdict == "not verified" and not status.holds and "collsim verify" in status.detail
    with pytest.raises(VerificationRefused):
        emit("ll", "one-shot", tmp_path / "x")


def test_gate_reads_verifier_results(monkeypatch):
    class Result:
        def __init__(self, ok, violated=()):
            self.ok = ok
            self.violated = list(violated)
            self.depends_on = ["vector-8B-pairs-untorn"] if ok else []

    from collsim.verify import verifier

    monkeypatch.setattr(verifier, "verdict_for", lambda *a, **k: Result(True))
    status = gate.verification_status("ll", "one-shot")
    assert status.holds and status.detail == "depends on vector-8B-pairs-untorn"
    monkeypatch.setattr(verifier, "verdict_for", lambda *a, **k: Result(False, ["stale-read"]))
    status = gate.verification_status("ll", "one-shot")
    assert status.verdict == "violated" and "stale-read" in status.detail
    monkeypatch.setattr(verifier, "verdict_for", lambda *a, **k: Result(False))
    assert gate.verification_status("ll", "one-shot").verdict == "unknown"

    def boom(*a, **k):
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(verifier, "verdict_for", boom)
    status = gate.verification_status("ll", "one-shot")
    assert status.verdict == "not verified" and "RuntimeError: solver crashed" in status.detail


def test_unverified_marks_every_generated_file(tmp_path, verdict):
    verdict["default"] = "violated"
    result = emit("sentinel", "two-shot", tmp_path / "s", unverified=True)
    assert result.unverified
    for path in result.files:
        if path.suffix == ".json":
            meta = json.loads(path.read_text())
            assert meta["unverified"] and "UNVERIFIED" in meta["banner"][1]
            continue
        head = path.read_text().splitlines()[:4]
        assert any("*** UNVERIFIED ***" in line for line in head), path.name
    assert "violated" in (tmp_path / "s" / "kernel.cu").read_text()


@pytest.mark.parametrize("mutant", list_mutants())
def test_mutants_are_refused_and_emit_marked_with_unverified(mutant, tmp_path, verdict):
    proto = load_protocol(mutant)
    algorithm = proto.algorithms[0]
    verdict["default"] = "holds"  # shipped protocols verified ...
    verdict[(mutant, algorithm)] = "violated"  # ... the mutant not
    with pytest.raises(VerificationRefused, match=re.escape(mutant)):
        prepare(mutant, algorithm)
    emitted = prepare(mutant, algorithm, unverified=True)
    assert emitted.unverified
    assert all("UNVERIFIED" in text[:600] for name, text in emitted.files.items())


def test_emit_all_emits_verified_and_reports_refusals(tmp_path, verdict):
    verdict["default"] = "holds"
    verdict[("ll128", "ring")] = "unknown"
    results, refusals = emit_all(tmp_path, protocols=["ll128", "simple"])
    emitted = sorted(r.directory.name for r in results)
    assert "ll128__ring" not in emitted and "simple__ring" in emitted
    assert len(refusals) == 1 and "ll128/ring" in refusals[0]
    assert "simple__two-shot" in (tmp_path / "Makefile").read_text()


def test_vector_atomics_need_sm90(verdict):
    verdict["default"] = "holds"
    emitted = prepare("atomic-counter", "one-shot")
    assert emitted.plan.needs_vector_atomics and emitted.archs == ["sm_90", "sm_100"]
    assert "__CUDA_ARCH__ < 900" in emitted.files["kernel.cu"]
    assert "ALLOWED_ARCHS := sm_90 sm_100" in emitted.files["Makefile"]
    with pytest.raises(InputError, match="sm_90") as err:
        prepare("atomic-counter", "one-shot", arch="sm_80")
    assert err.value.field == "--arch" and err.value.choices == ["sm_90", "sm_100"]


def test_unsupported_algorithm_lists_choices(verdict):
    verdict["default"] = "holds"
    with pytest.raises(InputError, match="one-shot"):
        prepare("atomic-counter", "ring")


def test_instruction_forms_follow_the_ir(verdict):
    verdict["default"] = "holds"
    ll = prepare("ll", "one-shot").files["kernel.cu"]
    assert "st.volatile.global.v4.u32" in ll and "ld.volatile.global.v4.u32" in ll
    ll128 = prepare("ll128", "one-shot").files["kernel.cu"]
    assert "st.volatile.global.v2.u64" in ll128 and "__ballot_sync" in ll128
    simple = prepare("simple", "one-shot").files["kernel.cu"]
    assert "fence.acq_rel.sys" in simple and "st.relaxed.sys.global.u64" in simple
    barrier = prepare("barrier", "one-shot").files["kernel.cu"]
    assert "st.release.sys.global.u64" in barrier and "ld.acquire.sys.global.u64" in barrier
    atomic = prepare("atomic-counter", "one-shot").files["kernel.cu"]
    assert "red.relaxed.sys.global.add.v4.f32" in atomic
    assert "red.release.sys.global.add.u64" in atomic
    assert "red.relaxed.sys.global.add.noftz.v4.bf16x2" in atomic
    sentinel = prepare("sentinel", "one-shot").files["kernel.cu"]
    assert "st.relaxed.sys.global.v4.u32" in sentinel and "0xfffafffau" in sentinel


def test_partial_stores_become_one_scalar_store_per_covered_word(verdict):
    verdict["default"] = "violated"
    source = prepare("mutant-ll-split-flag", "one-shot", unverified=True).files["kernel.cu"]
    data = re.findall(r"op=2 store_data\\n\\t(st[^ ]+)", source)
    flag = re.findall(r"op=3 store_flag\\n\\t(st[^ ]+)", source)
    assert data == ["st.volatile.global.u32"] * 2 and flag == ["st.volatile.global.u32"] * 2


def test_sentinel_buffers_start_as_the_sentinel_in_data_words(verdict):
    verdict["default"] = "holds"
    source = prepare("sentinel", "one-shot").files["kernel.cu"]
    assert "kInit0[] = {0xfffafffau, 0xfffafffau, 0xfffafffau, 0xfffafffau}" in source
    ll = prepare("ll", "one-shot").files["kernel.cu"]
    assert "kInit0[] = {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}" in ll


def test_register_handoffs_only_where_threads_change():
    # LL lines carry 8 data bytes and the reduce works on 8-byte vectors: the same thread polls and
    # reduces every byte, so no barrier is needed. LL128 lines are 8 lanes: the reduce reads bytes
    # other threads polled, so one hand-off barrier precedes it.
    assert plan_for(load_protocol("ll"), "one-shot").sync_before == set()
    plan = plan_for(load_protocol("ll128"), "one-shot")
    labels = {n.id: getattr(n.op, "label", "") for n in iter_nodes(plan.nodes)}
    assert [labels[i] for i in sorted(plan.sync_before)] == ["reduce"]


def test_emitter_source_does_not_special_case_protocols():
    # "sentinel" is also IR vocabulary (Fill("sentinel"), Buffer(init="sentinel")), not only a protocol name
    names = (set(list_protocols()) | set(list_mutants())) - {"sentinel"}
    for path in EMIT_DIR.rglob("*"):
        if path.suffix not in (".py", ".cu", ".cuh", ".h"):
            continue
        text = path.read_text()
        for name in names:
            for quoted in (f'"{name}"', f"'{name}'"):
                assert quoted not in text, f"{path.name} mentions protocol {name}"
        assert ".name ==" not in text and "name in (" not in text, path.name


# ---------------------------------------------------------------------------
# The PTX translation check on PTX assembled from the generated asm text
# ---------------------------------------------------------------------------
def _fake_ptx(source: str) -> str:
    """A PTX-like text: every asm block of kernel.cu in order, each in a loop, in three entries (one per dtype).

    Atomic data ops print three dtype variants; only programs without them are used here.
    """
    blocks = []
    for i, m in enumerate(re.finditer(r'asm volatile\("((?:[^"\\]|\\.)*)"', source)):
        text = m.group(1).replace("\\n", "\n").replace("\\t", "\t")
        blocks.append(f"$L__BB0_{i}:\n\t// begin inline asm\n\t{text}\n\t// end inline asm\n\tbra.uni $L__BB0_{i};")
    body = "\n".join(blocks)
    entries = []
    for mangled in ("IfE", "I12collsim_bf16E", "IiE"):
        entries.append(f".visible .entry _Z20collsim_kernel_part0{mangled}v13CollsimParams(\n)\n{{\n{body}\n\tret;\n}}\n")
    return "\n".join(entries)


@pytest.mark.parametrize("name,algorithm", [("simple", "ring"), ("barrier", "two-shot"), ("ll128", "one-shot")])
def test_translation_check_passes_on_the_generated_instructions(name, algorithm, verdict):
    verdict["default"] = "holds"
    emitted = prepare(name, algorithm)
    report = check_ptx(emitted.plan, _fake_ptx(emitted.files["kernel.cu"]))
    assert report.ok, report.summary()
    assert len(report.entries) == 3 and report.checked_ops > 0


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("fence.acq_rel.sys;", "", "0 memory instruction"),  # a dropped fence
        ("st.relaxed.sys.global.u64", "st.relaxed.gpu.global.u64", "weaker"),  # narrower scope
        ("ld.volatile.global.u64", "ld.global.u64", "weaker"),  # lost volatile
        ("st.global.v4.u32", "st.global.v2.u64", "vector shape"),  # different store width
    ],
)
def test_translation_check_catches_weakened_instructions(old, new, message, verdict):
    verdict["default"] = "holds"
    emitted = prepare("simple", "one-shot")
    ptx = _fake_ptx(emitted.files["kernel.cu"])
    assert old in ptx
    report = check_ptx(emitted.plan, ptx.replace(old, new))
    assert not report.ok
    assert any(message in str(f) for f in report.errors), report.summary()


def test_translation_check_catches_a_missing_op(verdict):
    verdict["default"] = "holds"
    emitted = prepare("barrier", "one-shot")
    ptx = _fake_ptx(emitted.files["kernel.cu"])
    first = re.search(re.escape(MARKER) + r"(\d+)", ptx).group(1)
    report = check_ptx(emitted.plan, ptx.replace(f"{MARKER}{first} ", "dropped "))
    assert any("no " in str(f) and f.op_id == int(first) for f in report.errors)


def test_translation_check_wants_polls_in_loops(verdict):
    verdict["default"] = "holds"
    emitted = prepare("ll", "one-shot")
    ptx = re.sub(r"\n\tbra\.uni \$L__BB0_\d+;", "", _fake_ptx(emitted.files["kernel.cu"]))
    report = check_ptx(emitted.plan, ptx)
    assert any("not inside a loop" in str(f) for f in report.errors)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def _run_cli(args: list[str]) -> int:
    try:
        cli_main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_cli_refuses_with_exit_1_and_emits_with_unverified(tmp_path, verdict, capsys):
    verdict["default"] = "not verified"
    assert _run_cli(["emit", "ll", "--algorithm", "one-shot", "--out", str(tmp_path / "a")]) == 1
    assert "refusing to emit ll/one-shot" in capsys.readouterr().err
    assert _run_cli(["emit", "ll", "-a", "two-shot", "-o", str(tmp_path / "b"), "--unverified"]) == 0
    assert "UNVERIFIED" in (tmp_path / "b" / "kernel.cu").read_text()


def test_cli_bad_input_exits_2(tmp_path, verdict, capsys):
    verdict["default"] = "holds"
    assert _run_cli(["emit", "atomic-counter", "-a", "ring", "-o", str(tmp_path / "c")]) == 2
    assert "one-shot" in capsys.readouterr().err
    assert _run_cli(["emit", "-o", str(tmp_path / "d")]) == 2
    assert _run_cli(["emit", "nosuch", "-o", str(tmp_path / "e")]) == 2


def test_cli_all(tmp_path, verdict, capsys):
    verdict["default"] = "holds"
    assert _run_cli(["emit", "--all", "--out", str(tmp_path)]) == 0
    dirs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert dirs == sorted(f"{n}__{a}" for n, a in SHIPPED)


# ---------------------------------------------------------------------------
# Programs written by hand: constructs the shipped protocols do not use
# ---------------------------------------------------------------------------
def _hand_program(ops, registers=None):
    from collsim.ir import Buffer, Program, counter_layout

    return Program("hand", "one-shot", tuple(ops), (Buffer("flags", counter_layout(8), 1, 4, 1),), registers or {})


def test_kernel_boundaries_split_the_program_into_launches():
    from collsim.emit.cuda import generate_kernel_source
    from collsim.emit.plan import plan_program
    from collsim.ir import ITER, NRANKS, RANK, AtLeast, KernelBoundary, PollUntil, Ref, Scope, Sem, Store

    ops = [
        Store(Ref("flags", (RANK + 1) % NRANKS, region=RANK), None, Sem.RELEASE, Scope.SYS, flag=ITER + 1),
        KernelBoundary(),
        PollUntil(Ref("flags", RANK, region=(RANK + NRANKS - 1) % NRANKS), AtLeast(ITER + 1), Sem.ACQUIRE, Scope.SYS),
        KernelBoundary(),
    ]
    plan = plan_program(_hand_program(ops))
    assert len(plan.kernels) == 2
    source = generate_kernel_source(plan)
    assert "collsim_kernel_part0" in source and "collsim_kernel_part1" in source
    part0, part1 = source.split("collsim_kernel_part1")
    assert "p.ctrl[rank][chan] = iter + 1" not in part0  # ITER advances once per collective,
    assert "p.ctrl[rank][chan] = iter + 1" in part1  # at the end of its last launch


def test_constructs_without_a_translation_are_refused():
    from collsim.emit.cuda import generate_kernel_source
    from collsim.emit.plan import plan_program
    from collsim.ir import RANK, Atomic, KernelBoundary, Loop, Ref, RmwOp, Scope, Sem

    with pytest.raises(ValueError, match="compare"):  # a CAS needs its compare value, refused in the IR
        Atomic(RmwOp.CAS, Ref("flags", RANK), 1, Sem.ACQ_REL, Scope.SYS)
    cas = [Atomic(RmwOp.CAS, Ref("flags", RANK), 1, Sem.ACQ_REL, Scope.SYS, compare=0), KernelBoundary()]
    source = generate_kernel_source(plan_program(_hand_program(cas)))
    assert "atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;" in source
    weak = [Atomic(RmwOp.ADD, Ref("flags", RANK), 1, Sem.WEAK, Scope.SYS), KernelBoundary()]
    with pytest.raises(EmitError, match="weak"):
        generate_kernel_source(plan_program(_hand_program(weak)))
    nested = [Loop("k", 2, (KernelBoundary(),))]
    with pytest.raises(EmitError, match="inside a loop"):
        plan_program(_hand_program(nested))


def test_acquire_atomic_without_result_is_an_atom():
    from collsim.emit.cuda import generate_kernel_source
    from collsim.emit.plan import plan_program
    from collsim.ir import RANK, Atomic, KernelBoundary, Ref, RmwOp, Scope, Sem

    ops = [Atomic(RmwOp.ADD, Ref("flags", RANK), 1, Sem.ACQ_REL, Scope.GPU), KernelBoundary()]
    source = generate_kernel_source(plan_program(_hand_program(ops)))
    assert "atom.acq_rel.gpu.global.add.u64" in source and "red." not in source


def test_the_gate_asks_for_the_verdict_of_the_instance_it_emits(tmp_path, monkeypatch, collsim_cli):
    # A protocol from a file is emitted once `collsim verify FILE` holds (the gate looked it up by name, which
    # no registry knows, and refused every file); a shipped protocol with parameters of its own is gated by its
    # own verdict, not by the default one's.
    monkeypatch.setenv("COLLSIM_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "ll_deep.py"
    file.write_text("from protocols.ll import LL\n\n\nclass Deep(LL):\n    name = 'll-deep'\n")
    code, _, err = collsim_cli("emit", str(file), "--out", str(tmp_path / "before"))
    assert code != 0 and f"run `collsim verify {file}" in err and not (tmp_path / "before").exists()
    code, _, _ = collsim_cli("verify", str(file), "--ranks", "2", "--iterations", "1", "--no-dependencies")
    assert code == 0
    assert gate.verification_status(load_protocol_file(str(file)), "one-shot").verdict == "not verified"  # bound
    verify(str(file), ranks=3, iterations=2)  # the bound emit looks up
    code, _, err = collsim_cli("emit", str(file), "--out", str(tmp_path / "after"))
    assert code == 0, err
    assert (tmp_path / "after" / "kernel.cu").is_file()
    verify("ll", "one-shot")
    assert gate.verification_status("ll", "one-shot").holds
    one_bit = load_protocol("ll", flag_bits=1)
    assert gate.verification_status(one_bit, "one-shot").verdict == "not verified"
    with pytest.raises(VerificationRefused):
        prepare(one_bit, "one-shot")
