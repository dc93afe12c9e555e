"""Well-formedness rules every protocol program must satisfy, checked on tiny instances.

The rules catch mistakes the consumers would otherwise trip over in
confusing ways: an access to an undeclared buffer or outside it, a poll that
inspects no word (its exit condition, checked on no word at all, would be
vacuously true), a poll on a word no rank ever writes (a certain hang), a
register read before any operation fills it, a flag store into a layout
without flag words, a host action after a device operation of the launch or
using the kernel's ``ITER``.

Writes are tracked per word *role*: a store with a data source writes a
line's data words, a flag (or a counter atomic, whose operand is an
expression) its flag words, so a poll on flag words that only data stores
reach is refused like a poll on a line nobody writes.
"""
from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from collsim.errors import ProtocolDefinitionError
from collsim.ir.effects import Effects, effects
from collsim.ir.layout import LineLayout, WordRole
from collsim.ir.expr import Expr, loaded_registers
from collsim.ir.ops import HOST_ACTIONS, HOST_SYMBOLS, Fill, Loop, Op, Ref, When
from collsim.ir.origin import shown_path
from collsim.ir.program import Program, walk
from collsim.ir.types import FillPattern

__all__ = ["ProgramCheckError", "check_program", "check_protocol_program", "protocol_file", "touched_lines",
           "written_roles", "TINY_INSTANCES"]

#: (NRANKS, ITER, MSG-in-lines) combinations the rules are checked on.
TINY_INSTANCES = ((2, 0, 1), (3, 1, 2), (4, 2, 1))


class ProgramCheckError(ProtocolDefinitionError):
    """A program breaks a well-formedness rule; ``op`` is the (bound) operation that breaks it.

    ``op.origin`` says where protocol code emitted it (None for an op collsim's algorithms emitted).
    """

    def __init__(self, message: str, *, op: Op, **where: Any) -> None:
        self.op = op
        super().__init__(message, **where)


def touched_lines(program: Program, ref, env) -> Iterable[tuple]:
    """The (buffer, rank, flat line) keys a bound :class:`Ref` covers; IndexError when outside the buffer."""
    buf = program.buffer(ref.buffer)
    for line in range(ref.line, ref.line + ref.lines):
        yield (ref.buffer, ref.rank, buf.line_index(ref.slot, ref.region, line, env))


def written_roles(touch: Effects, layout: LineLayout) -> frozenset[WordRole]:
    """The word roles of ``layout`` a writing operation (its :class:`~collsim.ir.effects.Effects`) writes.

    A data source writes the data words, a flag the flag words; an atomic whose operand is an
    expression (a counter) and a memset write every word of the line.

    >>> from collsim.ir.layout import counter_layout, plain_layout
    >>> from collsim.ir.ops import Atomic, Ref, Store, Input
    >>> from collsim.ir.types import RmwOp, Scope, Sem
    >>> sorted(written_roles(effects(Store(Ref("b", 0), Input(), Sem.WEAK, Scope.SYS)), plain_layout()))
    [<WordRole.DATA: 'data'>]
    >>> sorted(written_roles(effects(Atomic(RmwOp.ADD, Ref("c", 0), 1, Sem.RELEASE, Scope.SYS)), counter_layout()))
    [<WordRole.FLAG: 'flag'>]
    """
    if not touch.writes_memory:
        return frozenset()
    if touch.whole_lines or (touch.atomic and not touch.sources):
        return frozenset(word.role for word in layout.words)
    roles = set()
    if touch.sources:
        roles.add(WordRole.DATA)
    if touch.flag is not None:
        roles.add(WordRole.FLAG)
    return frozenset(roles)


