"""Well-formedness rules every protocol program must satisfy, checked on tiny instances.

The rules catch mistakes the consumers would otherwise trip over in
confusing ways: an access to an undeclared buffer or outside it, a poll on a
location no rank ever writes (a certain hang), a register read before any
operation fills it, a flag store into a layout without flag words.
"""
from __future__ import annotations

from collections.abc import Iterable

from collsim.errors import ProtocolDefinitionError
from collsim.ir.ops import Atomic, Equals, Fill, Input, PollUntil, Reduce, Reg, Store, WriteOutput
from collsim.ir.program import Program

__all__ = ["check_program", "touched_lines", "TINY_INSTANCES"]

#: (NRANKS, ITER, MSG-in-lines) combinations the rules are checked on.
TINY_INSTANCES = ((2, 0, 1), (3, 1, 2), (4, 2, 1))


def touched_lines(program: Program, ref, env) -> Iterable[tuple]:
    """The (buffer, rank, flat line) keys a bound :class:`Ref` covers; IndexError when outside the buffer."""
    buf = program.buffer(ref.buffer)
    for line in range(ref.line, ref.line + ref.lines):
        yield (ref.buffer, ref.rank, buf.line_index(ref.slot, ref.region, line, env))


def check_program(program: Program, source: str | None = None) -> None:
    """Raise :class:`ProtocolDefinitionError` naming the first broken rule."""
    where = f"{program.protocol}/{program.algorithm}"
    for nranks, iteration, msg_lines in TINY_INSTANCES:
        buffers = {buf.name: buf for buf in program.buffers}
        data_bytes = max(buf.layout.data_bytes for buf in program.buffers) or 16
        msg = msg_lines * nranks * data_bytes
        written: set[tuple] = set()
        polled: list[tuple[str, tuple]] = []
        for rank in range(nranks):
            env = {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}
            filled: set[str] = set()
            for flat in program.flatten(env):
                op = flat.op
                ref = getattr(op, "dst", None) or getattr(op, "src", None)
                if hasattr(ref, "buffer"):
                    if ref.buffer not in buffers:
                        raise ProtocolDefinitionError(
                            f"{where}: {flat.name} uses undeclared buffer {ref.buffer!r}",
                            file=source, field="buffers", choices=sorted(buffers),
                        )
                    if not 0 <= ref.rank < nranks:
                        raise ProtocolDefinitionError(f"{where}: {flat.name} targets rank {ref.rank} of {nranks}",
                                                      file=source)
                    try:
                        keys = list(touched_lines(program, ref, env))
                    except IndexError as err:
                        raise ProtocolDefinitionError(f"{where}: {flat.name}: {err} (ranks={nranks})",
                                                      file=source) from None
                    layout = buffers[ref.buffer].layout
                    if isinstance(op, (Store, Atomic)):
                        written.update(keys)
                    if isinstance(op, Store) and op.flag is not None and not layout.flag_words:
                        raise ProtocolDefinitionError(
                            f"{where}: {flat.name} stores a flag into {ref.buffer!r}, whose layout "
                            f"{layout.name} has no flag word", file=source)
                    if isinstance(op, PollUntil):
                        if isinstance(op.until, (Equals,)) and not layout.poll_words:
                            raise ProtocolDefinitionError(f"{where}: {flat.name} polls a layout with no flag word",
                                                          file=source)
                        polled.extend((flat.name, key) for key in keys)
                for src in _sources(op):
                    if isinstance(src, Reg) and src.name not in filled:
                        raise ProtocolDefinitionError(
                            f"{where}: {flat.name} reads register {src.name!r} before anything fills it",
                            file=source)
                into = getattr(op, "into", None)
                if into:
                    filled.add(into)
        for name, key in polled:
            buf = buffers[key[0]]
            if key not in written and buf.init != "sentinel":
                raise ProtocolDefinitionError(
                    f"{where}: {name} polls {key[0]} line {key[2]} of rank {key[1]}, which no rank writes "
                    f"(ranks={nranks}): the poll can never succeed", file=source)


def _sources(op) -> tuple:
    if isinstance(op, Store):
        return (op.src,) if op.src is not None else ()
    if isinstance(op, Reduce):
        return op.srcs
    if isinstance(op, WriteOutput):
        return (op.src,)
    if isinstance(op, Atomic) and isinstance(op.operand, (Input, Reg, Fill)):
        return (op.operand,)
    return ()


