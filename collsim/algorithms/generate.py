"""``generate(protocol, algorithm)``: the symbolic per-rank :class:`Program`, and facts derived from algorithms.

An error raised by a protocol's own code while its program is built becomes a
:class:`ProgramBuildError` naming the protocol file and line, in every command
that generates programs (simulate, verify, emit, review, run).
"""
from __future__ import annotations

import inspect

from collsim.algorithms.algorithm import Algorithm, cta_slice
from collsim.algorithms.one_shot import ONE_SHOT
from collsim.algorithms.ring import RING
from collsim.algorithms.two_shot import TWO_SHOT
from collsim.errors import CollsimError, InputError, ProtocolDefinitionError, UnsupportedError
from collsim.ir.expr import Expr
from collsim.ir.ops import HOST_ACTIONS, BulkLoad, KernelBoundary, ProxyThread, When
from collsim.ir.origin import SourceLocation, shown_path, traceback_location
from collsim.ir.program import Program, ProgramBuilder, walk
from collsim.ir.protocol import Launch, Protocol

__all__ = ["ALGORITHMS", "ProgramBuildError", "algorithm_named", "generate", "sync_rounds", "transfer_bytes"]

_BY_NAME: dict[str, Algorithm] = {a.name: a for a in (ONE_SHOT, TWO_SHOT, RING)}
#: the algorithms, in the order they are listed
ALGORITHMS: tuple[str, ...] = tuple(_BY_NAME)


def algorithm_named(name: str) -> Algorithm:
    """The declaration of algorithm ``name``.

    >>> algorithm_named("two-shot").exchanges
    2
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise InputError(f"unknown algorithm {name!r}", field="algorithm", choices=ALGORITHMS) from None


def transfer_bytes(protocol: Protocol, algorithm: str, ctas: int | None = None) -> Expr:
    """The most bytes one send of ``algorithm`` moves: the whole message for one-shot, a chunk otherwise; with
    several CTAs per rank (``ctas``, default the protocol's), one CTA's slice of it."""
    size = algorithm_named(algorithm).transfer_bytes(protocol)
    return cta_slice(protocol, size, _ctas(protocol) if ctas is None else ctas)[0]


def sync_rounds(protocol: Protocol, algorithm: str, nranks: int) -> int:
    """Global barrier rounds one launch of ``protocol`` under ``algorithm`` runs beyond data-carried flags.

    The protocol declares its barriers per exchange and per launch
    (:attr:`~collsim.ir.protocol.Protocol.barriers_per_exchange`,
    :attr:`~collsim.ir.protocol.Protocol.barriers_per_launch`), the algorithm its exchanges per launch.

    >>> from collsim.ir.registry import load_protocol
    >>> sync_rounds(load_protocol("barrier"), "two-shot", 8), sync_rounds(load_protocol("ll"), "ring", 8)
    (3, 0)
    """
    exchanges = algorithm_named(algorithm).exchanges.evaluate({"NRANKS": nranks})
    return protocol.barriers_per_exchange * exchanges + protocol.barriers_per_launch


class ProgramBuildError(ProtocolDefinitionError):
    """A protocol's code raised an exception while :func:`generate` built its program.

    Its message reads ``protocol.py:LINE: algorithm: what happened``; ``origin`` holds every frame
    of protocol code the exception passed through (innermost first), ``reason`` the message
    without the place.
    """

    def __init__(self, reason: str, *, algorithm: str, origin: SourceLocation | None, file: str | None,
                 line: int | None) -> None:
        self.reason = reason
        self.algorithm = algorithm
        self.origin = origin
        super().__init__(f"{algorithm}: {reason}", file=file, line=line)


def _build_error(protocol: Protocol, algorithm: str, err: Exception) -> Exception:
    origin = traceback_location(err.__traceback__)
    if isinstance(err, CollsimError):
        reason = err.message if isinstance(err, InputError) else str(err)
    else:
        reason = f"{type(err).__name__}: {err}"
    if origin is not None:
        return ProgramBuildError(reason, algorithm=algorithm, origin=origin, file=shown_path(origin.file),
                                 line=origin.line)
    if not isinstance(err, CollsimError):
        return err  # raised by collsim's own code alone: an internal error, not the protocol's
    try:
        file, line = inspect.getsourcefile(type(protocol)), inspect.getsourcelines(type(protocol))[1]
    except (TypeError, OSError):
        file, line = None, None
    return ProgramBuildError(reason, algorithm=algorithm, origin=None, file=shown_path(file) if file else None,
                             line=line)


def generate(protocol: Protocol, algorithm: str, ctas: int | None = None) -> Program:
    """The program every rank runs for one AllReduce with ``protocol`` under ``algorithm``.

    ``ctas`` overrides the protocol's CTAs per rank (:attr:`~collsim.ir.protocol.Protocol.ctas`; the
    verifier's bound may check fewer CTAs than the kernel launches).

    Raises
    ------
    InputError
        if the protocol has no program for the algorithm; the message lists the ones it has.
    ProgramBuildError
        if the protocol's code raises while the program is built.
    """
    shape = algorithm_named(algorithm)
    if algorithm not in protocol.algorithms:
        raise InputError(
            f"protocol {protocol.name!r} has no {algorithm} program",
            field="algorithm",
            choices=protocol.algorithms,
        )
    ctas = _ctas(protocol) if ctas is None else ctas
    b = ProgramBuilder(ctas)
    size = transfer_bytes(protocol, algorithm, ctas)
    launch = Launch(size, shape.exchanges)
    try:
        protocol.prologue(b, launch)
        shape.build(protocol, b)
        protocol.epilogue(b, launch)
        buffers = protocol.buffers(size)
    except Exception as err:  # noqa: BLE001 - any mistake in protocol code is reported with its line
        raise _build_error(protocol, algorithm, err) from None
    b.emit(KernelBoundary())
    if ctas > 1:
        _refuse_host_actions(protocol, b.ops, ctas)
    domain = protocol.data_domain
    return Program(protocol.name, algorithm, b.ops, buffers, dict(b.registers),
                   forbidden_word=domain.forbidden_word if domain is not None else None,
                   word_encoding=domain.encoding if domain is not None else None, ctas=ctas)


def _refuse_host_actions(protocol: Protocol, ops: tuple, ctas: int) -> None:
    """Host actions, proxy threads, bulk copies and branches with several CTAs per rank are not modelled by
    every consumer: refuse them at their line."""
    for op in walk(ops):
        if isinstance(op, HOST_ACTIONS + (ProxyThread, BulkLoad, When)):
            where = f"{shown_path(op.origin.file)}:{op.origin.line}: " if op.origin is not None else ""
            what = f"host action {op.label}" if isinstance(op, HOST_ACTIONS) else op.label
            raise UnsupportedError(f"{where}protocol {protocol.name!r}: {what} in a program of {ctas} CTAs per rank "
                                   "is not modelled (host actions, proxy threads, bulk copies and branches run with "
                                   "one CTA per rank)")


def _ctas(protocol: Protocol) -> int:
    ctas = protocol.ctas
    if not isinstance(ctas, int) or isinstance(ctas, bool) or ctas < 1:
        raise ProtocolDefinitionError(f"protocol {protocol.name!r}: ctas (CTAs per rank) is a whole number >= 1, "
                                      f"not {ctas!r}", field="ctas")
    return ctas
