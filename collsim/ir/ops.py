"""The operations of a per-rank program.

Every operation works on a *range*: ``Ref(buffer, rank, slot, region, line,
lines)`` names ``lines`` consecutive lines of one buffer in one rank's memory.
The simulator costs a range as a whole; the verifier instantiates it with a
tiny line count and sees one event per scalar element; the emitter prints a
strided loop over it.

Data flows through named *registers* (vectors of bytes local to the rank):
a load or poll fills a register, a reduce combines sources into one, a store
reads from a source. Sources are :class:`Input` (this iteration's input),
:class:`Reg` or :class:`Fill` (a constant pattern: zero or the sentinel).

A buffer bound to a multicast object (``Buffer(multicast=True)``) is also
reachable through one *multimem* address that stands for every rank's copy:
:class:`MulticastRef` names a range there, and the ``multimem`` operations
(:class:`MultimemLoadReduce`, :class:`MultimemStore`, :class:`MultimemRed`)
act on every copy at once, the NVSwitch doing the reduction or the fan-out
(PTX ISA 8.1, sm_90; :mod:`collsim.ir.multimem` holds what the ISA allows).

A bound operation (see :func:`collsim.ir.program.flatten`) is the same class
with every expression replaced by its integer value.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Mapping, Union

from collsim.ir import multimem
from collsim.ir.assumptions import HOST_TSO
from collsim.ir.expr import Expr, ExprLike, LoadedValue, as_expr
from collsim.ir.floats import F32_NEG_ZERO, Compare, is_nan32
from collsim.ir.origin import SourceLocation
from collsim.ir.types import FenceKind, FillPattern, Issuer, RmwOp, Scope, Sem

__all__ = [
    "Ref",
    "MulticastRef",
    "Input",
    "Reg",
    "Fill",
    "Source",
    "Equals",
    "AtLeast",
    "NotEqual",
    "Predicate",
    "SymbolicWord",
    "DATA_WORD",
    "SENTINEL_WORD",
    "Op",
    "Store",
    "Load",
    "PollUntil",
    "Fence",
    "Atomic",
    "MultimemLoadReduce",
    "MultimemStore",
    "MultimemRed",
    "Reduce",
    "WriteOutput",
    "SyncGroup",
    "KernelBoundary",
    "HostMemset",
    "HostBarrier",
    "ProxyThread",
    "PROXY_OPS",
    "BulkLoad",
    "ProxyFence",
    "HOST_SYMBOLS",
    "HOST_ACTIONS",
    "HOST_ORDERING",
    "Loop",
    "When",
    "WHEN_BODY",
    "OP_TYPES",
    "bind",
]


def _e(value: ExprLike) -> Expr:
    return as_expr(value)


@dataclass(frozen=True)
class Ref:
    """``lines`` lines starting at ``line`` of ``buffer[slot][region]`` in ``rank``'s memory."""

    buffer: str
    rank: Expr
    slot: Expr = 0  # type: ignore[assignment]
    region: Expr = 0  # type: ignore[assignment]
    line: Expr = 0  # type: ignore[assignment]
    lines: Expr = 1  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name in ("rank", "slot", "region", "line", "lines"):
            value = getattr(self, name)
            if isinstance(value, int):
                object.__setattr__(self, name, _e(value))

    def describe(self) -> str:
        return f"{self.buffer}@{self.rank}[slot {self.slot}, region {self.region}, lines {self.line}+{self.lines}]"


