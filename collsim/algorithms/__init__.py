"""AllReduce algorithms: they turn a protocol into the program every rank runs.

An algorithm decides what data goes where, in how many phases, and where the
reductions happen; the protocol decides how each phase's data moves and is
synchronized (:meth:`collsim.ir.protocol.Protocol.exchange`).

Each algorithm states its precondition (what a rank holds before: its input)
and postcondition (every rank's output is the elementwise reduction of all
ranks' inputs), which the verifier checks over all executions.
"""
from __future__ import annotations

from collsim.algorithms.base import ALGORITHMS, generate, transfer_bytes

__all__ = ["ALGORITHMS", "generate", "transfer_bytes"]
