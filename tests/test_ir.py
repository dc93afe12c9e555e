"""The protocol IR: programs generate, pass the well-formedness rules, and mean what they say."""
from __future__ import annotations

import pytest

from collsim.algorithms import generate
from collsim.errors import InputError, ProtocolDefinitionError
from collsim.ir import (
    AtLeast, Equals, Load, NotEqual, PollUntil, Ref, Store, ProgramBuilder, Program, Sem, Scope,
)
from collsim.ir.checks import check_program
from collsim.ir.registry import list_protocols, load_protocol

SHIPPED = [(name, alg) for name in list_protocols() for alg in load_protocol(name).algorithms]


def env(rank=0, nranks=4, iteration=0, msg=4096):
    return {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}


@pytest.mark.parametrize("name,algorithm", SHIPPED)
def test_every_shipped_program_is_well_formed(name, algorithm):
    check_program(generate(load_protocol(name), algorithm))


def test_the_shipped_protocols():
    assert list_protocols() == ["atomic-counter", "barrier", "ll", "ll128", "ll128-atomic", "ll128-atomic-nvls", "nvls",
                                "nvls-poison", "sentinel", "signal-pad", "simple"]


def test_unsupported_combination_lists_what_can_run():
    with pytest.raises(InputError) as err:
        generate(load_protocol("atomic-counter"), "ring")
    assert "one-shot" in str(err.value)


def test_unknown_parameter_is_refused_with_choices():
    with pytest.raises(ProtocolDefinitionError) as err:
        load_protocol("ll", depht=3)
    assert "depth" in str(err.value)


def test_ll_one_shot_sends_whole_message_to_every_peer_with_the_epoch_flag():
    prog = generate(load_protocol("ll"), "one-shot")
    ops = [f.op for f in prog.flatten(env(rank=1, nranks=4, iteration=5, msg=64))]
    stores = [op for op in ops if isinstance(op, Store)]
    assert sorted(op.dst.rank for op in stores) == [0, 2, 3]
    assert all(op.flag == 6 and op.dst.slot == 1 and op.dst.region == 1 for op in stores)
    assert all(op.dst.lines == 8 for op in stores)  # 64 B of data, 8 B per 16-B line
    polls = [op for op in ops if isinstance(op, PollUntil)]
    assert sorted(op.src.region for op in polls) == [0, 2, 3]
    assert all(isinstance(op.until, Equals) and op.until.value == 6 and op.sem is Sem.VOLATILE for op in polls)


def test_flag_width_wraps_the_epoch():
    prog = generate(load_protocol("ll", flag_bits=2), "one-shot")
    ops = [f.op for f in prog.flatten(env(iteration=3))]
    assert {op.flag for op in ops if isinstance(op, Store)} == {0}


def test_ring_uses_credits_and_rotates_slots():
    prog = generate(load_protocol("simple"), "ring")
    ops = [f.op for f in prog.flatten(env(rank=0, nranks=4, iteration=0))]
    credit_waits = [op for op in ops if isinstance(op, PollUntil) and op.src.buffer == "credits"]
    assert len(credit_waits) == 2 * (4 - 1)
    assert [op.until.value for op in credit_waits] == [s + 1 - 2 for s in range(6)]
    data = [op for op in ops if isinstance(op, Store) and op.dst.buffer == "slots"]
    assert [op.dst.slot for op in data] == [s % 2 for s in range(6)]
    assert all(op.dst.rank == 1 for op in data)


def test_sentinel_repoisons_the_slot_no_peer_can_be_writing():
    prog = generate(load_protocol("sentinel"), "one-shot")
    ops = [f.op for f in prog.flatten(env(iteration=4))]
    repoison = [op for op in ops if isinstance(op, Store) and op.label == "repoison"]
    polls = [op for op in ops if isinstance(op, PollUntil)]
    assert {op.dst.slot for op in repoison} == {(4 + 2) % 3}
    assert {op.src.slot for op in polls} == {4 % 3}
    assert all(op.until == NotEqual(0xFFFAFFFA) for op in polls)


def test_barrier_numbers_never_repeat_across_launches():
    prog = generate(load_protocol("barrier"), "two-shot")
    seen = []
    for iteration in range(3):
        ops = [f.op for f in prog.flatten(env(rank=0, nranks=2, iteration=iteration))]
        seen += [op.until.value for op in ops if isinstance(op, PollUntil)]
    assert len(seen) == len(set(seen)) == 9
    assert seen == sorted(seen)