@dataclass(frozen=True)
class MulticastRef:
    """``lines`` lines starting at ``line`` of ``buffer[slot][region]`` in *every* rank's copy, through the
    buffer's multicast address.

    Only ``multimem`` operations access it (PTX ISA §8.2.3: other accesses to a multimem address are
    undefined); the buffer must be declared ``multicast=True``. :meth:`copy` is the same range in one
    rank's copy, where ordinary operations reach it through its unicast address.

    >>> MulticastRef("counters", slot=1).copy(2).describe()
    'counters@2[slot 1, region 0, lines 0+1]'
    """

    buffer: str
    slot: Expr = 0  # type: ignore[assignment]
    region: Expr = 0  # type: ignore[assignment]
    line: Expr = 0  # type: ignore[assignment]
    lines: Expr = 1  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name in ("slot", "region", "line", "lines"):
            value = getattr(self, name)
            if isinstance(value, int):
                object.__setattr__(self, name, _e(value))

    def copy(self, rank: ExprLike) -> Ref:
        """The same lines in ``rank``'s copy of the buffer (bound, with integer fields, if this range is bound)."""
        if isinstance(self.lines, Expr):
            return Ref(self.buffer, rank, self.slot, self.region, self.line, self.lines)  # type: ignore[arg-type]
        bound = object.__new__(Ref)
        for name, value in (("buffer", self.buffer), ("rank", rank), ("slot", self.slot), ("region", self.region),
                            ("line", self.line), ("lines", self.lines)):
            object.__setattr__(bound, name, value)
        return bound

    def describe(self) -> str:
        return f"{self.buffer}@multicast[slot {self.slot}, region {self.region}, lines {self.line}+{self.lines}]"


@dataclass(frozen=True)
class Input:
    """This rank's input for the current iteration, from byte ``offset``."""

    offset: Expr = 0  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if isinstance(self.offset, int):
            object.__setattr__(self, "offset", _e(self.offset))


@dataclass(frozen=True)
class Reg:
    """Register ``name`` from byte ``offset``.

    ``count`` slices ``stride`` bytes apart stand for several operands at
    once (the ``NRANKS - 1`` received vectors of a one-shot reduce).
    """

    name: str
    offset: Expr = 0  # type: ignore[assignment]
    count: Expr = 1  # type: ignore[assignment]
    stride: Expr = 0  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name in ("offset", "count", "stride"):
            if isinstance(getattr(self, name), int):
                object.__setattr__(self, name, _e(getattr(self, name)))


@dataclass(frozen=True)
class Fill:
    """A constant pattern in every data word: ``FillPattern.ZERO`` or ``FillPattern.SENTINEL``.

    The pattern may be given by name (``Fill("sentinel")``).
    """

    pattern: FillPattern

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "pattern", FillPattern(self.pattern))
        except ValueError:
            raise ValueError(f"fill pattern is 'zero' or 'sentinel', not {self.pattern!r}") from None
        if self.pattern is FillPattern.ARBITRARY:
            raise ValueError("fill pattern is 'zero' or 'sentinel': 'arbitrary' is what a buffer may start as, "
                             "not a value a store writes")


Source = Union[Input, Reg, Fill]


