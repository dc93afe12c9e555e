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

from collsim.algorithms.algorithm import Algorithm, chunk_bytes, cta_slice, shifted
from collsim.errors import ProtocolDefinitionError
from collsim.ir.expr import NRANKS, RANK, Const
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX, Exchange, Protocol, Recv, ReduceExchange, Send

__all__ = ["TWO_SHOT", "build"]

EXCHANGES = Const(2)


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    """Emit the two-shot program of ``protocol`` into ``b``; with several CTAs per rank each CTA runs it on its
    slice of every chunk (:func:`~collsim.algorithms.algorithm.cta_slice`)."""
    chunk = chunk_bytes(protocol)
    part, at = cta_slice(protocol, chunk, b.ctas)
    if protocol.reduces_remotely and b.ctas != 1:
        raise ProtocolDefinitionError("two-shot with a remote reduction runs one CTA per rank")
    if protocol.reduces_remotely:
        b.register("mine", chunk)
        b.register("gathered", (NRANKS - 1) * chunk)
        protocol.reduce_exchange(b, ReduceExchange(0, EXCHANGES, Input(0), chunk, "mine", scatter=True))
        b.emit(WriteOutput(Reg("mine"), RANK * chunk, chunk))
    else:
        b.register("recv", (NRANKS - 1) * part)
        b.register("mine", part)
        b.register("gathered", (NRANKS - 1) * part)
        protocol.exchange(
            b,
            Exchange(
                phase=0,
                phases_per_iter=EXCHANGES,
                sends=(Send(PEER, Input(shifted(PEER * chunk, at)), part, shifted(PEER * chunk, at)),),
                recvs=(Recv(PEER, "recv", part, shifted(RANK * chunk, at), into_offset=PEER_INDEX * part),),
                over_peers=True,
            ),
        )
        b.emit(
            Reduce(
                "mine",
                (Input(shifted(RANK * chunk, at)), Reg("recv", 0, count=NRANKS - 1, stride=part)),
                part,
                output_offset=shifted(RANK * chunk, at),
            )
        )

    def write_gathered(builder: ProgramBuilder, recv: Recv) -> None:
        builder.emit(WriteOutput(Reg("gathered", recv.into_offset), shifted(PEER * chunk, at), part))

    protocol.exchange(
        b,
        Exchange(
            phase=1,
            phases_per_iter=EXCHANGES,
            sends=(Send(PEER, Reg("mine"), part, shifted(RANK * chunk, at)),),
            recvs=(Recv(PEER, "gathered", part, shifted(PEER * chunk, at), into_offset=PEER_INDEX * part),),
            over_peers=True,
            consume=write_gathered,
        ),
    )


TWO_SHOT = Algorithm("two-shot", EXCHANGES, chunk_bytes, build)
