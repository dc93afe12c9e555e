"""The protocol IR: one description of a protocol, read by the simulator, the verifier and the emitter.

Start with :class:`~collsim.ir.protocol.Protocol` (what a protocol
declares), :mod:`collsim.ir.ops` (the operations), and
:func:`collsim.algorithms.generate` (protocol + algorithm -> per-rank
:class:`~collsim.ir.program.Program`).
"""
from __future__ import annotations

from collsim.ir.assumptions import ASSUMPTIONS, Assumption, get_assumption
from collsim.ir.buffers import Buffer
from collsim.ir.expr import ITER, MSG, NRANKS, RANK, Const, Expr, Var, ceil_div, mask
from collsim.ir.layout import LineLayout, Word, WordRole, counter_layout, plain_layout
from collsim.ir.ops import (
    AtLeast,
    Atomic,
    Equals,
    Fence,
    Fill,
    Input,
    KernelBoundary,
    Load,
    Loop,
    NotEqual,
    PollUntil,
    Reduce,
    Ref,
    Reg,
    Store,
    SyncGroup,
    WriteOutput,
)
from collsim.ir.program import FlatOp, Program, ProgramBuilder, flatten
from collsim.ir.protocol import PEER, PEER_INDEX, DataDomain, Exchange, Protocol, Recv, ReduceExchange, Send
from collsim.ir.types import FenceKind, Issuer, RmwOp, Scope, Sem

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations",)]