def test_simple_fences_between_data_and_step_counter():
    prog = generate(load_protocol("simple"), "one-shot")
    ops = [f.op for f in prog.flatten(env(nranks=2))]
    kinds = [type(op).__name__ for op in ops]
    first_step = next(i for i, op in enumerate(ops) if isinstance(op, Store) and op.dst.buffer == "steps")
    assert "Fence" in kinds[:first_step]
    assert kinds.index("Store") < kinds.index("Fence")


def test_atomic_counter_counts_arrivals_per_slot_use():
    prog = generate(load_protocol("atomic-counter"), "one-shot")
    ops = [f.op for f in prog.flatten(env(nranks=4, iteration=5))]
    wait = next(op for op in ops if isinstance(op, PollUntil))
    assert isinstance(wait.until, AtLeast) and wait.until.value == 4 * (5 // 2 + 1) and wait.sem is Sem.ACQUIRE


def test_poll_on_a_location_nobody_writes_is_refused():
    b = ProgramBuilder()
    from collsim.ir import Buffer, counter_layout, RANK
    b.emit(PollUntil(Ref("flags", RANK), Equals(1), Sem.ACQUIRE, Scope.SYS))
    prog = Program("broken", "one-shot", b.ops, (Buffer("flags", counter_layout(), 1, 1, 1),))
    with pytest.raises(ProtocolDefinitionError, match="no rank writes"):
        check_program(prog)


def test_out_of_range_buffer_index_is_refused():
    b = ProgramBuilder()
    from collsim.ir import Buffer, counter_layout, RANK, NRANKS
    b.emit(Store(Ref("flags", RANK, region=NRANKS), None, Sem.RELEASE, Scope.SYS, flag=1))
    prog = Program("broken", "one-shot", b.ops, (Buffer("flags", counter_layout(), 1, NRANKS, 1),))
    with pytest.raises(ProtocolDefinitionError, match="outside"):
        check_program(prog)


@pytest.mark.parametrize("name,algorithm", SHIPPED)
def test_op_count_does_not_grow_with_message_size(name, algorithm):
    prog = generate(load_protocol(name), algorithm)
    small = prog.op_count(env(nranks=8, msg=8))
    large = prog.op_count(env(nranks=8, msg=1 << 30))
    assert small == large


def test_loads_of_peers_are_remote_only_in_the_pull_protocol():
    for name in ("barrier", "ll"):
        prog = generate(load_protocol(name), "one-shot")
        ops = [f.op for f in prog.flatten(env(rank=2))]
        remote_loads = [op for op in ops if isinstance(op, (Load, PollUntil)) and op.src.rank != 2]
        assert bool(remote_loads) == (name == "barrier")




@pytest.mark.parametrize("params, message", [
    ({"flag_bits": 0}, "a flag is 1 to 64 bits wide, not 0"),
    ({"flag_bits": 65}, "a flag is 1 to 64 bits wide, not 65"),
    ({"flag_bits": 2.5}, "parameter 'flag_bits' is a whole number (its default is 32), not 2.5"),
    ({"depth": True}, "parameter 'depth' is a whole number (its default is 2), not True"),
    ({"depth": "2"}, "parameter 'depth' is a whole number"),
])
def test_a_parameter_of_the_wrong_kind_or_width_is_refused_when_the_protocol_is_built(params, message):
    # before: a 65-bit or 2.5-bit flag was verified (all properties held) and simulated as if a GPU had one
    with pytest.raises(ProtocolDefinitionError) as refused:
        load_protocol("ll", **params)
    assert message in str(refused.value) and refused.value.field == f"params.{next(iter(params))}"


def test_parameters_of_their_default_kind_are_kept():
    from collsim.ir.types import Sem

    assert load_protocol("ll", flag_bits=64, depth=3).params["flag_bits"] == 64
    assert load_protocol("atomic-counter", counter_sem=Sem.RELAXED, reset=False).params["reset"] is False
    with pytest.raises(ProtocolDefinitionError, match="is a Sem"):
        load_protocol("atomic-counter", counter_sem="relaxed")
