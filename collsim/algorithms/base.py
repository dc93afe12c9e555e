"""Algorithm dispatch: ``generate(protocol, algorithm)`` returns the symbolic per-rank :class:`Program`."""
from __future__ import annotations

from typing import Callable

from collsim.errors import InputError
from collsim.ir.expr import MSG, NRANKS, Expr, ceil_div
from collsim.ir.ops import KernelBoundary
from collsim.ir.program import Program, ProgramBuilder
from collsim.ir.protocol import Protocol

__all__ = ["ALGORITHMS", "generate", "transfer_bytes", "chunk_bytes"]

ALGORITHMS = ("one-shot", "two-shot", "ring")


def chunk_bytes(protocol: Protocol) -> Expr:
    """A rank's share of the message, rounded up to whole data lines so every chunk starts on a line."""
    line_data = protocol.data_layout.data_bytes
    return ceil_div(MSG, NRANKS * line_data) * line_data


def transfer_bytes(protocol: Protocol, algorithm: str) -> Expr:
    """The most bytes one send of ``algorithm`` moves: the whole message for one-shot, a chunk otherwise."""
    return MSG if algorithm == "one-shot" else chunk_bytes(protocol)


def _builders() -> dict[str, Callable[[Protocol, ProgramBuilder], None]]:
    from collsim.algorithms import one_shot, ring, two_shot

    return {"one-shot": one_shot.build, "two-shot": two_shot.build, "ring": ring.build}


def generate(protocol: Protocol, algorithm: str) -> Program:
    """The program every rank runs for one AllReduce with ``protocol`` under ``algorithm``.

    Raises
    ------
    InputError
        if the protocol has no program for the algorithm; the message lists the ones it has.
    """
    if algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r}", field="algorithm", choices=ALGORITHMS)
    if algorithm not in protocol.algorithms:
        raise InputError(
            f"protocol {protocol.name!r} has no {algorithm} program",
            field="algorithm",
            choices=protocol.algorithms,
        )
    b = ProgramBuilder()
    size = transfer_bytes(protocol, algorithm)
    protocol.prologue(b, size)
    _builders()[algorithm](protocol, b)
    protocol.epilogue(b, size)
    b.emit(KernelBoundary())
    return Program(protocol.name, algorithm, b.ops, protocol.buffers(size), dict(b.registers))
