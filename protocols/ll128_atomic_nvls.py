"""ll128-atomic-nvls: the LL128-atomic line, reduced into every rank's copy by one multimem.red per line."""
from __future__ import annotations

from collsim.ir.expr import Expr
from collsim.ir.ops import MulticastRef, MultimemRed
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import ReduceExchange
from collsim.ir.types import RmwOp, Scope, Sem
from protocols.ll128_atomic import LL128Atomic


class LL128AtomicNVLS(LL128Atomic):
    """The ``ll128-atomic`` line (120 B of data and a count word), reduced into every rank's copy at once: one ``multimem.red`` per line through the NVSwitch instead of ``NRANKS`` unicast reductions.

    The result lines are bound to a multicast object; each contributor
    issues one line-wide ``multimem.red.add`` (data words + 1 on the count)
    and the switch fans it out to every copy, where each copy's atomic unit
    applies it. The reader spins on its own copy as in ``ll128-atomic``.
    Correct only if a multicast reduction into one 128-byte line lands in
    each copy with its data and count together or in order
    (``multicast-line-128B-reductions-ordered``). Needs NVSwitch multicast
    (sm_90, NVLink SHARP). Scratch per rank as ``ll128-atomic``, rounded up
    to the multicast granularity.
    """

    name = "ll128-atomic-nvls"
    assumptions = ("multicast-line-128B-reductions-ordered",)
    citation = ("arXiv 2607.16100 (abstract: LL128 atomic AllReduce, multicast); PTX ISA multimem.red "
                "(PTX 8.1, sm_90)")
    multicast = True

    def reduce_into_every_rank(self, b: ProgramBuilder, ex: ReduceExchange, slot: Expr) -> None:
        b.emit(MultimemRed(RmwOp.ADD, MulticastRef("lines", slot=slot, lines=self.lines_of(ex)), ex.data,
                           Sem.RELAXED, Scope.SYS, flag=1, label="multimem_red_line"))
