"""Per-launch message sizes, arbitrary initial contents and narrow accesses: IR, verifier, simulator, emitter."""
from __future__ import annotations

from pathlib import Path

import pytest

from collsim.emit import prepare
from collsim.ir import Buffer, Fill, HostMemset, Ref, counter_layout
from collsim.ir.registry import load_protocol
from collsim.verify import verify
from collsim.verify.lower import lower_instance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "protocols"


# -- arbitrary initial contents ------------------------------------------------------------------------------
def test_a_buffer_may_start_arbitrary_but_no_store_writes_arbitrary():
    assert Buffer("f", counter_layout(), depth=1, regions=1, lines=1, init="arbitrary").init == "arbitrary"
    with pytest.raises(ValueError, match="arbitrary"):
        Fill("arbitrary")
    with pytest.raises(ValueError, match="arbitrary"):
        HostMemset(Ref("f", 0), pattern="arbitrary")
    with pytest.raises(ValueError, match="'zero', 'sentinel' or 'arbitrary'"):
        Buffer("f", counter_layout(), depth=1, regions=1, lines=1, init="garbage")


def test_uncleared_ll_lines_are_caught_as_a_stale_read_on_garbage():
    result = verify("mutant-ll-uncleared", ranks=2, properties=["stale-read"], dependencies=False, use_cache=False)
    prop = result.properties["stale-read"]
    assert result.caught and prop.violated
    assert "init=\"arbitrary\"" in prop.counterexample.reason
    # the same protocol on cleared memory holds: the garbage is what breaks it
    assert verify("ll", ranks=2, properties=["stale-read"], dependencies=False, use_cache=False).ok


def test_a_protocol_that_clears_what_it_polls_holds_on_uncleared_memory():
    path = str(EXAMPLES / "uncleared_reset_barrier.py")
    low = lower_instance(load_protocol(path), "one-shot")
    assert low.arbitrary_init and all(bits == 64 or bits == 32 for bits in low.arbitrary_init.values())
    result = verify(path, ranks=2, dependencies=False, use_cache=False)
    assert result.ok, result.render()


def test_the_harness_fills_uncleared_buffers_with_garbage_a_flag_poll_accepts():
    emitted = prepare("mutant-ll-uncleared", "one-shot", unverified=True)
    kernel = emitted.files["kernel.cu"]
    # ll-16B line {data, flag, data, flag}: garbage data, flag 1 (the first epoch) in every flag word
    assert "kInit0[] = {0xa5a5a5a5u, 0x00000001u, 0xa5a5a5a5u, 0x00000001u}" in kernel
    assert '"lines", "ll-16B", "arbitrary"' in kernel
    cleared = prepare("ll", "one-shot", unverified=True).files["kernel.cu"]
    assert "kInit0[] = {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}" in cleared


# -- per-launch message sizes --------------------------------------------------------------------------------
SIZED = str(EXAMPLES / "ll_sized.py")
TOGGLE = str(EXAMPLES / "ll_sized_toggle.py")


def test_bounds_take_one_size_per_launch_within_the_allocation():
    from collsim.verify.instance import Bounds

    assert Bounds(ranks=2, iterations=2, lines=2, sizes=(1, 2)).describe().endswith("launches of 1/2 line(s) per chunk")
    with pytest.raises(ValueError, match="each of the 2 launches"):
        Bounds(ranks=2, iterations=2, lines=2, sizes=(1, 3))
    assert repr(Bounds(lines=2, sizes=(2, 1))) == repr(Bounds(lines=2))  # fixed-size cache keys unchanged


