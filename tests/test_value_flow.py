"""Values from memory in the protocol: a loaded value as a poll's wait target, CAS loops, branches on results."""
from __future__ import annotations

from pathlib import Path

import pytest

from collsim.algorithms import generate
from collsim.errors import ProtocolDefinitionError
from collsim.ir import ITER, RANK, AtLeast, Equals, Ref, Scope, Sem, Store
from collsim.ir.checks import check_protocol_program
from collsim.ir.expr import Loaded, LoadedValue, loaded_registers
from collsim.ir.registry import load_protocol_file
from collsim.verify import verify

ROOT = Path(__file__).resolve().parents[1]
STEP = ROOT / "examples/protocols/step_barrier.py"
STEP_PEER = ROOT / "examples/protocols/step_barrier_peer.py"


# -- a loaded value as the wait target ---------------------------------------------------------------------------
def test_a_loaded_word_binds_to_a_value_each_consumer_resolves():
    target = AtLeast(Loaded("step") + ITER + 1).bind({"ITER": 2})
    assert target.value == LoadedValue("step", 0, 3) and target.loaded
    with pytest.raises(TypeError, match="resolve it"):
        target.holds(5)
    resolved = target.resolved(lambda register, offset: 4)
    assert resolved.value == 7 and resolved.holds(7) and not resolved.holds(6)
    assert Equals(Loaded("gen", 8) - 1).bind({}).describe() == "== gen[8] - 1"
    assert loaded_registers(Loaded("a") + Loaded("b", 8)) == ("a", "b")
    with pytest.raises(TypeError, match="only with \\+ and -"):
        (Loaded("step") * 2).evaluate({})


def test_a_step_counter_loaded_at_kernel_start_as_the_wait_target_holds():
    r = verify(str(STEP), dependencies=False, use_cache=False)
    assert r.ok, r.render(counterexamples=False)


def test_a_step_loaded_from_a_peer_before_it_is_saved_is_a_stale_read():
    r = verify(str(STEP_PEER), properties=["stale-read"], dependencies=False, use_cache=False)
    assert r.caught
    cex = r.properties["stale-read"].counterexample
    assert cex is not None and any(step.op == "load_step" for step in cex.steps)


def _variant(name, **methods):
    base = type(load_protocol_file(str(STEP)))
    return type(name.title().replace("-", ""), (base,), {"name": name, **methods})()


def test_a_wait_for_a_register_nothing_loaded_is_ill_formed_with_its_line(tmp_path):
    source = tmp_path / "never_loaded.py"
    source.write_text(
        "from collsim.ir.registry import load_protocol_file\n"
        f"_Base = type(load_protocol_file({str(STEP)!r}))\n"
        "\n"
        "class NeverLoaded(_Base):\n"
        "    name = 'never-loaded'\n"
        "\n"
        "    def prologue(self, b, launch):\n"
        "        b.register('step', 8)  # the load_step is gone\n")
    protocol = load_protocol_file(str(source))
    with pytest.raises(ProtocolDefinitionError, match="waits for a value loaded into register 'step' before") as err:
        check_protocol_program(generate(protocol, "one-shot"), protocol)
    assert err.value.line == 4 and "never_loaded.py" in str(err.value)


def test_a_loaded_value_is_a_wait_target_only():
    def epilogue(self, b, launch):
        b.emit(Store(Ref("steps", RANK), None, Sem.RELAXED, Scope.SYS, flag=Loaded("step") + 1, label="bump"))

    stored = _variant("stored-loaded", epilogue=epilogue)
    with pytest.raises(ProtocolDefinitionError, match="outside a poll's predicate"):
        check_protocol_program(generate(stored, "one-shot"), stored)


def test_the_simulator_waits_for_the_value_the_counter_held():
    from collsim.models import simulate
    from collsim.ir.registry import load_protocol
    from collsim.topology import load_topology

    topo = load_topology("hgx-h100")
    step = simulate(topo, 8, "one-shot", load_protocol_file(str(STEP)), 1024, model="des")
    plain = simulate(topo, 8, "one-shot", load_protocol("barrier"), 1024, model="des")
    # the same barriers plus a local step load and save: no faster, and not a wait for a value never written
    assert plain.latency_us <= step.latency_us < plain.latency_us + 2.0
