"""The protocol IR: one description of a protocol, read by the simulator, the verifier and the emitter.

Start with :class:`~collsim.ir.protocol.Protocol` (what a protocol
declares), :mod:`collsim.ir.ops` (the operations), and
:func:`collsim.algorithms.generate` (protocol + algorithm -> per-rank
:class:`~collsim.ir.program.Program`). A consumer walks operations through a
subclass of :class:`~collsim.ir.visit.OpVisitor`.
"""
from __future__ import annotations

from collsim.ir.assumptions import ASSUMPTIONS, Assumption, get_assumption
from collsim.ir.buffers import Buffer
from collsim.ir.expr import ARG_ITER, ITER, MSG, NRANKS, RANK, Const, Expr, Loaded, Var, ceil_div, mask
from collsim.ir.layout import LineLayout, Word, WordRole, counter_layout, plain_layout
from collsim.ir.ops import (
    DATA_WORD,
    OP_TYPES,
    SENTINEL_WORD,
    AtLeast,
    Atomic,
    Equals,
    Fence,
    Fill,
    HostBarrier,
    HostMemset,
    Input,
    KernelBoundary,
    Load,
    Loop,
    MulticastRef,
    MultimemLoadReduce,
    MultimemRed,
    MultimemStore,
    NotEqual,
    Op,
    PollUntil,
    Predicate,
    ProxyThread,
    ProxyFence,
    BulkLoad,
    Reduce,
    Ref,
    Reg,
    Store,
    SyncGroup,
    When,
    WriteOutput,
)
from collsim.ir.origin import SourceLocation
from collsim.ir.program import FlatOp, Program, ProgramBuilder, flatten, walk
from collsim.ir.protocol import PEER, PEER_INDEX, DataDomain, Exchange, Launch, Protocol, Recv, ReduceExchange, Send
from collsim.ir.types import FenceKind, FillPattern, Issuer, RmwOp, Scope, Sem
from collsim.ir.visit import OpVisitor

__all__ = [
    # expressions
    "RANK", "NRANKS", "ITER", "ARG_ITER", "MSG", "Const", "Expr", "Var", "ceil_div", "mask", "Loaded",
    # memory and its vocabulary
    "Buffer", "LineLayout", "Word", "WordRole", "counter_layout", "plain_layout",
    "Sem", "Scope", "FenceKind", "RmwOp", "Issuer", "FillPattern",
    "ASSUMPTIONS", "Assumption", "get_assumption",
    # operations
    "Op", "OP_TYPES", "Store", "Load", "PollUntil", "Fence", "Atomic", "Reduce", "WriteOutput", "SyncGroup",
    "KernelBoundary", "Loop", "MultimemLoadReduce", "MultimemStore", "MultimemRed", "HostMemset", "HostBarrier",
    "ProxyThread", "BulkLoad", "ProxyFence", "When",
    "Ref", "MulticastRef", "Input", "Reg", "Fill", "Predicate", "Equals", "AtLeast", "NotEqual",
    "DATA_WORD", "SENTINEL_WORD",
    # programs and protocols
    "Program", "ProgramBuilder", "FlatOp", "flatten", "walk", "SourceLocation",
    "Protocol", "DataDomain", "Exchange", "ReduceExchange", "Send", "Recv", "Launch", "PEER", "PEER_INDEX",
    # consumers
    "OpVisitor",
]