def test_each_launch_moves_its_own_lines_of_buffers_sized_for_the_largest():
    from collsim.verify.instance import Bounds

    low = lower_instance(load_protocol(SIZED), "one-shot", Bounds(ranks=2, iterations=2, lines=2, sizes=(1, 2)))
    lines_written = {it: {ev.line for ev in low.events if ev.is_write and ev.loc[0] == "lines" and ev.iteration == it}
                     for it in (0, 1)}
    assert lines_written == {0: {0}, 1: {0, 1}}
    assert {key[2] for key in low.expected_outputs if key[1] == 0} == {0, 1}       # 1 line = 2 elements
    assert {key[2] for key in low.expected_outputs if key[1] == 1} == {0, 1, 2, 3}  # 2 lines = 4 elements


def test_a_toggle_flag_right_at_one_size_is_a_stale_read_when_the_size_changes():
    fixed = verify(TOGGLE, ranks=2, sizes=(2, 2), dependencies=False, use_cache=False)
    assert fixed.ok, fixed.render()
    every = verify(TOGGLE, ranks=2, properties=["stale-read"], dependencies=False, use_cache=False)
    stale = every.properties["stale-read"]
    assert every.caught and stale.note == "at launches of 1/2 line(s) per chunk"
    assert any("each of 3 sequences" in note for note in every.bound.notes)


def test_full_epochs_hold_for_every_sequence_of_sizes():
    result = verify(SIZED, ranks=2, dependencies=False, use_cache=False)
    assert result.ok, result.render()
    assert any("each of 3 sequences" in note for note in result.bound.notes)


def test_cli_verify_takes_the_sizes_of_each_launch(capsys):
    from collsim.cli import main

    with pytest.raises(SystemExit) as err:
        main(["verify", TOGGLE, "--ranks", "2", "--sizes", "1,2", "--no-dependencies", "--no-cache"])
    assert err.value.code == 1
    out = capsys.readouterr().out
    assert "message size per launch: 1/2 line(s) per chunk" in out and "stale read           VIOLATED" in out
    for argv, message in ((["verify", TOGGLE, "--sizes", "1,x"], "--sizes: expected comma-separated"),
                          (["verify", TOGGLE, "--sizes", "0,1"], "--sizes: every launch moves at least 1"),
                          (["verify", "--all", "--sizes", "1,2"], "--sizes: applies to one protocol"),
                          (["verify", "ll", "--ranks", "2", "--sizes", "1,2"], "--sizes: protocol 'll' runs every")):
        with pytest.raises(SystemExit) as err:
            main(argv)
        assert err.value.code == 2 and message in capsys.readouterr().err, argv


def test_the_cache_answers_for_every_sequence_or_not_at_all(monkeypatch, tmp_path):
    from collsim.verify import verdict_for

    monkeypatch.setenv("COLLSIM_CACHE_DIR", str(tmp_path / "cache"))
    assert verdict_for(SIZED, ranks=2, dependencies=False, solve=False) is None
    verify(SIZED, ranks=2, sizes=(2, 2), dependencies=False)
    assert verdict_for(SIZED, ranks=2, dependencies=False, solve=False) is None  # (2, 1) and (1, 2) not solved yet
    solved = verify(SIZED, ranks=2, dependencies=False)
    cached = verdict_for(SIZED, ranks=2, dependencies=False, solve=False)
    assert cached is not None and cached.cached and cached.ok and cached.bound.notes == solved.bound.notes


def test_a_fixed_size_protocol_refuses_changing_sizes():
    from collsim.errors import InputError

    with pytest.raises(InputError, match="varying_sizes"):
        verify("ll", ranks=2, sizes=(1, 2), dependencies=False, use_cache=False)


def test_the_simulator_times_each_launch_at_its_own_size():
    from collsim.errors import InputError
    from collsim.models import SimRequest, resolve_protocol
    from collsim.sim.model import run_des, run_launches
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    request = SimRequest(topology=topo, ranks=4, algorithm="one-shot", protocol=resolve_protocol(SIZED),
                         size_bytes=64)
    sizes = [65536, 1024, 16384]
    runs = run_launches(request, sizes)
    alone = [run_des(SimRequest(topology=topo, ranks=4, algorithm="one-shot", protocol=resolve_protocol(SIZED),
                                size_bytes=size)).latency_us for size in sizes]
    assert [run.latency_us for run in runs] == alone
    assert runs[1].latency_us < runs[2].latency_us < runs[0].latency_us
    fixed = SimRequest(topology=topo, ranks=4, algorithm="one-shot", protocol=resolve_protocol("ll"), size_bytes=64)
    with pytest.raises(InputError, match="varying_sizes"):
        run_launches(fixed, [1024, 2048])


