"""A protocol instance: the event program of a tiny, bound instance, plus what the properties compare against.

:func:`collsim.verify.lower.lower_instance` produces a :class:`VerifyInstance`
from a protocol. It *is* a :class:`collsim.verify.events.Program` (the one
event form every memory-model query uses, litmus tests included) and adds
the instance's bound, the outputs each rank computes and the values they
should have, the sentinel and the lowering's notes.

Threads are lists of instructions, each a set of events (one per scalar
element accessed, unordered among themselves: PTX ISA §8.2.4). Every value
is a linear term over input elements and read events
(:class:`~collsim.verify.terms.Lin`). Input element ``e`` of rank ``r`` in
launch ``i`` is a distinct power of :data:`INPUT_BASE` above every flag,
counter and sentinel value, so a sum identifies the multiset of inputs in it
and a consumer's value names its producer.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Hashable, Iterator, Mapping

from collsim.ir.floats import WordEncoding
from collsim.ir.ops import NotEqual
from collsim.verify.events import AtomicGroup, Event, EventKind, Instr, InstrKind, Placement, Program
from collsim.verify.terms import Lin

__all__ = [
    "Bounds",
    "threads_text",
    "Lin",
    "EventKind",
    "InstrKind",
    "VerifyEvent",
    "VerifyInstr",
    "VerifyInstance",
    "input_value",
    "long_integer_text",
    "INPUT_BASE",
    "INPUT_OFFSET",
]

#: input element values are BASE ** (OFFSET + k): above every flag/sentinel value
INPUT_BASE = 256
INPUT_OFFSET = 6

#: the lowering's names for the one event type and its instructions
VerifyEvent = Event
VerifyInstr = Instr


@dataclass(frozen=True)
class Bounds:
    """The size of the instance the verifier checks.

    Parameters
    ----------
    ranks, iterations : int
        Ranks and launches (``ITER`` = 0 .. iterations-1).
    lines : int
        Lines per chunk (one-shot: per message).
    threads : int
        Threads per CTA (per rank, with one CTA per rank).
    max_lanes : int
        Lines wider than this many store lanes are shrunk (see :mod:`collsim.verify.granules`).
    sizes : tuple of int, optional
        The lines per chunk of each launch, for a protocol whose message size changes between launches
        (:attr:`~collsim.ir.protocol.Protocol.varying_sizes`): ``MSG`` of launch ``i`` is ``sizes[i]`` lines
        per chunk, the buffers are allocated for ``lines``, the largest. ``None``: every launch moves ``lines``.
    ctas : int
        CTAs per rank (the program is generated for this many; see :attr:`collsim.ir.protocol.Protocol.ctas`);
        with several, ``lines`` counts each CTA's lines of a chunk.
    """

    ranks: int = 3
    iterations: int = 2
    lines: int = 1
    threads: int = 1
    max_lanes: int = 2
    # not in the repr (cache keys of fixed-size instances stay as they were); the bound program's text has it
    sizes: tuple[int, ...] | None = field(default=None, repr=False)
    ctas: int = 1

    def __post_init__(self) -> None:
        if self.ranks < 2:
            raise ValueError("the verifier needs at least 2 ranks")
        if self.iterations < 1 or self.lines < 1 or self.threads < 1 or self.max_lanes < 1 or self.ctas < 1:
            raise ValueError("iterations, lines, threads, max_lanes and ctas are at least 1")
        if self.sizes is not None:
            object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
            if len(self.sizes) != self.iterations or not all(1 <= s <= self.lines for s in self.sizes):
                raise ValueError(f"sizes gives the lines per chunk of each of the {self.iterations} launches, "
                                 f"each 1 .. {self.lines}, not {self.sizes}")

    def __repr__(self) -> str:
        # one CTA per rank prints as before the field existed (verify cache keys); sizes are left out (the bound
        # program's text has them)
        text = (f"Bounds(ranks={self.ranks!r}, iterations={self.iterations!r}, lines={self.lines!r}, "
                f"threads={self.threads!r}, max_lanes={self.max_lanes!r}")
        return text + (f", ctas={self.ctas!r})" if self.ctas != 1 else ")")

    def launch_lines(self, iteration: int) -> int:
        """Lines per chunk launch ``iteration`` moves."""
        return self.lines if self.sizes is None else self.sizes[iteration]

    def describe(self) -> str:
        text = (f"{self.ranks} ranks x {self.iterations} iterations, {self.lines} line(s) per chunk, "
                f"{threads_text(self.threads, self.ctas)}")
        if self.sizes is not None:
            text += f", launches of {'/'.join(map(str, self.sizes))} line(s) per chunk"
        return text


def threads_text(threads: int, ctas: int) -> str:
    """``"2 thread(s) per rank"``, or with several CTAs per rank ``"2 CTAs x 2 thread(s) per rank"``."""
    return f"{threads} thread(s) per rank" if ctas == 1 else f"{ctas} CTAs x {threads} thread(s) per rank"


@contextmanager
def long_integer_text() -> Iterator[None]:
    """Lift Python's limit on the decimal text of an int while a verification runs: an input's concrete value
    is a distinct power (:func:`input_value`), whose text passes the limit at a node's bound (8 ranks x 3
    launches of a line protocol), and z3 takes and gives integers as text."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if limit:
        sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        if limit:
            sys.set_int_max_str_digits(limit)


