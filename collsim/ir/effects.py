"""What each operation touches: the memory range it accesses, the data it reads, the register it fills.

One rule per operation class, shared by every consumer that only needs to know
*what* an operation reads and writes, not how it does it: the well-formedness
checks (:mod:`collsim.ir.checks`) and the emitter's register hand-off analysis
(:mod:`collsim.emit.plan`).

>>> from collsim.ir.ops import Input, Ref, Reg, Store, Reduce
>>> from collsim.ir.types import Scope, Sem
>>> e = effects(Store(Ref("lines", 1), Reg("acc"), Sem.RELAXED, Scope.SYS))
>>> e.ref.buffer, e.writes_memory, e.registers_read
('lines', True, ('acc',))
>>> effects(Reduce("acc", (Input(0), Reg("recv")), 64)).fills
'acc'
"""
from __future__ import annotations

from dataclasses import dataclass

from collsim.ir.expr import Expr, loaded_registers
from collsim.ir.ops import (Atomic, Fence, Fill, HostBarrier, HostMemset, Input, KernelBoundary, Load, Loop,
                            MulticastRef, MultimemLoadReduce, MultimemRed, MultimemStore, Op, PollUntil, Predicate,
                            BulkLoad, ProxyFence, ProxyThread, Reduce, Ref, Reg, Source, Store, SyncGroup, When,
                            WriteOutput)
from collsim.ir.visit import OpVisitor

__all__ = ["Effects", "effects"]


@dataclass(frozen=True)
class Effects:
    """What one operation touches.

    ``ref`` is the symmetric-memory range it accesses (None for local work; a
    :class:`~collsim.ir.ops.MulticastRef` for a multimem op, which touches that range in every
    rank's copy: :meth:`refs`), ``writes_memory``
    whether it writes that range, ``atomic`` whether it reads and writes it in one atomic
    operation, ``flag`` the flag value it stores into the flag words, ``until`` the condition
    it spins on; ``sources`` are the data sources it reads and ``fills`` the register it writes
    (None when it writes none). ``orders_group`` marks an op after which every thread of the
    rank sees what every other thread did before it (a group barrier, the end of a launch), and
    ``ends_launch`` the end of a launch. ``whole_lines`` marks a write of every word of its lines
    (data and flag words alike: a memset), ``host`` an action of the host between launches.
    """

    ref: Ref | MulticastRef | None = None
    writes_memory: bool = False
    atomic: bool = False
    flag: Expr | None = None
    until: Predicate | None = None
    sources: tuple[Source, ...] = ()
    fills: str | None = None
    orders_group: bool = False
    ends_launch: bool = False
    whole_lines: bool = False
    host: bool = False
    #: registers whose loaded words a poll's predicate waits for (:class:`~collsim.ir.expr.Loaded`) or a
    #: branch tests (:class:`~collsim.ir.ops.When`)
    loaded: tuple[str, ...] = ()

    @property
    def multicast(self) -> bool:
        """Whether the op reaches every rank's copy through a multicast address."""
        return isinstance(self.ref, MulticastRef)

    def refs(self, nranks: int) -> tuple[Ref, ...]:
        """The ranges the op touches in each rank's memory: its one range, or one per copy of a multicast range.

        >>> from collsim.ir.types import Scope, Sem
        >>> e = effects(MultimemStore(MulticastRef("out"), Reg("acc"), Sem.RELAXED, Scope.SYS))
        >>> [str(r.rank) for r in e.refs(2)]
        ['0', '1']
        """
        if self.ref is None:
            return ()
        if isinstance(self.ref, MulticastRef):
            return tuple(self.ref.copy(rank) for rank in range(nranks))
        return (self.ref,)

    @property
    def polls(self) -> bool:
        """Whether the op spins on its range."""
        return self.until is not None

    @property
    def registers_read(self) -> tuple[str, ...]:
        """The registers among :attr:`sources`, and those a predicate's loaded value names."""
        return tuple(src.name for src in self.sources if isinstance(src, Reg)) + self.loaded

    @property
    def touches_registers(self) -> bool:
        """Whether the op reads or writes any register."""
        return bool(self.registers_read) or self.fills is not None


_NOTHING = Effects()
_GROUP_BARRIER = Effects(orders_group=True)
_LAUNCH_END = Effects(orders_group=True, ends_launch=True)
_HOST_BARRIER = Effects(orders_group=True, host=True)


class _EffectsOf(OpVisitor):
    consumer = "the effects table of collsim.ir.effects"

    def visit_store(self, op: Store) -> Effects:
        return Effects(op.dst, writes_memory=True, flag=op.flag, sources=(op.src,) if op.src is not None else ())

    def visit_load(self, op: Load) -> Effects:
        return Effects(op.src, fills=op.into)

    def visit_poll_until(self, op: PollUntil) -> Effects:
        # a CAS loop's exiting sample writes ``swap`` into the words it compared (a counter atomic's roles)
        return Effects(op.src, writes_memory=op.cas, atomic=op.cas, until=op.until, fills=op.into,
                       loaded=loaded_registers(op.until.value))

    def visit_fence(self, op: Fence) -> Effects:
        return _NOTHING

    def visit_atomic(self, op: Atomic) -> Effects:
        data = isinstance(op.operand, (Input, Reg, Fill))
        return Effects(op.dst, writes_memory=True, atomic=True, flag=op.flag, sources=(op.operand,) if data else (),
                       fills=op.into)

    def visit_multimem_load_reduce(self, op: MultimemLoadReduce) -> Effects:
        return Effects(op.src, fills=op.into)

    def visit_multimem_store(self, op: MultimemStore) -> Effects:
        return Effects(op.dst, writes_memory=True, flag=op.flag, sources=(op.src,) if op.src is not None else ())

    def visit_multimem_red(self, op: MultimemRed) -> Effects:
        data = isinstance(op.operand, (Input, Reg, Fill))
        return Effects(op.dst, writes_memory=True, atomic=True, flag=op.flag, sources=(op.operand,) if data else ())

    def visit_reduce(self, op: Reduce) -> Effects:
        return Effects(sources=op.srcs, fills=op.into)

    def visit_write_output(self, op: WriteOutput) -> Effects:
        return Effects(sources=(op.src,))

    def visit_sync_group(self, op: SyncGroup) -> Effects:
        return _GROUP_BARRIER

    def visit_kernel_boundary(self, op: KernelBoundary) -> Effects:
        return _LAUNCH_END

    def visit_loop(self, op: Loop) -> Effects:
        return _NOTHING  # a loop's effects are its body's

    def visit_host_memset(self, op: HostMemset) -> Effects:
        return Effects(op.dst, writes_memory=True, sources=(Fill(op.pattern),), whole_lines=True, host=True)

    def visit_host_barrier(self, op: HostBarrier) -> Effects:
        return _HOST_BARRIER

    def visit_bulk_load(self, op: BulkLoad) -> Effects:
        return Effects(op.src, fills=op.into)

    def visit_proxy_fence(self, op: ProxyFence) -> Effects:
        return _NOTHING

    def visit_proxy_thread(self, op: ProxyThread) -> Effects:
        return _NOTHING  # the proxy's effects are its body's, on the host thread (collsim.ir.checks walks it)

    def visit_when(self, op: When) -> Effects:
        return Effects(loaded=(op.register,))  # it reads its register; what it runs is its body's


_EFFECTS = _EffectsOf()


def effects(op: Op) -> Effects:
    """What ``op`` touches (see :class:`Effects`); a loop touches nothing itself."""
    return _EFFECTS.visit(op)