def test_the_harness_of_a_varying_size_program_interleaves_sizes_without_clearing():
    sized = prepare(SIZED, "one-shot", unverified=True).files["main.cu"]
    assert "void mixed_size_rounds(Harness& h)" in sized and "  mixed_size_rounds(h);\n" in sized
    assert "reset_state(h, h.cap);" in sized
    fixed = prepare("ll", "one-shot", unverified=True).files["main.cu"]
    assert "mixed_size_rounds" not in fixed  # a fixed-size program's harness is the template as it is


@pytest.mark.slow
@pytest.mark.parametrize("name", [TOGGLE, "mutant-ll-uncleared", str(EXAMPLES / "ll_half_flag.py"),
                                  str(EXAMPLES / "ll_half_flag_word_read.py")])
def test_emitted_programs_compile_with_warnings_as_errors(name, tmp_path):
    import subprocess

    from collsim.emit.package import write_program
    from collsim.emit.toolchain import WERROR, find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (PATH, $NVCC or $CUDA_HOME)")
    write_program(prepare(name, "one-shot", unverified=True), tmp_path)
    for source in ("kernel.cu", "main.cu"):
        cmd = [nvcc, "-O3", "-std=c++17", *WERROR, "-gencode", "arch=compute_90,code=sm_90", "-c", source,
               "-o", source + ".o"]
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr


# -- byte-wide and mixed-size accesses -----------------------------------------------------------------------
HALF = str(EXAMPLES / "ll_half_flag.py")
WORD_READ = str(EXAMPLES / "ll_half_flag_word_read.py")


def test_narrow_words_and_wider_loads_are_declared_in_the_layout():
    from collsim.ir import LineLayout, Word, WordRole

    assert Word(WordRole.FLAG, 1).narrow and not Word(WordRole.FLAG, 4).narrow
    with pytest.raises(ValueError, match="1 or 2 for a narrow word"):
        Word(WordRole.DATA, 3)
    words = (Word(WordRole.DATA, 2),) * 7 + (Word(WordRole.FLAG, 2),)
    line = LineLayout("l", words, 16, load_bytes=4)
    assert [line.load_element(i) for i in (0, 1, 6, 7)] == [(0, 4), (0, 4), (12, 4), (12, 4)]
    assert repr(line) == repr(LineLayout("l", words, 16))  # the program text (and the simulator's key) as before
    with pytest.raises(ValueError, match="cover whole words"):
        LineLayout("l", (Word(WordRole.DATA, 8),) * 2, 16, load_bytes=4)


def test_same_size_accesses_to_narrow_words_hold_and_a_wider_load_races():
    same = verify(HALF, ranks=2, dependencies=False, use_cache=False)
    assert same.ok, same.render()
    mixed = verify(WORD_READ, ranks=2, properties=["data-race"], dependencies=False, use_cache=False)
    assert mixed.caught
    reason = mixed.properties["data-race"].counterexample.reason
    assert "a 2-byte and a 4-byte access to the same bytes (mixed-size accesses)" in reason


