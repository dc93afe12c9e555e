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
