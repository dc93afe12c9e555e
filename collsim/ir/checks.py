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
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

from collsim.errors import ProtocolDefinitionError
from collsim.ir.effects import Effects, effects
from collsim.ir.layout import LineLayout, WordRole
from collsim.ir.expr import Expr, loaded_registers
from collsim.ir.ops import (HOST_ACTIONS, HOST_SYMBOLS, PROXY_OPS, Atomic, BulkLoad, Fence, Fill, Input, Loop, Op,
                            PollUntil, ProxyThread, Ref, When)
from collsim.ir.origin import shown_path
from collsim.ir.program import Program, walk
from collsim.ir.types import FillPattern, Issuer, Scope, Sem

__all__ = ["ProgramCheckError", "check_program", "check_protocol_program", "cta_scope_findings", "protocol_file",
           "touched_lines", "written_roles", "host_scope_findings", "TINY_INSTANCES"]

#: (NRANKS, ITER, MSG-in-lines) combinations the rules are checked on.
TINY_INSTANCES = ((2, 0, 1), (3, 1, 2), (4, 2, 1))


class ProgramCheckError(ProtocolDefinitionError):
    """A program breaks a well-formedness rule; ``op`` is the (bound) operation that breaks it.

    ``op.origin`` says where protocol code emitted it (None for an op collsim's algorithms emitted).
    """

    def __init__(self, message: str, *, op: Op, **where: Any) -> None:
        self.op = op
        super().__init__(message, **where)


def touched_lines(program: Program, ref, env, cta: int = 0) -> Iterable[tuple]:
    """The (buffer, rank, flat line) keys a bound :class:`Ref` covers; IndexError when outside the buffer.

    The line of a ``per_cta`` buffer counts from CTA ``cta``'s copy (the copies follow each other).
    """
    buf = program.buffer(ref.buffer)
    base = cta * buf.total_lines(env) if buf.per_cta else 0
    for line in range(ref.line, ref.line + ref.lines):
        yield (ref.buffer, ref.rank, base + buf.line_index(ref.slot, ref.region, line, env))


def _cta_envs(program: Program, nranks: int, iteration: int, msg: int) -> Iterable[tuple[int, int, dict]]:
    """``(rank, CTA, env)`` for every CTA of every rank of a tiny instance."""
    for rank in range(nranks):
        env = {"RANK": rank, "NRANKS": nranks, "ITER": iteration, "MSG": msg}
        for cta in range(program.ctas):
            yield rank, cta, program.cta_env(env, cta)


def _issues(op: Op, cta: int) -> bool:
    """Whether CTA ``cta`` issues ``op`` (an ``Issuer.GRID_LEADER`` op runs in CTA 0 only)."""
    return cta == 0 or getattr(op, "issuer", None) is not Issuer.GRID_LEADER


