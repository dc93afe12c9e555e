"""The vocabulary of memory operations: semantics, scopes, atomic operators.

Names follow the PTX ISA (memory consistency model chapter): an access is
``weak`` or strong (``relaxed``, ``acquire``, ``release``); ``volatile`` is
kept as its own spelling because the emitter must print ``.volatile``, while
the verifier treats it as ``relaxed`` at ``sys`` scope, as the ISA defines.
"""
from __future__ import annotations

from enum import Enum, StrEnum

__all__ = ["Sem", "Scope", "FenceKind", "RmwOp", "Issuer", "FillPattern"]


class Sem(str, Enum):
    """Memory-order semantics of a load, store or atomic."""

    WEAK = "weak"
    RELAXED = "relaxed"
    VOLATILE = "volatile"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"

    @property
    def is_strong(self) -> bool:
        """Strong accesses can be morally strong; weak ones never are."""
        return self is not Sem.WEAK

    @property
    def model_sem(self) -> str:
        """The semantics the memory model sees (volatile is relaxed)."""
        return "relaxed" if self is Sem.VOLATILE else self.value

    def model_scope(self, scope: Scope) -> Scope:
        """The scope the memory model sees for an access of these semantics declared at ``scope``: a volatile
        access is system-scoped whatever scope it names (PTX ISA, memory consistency model: volatile operations
        are relaxed operations at system scope).

        >>> Sem.VOLATILE.model_scope(Scope.GPU), Sem.RELAXED.model_scope(Scope.GPU)
        (<Scope.SYS: 'sys'>, <Scope.GPU: 'gpu'>)
        """
        return Scope.SYS if self is Sem.VOLATILE else scope


class Scope(str, Enum):
    """The set of threads an operation's ordering guarantees apply to."""

    CTA = "cta"
    GPU = "gpu"
    SYS = "sys"


class FenceKind(str, Enum):
    """``fence.sc`` or ``fence.acq_rel`` (PTX ``membar``/``fence``)."""

    SC = "sc"
    ACQ_REL = "acq_rel"


class RmwOp(str, Enum):
    """Atomic read-modify-write operators (``atom``/``red``)."""

    ADD = "add"
    EXCH = "exch"
    CAS = "cas"
    MIN = "min"
    MAX = "max"


class Issuer(str, Enum):
    """Which threads of a rank's thread group issue an operation.

    ``ALL``: the threads stride over the operation's lines (data movement).
    ``LEADER``: thread 0 alone (flags, counters). The verifier gives each
    rank more than one thread when it checks the "signal before the whole
    group finished writing" class of bugs, so the difference matters.
    In a program of several CTAs per rank (:attr:`collsim.ir.protocol.Protocol.ctas`)
    both run in every CTA (each CTA's threads stride over the lines, each
    CTA's thread 0 leads); ``GRID_LEADER`` is thread 0 of CTA 0 alone, the
    one thread of the rank's grid (``blockIdx.x == 0 && threadIdx.x == 0``)
    that signals other ranks once the rank's CTAs met at a grid barrier.
    With one CTA per rank it is ``LEADER``.
    """

    ALL = "all"
    LEADER = "leader"
    GRID_LEADER = "grid_leader"

    @property
    def leads(self) -> bool:
        """Whether one thread (of a CTA or of the grid) issues the operation, not every thread."""
        return self is not Issuer.ALL


class FillPattern(StrEnum):
    """A constant a buffer starts as or a :class:`~collsim.ir.ops.Fill` store writes into every data word.

    ``ZERO`` is fresh memory; ``SENTINEL`` is the protocol's sentinel pattern (the value its
    ``NotEqual`` polls compare against, see :attr:`collsim.ir.program.Program.sentinel_word`).
    ``ARBITRARY`` is only what a buffer may start as: memory that nobody cleared (``cudaMalloc`` does
    not zero; a caching allocator hands back what a previous user left), every word any bit pattern.
    A member compares equal to its name in lower case, and prints (``repr`` included) as that
    string, so programs, their reprs and cache keys read as they did with plain strings.

    >>> FillPattern("sentinel") is FillPattern.SENTINEL, repr(FillPattern.ZERO)
    (True, "'zero'")
    """

    ZERO = "zero"
    SENTINEL = "sentinel"
    ARBITRARY = "arbitrary"

    def __repr__(self) -> str:
        return repr(self.value)
