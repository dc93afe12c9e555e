"""Ring AllReduce: ``NRANKS - 1`` reduce-scatter steps, then ``NRANKS - 1`` all-gather steps.

Each step sends one chunk to the next rank and receives one from the
previous, so each rank moves ``2 (NRANKS - 1) / NRANKS * MSG`` bytes, the
bandwidth optimum, at the price of ``2 (NRANKS - 1)`` synchronized steps.
A rank can run ahead of its successor, so slots are reused under credits
(``lockstep=False``).

Precondition and postcondition as for one-shot.
"""
from __future__ import annotations

from collsim.algorithms.algorithm import Algorithm, chunk_bytes
from collsim.ir.expr import NRANKS, RANK
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Protocol, Recv, Send, peer_ranks

__all__ = ["RING", "build"]

EXCHANGES = 2 * (NRANKS - 1)


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    """Emit the ring program of ``protocol`` into ``b``."""
    chunk = chunk_bytes(protocol)
    nxt, prv = peer_ranks()
    phases = EXCHANGES
    b.register("recv", chunk)
    b.register("acc", chunk)

    def chunk_at(shift):  # chunk index RANK + shift, mod NRANKS (shift may be negative)
        return (RANK + shift + 2 * NRANKS) % NRANKS

    # Reduce-scatter step 0 sends straight from the input.
    protocol.exchange(
        b,
        Exchange(0, phases, (Send(nxt, Input(RANK * chunk), chunk, RANK * chunk),),
                 (Recv(prv, "recv", chunk, chunk_at(-1) * chunk),), lockstep=False),
    )
    b.emit(Reduce("acc", (Input(chunk_at(-1) * chunk), Reg("recv")), chunk))
    with b.loop("s", NRANKS - 2) as s:
        step = s + 1
        protocol.exchange(
            b,
            Exchange(step, phases, (Send(nxt, Reg("acc"), chunk, chunk_at(-step) * chunk),),
                     (Recv(prv, "recv", chunk, chunk_at(-step - 1) * chunk),), lockstep=False),
        )
        b.emit(Reduce("acc", (Input(chunk_at(-step - 1) * chunk), Reg("recv")), chunk))
    # acc now holds chunk RANK+1, reduced over every rank.
    b.emit(WriteOutput(Reg("acc"), chunk_at(1) * chunk, chunk))
    with b.loop("t", NRANKS - 1) as t:
        protocol.exchange(
            b,
            Exchange(NRANKS - 1 + t, phases, (Send(nxt, Reg("acc"), chunk, chunk_at(1 - t) * chunk),),
                     (Recv(prv, "acc", chunk, chunk_at(-t) * chunk),), lockstep=False),
        )
        b.emit(WriteOutput(Reg("acc"), chunk_at(-t) * chunk, chunk))


RING = Algorithm("ring", EXCHANGES, chunk_bytes, build)
