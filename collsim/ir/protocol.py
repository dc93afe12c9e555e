"""The protocol contract: what a protocol declares and the hooks algorithms call.

An *algorithm* (one-shot, two-shot, ring) decides what data goes where and
in how many phases; a *protocol* decides how one phase's data is moved and
synchronized. The algorithm describes each phase as an :class:`Exchange` (a
set of sends and receives, possibly over a loop of peers) and asks the
protocol to lower it to memory operations with :meth:`Protocol.exchange`.

A protocol is a subclass of :class:`Protocol` in ``protocols/``; its class
attributes are its declarations, read by every consumer.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

from collsim.errors import ProtocolDefinitionError
from collsim.ir.assumptions import get_assumption
from collsim.ir.buffers import Buffer
from collsim.ir.floats import WordEncoding
from collsim.ir.expr import ITER, NRANKS, RANK, Expr, Var, as_expr, mask
from collsim.ir.layout import LineLayout
from collsim.ir.ops import Source
from collsim.ir.program import ProgramBuilder

__all__ = ["DataDomain", "Send", "Recv", "Exchange", "ReduceExchange", "Launch", "Protocol", "PEER", "PEER_INDEX",
           "peer_ranks", "MAX_FLAG_BITS"]

#: The loop variable of an exchange over all peers (0 .. NRANKS-2) ...
PEER_INDEX = Var("k")
#: ... and the peer it stands for: ranks are visited in rotated order, as
#: PyTorch's one-shot kernel does, so the ranks do not all hit one peer at once.
PEER = (RANK + 1 + PEER_INDEX) % NRANKS


@dataclass(frozen=True)
class DataDomain:
    """A restriction on user data a protocol needs (e.g. no word equals the sentinel).

    ``forbidden_word`` is a bit pattern no input word and no partial sum holds (the protocol's
    promise, checked bitwise); ``encoding`` states the element type's floating-point facts (which
    bit patterns inputs can hold, :class:`~collsim.ir.floats.WordEncoding`); the verifier assumes
    both. ``None`` for either states nothing.
    """

    forbidden_word: int | None
    statement: str
    encoding: WordEncoding | None = None

    def __repr__(self) -> str:
        # without an encoding it prints as before the field existed (verify cache keys)
        extra = "" if self.encoding is None else f", encoding={self.encoding!r}"
        return f"DataDomain(forbidden_word={self.forbidden_word!r}, statement={self.statement!r}{extra})"


@dataclass(frozen=True)
class Send:
    """Send ``nbytes`` of ``data`` to rank ``to``; ``offset`` is the data's byte offset in the message."""

    to: Expr
    data: Source
    nbytes: Expr
    offset: Expr

    def __post_init__(self) -> None:
        for name in ("to", "nbytes", "offset"):
            object.__setattr__(self, name, as_expr(getattr(self, name)))


@dataclass(frozen=True)
class Recv:
    """Receive ``nbytes`` from rank ``frm`` into register ``into``; ``offset`` as in the sender's :class:`Send`."""

    frm: Expr
    into: str
    nbytes: Expr
    offset: Expr
    into_offset: Expr = 0  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name in ("frm", "nbytes", "offset", "into_offset"):
            object.__setattr__(self, name, as_expr(getattr(self, name)))