def cta_scope_findings(program: Program, where: Callable[[Op], str] = lambda op: op.label) -> list[str]:
    """Warnings for strong accesses at ``cta`` scope to memory another CTA also accesses, one per operation.

    ``cta`` scope covers the threads of the issuing CTA only (PTX ISA, memory consistency model: scope):
    a release or acquire at ``cta`` scope does not synchronize with another CTA, of this GPU or another,
    so a flag or counter between CTAs needs ``gpu`` scope (``sys`` between GPUs). ``where(op)`` names the
    op (the verifier passes its file:line). The verifier proves what such an access does; these lines
    say where to look.

    >>> from collsim.ir.library import grid_barrier, grid_counter_buffer
    >>> from collsim.ir.ops import KernelBoundary
    >>> from collsim.ir.program import ProgramBuilder
    >>> from collsim.ir.types import Scope
    >>> b = ProgramBuilder(2)
    >>> grid_barrier(b, 1, scope=Scope.CTA)
    >>> program = Program("p", "one-shot", b.ops, (grid_counter_buffer(),), ctas=2)
    >>> print(cta_scope_findings(program)[0])
    grid_barrier.cta_arrive: grid_barrier.cta_arrive, an atomic at cta scope on grid_arrivals, which CTA 1 of rank 0 also accesses: cta scope orders it with its own CTA only (use gpu scope between the CTAs of one GPU, sys between GPUs)
    """
    if program.ctas == 1:
        return []
    nranks, iteration = 2, 0
    data_bytes = max((buf.layout.data_bytes for buf in program.buffers), default=16) or 16
    msg = nranks * program.ctas * data_bytes
    users: dict[tuple, set[tuple[int, int]]] = {}
    narrow: list[tuple[Op, int, int, list[tuple]]] = []
    for rank, cta, env in _cta_envs(program, nranks, iteration, msg):
        for _name, op, _branch, _on_host in _bound_ops(program.flatten(env)):
            touch = effects(op)
            if touch.ref is None or not _issues(op, cta) or touch.ref.buffer not in {b.name for b in program.buffers}:
                continue
            try:
                keys = [key for copy in touch.refs(nranks) for key in touched_lines(program, copy, env, cta)]
            except IndexError:
                continue  # check_program reports it
            for key in keys:
                users.setdefault(key, set()).add((rank, cta))
            sem, scope = getattr(op, "sem", None), getattr(op, "scope", None)
            if sem is not None and Sem(sem).is_strong and Sem(sem).model_scope(Scope(scope)) is Scope.CTA:
                narrow.append((op, rank, cta, keys))
    found: dict[str, str] = {}
    for op, rank, cta, keys in narrow:
        others = sorted({user for key in keys for user in users[key]} - {(rank, cta)})
        place = where(op)
        if others and place not in found:
            what = "atomic" if isinstance(op, Atomic) else ("poll" if isinstance(op, PollUntil) else
                                                            type(op).__name__.lower())
            other_rank, other_cta = others[0]
            found[place] = (f"{place}: {op.label}, {'an' if what[0] in 'aeiou' else 'a'} {what} at cta scope on "
                            f"{keys[0][0]}, which CTA {other_cta} of rank {other_rank} also accesses: cta scope "
                            "orders it with its own CTA only (use gpu scope between the CTAs of one GPU, sys "
                            "between GPUs)")
    return list(found.values())


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
            if isinstance(op, ProxyThread):
                if loop is not None:
                    raise ProgramCheckError(f"{where}: proxy thread {op.label} is inside loop {loop.label!r}: a "
                                            f"rank has one proxy thread per launch (loop inside its body instead)",
                                            op=op, file=source)
                _check_proxy_body(op, op.body, where, source)
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


def _check_proxy_body(proxy: ProxyThread, ops: tuple[Op, ...], where: str, source: str | None) -> None:
    """A proxy thread's body holds the host's loads, stores, polls and fences, each at ``sys`` scope."""
    for op in ops:
        if not isinstance(op, PROXY_OPS):
            raise ProgramCheckError(
                f"{where}: proxy thread {proxy.label} contains {type(op).__name__} {getattr(op, 'label', '')!r}: a "
                f"proxy thread's body holds {', '.join(t.__name__ for t in PROXY_OPS)}", op=op, file=source)
        if isinstance(op, Loop):
            _check_proxy_body(proxy, op.body, where, source)
            continue
        if isinstance(getattr(op, "src", None), Input):
            raise ProgramCheckError(
                f"{where}: proxy thread {proxy.label}: {op.label} stores the kernel's input, which is in device "
                f"memory the host thread cannot read: store a register the proxy loaded", op=op, file=source)
        scope = op.sem.model_scope(op.scope) if hasattr(op, "sem") else op.scope
        if scope is not Scope.SYS:
            raise ProgramCheckError(
                f"{where}: proxy thread {proxy.label}: {op.label} is at {scope.value} scope, but the proxy is a "
                f"host thread in no CTA and no GPU: only sys scope includes it and the threads it synchronizes "
                f"with (declare Scope.SYS)", op=op, file=source)


