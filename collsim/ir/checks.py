"""Well-formedness rules every protocol program must satisfy, checked on tiny instances.

The rules catch mistakes the consumers would otherwise trip over in
confusing ways: an access to an undeclared buffer or outside it, a poll on a
location no rank ever writes (a certain hang), a register read before any
operation fills it, a flag store into a layout without flag words.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from collsim.errors import ProtocolDefinitionError
from collsim.ir.effects import effects
from collsim.ir.ops import Equals, Op
from collsim.ir.program import Program
from collsim.ir.types import FillPattern

__all__ = ["ProgramCheckError", "check_program", "touched_lines", "TINY_INSTANCES"]

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


def check_program(program: Program, source: str | None = None) -> None:
    """Raise :class:`ProgramCheckError` naming the first broken rule."""
    where = f"{program.protocol}/{program.algorithm}"
    for nranks, iteration, msg_lines in TINY_INSTANCES:
        buffers = {buf.name: buf for buf in program.buffers}
        data_bytes = max(buf.layout.data_bytes for buf in program.buffers) or 16
        msg = msg_lines * nranks * data_bytes
        written: set[tuple] = set()
        polled: list[tuple[Op, str, tuple]] = []
        for rank in range(nranks):
            env = {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}
            filled: set[str] = set()
            for flat in program.flatten(env):
                op, touch = flat.op, effects(flat.op)
                ref = touch.ref
                if ref is not None:
                    if ref.buffer not in buffers:
                        raise ProgramCheckError(
                            f"{where}: {flat.name} uses undeclared buffer {ref.buffer!r}",
                            op=op, file=source, field="buffers", choices=sorted(buffers),
                        )
                    if touch.multicast and not buffers[ref.buffer].multicast:
                        raise ProgramCheckError(
                            f"{where}: {flat.name} uses the multicast address of buffer {ref.buffer!r}, which is "
                            "not bound to a multicast object (declare it Buffer(..., multicast=True))",
                            op=op, file=source, field="buffers")
                    keys = []
                    for copy in touch.refs(nranks):
                        if not 0 <= copy.rank < nranks:
                            raise ProgramCheckError(f"{where}: {flat.name} targets rank {copy.rank} of {nranks}",
                                                    op=op, file=source)
                        try:
                            keys.extend(touched_lines(program, copy, env))
                        except IndexError as err:
                            raise ProgramCheckError(f"{where}: {flat.name}: {err} (ranks={nranks})",
                                                    op=op, file=source) from None
                    layout = buffers[ref.buffer].layout
                    if touch.writes_memory:
                        written.update(keys)
                    if touch.flag is not None and not layout.flag_words:
                        raise ProgramCheckError(
                            f"{where}: {flat.name} stores a flag into {ref.buffer!r}, whose layout "
                            f"{layout.name} has no flag word", op=op, file=source)
                    if touch.polls:
                        if isinstance(touch.until, Equals) and not layout.poll_words:
                            raise ProgramCheckError(f"{where}: {flat.name} polls a layout with no flag word",
                                                    op=op, file=source)
                        polled.extend((op, flat.name, key) for key in keys)
                for name in touch.registers_read:
                    if name not in filled:
                        raise ProgramCheckError(
                            f"{where}: {flat.name} reads register {name!r} before anything fills it",
                            op=op, file=source)
                if touch.fills:
                    filled.add(touch.fills)
        for op, name, key in polled:
            buf = buffers[key[0]]
            if key not in written and buf.init is not FillPattern.SENTINEL:
                raise ProgramCheckError(
                    f"{where}: {name} polls {key[0]} line {key[2]} of rank {key[1]}, which no rank writes "
                    f"(ranks={nranks}): the poll can never succeed", op=op, file=source)
