"""Floating-point meaning of sentinel data: the comparison (bitwise or IEEE) and the data's encodings."""
from __future__ import annotations

import re
import subprocess

import pytest
import z3

from collsim.emit import prepare
from collsim.emit.package import write_program
from collsim.emit.toolchain import WERROR, find_nvcc

from collsim.ir.floats import F32_NEG_ZERO, Compare, FloatInputs, WordEncoding, ieee_equal
from collsim.ir.ops import DATA_WORD, SENTINEL_WORD, NotEqual
from collsim.ir.protocol import DataDomain
from collsim.verify import verify
from protocols.sentinel import POISON, Sentinel

PLUS_ZERO = 0x00000000
ONE = 0x3F800000
QNAN = 0x7FC00000


@pytest.mark.parametrize("word, sentinel, bitwise, ieee", [
    (PLUS_ZERO, F32_NEG_ZERO, True, False),   # -0.0 == +0.0 under IEEE only
    (F32_NEG_ZERO, F32_NEG_ZERO, False, False),
    (ONE, F32_NEG_ZERO, True, True),
    (POISON, POISON, False, True),            # NaN != NaN: an IEEE poll passes on the poison itself
    (ONE, POISON, True, True),
    (ONE, ONE, False, False),
])
def test_not_equal_holds_bitwise_and_ieee(word, sentinel, bitwise, ieee):
    assert NotEqual(sentinel).holds(word) is bitwise
    assert bool(NotEqual(sentinel, Compare.IEEE).holds(word)) is ieee


@pytest.mark.parametrize("sentinel", [F32_NEG_ZERO, POISON, ONE])
@pytest.mark.parametrize("word", [PLUS_ZERO, F32_NEG_ZERO, ONE, POISON, QNAN])
def test_ieee_holds_is_one_definition_for_ints_and_z3(word, sentinel):
    pred = NotEqual(sentinel, Compare.IEEE)
    x = z3.Int("x")
    s = z3.Solver()
    s.add(x == word, z3.Not(pred.holds(x)) if pred.holds(word) else pred.holds(x))
    assert s.check() == z3.unsat
    assert bool(pred.holds(word)) is not bool(ieee_equal(word, sentinel))


def test_symbolic_words_follow_the_comparison():
    assert NotEqual(POISON).holds(SENTINEL_WORD) is False
    assert NotEqual(POISON, Compare.IEEE).holds(SENTINEL_WORD) is True
    assert NotEqual(F32_NEG_ZERO, Compare.IEEE).holds(SENTINEL_WORD) is False
    assert NotEqual(F32_NEG_ZERO, Compare.IEEE).holds(DATA_WORD) is True


def test_bitwise_compare_prints_as_before():
    assert repr(NotEqual(POISON)) == f"NotEqual(value={POISON})"
    assert NotEqual(POISON).describe() == "!= 0xfffafffa"
    assert NotEqual(POISON, "ieee").describe() == "!= 0xfffafffa (ieee)"
    assert repr(Sentinel.data_domain).startswith("DataDomain(forbidden_word=4294639610, statement=")


def test_word_encodings():
    finite = WordEncoding("f32", FloatInputs.FINITE)
    assert finite.admits(PLUS_ZERO) and finite.admits(F32_NEG_ZERO) and finite.admits(0x00000001)
    assert not finite.admits(QNAN) and not finite.admits(0x7F800000) and not finite.admits(POISON)
    assert not WordEncoding("f32", "finite", subnormals_flushed=True).admits(0x80000001)
    assert WordEncoding("f32", "nan-payloads").admits(POISON)
    pair = WordEncoding("bf16x2", FloatInputs.FINITE)
    assert pair.admits(0x3F803F80) and not pair.admits(POISON) and not pair.admits(0x3F80FFFA)
    assert WordEncoding("bf16x2", "nan-payloads").admits(POISON)
    with pytest.raises(ValueError, match="f32, bf16x2"):
        WordEncoding("fp8")


class _SentinelBf16Finite(Sentinel):
    """Sentinel moving finite bf16 pairs: no pair forms the NaN poison, with no forbidden word stated."""

    name = "sentinel-bf16-finite"
    data_domain = DataDomain(None, "user data are finite bf16 pairs", WordEncoding("bf16x2", FloatInputs.FINITE))


class _SentinelNegZeroBitwise(Sentinel):
    """The -0.0 sentinel compared bitwise: +0.0 data differs from it, so only -0.0 itself must be excluded."""

    name = "sentinel-neg-zero-bitwise"
    sentinel = (F32_NEG_ZERO, Compare.BITWISE)
    data_domain = DataDomain(F32_NEG_ZERO, "no word of user data is -0.0", WordEncoding("f32", FloatInputs.FINITE))


@pytest.mark.parametrize("proto, algorithm", [(_SentinelBf16Finite, "one-shot"), (_SentinelNegZeroBitwise, "one-shot"),
                                               (_SentinelNegZeroBitwise, "two-shot")])
def test_domain_that_excludes_the_sentinel_holds(proto, algorithm):
    r = verify(proto(), algorithm=algorithm, properties=["sentinel-collision"], dependencies=False, use_cache=False,
               timeout=120)
    assert r.properties["sentinel-collision"].holds, r.properties["sentinel-collision"].describe()


def test_neg_zero_ieee_counterexample_writes_plus_zero():
    r = verify("mutant-sentinel-neg-zero-ieee", properties=["sentinel-collision"], dependencies=False,
               use_cache=False, timeout=120)
    result = r.properties["sentinel-collision"]
    assert result.violated
    assert "stores user data 0x0 that the poll's ieee comparison takes for the sentinel 0x80000000" in result.counterexample.reason


def test_two_shot_with_partial_sums_in_polled_words_is_caught_too():
    """Two-shot also stores partial sums into polled words (their bit patterns are encoded apart from the inputs)."""
    r = verify("mutant-sentinel-neg-zero-ieee", algorithm="two-shot", properties=["sentinel-collision"],
               dependencies=False, use_cache=False, timeout=120)
    assert r.properties["sentinel-collision"].violated


def _poll_line(kernel: str) -> str:
    return next(line for line in kernel.splitlines() if "break;" in line and "e3" in line and "timeout" not in line)


def test_emitter_prints_the_declared_comparison():
    bitwise = prepare("sentinel", "one-shot", unverified=True).files["kernel.cu"]
    ieee = prepare("mutant-sentinel-neg-zero-ieee", "one-shot", unverified=True).files["kernel.cu"]
    assert "__uint_as_float" not in _poll_line(bitwise) and "e3 != (unsigned int)o_want" in _poll_line(bitwise)
    assert ("__uint_as_float((unsigned int)e3) != __uint_as_float((unsigned int)o_want)"
            in _poll_line(ieee))


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (PATH, $NVCC or $CUDA_HOME): no CUDA compile")
def test_ieee_compare_compiles_for_sm90_as_a_float_compare(tmp_path):
    write_program(prepare("mutant-sentinel-neg-zero-ieee", "one-shot", unverified=True), tmp_path)
    cmd = [find_nvcc(), "-O3", "-std=c++17", *WERROR, "-gencode", "arch=compute_90,code=sm_90", "-ptx",
           "kernel.cu", "-o", "kernel.ptx"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ptx = (tmp_path / "kernel.ptx").read_text()
    assert re.search(r"setp\.neu\.f32\s+%p\d+, %f\d+, 0f80000000;", ptx)  # unordered !=: NaN data passes
