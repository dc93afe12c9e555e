"""One-shot AllReduce: every rank gets every other rank's whole input and reduces locally.

One communication phase, ``(NRANKS - 1) * MSG`` bytes in and out of each
rank: the fewest synchronization steps, the most traffic. With a protocol
that reduces remotely (atomics), every rank instead adds its input into
every rank's result buffer.

Precondition: rank ``r`` holds input ``x_r``. Postcondition: every rank's
output is ``sum_r x_r``.
"""
from __future__ import annotations

from collsim.algorithms.algorithm import Algorithm, cta_slice, shifted, whole_message
from collsim.errors import ProtocolDefinitionError
from collsim.ir.expr import MSG, NRANKS, Const
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX, Exchange, Protocol, Recv, ReduceExchange, Send

__all__ = ["ONE_SHOT", "build"]

EXCHANGES = Const(1)


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    """Emit the one-shot program of ``protocol`` into ``b``; with several CTAs per rank each CTA runs it on
    its slice of the message (:func:`~collsim.algorithms.algorithm.cta_slice`)."""
    if protocol.reduces_remotely:
        if b.ctas != 1:
            raise ProtocolDefinitionError("one-shot with a remote reduction runs one CTA per rank")
        b.register("result", MSG)
        protocol.reduce_exchange(b, ReduceExchange(0, EXCHANGES, Input(0), MSG, "result"))
        b.emit(WriteOutput(Reg("result"), 0, MSG))
        return
    part, at = cta_slice(protocol, MSG, b.ctas)
    b.register("recv", (NRANKS - 1) * part)
    b.register("acc", part)
    protocol.exchange(
        b,
        Exchange(
            phase=0,
            phases_per_iter=EXCHANGES,
            sends=(Send(PEER, Input(shifted(0, at)), part, shifted(0, at)),),
            recvs=(Recv(PEER, "recv", part, shifted(0, at), into_offset=PEER_INDEX * part),),
            over_peers=True,
            lockstep=True,
        ),
    )
    b.emit(
        Reduce("acc", (Input(shifted(0, at)), Reg("recv", 0, count=NRANKS - 1, stride=part)), part,
               output_offset=shifted(0, at))
    )


ONE_SHOT = Algorithm("one-shot", EXCHANGES, whole_message, build)
