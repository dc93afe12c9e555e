"""One-shot AllReduce: every rank gets every other rank's whole input and reduces locally.

One communication phase, ``(NRANKS - 1) * MSG`` bytes in and out of each
rank: the fewest synchronization steps, the most traffic. With a protocol
that reduces remotely (atomics), every rank instead adds its input into
every rank's result buffer.

Precondition: rank ``r`` holds input ``x_r``. Postcondition: every rank's
output is ``sum_r x_r``.
"""
from __future__ import annotations

from collsim.algorithms.algorithm import Algorithm, whole_message
from collsim.ir.expr import MSG, NRANKS, Const
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX, Exchange, Protocol, Recv, ReduceExchange, Send

__all__ = ["ONE_SHOT", "build"]

EXCHANGES = Const(1)


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    """Emit the one-shot program of ``protocol`` into ``b``."""
    if protocol.reduces_remotely:
        b.register("result", MSG)
        protocol.reduce_exchange(b, ReduceExchange(0, EXCHANGES, Input(0), MSG, "result"))
        b.emit(WriteOutput(Reg("result"), 0, MSG))
        return
    b.register("recv", (NRANKS - 1) * MSG)
    b.register("acc", MSG)
    protocol.exchange(
        b,
        Exchange(
            phase=0,
            phases_per_iter=EXCHANGES,
            sends=(Send(PEER, Input(0), MSG, 0),),
            recvs=(Recv(PEER, "recv", MSG, 0, into_offset=PEER_INDEX * MSG),),
            over_peers=True,
            lockstep=True,
        ),
    )
    b.emit(
        Reduce("acc", (Input(0), Reg("recv", 0, count=NRANKS - 1, stride=MSG)), MSG, output_offset=0)
    )


ONE_SHOT = Algorithm("one-shot", EXCHANGES, whole_message, build)