def input_value(rank: int, iteration: int, element: int, bounds: Bounds, elements: int) -> int:
    """The concrete value of an input element: a distinct power of :data:`INPUT_BASE`."""
    index = (iteration * bounds.ranks + rank) * elements + element
    return INPUT_BASE ** (INPUT_OFFSET + index)


class VerifyInstance(Program):
    """The unrolled, element-level program of every rank of one tiny instance.

    Beyond :class:`~collsim.verify.events.Program`: ``protocol``,
    ``algorithm``, ``bounds``, ``msg`` (bytes), ``assumptions_active`` (the
    hardware assumptions its atomic groups state), ``outputs`` (``(rank,
    iteration, element) -> Lin``, ``None`` where not modelled),
    ``expected_outputs``, ``word_bytes``, ``elements`` (input elements per rank
    per launch), ``arbitrary_init`` (locations that start as any bit pattern), ``sentinel``,
    ``forbidden_word``, ``notes`` and ``flat_signature`` (the bound program's text, for cache keys).
    """

    def __init__(self, *, protocol: str, algorithm: str, bounds: Bounds, msg: int, assumptions: tuple[str, ...],
                 threads: list[list[Instr]], placement: list[Placement], init: Mapping[Hashable, int],
                 outputs: dict[tuple, Lin | None], expected_outputs: dict[tuple, Lin], word_bytes: int, elements: int,
                 sentinel: int | None, forbidden_word: int | None, notes: list[str] | None = None,
                 flat_signature: str = "", groups: list[AtomicGroup] | None = None,
                 word_encoding: WordEncoding | None = None,
                 arbitrary_init: Mapping[Hashable, int] | None = None) -> None:
        super().__init__(threads, placement, init, (), None, f"{protocol}/{algorithm}",
                         [f"rank{p.rank}.t{t}" for t, p in enumerate(placement)], groups)
        #: thread -> what it is when it is no thread of the rank's CTA: ``proxy`` (the host proxy thread) or
        #: ``bulk`` (the copy engine of a cp.async.bulk)
        self.roles: dict[int, str] = {}
        self.protocol = protocol
        self.algorithm = algorithm
        self.bounds = bounds
        self.msg = msg
        self.assumptions_active = assumptions
        self.assumption_set = frozenset(assumptions)
        self.outputs = outputs
        self.expected_outputs = expected_outputs
        self.word_bytes = word_bytes
        self.elements = elements
        self.sentinel = sentinel
        self.forbidden_word = forbidden_word
        #: the data words' floating-point facts (the protocol's ``DataDomain.encoding``), if stated
        self.word_encoding = word_encoding
        self.notes = list(notes or [])
        self.flat_signature = flat_signature
        #: locations whose initial value is any bit pattern of that many bits (``Buffer(init="arbitrary")``);
        #: their :attr:`init` is the 0 the reference run reads
        self.arbitrary_init: dict[Hashable, int] = dict(arbitrary_init or {})

    def input_env(self) -> dict[tuple, int]:
        env = {}
        for r in range(self.bounds.ranks):
            for i in range(self.bounds.iterations):
                for e in range(self.elements):
                    env[("in", r, i, e)] = input_value(r, i, e, self.bounds, self.elements)
        return env

    def local_thread(self, thread: int) -> int:
        """The thread's index in its CTA; -1 for the rank's host proxy thread, -2 for a bulk copy's engine."""
        role = self.roles.get(thread)
        if role is not None:
            return -1 if role == "proxy" else -2
        return thread % self.bounds.threads

    def thread_text(self, thread: int, short: bool = False) -> str:
        """How counterexamples name ``thread`` within its rank: ``thread 1`` (``t1``), with several CTAs per rank
        ``CTA 1 thread 0`` (``c1.t0``), or ``proxy thread`` (``proxy``, the rank's host proxy) and ``bulk copy
        engine`` (``tma``)."""
        local = self.local_thread(thread)
        if local < 0:
            return ({-1: "proxy", -2: "tma"} if short else {-1: "proxy thread", -2: "bulk copy engine"})[local]
        if self.bounds.ctas == 1:
            return f"t{local}" if short else f"thread {local}"
        cta = self.placement[thread].cta
        return f"c{cta}.t{local}" if short else f"CTA {cta} thread {local}"

    def cta_of(self, thread: int) -> int | None:
        """The CTA of ``thread`` within its rank, None with one CTA per rank (and for a proxy or copy engine)."""
        return None if self.bounds.ctas == 1 or thread in self.roles else self.placement[thread].cta

    def rank_of(self, thread: int) -> int:
        rank = self.placement[thread].rank
        return thread if rank is None else rank

    @property
    def sentinel_polls(self) -> list[Instr]:
        """The polls that wait for data to overwrite a sentinel (``NotEqual``)."""
        return [i for i in self.instrs if i.kind == InstrKind.POLL and isinstance(i.predicate, NotEqual)]