class SymbolicWord:
    """The value of a polled word for a consumer that does not track data values (the simulator).

    :data:`DATA_WORD` is user data: never an epoch or a count, and never the sentinel (the
    protocol's data domain promises it). :data:`SENTINEL_WORD` is the sentinel pattern.
    :meth:`Predicate.holds` decides both.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: A polled word that holds user data.
DATA_WORD = SymbolicWord("DATA")
#: A polled word that holds the sentinel pattern.
SENTINEL_WORD = SymbolicWord("SENTINEL")


@dataclass(frozen=True)
class Predicate:
    """The exit condition of a :class:`PollUntil`, checked on every polled word of every line.

    :meth:`holds` is the one evaluation every consumer uses. The word may be an ``int`` (the
    verifier's reference run), a z3 term (the verifier's encoding: the result is a z3 formula),
    any value with comparison operators (the emitter compares C expressions this way), or a
    :class:`SymbolicWord`.

    >>> from collsim.ir.expr import ITER
    >>> epoch = Equals(ITER + 1).bind({"ITER": 2})
    >>> epoch.holds(3), epoch.describe(), AtLeast(3).bind({}).holds(2)
    (True, '== 3', False)
    >>> NotEqual(0xFFFAFFFA).holds(SENTINEL_WORD), NotEqual(0xFFFAFFFA).holds(DATA_WORD)
    (False, True)
    """

    value: Any
    #: the comparison, as :meth:`describe` prints it
    symbol: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if isinstance(self.value, int):
            object.__setattr__(self, "value", _e(self.value))

    def bind(self, env: Mapping[str, int]) -> "Predicate":
        """The same predicate with its value evaluated in ``env``."""
        if not isinstance(self.value, Expr):
            return self
        bound = object.__new__(type(self))
        object.__setattr__(bound, "value", self.value.evaluate(env))
        return bound

    def holds(self, word: Any, want: Any = None) -> Any:
        """Whether ``word`` satisfies the condition against ``want`` (default: the bound predicate's value)."""
        if isinstance(word, SymbolicWord):
            return self._symbolic_holds(word)
        if want is None:
            want = self.value
            if isinstance(want, Expr):
                raise TypeError(f"{self!r} is symbolic: bind it (Predicate.bind or collsim.ir.ops.bind) first")
            if isinstance(want, LoadedValue):
                raise TypeError(f"{self!r} waits for a loaded value: resolve it (Predicate.resolved) first")
        return self._compare(word, want)

    @property
    def loaded(self) -> bool:
        """Whether the bound value is a register word (:class:`~collsim.ir.expr.Loaded`) still to resolve."""
        return isinstance(self.value, LoadedValue)

    def resolved(self, lookup: Any) -> "Predicate":
        """The bound predicate with a loaded value replaced by ``lookup(register, offset)`` (plus its offset):
        the consumer's own value of the register word (an int, a verifier term, a C expression).

        >>> from collsim.ir.expr import Loaded
        >>> AtLeast(Loaded("step") + 2).bind({}).resolved(lambda reg, off: 5).holds(7)
        True
        """
        if not isinstance(self.value, LoadedValue):
            return self
        return self.with_value(self.value.resolve(lookup))

    def with_value(self, value: Any) -> "Predicate":
        """The same comparison against ``value`` (a consumer's own term for a resolved target)."""
        bound = object.__new__(type(self))
        for f in fields(self):
            object.__setattr__(bound, f.name, getattr(self, f.name))
        object.__setattr__(bound, "value", value)
        return bound

    def describe(self) -> str:
        """``"== 5"``, ``">= 3"``, ``"!= 0xfffafffa"``: the condition a bound poll waits for."""
        return f"{self.symbol} {self.value}"

    def _compare(self, word: Any, want: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _symbolic_holds(self, word: SymbolicWord) -> bool:
        return False  # user data and the sentinel are never an epoch or a count


@dataclass(frozen=True)
class Equals(Predicate):
    """Every polled word equals ``value`` (an epoch flag)."""

    value: Expr
    symbol: ClassVar[str] = "=="

    def _compare(self, word: Any, want: Any) -> Any:
        return word == want


@dataclass(frozen=True)
class AtLeast(Predicate):
    """The polled counter is at least ``value``."""

    value: Expr
    symbol: ClassVar[str] = ">="

    def _compare(self, word: Any, want: Any) -> Any:
        return word >= want


@dataclass(frozen=True)
class NotEqual(Predicate):
    """No polled word equals ``value`` (the sentinel: data has overwritten it)."""

    value: int
    #: ``bitwise`` compares the word as an unsigned integer; ``ieee`` as an f32, where
    #: ``-0.0 == +0.0`` and a NaN sentinel equals nothing (see :mod:`collsim.ir.floats`)
    compare: Compare = Compare.BITWISE
    symbol: ClassVar[str] = "!="

    def __post_init__(self) -> None:
        # the sentinel is a literal bit pattern, not an expression
        object.__setattr__(self, "compare", Compare(self.compare))

    def __repr__(self) -> str:
        # a bitwise compare prints as it did before the field existed (cache keys, reports)
        extra = "" if self.compare is Compare.BITWISE else f", compare={self.compare!r}"
        return f"NotEqual(value={self.value!r}{extra})"

    def _compare(self, word: Any, want: Any) -> Any:
        if self.compare is Compare.BITWISE:
            return word != want
        if hasattr(word, "ieee_not_equal"):  # a consumer's own word type (the emitter's C expression)
            return word.ieee_not_equal(want)
        if is_nan32(want):
            return word == word  # NaN != NaN: every word, the sentinel included, satisfies the poll
        if want in (0, F32_NEG_ZERO):
            return (word != 0) & (word != F32_NEG_ZERO)  # -0.0 == +0.0: neither zero satisfies it
        return word != want

    def _symbolic_holds(self, word: SymbolicWord) -> bool:
        if word is SENTINEL_WORD:
            return self.compare is Compare.IEEE and is_nan32(self.value)
        return word is DATA_WORD

    def describe(self) -> str:
        ieee = " (ieee)" if self.compare is Compare.IEEE else ""
        return f"{self.symbol} {self.value:#x}{ieee}"


@dataclass(frozen=True)
class Op:
    """Base of all operations. ``label`` names the op in timelines, counterexamples and emitted comments.

    ``origin`` is where protocol code emitted the op (:class:`~collsim.ir.program.ProgramBuilder`
    records it); it is no part of the op's value: ops equal and print alike wherever they came from.
    """

    origin: SourceLocation | None = field(default=None, kw_only=True, compare=False, repr=False)

    def children(self) -> tuple["Op", ...]:
        return ()


@dataclass(frozen=True)
class Store(Op):
    """Store ``src`` into the data words and ``flag`` into the flag words of ``dst``'s lines."""

    dst: Ref
    src: Source | None
    sem: Sem
    scope: Scope
    flag: Expr | None = None
    issuer: Issuer = Issuer.ALL
    label: str = "store"

    def __post_init__(self) -> None:
        if isinstance(self.flag, int):
            object.__setattr__(self, "flag", _e(self.flag))


@dataclass(frozen=True)
class Load(Op):
    """Load the data words of ``src``'s lines into register ``into``."""

    into: str
    src: Ref
    sem: Sem
    scope: Scope
    issuer: Issuer = Issuer.ALL
    label: str = "load"
    into_offset: Expr = 0  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if isinstance(self.into_offset, int):
            object.__setattr__(self, "into_offset", _e(self.into_offset))


@dataclass(frozen=True)
class PollUntil(Op):
    """Spin loading ``src`` until ``until`` holds for every line's polled words.

    The data words of the load that ends the spin go to register ``into``
    (``None``: the poll only synchronizes).

    With ``swap`` the spin is a *CAS loop* on a flag or counter word: every sample is
    ``atom.cas(word, until.value, swap)`` (``until`` must be :class:`Equals`), a failing one only
    reads, and the one that finds the expected value ends the spin and writes ``swap``
    (PyTorch SymmetricMemory's ``put_signal`` spins on CAS(0, 1), ``wait_signal`` on CAS(1, 0)).
    ``sem`` is then the atomic's: relaxed, acquire, release or acq_rel.
    """

    src: Ref
    until: Predicate
    sem: Sem
    scope: Scope
    into: str | None = None
    issuer: Issuer = Issuer.ALL
    label: str = "poll"
    into_offset: Expr = 0  # type: ignore[assignment]
    swap: Expr | None = None

    def __post_init__(self) -> None:
        if isinstance(self.into_offset, int):
            object.__setattr__(self, "into_offset", _e(self.into_offset))
        if isinstance(self.swap, int):
            object.__setattr__(self, "swap", _e(self.swap))
        if self.swap is not None:
            if not isinstance(self.until, Equals):
                raise ValueError(f"poll {self.label!r}: a CAS loop (swap) waits until the word equals the compare "
                                 f"value: its predicate is Equals, not {type(self.until).__name__}")
            if self.into is not None:
                raise ValueError(f"poll {self.label!r}: a CAS loop returns the compare value; it fills no register")
            if Sem(self.sem) is Sem.WEAK:
                raise ValueError(f"poll {self.label!r}: a CAS is atomic: its sem is relaxed, acquire, release or "
                                 "acq_rel, not weak")

    @property
    def cas(self) -> bool:
        """Whether the spin is a CAS loop (see ``swap``)."""
        return self.swap is not None


@dataclass(frozen=True)
class Fence(Op):
    """``fence.sc`` or ``fence.acq_rel`` at ``scope``."""

    kind: FenceKind
    scope: Scope
    issuer: Issuer = Issuer.ALL
    label: str = "fence"


@dataclass(frozen=True)
class Atomic(Op):
    """Atomic read-modify-write on every word of ``dst``'s lines.

    ``operand`` is a data source (vector reductions such as 128-bit
    ``red.add``) or an expression (counters). With ``into`` the old values
    go to that register (``atom``); without, it is a reduction (``red``).
    ``flag``, with a data operand, is added to the flag words of each line
    (a count the line's readers poll, as in the LL128-atomic line: the data
    words get the operand, the count word ``flag``, all by the lanes of one
    line). ``RmwOp.CAS`` takes ``compare``: each word becomes ``operand`` if it
    held ``compare``, else is left as it is (a failed CAS writes nothing and is
    still a read); a CAS *loop* is a :class:`PollUntil` with ``swap``.
    """

    op: RmwOp
    dst: Ref
    operand: Source | Expr
    sem: Sem
    scope: Scope
    into: str | None = None
    issuer: Issuer = Issuer.ALL
    label: str = "atomic"
    into_offset: Expr = 0  # type: ignore[assignment]
    flag: Expr | None = None
    compare: Expr | None = None

    def __post_init__(self) -> None:
        if isinstance(self.operand, int):
            object.__setattr__(self, "operand", _e(self.operand))
        if isinstance(self.into_offset, int):
            object.__setattr__(self, "into_offset", _e(self.into_offset))
        if isinstance(self.flag, int):
            object.__setattr__(self, "flag", _e(self.flag))
        if isinstance(self.compare, int):
            object.__setattr__(self, "compare", _e(self.compare))
        if (RmwOp(self.op) is RmwOp.CAS) != (self.compare is not None):
            raise ValueError(f"atomic {self.label!r}: a compare value goes with RmwOp.CAS and only with it")
        if self.compare is not None and isinstance(self.operand, (Input, Reg, Fill)):
            raise ValueError(f"atomic {self.label!r}: a CAS swaps in a counter value (an expression), not data")
        if self.flag is not None and not isinstance(self.operand, (Input, Reg, Fill)):
            raise ValueError(f"atomic {self.label!r}: a flag is added next to data; a counter atomic's operand "
                             "is already its increment")


def _multimem_checked(instruction: str, sem: Sem, scope: Scope, op: RmwOp | None, label: str) -> None:
    try:
        multimem.check_semantics(instruction, Sem(sem))
        if op is not None:
            multimem.check_operator(instruction, RmwOp(op).value)
    except ValueError as err:
        raise ValueError(f"{label!r}: {err}") from None
    if Scope(scope) not in (Scope.CTA, Scope.GPU, Scope.SYS):
        raise ValueError(f"{label!r}: multimem scope is cta, gpu or sys, not {scope}")


@dataclass(frozen=True)
class MultimemLoadReduce(Op):
    """``multimem.ld_reduce``: load the data words of ``src``'s lines from every rank's copy, reduced
    (``op``, in the NVSwitch) into register ``into``.

    Each copy's element is a separate load (no atomicity across copies, PTX ISA §8.2.4 for each copy's
    vector); ``sem`` is weak, relaxed or acquire (PTX default: weak).
    """

    into: str
    src: MulticastRef
    sem: Sem
    scope: Scope
    op: RmwOp = RmwOp.ADD
    issuer: Issuer = Issuer.ALL
    label: str = "multimem_ld_reduce"
    into_offset: Expr = 0  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if isinstance(self.into_offset, int):
            object.__setattr__(self, "into_offset", _e(self.into_offset))
        _multimem_checked("ld_reduce", self.sem, self.scope, self.op, self.label)


@dataclass(frozen=True)
class MultimemStore(Op):
    """``multimem.st``: store ``src`` into the data words and ``flag`` into the flag words of ``dst``'s lines,
    in every rank's copy (the NVSwitch replicates one upstream write).

    The copies are written in no particular order, each element a PTX store; ``sem`` is weak, relaxed or
    release (PTX default: weak).
    """

    dst: MulticastRef
    src: Source | None
    sem: Sem
    scope: Scope
    flag: Expr | None = None
    issuer: Issuer = Issuer.ALL
    label: str = "multimem_st"

    def __post_init__(self) -> None:
        if isinstance(self.flag, int):
            object.__setattr__(self, "flag", _e(self.flag))
        _multimem_checked("st", self.sem, self.scope, None, self.label)


@dataclass(frozen=True)
class MultimemRed(Op):
    """``multimem.red``: one atomic reduction (``op``) with ``operand`` on every word of ``dst``'s lines,
    in every rank's copy.

    ``operand`` is a data source (vector ``.add`` of floats) or an expression (a counter's increment);
    ``flag``, with a data operand, is added to the lines' flag words. Each copy gets its own atomic
    read-modify-write per element; ``sem`` is relaxed or release (PTX default: relaxed, ``.sys``).
    """

    op: RmwOp
    dst: MulticastRef
    operand: Source | Expr
    sem: Sem
    scope: Scope
    flag: Expr | None = None
    issuer: Issuer = Issuer.ALL
    label: str = "multimem_red"

    def __post_init__(self) -> None:
        if isinstance(self.operand, int):
            object.__setattr__(self, "operand", _e(self.operand))
        if isinstance(self.flag, int):
            object.__setattr__(self, "flag", _e(self.flag))
        data = isinstance(self.operand, (Input, Reg, Fill))
        if self.flag is not None and not data:
            raise ValueError(f"{self.label!r}: a flag is added next to data; a counter's operand is its increment")
        if data and RmwOp(self.op) is not RmwOp.ADD:
            raise ValueError(f"{self.label!r}: multimem.red reduces floating-point data with add only")
        _multimem_checked("red", self.sem, self.scope, self.op, self.label)


@dataclass(frozen=True)
class Reduce(Op):
    """Register ``into`` = elementwise ``op`` over ``srcs`` (``nbytes`` bytes each), at local memory speed.

    With ``output_offset`` the result is also written to this rank's output
    at that byte offset (the fused reduce-and-store of real kernels).
    """

    into: str
    srcs: tuple[Source, ...]
    nbytes: Expr
    op: str = "sum"
    label: str = "reduce"
    output_offset: Expr | None = None

    def __post_init__(self) -> None:
        for name in ("nbytes", "output_offset"):
            if isinstance(getattr(self, name), int):
                object.__setattr__(self, name, _e(getattr(self, name)))


@dataclass(frozen=True)
class WriteOutput(Op):
    """Copy ``nbytes`` from ``src`` to this rank's output at byte ``offset``."""

    src: Source
    offset: Expr
    nbytes: Expr
    label: str = "write_output"

    def __post_init__(self) -> None:
        for name in ("offset", "nbytes"):
            if isinstance(getattr(self, name), int):
                object.__setattr__(self, name, _e(getattr(self, name)))


@dataclass(frozen=True)
class SyncGroup(Op):
    """Barrier among the threads of this rank's group (``__syncthreads``)."""

    label: str = "sync_group"


@dataclass(frozen=True)
class KernelBoundary(Op):
    """The end of one launch.

    CUDA stream order makes every memory operation of a launch happen before
    those of the next launch on the same stream; the verifier models the
    boundary as ``fence.sc.sys`` between unrolled iterations, the simulator
    as the kernel's end.
    """

    label: str = "kernel_end"


#: The symbols an expression of a host action may use: the host knows its rank, the rank count, the
#: message size and its own launch count (``ARG_ITER``), not the kernel's device launch counter ``ITER``.
HOST_SYMBOLS = frozenset({"RANK", "NRANKS", "MSG", "ARG_ITER"})


@dataclass(frozen=True)
class HostMemset(Op):
    """``cudaMemsetAsync`` on this rank's stream, before the launch: every word of ``dst``'s lines becomes
    zero (``FillPattern.ZERO``) or, in a layout without flag words, the sentinel (``cuMemsetD32Async``).

    A *host action*: the host issues it between the rank's previous launch and this one, so host actions
    come first in a program, before any device operation. Stream order puts it after everything the
    rank's previous launch did and before everything this launch does; it is ordered with *other* ranks
    only by what orders their launches (a :class:`HostBarrier`, or the kernels' own synchronization): a
    peer still in its previous launch, or already in this one, may write the range while it is cleared.
    Its expressions use the host's symbols (:data:`HOST_SYMBOLS`: ``ARG_ITER``, not ``ITER``). The
    memset's stores are plain (weak) stores of a separate memset kernel.
    """

    dst: Ref
    pattern: FillPattern = FillPattern.ZERO
    label: str = "host_memset"

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "pattern", FillPattern(self.pattern))
        except ValueError:
            raise ValueError(f"host memset {self.label!r}: pattern is 'zero' or 'sentinel', not "
                             f"{self.pattern!r}") from None
        if self.pattern is FillPattern.ARBITRARY:
            raise ValueError(f"host memset {self.label!r}: pattern is 'zero' or 'sentinel', not 'arbitrary'")


@dataclass(frozen=True)
class HostBarrier(Op):
    """A collective among the ranks' host processes between launches: each host waits for its stream to
    drain (``cudaStreamSynchronize``), then all meet (``torch.distributed.barrier``, ``MPI_Barrier``).

    A *host action* (it comes before any device operation of the launch): everything every rank did
    before it (earlier launches, earlier host actions) happens before everything any rank does after it.
    It costs a stream drain, a host round trip among the ranks and a fresh kernel launch, and it cannot
    be captured into a CUDA graph.
    """

    label: str = "host_barrier"


@dataclass(frozen=True)
class BulkLoad(Op):
    """``cp.async.bulk`` (TMA, sm_90): copy ``src``'s whole lines into register ``into`` through the *async proxy*.

    The rank's leader thread issues the copy into shared memory, completing on an mbarrier every thread of the
    rank then waits on (``mbarrier.try_wait``: acquire at cta scope), and the threads take the bytes from there.
    The copy's reads are async-proxy accesses: they are ordered after the generic-proxy accesses the issuing
    thread performed or observed before it only through a :class:`ProxyFence` between them (PTX ISA, memory
    consistency model, proxies; ``fence.proxy.async``). An acquire of a peer's flag, then the copy of the data
    the flag published, needs that fence. The source layout holds data words only (a bulk copy moves bytes).
    """

    into: str
    src: Ref
    into_offset: Expr = 0  # type: ignore[assignment]
    label: str = "bulk_load"

    def __post_init__(self) -> None:
        if isinstance(self.into_offset, int):
            object.__setattr__(self, "into_offset", _e(self.into_offset))


@dataclass(frozen=True)
class ProxyFence(Op):
    """``fence.proxy.async``: a bidirectional proxy fence between the generic and the async proxy, for every state
    space. This thread's generic-proxy accesses before it (and what they observed) are ordered before its
    async-proxy accesses after it (a :class:`BulkLoad` it issues), and the reverse."""

    issuer: Issuer = Issuer.ALL
    label: str = "fence_proxy_async"


@dataclass(frozen=True)
class ProxyThread(Op):
    """The work of this rank's host *proxy thread* in one launch: ``body`` runs on a CPU thread of the rank's
    host process, concurrently with the kernel (NCCL's proxy thread progressing network sends; MSCCL++ and
    NCCL host-side flags in pinned, device-mapped memory).

    The body is :class:`Store`, :class:`Load`, :class:`PollUntil`, :class:`Fence` and :class:`Loop` on
    buffers in host memory (``Buffer(location="host")``: ``cudaHostAlloc`` with ``cudaHostAllocMapped``,
    which the kernel reaches over PCIe or C2C). The proxy thread is no CTA and no GPU: the only scope that
    includes it is ``sys``, so every access of the body is at ``Scope.SYS``, and the GPU's accesses that
    synchronize with it must be too. The body's accesses are the host CPU's plain loads and stores: their order
    is the host's. Under the hardware assumption ``host-tso`` (:data:`HOST_ORDERING`, which the protocol
    declares in ``assumptions``) the host orders them as x86-TSO does: every load an acquire, every store a
    release. Without it (an Arm host) they are relaxed, and only the body's :class:`Fence` ops order them. A
    typical body is the consumer side of a head/tail FIFO: poll the head the kernel posted (acquire), act on
    the request, post the tail the kernel polls (release). ``ITER`` in the body is the round the proxy
    serves, which it counts itself (one request per launch), so it advances under graph replay as the
    kernel's launch counter does.
    """

    body: tuple[Op, ...] = field(default_factory=tuple)
    label: str = "proxy"

    def children(self) -> tuple[Op, ...]:
        return self.body


#: The name of the hardware assumption (:mod:`collsim.ir.assumptions`) under which the verifier orders the proxy
#: thread's own accesses as x86-TSO does (see :class:`ProxyThread`); a protocol with a proxy thread declares it.
HOST_ORDERING = HOST_TSO


@dataclass(frozen=True)
class Loop(Op):
    """Run ``body`` for ``var`` = 0 .. ``count``-1."""

    var: str
    count: Expr
    body: tuple[Op, ...] = field(default_factory=tuple)
    label: str = "loop"

    def __post_init__(self) -> None:
        if isinstance(self.count, int):
            object.__setattr__(self, "count", _e(self.count))

    def children(self) -> tuple[Op, ...]:
        return self.body


@dataclass(frozen=True)
class When(Op):
    """Run ``body`` only when ``cond`` holds for the word at byte ``offset`` of register ``register``: a
    branch on a value the thread read, such as the old value a fetch-add returned (the last arriver at
    a counter resets it and releases the others).

    The register must be filled earlier on every path (:mod:`collsim.ir.checks`); ``cond`` is bound
    like a poll's predicate and evaluated by :meth:`Predicate.holds` in every consumer. The body is
    straight-line: stores, atomics and fences (:data:`WHEN_BODY`), so a thread that skips it leaves
    nobody waiting; a :class:`Loop` may contain a ``When`` (release a flag to every peer).
    """

    register: str
    cond: Predicate
    body: tuple[Op, ...] = field(default_factory=tuple)
    offset: int = 0
    label: str = "when"
    #: the width of the register word (the counter it came from)
    nbytes: int = 8

    def __post_init__(self) -> None:
        for op in self.body:
            if not isinstance(op, WHEN_BODY):
                raise ValueError(f"when {self.label!r}: a branch holds stores, atomics and fences, not "
                                 f"{type(op).__name__} ({getattr(op, 'label', '?')!r}): put the branch inside "
                                 "the loop, and keep polls and group barriers out of it")
            if getattr(op, "into", None) is not None:
                raise ValueError(f"when {self.label!r}: {op.label!r} fills a register inside the branch; a "
                                 "register must be filled on every path")

    def children(self) -> tuple[Op, ...]:
        return self.body


#: What a :class:`When` may contain.
WHEN_BODY: tuple[type[Op], ...] = (Store, Atomic, Fence)

#: Every operation class, in the order consumers list them. A consumer walks operations through a
#: :class:`collsim.ir.visit.OpVisitor`, which must have a rule for each of these: a new operation is
#: added here and then fails at import in every consumer that does not handle it yet.
OP_TYPES: tuple[type[Op], ...] = (Store, Load, PollUntil, Fence, Atomic, Reduce, WriteOutput, SyncGroup,
                                  KernelBoundary, Loop, MultimemLoadReduce, MultimemStore, MultimemRed, HostMemset,
                                  HostBarrier, ProxyThread, BulkLoad, ProxyFence, When)
#: The operations a :class:`ProxyThread` body may contain (the host's loads, stores, polls and fences).
PROXY_OPS: tuple[type[Op], ...] = (Store, Load, PollUntil, Fence, Loop)

#: The operations the host performs between launches (see :class:`HostMemset`).
HOST_ACTIONS: tuple[type[Op], ...] = (HostMemset, HostBarrier)


def _bind_value(value: Any, env: Mapping[str, int]) -> Any:
    if isinstance(value, Expr):
        return value.evaluate(env)
    if isinstance(value, Predicate):
        return value.bind(env)
    if isinstance(value, (Ref, MulticastRef, Input, Reg)):
        return _bind_fields(value, env)
    if isinstance(value, tuple):
        return tuple(_bind_value(item, env) for item in value)
    if isinstance(value, (Store, Atomic, Fence)):  # the body of a When
        return _bind_fields(value, env)
    return value


def _bind_fields(obj: Any, env: Mapping[str, int]) -> Any:
    changes = {f.name: _bind_value(getattr(obj, f.name), env) for f in fields(obj)}
    bound = object.__new__(type(obj))
    for name, value in changes.items():
        object.__setattr__(bound, name, value)
    return bound


def bind(op: Op, env: Mapping[str, int]) -> Op:
    """The same operation with every expression replaced by its value in ``env``.

    Loops are not bound here; :func:`collsim.ir.program.flatten` unrolls them.

    >>> from collsim.ir.expr import ITER, RANK
    >>> op = Store(Ref("buf", RANK + 1, slot=ITER % 2), None, Sem.RELEASE, Scope.SYS, flag=ITER + 1)
    >>> bound = bind(op, {"RANK": 0, "ITER": 3})
    >>> bound.dst.rank, bound.dst.slot, bound.flag
    (1, 1, 4)
    """
    if isinstance(op, (Loop, ProxyThread)):
        raise TypeError("bind() does not unroll loops or proxy bodies; use collsim.ir.program.flatten")
    return _bind_fields(op, env)


# Keep `replace` importable from here for protocol authors who derive variants.
__all__.append("replace")