@dataclass(frozen=True)
class Exchange:
    """One communication phase of an algorithm.

    Parameters
    ----------
    phase, phases_per_iter : Expr
        This phase's index within the collective and the number of phases,
        so ``seq = ITER * phases_per_iter + phase`` numbers every phase of
        every launch on a channel: epochs, slots and credits derive from it.
    sends, recvs : tuple
        What this rank sends and receives. When ``over_peers`` is true they
        are templates inside a loop over every other rank, whose rank is
        :data:`PEER`.
    lockstep : bool
        True when the algorithm guarantees that a sender is at most one
        ``seq`` ahead of its receiver's consumption on every channel (each
        rank both sends to and receives from each peer every phase), so two
        slots suffice without credits. Ring pipelines do not guarantee it.
    forward : bool
        True when the sends carry what ``consume`` makes of the receives
        (a ring step that receives a piece, reduces or copies it, and sends
        the result on: NCCL's recvReduceSend). The receives are then the
        previous phase's sends (:attr:`recv_seq` is ``seq - 1``) and the
        protocol lowers receive, consume and send in that order.
    """

    phase: Expr
    phases_per_iter: Expr
    sends: tuple[Send, ...]
    recvs: tuple[Recv, ...]
    over_peers: bool = False
    lockstep: bool = True
    #: called by the protocol right after each receive completes (inside the
    #: peer loop), for work the algorithm does per received piece
    consume: Callable[[ProgramBuilder, Recv], None] | None = field(default=None, compare=False)
    forward: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", as_expr(self.phase))
        object.__setattr__(self, "phases_per_iter", as_expr(self.phases_per_iter))

    @property
    def seq(self) -> Expr:
        return ITER * self.phases_per_iter + self.phase

    @property
    def recv_seq(self) -> Expr:
        """The sequence number of what the receives get: this phase's, or the previous one's when forwarding."""
        return self.seq - 1 if self.forward else self.seq


@dataclass(frozen=True)
class ReduceExchange:
    """A phase in which every rank contributes its input ``data`` and receives a finished sum in ``into``.

    Only protocols with ``reduces_remotely`` implement it (atomics into the receiver's memory, or the
    switch reducing every rank's copy). Rank ``t`` receives the sum of every rank's bytes
    ``[piece_offset(t), piece_offset(t) + nbytes)`` of the message: the whole message (one-shot,
    ``scatter=False``, offset 0) or its own chunk ``t`` (a reduce-scatter, ``scatter=True``, offset
    ``t * nbytes``).
    """

    phase: Expr
    phases_per_iter: Expr
    data: Source
    nbytes: Expr
    into: str
    scatter: bool = False

    def __post_init__(self) -> None:
        for name in ("phase", "phases_per_iter", "nbytes"):
            object.__setattr__(self, name, as_expr(getattr(self, name)))

    @property
    def seq(self) -> Expr:
        return ITER * self.phases_per_iter + self.phase

    def piece_offset(self, rank: Expr) -> Expr:
        """The message byte offset of the piece rank ``rank`` receives."""
        return rank * self.nbytes if self.scatter else as_expr(0)


@dataclass(frozen=True)
class Launch:
    """What :meth:`Protocol.prologue` and :meth:`Protocol.epilogue` know of the launch they bracket.

    ``transfer_bytes`` is the most bytes one send moves (what :meth:`Protocol.buffers` was sized for)
    and ``phases_per_iter`` the number of exchanges in one launch, the same value every
    :class:`Exchange` of the launch carries: a hook derives epochs and barrier numbers from it
    instead of remembering what an earlier hook saw.
    """

    transfer_bytes: Expr
    phases_per_iter: Expr