def host_scope_findings(program: Program) -> list[tuple[Op, str]]:
    """The kernel's synchronizing accesses to host memory at a scope that leaves the proxy thread out.

    A release, acquire or poll of a buffer in host memory synchronizes with the rank's proxy thread only at
    ``sys`` scope (PTX ISA, memory consistency model: morally strong operations share a scope that includes
    both threads); at ``gpu`` or ``cta`` scope the host sees the flag but nothing it publishes. Returns
    ``(op, what is wrong)`` for each (symbolic) op, in program order; the verifier reports them as notes next
    to the verdict it finds.

    >>> from collsim.ir.buffers import Buffer
    >>> from collsim.ir.layout import counter_layout
    >>> from collsim.ir.ops import Store
    >>> head = Buffer("head", counter_layout(), depth=1, regions=1, lines=1, location="host")
    >>> post = Store(Ref("head", 0), None, Sem.RELEASE, Scope.GPU, flag=1, label="post")
    >>> [why for _, why in host_scope_findings(Program("p", "one-shot", (post,), (head,)))]
    ['post: a release of host buffer head at gpu scope does not include the host proxy thread (use Scope.SYS)']
    """
    hosted = {buf.name for buf in program.buffers if buf.on_host}
    found: list[tuple[Op, str]] = []
    if not hosted:
        return found

    def visit(ops: tuple[Op, ...]) -> None:
        for op in ops:
            if isinstance(op, Loop):
                visit(op.body)
                continue
            if isinstance(op, (ProxyThread, Fence)) or isinstance(op, HOST_ACTIONS):
                continue
            ref = effects(op).ref
            sem = getattr(op, "sem", None)
            if ref is None or ref.buffer not in hosted or sem is None:
                continue
            kind = "poll" if isinstance(op, PollUntil) else (sem.value if sem in (Sem.RELEASE, Sem.ACQUIRE,
                                                                                     Sem.ACQ_REL) else None)
            scope = sem.model_scope(op.scope)
            if kind is not None and scope is not Scope.SYS:
                found.append((op, f"{op.label}: a{'n' if kind[0] in 'aeiou' else ''} {kind} of host buffer "
                                  f"{ref.buffer} at {scope.value} scope does not include the host proxy thread "
                                  f"(use Scope.SYS)"))

    visit(program.ops)
    return found


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


def _bound_ops(flat_ops: Iterable[Any]) -> Iterable[tuple[str, Op, bool, bool]]:
    """``(name, op, inside a branch, run by the proxy thread)`` for every bound op, the ops of every
    :class:`When`'s body and the ops of every proxy thread's body (in place of the proxy thread)."""
    for flat in flat_ops:
        if isinstance(flat.op, ProxyThread):
            yield from ((inner.name, inner.op, False, True) for inner in flat.body)
            continue
        yield flat.name, flat.op, False, False
        if isinstance(flat.op, When):
            for op in flat.op.body:
                yield f"{flat.name}/{op.label}", op, True, False


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
        for rank, cta, env in _cta_envs(program, nranks, iteration, msg):
            filled: set[str] = set()
            proxy_filled: set[str] = set()  # the proxy thread's registers are its own
            for name, op, branch, on_host in _bound_ops(program.flatten(env)):
                touch = effects(op)
                if not _issues(op, cta):
                    continue
                ref = touch.ref
                if ref is not None:
                    if ref.buffer not in buffers:
                        raise ProgramCheckError(
                            f"{where}: {name} uses undeclared buffer {ref.buffer!r}",
                            op=op, file=source, field="buffers", choices=sorted(buffers),
                        )
                    if on_host and not buffers[ref.buffer].on_host:
                        raise ProgramCheckError(
                            f"{where}: proxy thread op {name} uses buffer {ref.buffer!r} in device memory: a "
                            f"host thread reaches host memory only (declare Buffer(..., location='host'))",
                            op=op, file=source, field="buffers")
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
                            keys.extend(touched_lines(program, copy, env, cta))
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
                    if isinstance(op, BulkLoad) and (layout.flag_words or layout.line_bytes % 16):
                        raise ProgramCheckError(
                            f"{where}: {name} bulk-copies {ref.buffer!r}, whose layout {layout.name} has flag "
                            f"words or lines that are not a multiple of 16 bytes: cp.async.bulk moves whole 16-byte "
                            f"units of data (copy a plain data layout)", op=op, file=source)
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
                mine = proxy_filled if on_host else filled
                for register in touch.registers_read:
                    if register not in mine:
                        what = "waits for a value loaded into" if register in touch.loaded else "reads"
                        other = (" (the proxy thread's registers are its own)"
                                 if register in (filled | proxy_filled) else "")
                        raise ProgramCheckError(
                            f"{where}: {name} {what} register {register!r} before anything fills it{other}",
                            op=op, file=source)
                if touch.fills and not branch:  # a register filled on one path only is not filled after it
                    mine.add(touch.fills)
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
