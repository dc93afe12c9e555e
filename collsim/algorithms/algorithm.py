"""What an algorithm declares: its name, its exchanges per launch, the most bytes one send moves, its builder.

These are facts of the algorithm, read by :func:`collsim.algorithms.generate` (the launch context it
hands to a protocol's hooks), by :func:`collsim.algorithms.sync_rounds` (for the analytic model) and
by the verifier (to size a tiny message), so no consumer has to name an algorithm to know them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from collsim.ir.expr import MSG, NRANKS, Expr, ceil_div
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Protocol

__all__ = ["Algorithm", "chunk_bytes", "whole_message"]


def chunk_bytes(protocol: Protocol) -> Expr:
    """A rank's share of the message, rounded up to whole data lines so every chunk starts on a line."""
    line_data = protocol.data_layout.data_bytes
    return ceil_div(MSG, NRANKS * line_data) * line_data


def whole_message(protocol: Protocol) -> Expr:
    """The whole message: what one send of an algorithm that sends everything at once moves."""
    return MSG


@dataclass(frozen=True)
class Algorithm:
    """An AllReduce algorithm.

    Parameters
    ----------
    name : str
        ``"one-shot"``, ``"two-shot"``, ``"ring"``.
    exchanges : Expr
        Communication phases per launch (the ``phases_per_iter`` of each of its :class:`Exchange`\\ s).
    transfer_bytes : callable
        ``transfer_bytes(protocol)``: the most bytes one send moves (it sizes the protocol's buffers).
    build : callable
        ``build(protocol, builder)``: emit the phases (through the protocol's hooks) and the local reductions.
    """

    name: str
    exchanges: Expr
    transfer_bytes: Callable[[Protocol], Expr]
    build: Callable[[Protocol, ProgramBuilder], None]
