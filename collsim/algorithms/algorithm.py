"""What an algorithm declares: its name, its exchanges per launch, the most bytes one send moves, its builder.

These are facts of the algorithm, read by :func:`collsim.algorithms.generate` (the launch context it
hands to a protocol's hooks), by :func:`collsim.algorithms.sync_rounds` (for the analytic model) and
by the verifier (to size a tiny message), so no consumer has to name an algorithm to know them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from collsim.ir.expr import CTA, MSG, NRANKS, Expr, ceil_div
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Protocol

__all__ = ["Algorithm", "chunk_bytes", "whole_message", "cta_slice", "shifted"]


def chunk_bytes(protocol: Protocol) -> Expr:
    """A rank's share of the message, rounded up to whole data lines so every chunk starts on a line."""
    line_data = protocol.data_layout.data_bytes
    return ceil_div(MSG, NRANKS * line_data) * line_data


def cta_slice(protocol: Protocol, nbytes: Expr, ctas: int) -> tuple[Expr, Expr | None]:
    """``(bytes, offset)`` of this CTA's slice of every ``nbytes`` piece an algorithm moves, with ``ctas`` CTAs
    per rank: CTA ``c`` moves bytes ``[c * part, (c + 1) * part)`` of each piece, ``part`` rounded up to whole
    data lines (the last slice may run past the piece: padding nobody reads). With one CTA: ``(nbytes, None)``,
    the piece itself, its expressions unchanged.

    >>> from collsim.ir.registry import load_protocol
    >>> part, offset = cta_slice(load_protocol("simple"), chunk_bytes(load_protocol("simple")), 2)
    >>> env = {"MSG": 256, "NRANKS": 4, "CTA": 1}
    >>> part.evaluate(env), offset.evaluate(env)
    (32, 32)
    """
    if ctas == 1:
        return nbytes, None
    line_data = protocol.data_layout.data_bytes
    part = ceil_div(nbytes, ctas * line_data) * line_data
    return part, CTA * part


def shifted(value: Expr | int, offset: Expr | None) -> Expr | int:
    """``value + offset``, or ``value`` itself without an offset (a program of one CTA per rank)."""
    return value if offset is None else value + offset


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