class Protocol:
    """Base class of protocols.

    Subclasses set the class attributes below and implement
    :meth:`buffers` and :meth:`exchange` (and :meth:`reduce_exchange` when
    ``reduces_remotely``). Constructor keyword arguments override entries of
    ``default_params`` (e.g. ``flag_bits``), so the verifier can shrink a
    flag and a mutant can change one parameter.

    A protocol keeps no state between hooks: every hook gets what it needs
    as arguments (:class:`Exchange`, :class:`Launch`), so one instance can
    generate any number of programs, in any order.
    """

    name: ClassVar[str]
    #: algorithms this protocol has programs for
    algorithms: ClassVar[tuple[str, ...]]
    #: the layout of the lines that carry data
    data_layout: ClassVar[LineLayout]
    #: hardware assumptions (names in collsim.ir.assumptions) it relies on
    assumptions: ClassVar[tuple[str, ...]] = ()
    data_domain: ClassVar[DataDomain | None] = None
    #: ranks add into each other's buffers (atomics) instead of reducing locally
    reduces_remotely: ClassVar[bool] = False
    #: the NCCL cost-model column that stands in for it in the analytic model
    analytic_family: ClassVar[str] = "simple"
    #: global barriers (all-to-all rounds beyond the data-carried flags) it runs in every exchange ...
    barriers_per_exchange: ClassVar[int] = 0
    #: ... and once per launch besides (a closing barrier): with an algorithm's exchanges per launch they
    #: make the sync rounds of the analytic model (:func:`collsim.algorithms.sync_rounds`)
    barriers_per_launch: ClassVar[int] = 0
    #: where the design comes from
    citation: ClassVar[str] = ""
    #: its launches are replayed from one CUDA graph (captured at launch 0): kernel arguments derived from
    #: the launch index (:data:`~collsim.ir.expr.ARG_ITER`) keep their capture values in every replay, while
    #: ``ITER``, read from the kernel's launch counter in device memory, advances
    graph_replay: ClassVar[bool] = False
    #: its message size changes between launches (a decode step's all-reduce): ``MSG`` is each launch's own
    #: size, a kernel argument, while the buffers are allocated once, for the largest message (their sizes are
    #: evaluated there); a launch finds what a larger earlier launch left beyond its own lines
    varying_sizes: ClassVar[bool] = False
    #: CTAs per rank (the kernel's ``gridDim.x``): every CTA runs the program with its own ``CTA`` index
    #: (:data:`~collsim.ir.expr.CTA`), slicing the data by it; buffers are shared by the rank's CTAs unless
    #: declared ``per_cta``. The CTAs of a rank meet at a grid barrier
    #: (:func:`collsim.ir.library.grid_barrier`), which needs them all resident at once (at most one CTA
    #: per SM is assumed: ``ctas`` <= the GPU's SM count).
    ctas: ClassVar[int] = 1
    #: what a mutant is expected to break (empty for shipped protocols)
    expected_violation: ClassVar[str | None] = None
    default_params: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.default_params)
        if unknown:
            raise ProtocolDefinitionError(
                f"protocol {self.name!r} has no parameter {sorted(unknown)[0]!r}",
                field="params",
                choices=sorted(self.default_params),
            )
        for key, value in params.items():
            _check_param(self.name, key, value, self.default_params[key])
        self.params: dict[str, Any] = {**self.default_params, **params}
        for assumption in self.assumptions:
            get_assumption(assumption)

    # -- declarations derived from the IR ---------------------------------
    @property
    def payload_efficiency(self) -> float:
        """Data bytes per wire byte of the data lines."""
        return self.data_layout.payload_efficiency

    @property
    def flag_bits(self) -> int:
        return int(self.params.get("flag_bits", 64))

    @property
    def key(self) -> tuple[str, str, str]:
        """One stable identity for caches: the class (module and qualified name), the name and the parameters.

        Two instances with the same key generate the same programs; the key is the same in every process.

        >>> from collsim.ir.registry import load_protocol
        >>> load_protocol("ll", depth=3).key
        ('protocols.ll.LL', 'll', "[('credit_slack', 0), ('depth', 3), ('flag_bits', 32)]")
        """
        cls = type(self)
        return (f"{cls.__module__}.{cls.__qualname__}", self.name, repr(sorted(self.params.items())))

    def describe(self) -> str:
        doc = (type(self).__doc__ or "").strip().split("\n\n")[0]
        return " ".join(doc.split())

    # -- hooks ---------------------------------------------------------------
    def buffers(self, transfer_bytes: Expr) -> tuple[Buffer, ...]:
        """The buffers for phases that move at most ``transfer_bytes`` per send."""
        raise NotImplementedError

    def prologue(self, b: ProgramBuilder, launch: Launch) -> None:
        """Operations before the first phase (default: none)."""

    def exchange(self, b: ProgramBuilder, ex: Exchange) -> None:
        raise NotImplementedError

    def reduce_exchange(self, b: ProgramBuilder, ex: ReduceExchange) -> None:
        raise ProtocolDefinitionError(f"protocol {self.name!r} does not reduce remotely")

    def epilogue(self, b: ProgramBuilder, launch: Launch) -> None:
        """Operations after the last phase (default: none)."""

    # -- helpers for subclasses -------------------------------------------
    def sends_then_recvs(self, b: ProgramBuilder, ex: Exchange, send, recv) -> None:
        """Lower ``ex`` as all sends, then all receives (each followed by ``ex.consume``); a forwarding
        exchange as all receives (each followed by ``ex.consume``), then the sends of what they produced.

        ``send(b, s)`` and ``recv(b, r)`` emit one send or receive; inside a
        peer loop their templates refer to :data:`PEER`.
        """
        if ex.forward:
            with _maybe_peer_loop(b, ex.over_peers):
                for r in ex.recvs:
                    recv(b, r)
                    if ex.consume is not None:
                        ex.consume(b, r)
            with _maybe_peer_loop(b, ex.over_peers):
                for s in ex.sends:
                    send(b, s)
            return
        with _maybe_peer_loop(b, ex.over_peers):
            for s in ex.sends:
                send(b, s)
        with _maybe_peer_loop(b, ex.over_peers):
            for r in ex.recvs:
                recv(b, r)
                if ex.consume is not None:
                    ex.consume(b, r)

    def epoch(self, seq: Expr) -> Expr:
        """The flag value of sequence number ``seq``: ``seq + 1`` in ``flag_bits`` bits, never the zero of fresh memory until it wraps."""
        return mask(seq + 1, self.flag_bits)


