"""One-shot AllReduce: every rank gets every other rank's whole input and reduces locally.

One communication phase, ``(NRANKS - 1) * MSG`` bytes in and out of each
rank: the fewest synchronization steps, the most traffic. With a protocol
that reduces remotely (atomics), every rank instead adds its input into
every rank's result buffer.

Precondition: rank ``r`` holds input ``x_r``. Postcondition: every rank's
output is ``sum_r x_r``.
"""
from __future__ import annotations

from collsim.ir.expr import MSG, NRANKS
from collsim.ir.ops import Input, Reduce, Reg, WriteOutput
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX, Exchange, Protocol, Recv, ReduceExchange, Send


def build(protocol: Protocol, b: ProgramBuilder) -> None:
    if protocol.reduces_remotely:
        b.register("result", MSG)
        protocol.reduce_exchange(b, ReduceExchange(0, 1, Input(0), MSG, "result"))
        b.emit(WriteOutput(Reg("result"), 0, MSG))
        return
    b.register("recv", (NRANKS - 1) * MSG)
    b.register("acc", MSG)
    protocol.exchange(
        b,
        Exchange(
            phase=0,
            phases_per_iter=1,
            sends=(Send(PEER, Input(0), MSG, 0),),
            recvs=(Recv(PEER, "recv", MSG, 0, into_offset=PEER_INDEX * MSG),),
            over_peers=True,
            lockstep=True,
        ),
    )
    b.emit(
        Reduce("acc", (Input(0), Reg("recv", 0, count=NRANKS - 1, stride=MSG)), MSG, output_offset=0)
    )