def test_narrow_words_are_simulated_and_emitted():
    from collsim.models import SimRequest, resolve_protocol
    from collsim.sim.model import run_des
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    half, ll = resolve_protocol(HALF), resolve_protocol("ll")
    assert half.data_layout.narrow_words == tuple(range(8)) and half.payload_efficiency == 0.875

    def latency(proto):
        return run_des(SimRequest(topology=topo, ranks=4, algorithm="one-shot", protocol=proto,
                                  size_bytes=65536)).latency_us

    assert latency(half) < latency(ll)  # 87.5 % payload against LL's 50 %: fewer bytes on the wire
    kernel = prepare(HALF, "one-shot", unverified=True).files["kernel.cu"]
    # the 16-byte store assumption makes the line one access: one packed .b128 store and load of it (PTX has
    # no 16-byte vector of 16-bit elements); the poll compares the 16-bit epoch, masked out of its half
    assert kernel.count("st.volatile.global.b128 [%0], o_t;") == 1
    assert kernel.count("ld.volatile.global.b128 o_t, [%2];") == 1
    assert "e7 = (unsigned int)((o_w1 >> 48) & 0xffffu);" in kernel and "if (e7 == (unsigned int)o_want) break;" in kernel
    # the data words go to the register at their own width
    assert "*reinterpret_cast<unsigned short*>(o_into + o_d + 12) = (unsigned short)e6;" in kernel
    assert "static const unsigned int kInit0[] = {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u};" in kernel


def test_a_wider_load_is_emitted_at_its_declared_width():
    kernel = prepare(WORD_READ, "one-shot", unverified=True).files["kernel.cu"]
    assert "ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" in kernel  # load_bytes=4: 32-bit load elements
    assert "st.volatile.global.b128 [%0], o_t;" in kernel  # the writer as in ll_half_flag.py
    assert "e6 = (unsigned int)(o_w3 & 0xffffu);" in kernel and "e7 = (unsigned int)((o_w3 >> 16) & 0xffffu);" in kernel


def _narrow_program(layout, ops):
    from collsim.emit.plan import plan_program
    from collsim.ir import Program

    return plan_program(Program("hand", "one-shot", tuple(ops), (Buffer("lines", layout, 1, 4, 1),), {}))


def test_narrow_words_outside_stores_loads_and_polls_are_refused_naming_the_op():
    from collsim.emit.layouts import EmitError
    from collsim.ir import (RANK, Atomic, Input, KernelBoundary, LineLayout, ProxyThread, RmwOp, Scope, Sem, Store,
                            Word, WordRole)

    half = type(load_protocol(HALF)).data_layout
    add = Atomic(RmwOp.ADD, Ref("lines", RANK), Input(0), Sem.RELAXED, Scope.SYS, label="add_lines")
    with pytest.raises(EmitError, match="add_lines .*ll-bf16-half-flag has words narrower than 32 bits: the "
                                        "emitter prints the kernel's stores, loads and polls over them, not an "
                                        "Atomic"):
        _narrow_program(half, [add, KernelBoundary()])
    host_store = Store(Ref("lines", RANK), Input(0), Sem.RELEASE, Scope.SYS, flag=1, label="host_put")
    with pytest.raises(EmitError, match="host_put .*not a Store of a host proxy thread"):
        _narrow_program(half, [ProxyThread((host_store,)), KernelBoundary()])
    mixed = LineLayout("mixed", (Word(WordRole.DATA, 4),) * 3 + (Word(WordRole.DATA, 2), Word(WordRole.FLAG, 2)), 16)
    store = Store(Ref("lines", RANK), Input(0), Sem.VOLATILE, Scope.SYS, flag=1, label="store_mixed")
    with pytest.raises(EmitError, match="store_mixed .*mixes words of different widths"):
        _narrow_program(mixed, [store, KernelBoundary()])