def _check_host_actions(program: Program, where: str, source: str | None) -> None:
    """Host actions use the host's symbols only, and come before every device operation of the launch."""
    device_op: Op | None = None

    def visit(ops: tuple[Op, ...], loop: Loop | None) -> None:
        nonlocal device_op
        for op in ops:
            if isinstance(op, Loop):
                visit(op.body, loop or op)
                continue
            if not isinstance(op, HOST_ACTIONS):
                device_op = device_op or op
                continue
            if loop is not None:
                raise ProgramCheckError(f"{where}: host action {op.label} is inside loop {loop.label!r}: write one "
                                        f"host action per range instead", op=op, file=source)
            if device_op is not None:
                raise ProgramCheckError(
                    f"{where}: host action {op.label} comes after the device operation {device_op.label}: the host "
                    f"acts between launches, so host actions come first in a program (emit them in the prologue)",
                    op=op, file=source)
            for value in _expressions(op):
                extra = value.free_vars() - HOST_SYMBOLS
                if extra:
                    raise ProgramCheckError(
                        f"{where}: host action {op.label} uses {', '.join(sorted(extra))}: the host knows "
                        f"{', '.join(sorted(HOST_SYMBOLS))} (ARG_ITER is its launch count; ITER is the kernel's "
                        f"device counter)", op=op, file=source)

    visit(program.ops, None)


def _expressions(op: Op) -> Iterable[Expr]:
    for f in fields(op):
        value = getattr(op, f.name)
        if isinstance(value, Expr):
            yield value
        elif isinstance(value, Ref):
            yield from (getattr(value, g.name) for g in fields(value) if isinstance(getattr(value, g.name), Expr))


def _check_loaded_values(program: Program, where: str, source: str | None) -> None:
    """A loaded value (:class:`~collsim.ir.expr.Loaded`) is a poll's wait target, nothing else (an address,
    a count or a stored flag from memory is not modelled)."""
    for op in walk(program.ops):
        for value in _expressions(op):
            if loaded_registers(value):
                raise ProgramCheckError(
                    f"{where}: {op.label} uses the loaded value {value!r} outside a poll's predicate: a value "
                    f"from memory may be a poll's wait target only", op=op, file=source)


def _with_branches(flat_ops: Iterable[Any]) -> Iterable[tuple[str, Op, bool]]:
    """``(name, op, inside a branch)`` for every bound op and the ops of every :class:`When`'s body."""
    for flat in flat_ops:
        yield flat.name, flat.op, False
        if isinstance(flat.op, When):
            for op in flat.op.body:
                yield f"{flat.name}/{op.label}", op, True


