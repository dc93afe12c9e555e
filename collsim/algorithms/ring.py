"""Ring AllReduce: ``NRANKS - 1`` reduce-scatter steps, then ``NRANKS - 1`` all-gather steps.

Each step sends one chunk to the next rank and receives one from the
previous, so each rank moves ``2 (NRANKS - 1) / NRANKS * MSG`` bytes, the
bandwidth optimum, at the price of ``2 (NRANKS - 1)`` synchronized steps.
As in NCCL's ring (src/device/all_reduce.h runRing), a step after the first
receives a chunk, reduces it with the input (or copies it out) and sends the
result on, one forwarding exchange (``forward=True``); the last chunk is
only received. A rank can run ahead of its successor, so slots are reused
under credits (``lockstep=False``).

Precondition and postcondition as for one-shot.
"""
from __future__ import annotations

from collsim.errors import ProtocolDefinitionError
from collsim.algorithms.algorithm import Algorithm, chunk_bytes
from collsim.ir.expr import NRANKS, RANK
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import Exchange, Protocol, Recv, Send, peer_ranks

__all__ = ["RING", "build"]

EXCHANGES = 2 * (NRANKS - 1)


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    """Emit the ring program of ``protocol`` into ``b``."""
    if b.ctas != 1:
        # a ring's CTAs are its channels: each runs its own ring over its share of the message
        raise ProtocolDefinitionError("ring runs one CTA per rank (its channels are the CTAs: give the scenario "
                                      "channels instead of the protocol ctas)")
    chunk = chunk_bytes(protocol)
    nxt, prv = peer_ranks()
    phases = EXCHANGES
    b.register("recv", chunk)
    b.register("acc", chunk)

    def chunk_at(shift):  # chunk index RANK + shift, mod NRANKS (shift may be negative)
        return (RANK + shift + 2 * NRANKS) % NRANKS

    def reduce_step(p, write=False):
        """Receive chunk RANK - p (sent in phase p - 1), add this rank's input to it, send the sum on."""
        def consume(builder: ProgramBuilder, recv: Recv) -> None:
            builder.emit(Reduce("acc", (Input(chunk_at(-p) * chunk), Reg("recv")), chunk,
                                output_offset=chunk_at(-p) * chunk if write else None))

        protocol.exchange(b, Exchange(p, phases, (Send(nxt, Reg("acc"), chunk, chunk_at(-p) * chunk),),
                                      (Recv(prv, "recv", chunk, chunk_at(-p) * chunk),), lockstep=False,
                                      consume=consume, forward=True))

    def copy_step(p, index):
        """Receive the reduced chunk ``index`` (sent in phase p - 1), write it out, send it on."""
        def consume(builder: ProgramBuilder, recv: Recv) -> None:
            builder.emit(WriteOutput(Reg("acc"), index * chunk, chunk))

        protocol.exchange(b, Exchange(p, phases, (Send(nxt, Reg("acc"), chunk, index * chunk),),
                                      (Recv(prv, "acc", chunk, index * chunk),), lockstep=False,
                                      consume=consume, forward=True))

    # Reduce-scatter: phase 0 sends this rank's chunk from the input; each later phase receives, reduces
    # and sends on in one step (NCCL's directSend, directRecvReduceDirectSend).
    protocol.exchange(b, Exchange(0, phases, (Send(nxt, Input(RANK * chunk), chunk, RANK * chunk),), (),
                                  lockstep=False))
    with b.loop("s", NRANKS - 2) as s:
        reduce_step(s + 1)
    # Phase NRANKS-1 completes chunk RANK+1: it is written out and sent on (directRecvReduceCopyDirectSend).
    reduce_step(NRANKS - 1, write=True)
    # All-gather: receive a reduced chunk, write it out, send it on (directRecvCopyDirectSend) ...
    with b.loop("t", NRANKS - 2) as t:
        copy_step(NRANKS + t, chunk_at(-t))
    # ... and the last one is only received (directRecv).
    last = chunk_at(2)
    protocol.exchange(b, Exchange(phases - 1, phases, (), (Recv(prv, "acc", chunk, last * chunk),), lockstep=False,
                                  consume=lambda builder, recv: builder.emit(WriteOutput(Reg("acc"), last * chunk,
                                                                                         chunk))))


RING = Algorithm("ring", EXCHANGES, chunk_bytes, build)