def test_a_partial_store_of_narrow_words_is_one_store_per_word_at_its_width():
    from collsim.emit.cuda import generate_kernel_source
    from collsim.emit.ptxcheck import expected_instructions
    from collsim.ir import ITER, RANK, Equals, KernelBoundary, PollUntil, Scope, Sem, Store

    half = type(load_protocol(HALF)).data_layout
    ops = [Store(Ref("lines", RANK), None, Sem.RELEASE, Scope.SYS, flag=ITER + 1, label="flag_only"),
           PollUntil(Ref("lines", RANK), Equals(ITER + 1), Sem.ACQUIRE, Scope.SYS, label="poll"), KernelBoundary()]
    plan = _narrow_program(half, ops)  # no assumption: nothing joins the elements
    source = generate_kernel_source(plan)
    assert source.count("st.release.sys.global.b16 [%0], %1;") == 1
    assert "ld.acquire.sys.global.v4.b16 {%0, %1, %2, %3}, [%8];" in source
    assert "ld.acquire.sys.global.v4.b16 {%4, %5, %6, %7}, [%8+8];" in source
    store, poll = (want for _, want in sorted(expected_instructions(plan, "fp32").items()))
    assert (store.vector, store.types, store.count) == ("", ("b16", "u16"), 1)
    assert (poll.vector, poll.types, poll.count) == ("v4", ("b16", "u16"), 2)


def test_a_byte_flag_read_with_its_data_as_one_32_bit_word_races():
    from collsim.ir import LineLayout, Word, WordRole

    half = type(load_protocol(HALF))
    fp8 = LineLayout("fp8-byte-flag", (Word(WordRole.DATA, 1),) * 15 + (Word(WordRole.FLAG, 1),), 16)

    class ByteFlag(half):
        """Fifteen fp8 values and an 8-bit epoch in the last byte of the line, one 16-byte store."""

        name = "byte-flag"
        data_layout = fp8
        default_params = {**half.default_params, "flag_bits": 8}

    class ByteFlagWordRead(ByteFlag):
        """The same line polled as 32-bit words: the last one is three fp8 values and the flag byte."""

        name = "byte-flag-word-read"
        data_layout = LineLayout("fp8-byte-flag-u32-loads", fp8.words, 16, load_bytes=4)

    props = ["stale-read", "torn-read", "data-race"]
    _byte_flag_ptx_check(ByteFlag, ByteFlagWordRead)
    assert verify(ByteFlag(), ranks=2, properties=props, dependencies=False, use_cache=False).ok
    mixed = verify(ByteFlagWordRead(), ranks=2, properties=props, dependencies=False, use_cache=False)
    assert mixed.violated == ["data-race"]


def _byte_flag_ptx_check(byte_flag, word_read) -> None:
    """The byte-flag lines compile and pass the PTX check: packed .b128 under the 16-byte store assumption,
    vectors of bytes (``.v4.b8``, four per line) without it, 32-bit loads where the layout declares them."""
    import re
    import tempfile

    from collsim.emit.gate import verification_status
    from collsim.emit.package import build_program, write_program
    from collsim.emit.plan import plan_for
    from collsim.emit.ptxcheck import check_ptx
    from collsim.emit.toolchain import compile_ptx, find_nvcc

    class Bare(byte_flag):
        """The byte-flag line without the 16-byte assumption: nothing joins its bytes."""

        name = "byte-flag-bare"
        assumptions = ()

    want = {byte_flag: ("st.volatile.global.b128", "ld.volatile.global.b128"),
            word_read: ("st.volatile.global.b128", "ld.volatile.global.v4.u32"),
            Bare: ("st.volatile.global.v4.b8", "ld.volatile.global.v4.b8")}
    for cls, (store, load) in want.items():
        proto = cls()
        emitted = build_program(proto, "one-shot", verification_status(proto.name, "one-shot", solve=False),
                                unverified=True)
        kernel = emitted.files["kernel.cu"]
        assert re.search(re.escape(store) + r" \[%0\]", kernel) and load in kernel, cls.name
        if find_nvcc() is None:
            continue  # the PTX check needs the CUDA toolkit
        with tempfile.TemporaryDirectory() as tmp:
            write_program(emitted, Path(tmp))
            ptx = compile_ptx(Path(tmp))
        report = check_ptx(plan_for(proto, "one-shot"), ptx)
        assert report.ok, report.summary()
        per_line = 4 if cls is Bare else 1
        assert len(re.findall(re.escape(store) + r"\b", ptx)) == 3 * per_line  # fp32, bf16, int32 entries