def check_program(program: Program, source: str | None = None) -> None:
    """Raise :class:`ProgramCheckError` naming the first broken rule."""
    where = f"{program.protocol}/{program.algorithm}"
    _check_host_actions(program, where, source)
    _check_loaded_values(program, where, source)
    for nranks, iteration, msg_lines in TINY_INSTANCES:
        buffers = {buf.name: buf for buf in program.buffers}
        data_bytes = max(buf.layout.data_bytes for buf in program.buffers) or 16
        msg = msg_lines * nranks * data_bytes
        written: set[tuple] = set()  # (buffer, rank, line, role)
        polled: list[tuple[Op, str, tuple, frozenset[WordRole]]] = []
        for rank in range(nranks):
            env = {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}
            filled: set[str] = set()
            for name, op, branch in _with_branches(program.flatten(env)):
                touch = effects(op)
                ref = touch.ref
                if ref is not None:
                    if ref.buffer not in buffers:
                        raise ProgramCheckError(
                            f"{where}: {name} uses undeclared buffer {ref.buffer!r}",
                            op=op, file=source, field="buffers", choices=sorted(buffers),
                        )
                    if touch.multicast and not buffers[ref.buffer].multicast:
                        raise ProgramCheckError(
                            f"{where}: {name} uses the multicast address of buffer {ref.buffer!r}, which is "
                            "not bound to a multicast object (declare it Buffer(..., multicast=True))",
                            op=op, file=source, field="buffers")
                    keys = []
                    for copy in touch.refs(nranks):
                        if not 0 <= copy.rank < nranks:
                            raise ProgramCheckError(f"{where}: {name} targets rank {copy.rank} of {nranks}",
                                                    op=op, file=source)
                        try:
                            keys.extend(touched_lines(program, copy, env))
                        except IndexError as err:
                            raise ProgramCheckError(f"{where}: {name}: {err} (ranks={nranks})",
                                                    op=op, file=source) from None
                    layout = buffers[ref.buffer].layout
                    roles = written_roles(touch, layout)
                    written.update(key + (role,) for key in keys for role in roles)
                    if (touch.whole_lines and layout.flag_words and touch.sources
                            and touch.sources[0] == Fill(FillPattern.SENTINEL)):
                        raise ProgramCheckError(
                            f"{where}: {name} memsets {ref.buffer!r} to the sentinel, but its layout "
                            f"{layout.name} has flag words: a memset writes one pattern into every word, so "
                            f"clear it to zero", op=op, file=source)
                    if touch.flag is not None and not layout.flag_words:
                        raise ProgramCheckError(
                            f"{where}: {name} stores a flag into {ref.buffer!r}, whose layout "
                            f"{layout.name} has no flag word", op=op, file=source)
                    if touch.polls:
                        if not layout.poll_words:
                            raise ProgramCheckError(
                                f"{where}: {name} polls {ref.buffer!r}, whose layout {layout.name} has no "
                                f"flag word and names no polled word: the poll would inspect nothing, so its "
                                f"condition ({touch.until.describe()}) would hold vacuously (poll a flag or "
                                f"counter buffer, or give the layout polled_words)", op=op, file=source)
                        polled_roles = frozenset(layout.words[i].role for i in layout.poll_words)
                        polled.extend((op, name, key, polled_roles) for key in keys)
                for register in touch.registers_read:
                    if register not in filled:
                        what = "waits for a value loaded into" if register in touch.loaded else "reads"
                        raise ProgramCheckError(
                            f"{where}: {name} {what} register {register!r} before anything fills it",
                            op=op, file=source)
                if touch.fills and not branch:  # a register filled on one path only is not filled after it
                    filled.add(touch.fills)
        for op, name, key, roles in polled:
            buf = buffers[key[0]]
            if buf.init is FillPattern.SENTINEL:
                continue  # a sentinel poll may pass on what was there: the sentinel rule of the verifier decides
            if not any(key + (role,) in written for role in roles):
                what = " and ".join(sorted(role.value for role in roles))
                raise ProgramCheckError(
                    f"{where}: {name} polls the {what} word(s) of {key[0]} line {key[2]} of rank {key[1]}, "
                    f"which no rank writes (ranks={nranks}): the poll can never succeed", op=op, file=source)


def protocol_file(protocol: Any) -> str | None:
    """The source file of ``protocol``'s class (None when it has none, e.g. defined in a notebook)."""
    try:
        return inspect.getsourcefile(type(protocol))
    except (TypeError, OSError):
        return None


def _class_line(protocol: Any) -> int | None:
    try:
        return inspect.getsourcelines(type(protocol))[1]
    except (TypeError, OSError):
        return None


def check_protocol_program(program: Program, protocol: Any, shown: str | None = None) -> None:
    """:func:`check_program` for ``protocol``'s program, its error naming the protocol file's line.

    The line is where the protocol's code emitted the operation that breaks the rule, or the
    protocol class's line for an operation the algorithm emitted; ``shown`` is the file as the user
    named it (default: the class's file, relative to the working directory when possible). Raises
    :class:`~collsim.errors.ProtocolDefinitionError` (bad input: exit 2).
    """
    file = protocol_file(protocol)
    if shown is None:
        shown = shown_path(file) if file else f"protocol {program.protocol!r}"
    try:
        check_program(program, source=shown)
    except ProgramCheckError as err:
        origin = err.op.origin
        line = origin.line_in(file) if (file and origin is not None) else None
        if line is None:  # an op the algorithm emitted: point at the protocol's class
            line = _class_line(protocol)
        raise ProtocolDefinitionError(err.message, file=shown, line=line) from None
