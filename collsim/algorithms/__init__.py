"""AllReduce algorithms: they turn a protocol into the program every rank runs.

An algorithm decides what data goes where, in how many phases, and where the
reductions happen; the protocol decides how each phase's data moves and is
synchronized (:meth:`collsim.ir.protocol.Protocol.exchange`).

Each algorithm states its precondition (what a rank holds before: its input)
and postcondition (every rank's output is the elementwise reduction of all
ranks' inputs), which the verifier checks over all executions, and declares
its shape (:class:`~collsim.algorithms.algorithm.Algorithm`: exchanges per
launch, bytes per send).
"""
from __future__ import annotations

from collsim.algorithms.algorithm import Algorithm, chunk_bytes
from collsim.algorithms.generate import (
    ALGORITHMS,
    ProgramBuildError,
    algorithm_named,
    generate,
    sync_rounds,
    transfer_bytes,
)

__all__ = ["ALGORITHMS", "Algorithm", "ProgramBuildError", "algorithm_named", "chunk_bytes", "generate",
           "sync_rounds", "transfer_bytes"]