def peer_ranks() -> tuple[Expr, Expr]:
    """``(next, prev)`` ranks on the ring, as expressions."""
    return (RANK + 1) % NRANKS, (RANK + NRANKS - 1) % NRANKS


class _NoLoop:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _maybe_peer_loop(b: ProgramBuilder, over_peers: bool):
    return b.loop(PEER_INDEX.name, NRANKS - 1) if over_peers else _NoLoop()


#: The widest flag word a GPU access carries (an 8-byte store).
MAX_FLAG_BITS = 64


def _check_param(protocol: str, key: str, value: Any, default: Any) -> None:
    """A parameter given to a protocol has its default's kind (a bool, a whole number, a string, the same
    enumeration); ``flag_bits`` is 1 to :data:`MAX_FLAG_BITS`. Anything else would build a program no GPU
    runs (a 65-bit flag, 2.5 bits) and have it verified and simulated as if one did.

    >>> _check_param("ll", "flag_bits", 65, 32)
    Traceback (most recent call last):
    ...
    collsim.errors.ProtocolDefinitionError: params.flag_bits: protocol 'll': a flag is 1 to 64 bits wide, not 65
    """
    if isinstance(default, bool):
        kind, ok = "true or false", isinstance(value, bool)
    elif isinstance(default, int):
        kind, ok = "a whole number", isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, enum.Enum):
        kind, ok = f"a {type(default).__name__}", isinstance(value, type(default))
    elif isinstance(default, str):
        kind, ok = "a string", isinstance(value, str)
    else:  # tuples of ops, None: the protocol's own code reads them
        return
    if not ok:
        raise ProtocolDefinitionError(f"protocol {protocol!r}: parameter {key!r} is {kind} (its default is "
                                      f"{default!r}), not {value!r}", field=f"params.{key}")
    if key == "flag_bits" and not 1 <= value <= MAX_FLAG_BITS:
        raise ProtocolDefinitionError(f"protocol {protocol!r}: a flag is 1 to {MAX_FLAG_BITS} bits wide, not {value}",
                                      field=f"params.{key}")
