"""Two-shot AllReduce: reduce-scatter, then all-gather, each in one phase.

Rank ``r`` owns chunk ``r``: it receives chunk ``r`` from every peer,
reduces it, and sends the result to every peer. Two synchronization steps,
``2 (NRANKS - 1) / NRANKS * MSG`` bytes each way per rank.

With a protocol that reduces remotely (the switch's multimem.ld_reduce),
the reduce-scatter is one :class:`~collsim.ir.protocol.ReduceExchange`
in which rank ``r`` receives chunk ``r`` already reduced; the all-gather
is the same exchange as above.

Precondition and postcondition as for one-shot.
"""
from __future__ import annotations

from collsim.algorithms.algorithm import Algorithm, chunk_bytes
from collsim.ir.expr import NRANKS, RANK, Const
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX, Exchange, Protocol, Recv, ReduceExchange, Send

__all__ = ["TWO_SHOT", "build"]

EXCHANGES = Const(2)


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    """Emit the two-shot program of ``protocol`` into ``b``."""
    chunk = chunk_bytes(protocol)
    if protocol.reduces_remotely:
        b.register("mine", chunk)
        b.register("gathered", (NRANKS - 1) * chunk)
        protocol.reduce_exchange(b, ReduceExchange(0, EXCHANGES, Input(0), chunk, "mine", scatter=True))
        b.emit(WriteOutput(Reg("mine"), RANK * chunk, chunk))
    else:
        b.register("recv", (NRANKS - 1) * chunk)
        b.register("mine", chunk)
        b.register("gathered", (NRANKS - 1) * chunk)
        protocol.exchange(
            b,
            Exchange(
                phase=0,
                phases_per_iter=EXCHANGES,
                sends=(Send(PEER, Input(PEER * chunk), chunk, PEER * chunk),),
                recvs=(Recv(PEER, "recv", chunk, RANK * chunk, into_offset=PEER_INDEX * chunk),),
                over_peers=True,
            ),
        )
        b.emit(
            Reduce(
                "mine",
                (Input(RANK * chunk), Reg("recv", 0, count=NRANKS - 1, stride=chunk)),
                chunk,
                output_offset=RANK * chunk,
            )
        )

    def write_gathered(builder: ProgramBuilder, recv: Recv) -> None:
        builder.emit(WriteOutput(Reg("gathered", recv.into_offset), PEER * chunk, chunk))

    protocol.exchange(
        b,
        Exchange(
            phase=1,
            phases_per_iter=EXCHANGES,
            sends=(Send(PEER, Reg("mine"), chunk, RANK * chunk),),
            recvs=(Recv(PEER, "gathered", chunk, PEER * chunk, into_offset=PEER_INDEX * chunk),),
            over_peers=True,
            consume=write_gathered,
        ),
    )


TWO_SHOT = Algorithm("two-shot", EXCHANGES, chunk_bytes, build)
