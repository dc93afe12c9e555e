"""The verifier's form of a protocol program: element-level events of a tiny, bound instance.

:func:`collsim.verify.lower.lower_instance` produces a :class:`VerifyInstance`
from a protocol (:func:`collsim.verify.bridge.to_instance` from a litmus
program); :class:`collsim.verify.properties.Execution` encodes it in Z3 and
:func:`collsim.verify.reference.reference_run` runs it once.

An instance is a list of threads, each a list of :class:`VerifyInstr`
(instructions, in program order), each a set of :class:`VerifyEvent` (one
per scalar element accessed, unordered among themselves: PTX ISA §8.2.4).
Every value is a linear term over input elements and read events
(:class:`Lin`). Input element ``e`` of rank ``r`` in launch ``i`` is a
distinct power of :data:`INPUT_BASE` above every flag, counter and sentinel
value, so a sum identifies the multiset of inputs in it and a consumer's
value names its producer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from collsim.ir.ops import NotEqual, Predicate
from collsim.ir.types import FillPattern

__all__ = [
    "Bounds",
    "Lin",
    "EventKind",
    "InstrKind",
    "VerifyEvent",
    "VerifyInstr",
    "VerifyInstance",
    "input_value",
    "INPUT_BASE",
    "INPUT_OFFSET",
]

#: input element values are BASE ** (OFFSET + k): above every flag/sentinel value
INPUT_BASE = 256
INPUT_OFFSET = 6


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
        Threads per rank.
    max_lanes : int
        Lines wider than this many store lanes are shrunk (see module doc).
    """

    ranks: int = 3
    iterations: int = 2
    lines: int = 1
    threads: int = 1
    max_lanes: int = 2

    def __post_init__(self) -> None:
        if self.ranks < 2:
            raise ValueError("the verifier needs at least 2 ranks")
        if self.iterations < 1 or self.lines < 1 or self.threads < 1 or self.max_lanes < 1:
            raise ValueError("iterations, lines, threads and max_lanes are at least 1")

    def describe(self) -> str:
        return (f"{self.ranks} ranks x {self.iterations} iterations, {self.lines} line(s) per chunk, "
                f"{self.threads} thread(s) per rank")


class Lin:
    """A linear integer term: ``const + sum(coeff * atom)``.

    Atoms are ``("in", rank, iteration, element)`` (an input element),
    ``("rd", event_id)`` (the value a read event returned) and ``("sym",
    name)``.

    >>> (Lin.const(2) + Lin.atom(("rd", 7))).terms
    {('rd', 7): 1}
    """

    __slots__ = ("c", "terms")

    def __init__(self, c: int = 0, terms: Mapping[tuple, int] | None = None) -> None:
        self.c = c
        self.terms = {k: v for k, v in (terms or {}).items() if v}

    @staticmethod
    def const(value: int) -> "Lin":
        return Lin(value)

    @staticmethod
    def atom(key: tuple, coeff: int = 1) -> "Lin":
        return Lin(0, {key: coeff})

    def __add__(self, other: "Lin") -> "Lin":
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0) + v
        return Lin(self.c + other.c, terms)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def reads(self) -> set[int]:
        return {k[1] for k in self.terms if k[0] == "rd"}

    def inputs(self) -> list[tuple]:
        return [k for k in self.terms if k[0] == "in"]

    def evaluate(self, env: Mapping[tuple, int]) -> int:
        return self.c + sum(v * env[k] for k, v in self.terms.items())

    def __repr__(self) -> str:
        parts = [str(self.c)] if self.c or not self.terms else []
        parts += [f"{v}*{k}" if v != 1 else str(k) for k, v in self.terms.items()]
        return " + ".join(parts)


def input_value(rank: int, iteration: int, element: int, bounds: Bounds, elements: int) -> int:
    """The concrete value of an input element: a distinct power of :data:`INPUT_BASE`."""
    index = (iteration * bounds.ranks + rank) * elements + element
    return INPUT_BASE ** (INPUT_OFFSET + index)


class EventKind(StrEnum):
    """What one :class:`VerifyEvent` is (the spelling of the model layer's events, :mod:`collsim.verify.events`)."""

    WRITE = "W"
    READ = "R"
    RMW = "RMW"
    FENCE = "F"
    BARRIER = "BAR"


class InstrKind(StrEnum):
    """What one :class:`VerifyInstr` is."""

    STORE = "store"
    LOAD = "load"
    POLL = "poll"
    RMW = "rmw"
    FENCE = "fence"
    BARRIER = "bar"


_WRITES = frozenset({EventKind.WRITE, EventKind.RMW})
_READS = frozenset({EventKind.READ, EventKind.RMW})
_MEMORY = _WRITES | _READS


@dataclass(eq=False)
class VerifyEvent:
    """One memory event (or fence / barrier) of the unrolled program."""

    id: int
    kind: EventKind
    thread: int
    rank: int
    instr: int  # program-order index of its instruction within the thread
    loc: tuple | None = None  # (buffer, owner rank, flat line, word)
    sem: str = "weak"  # weak | relaxed | acquire | release | acq_rel | sc (fences)
    scope: str = "sys"
    value: Lin | None = None  # value written (W, RMW)
    rmw_op: str | None = None
    label: str = ""
    iteration: int = 0
    role: str | None = None  # "data" | "flag" for memory events
    slot: int = 0
    region: int = 0
    line: int = 0
    word: int = 0
    wgroup: int | None = None
    rgroup: int | None = None
    poll: int | None = None  # id of the poll instruction (per line) this read belongs to
    polled: bool = False  # a word the poll predicate inspects
    consumer: str | None = None  # register the value goes to
    bar: tuple | None = None  # (rank, k): the k-th barrier of the rank
    fill: FillPattern | None = None  # the pattern of a Fill store
    deps: frozenset[int] = frozenset()  # data dependencies (read events); control ones follow from polls
    returns_value: bool = True  # False for a ``red``: its read is not a read for acquire patterns
    writes_if: Any = None  # z3 Bool over read values: a ``cas`` writes only when it holds (None: always)

    def __post_init__(self) -> None:
        self.kind = EventKind(self.kind)

    @property
    def is_write(self) -> bool:
        return self.kind in _WRITES

    @property
    def is_read(self) -> bool:
        return self.kind in _READS

    @property
    def is_mem(self) -> bool:
        return self.kind in _MEMORY

    @property
    def strong(self) -> bool:
        return self.sem != "weak"

    def where(self) -> str:
        if self.loc is None:
            return ""
        buf, owner, _flat, word = self.loc
        return f"{buf}@rank{owner}[slot {self.slot}, region {self.region}, line {self.line}, word {word}]"


@dataclass
class VerifyInstr:
    """One instruction of one thread: its events share program order."""

    thread: int
    index: int
    kind: InstrKind
    events: list[VerifyEvent]
    label: str
    iteration: int
    predicate: Predicate | None = None  # polls: the bound exit condition
    id: int = -1

    def __post_init__(self) -> None:
        self.kind = InstrKind(self.kind)


@dataclass
class VerifyInstance:
    """The unrolled, element-level program of every rank of one tiny instance."""

    protocol: str
    algorithm: str
    bounds: Bounds
    msg: int
    assumptions: tuple[str, ...]
    events: list[VerifyEvent]
    threads: list[list[VerifyInstr]]
    placement: list[tuple[int, int, int]]  # thread -> (rank, cta, gpu)
    init: dict[tuple, int]
    outputs: dict[tuple, Lin | None]  # (rank, iteration, element) -> value (None: not modelled)
    expected_outputs: dict[tuple, Lin]
    word_bytes: int
    elements: int  # input elements per rank per iteration
    sentinel: int | None
    forbidden_word: int | None
    notes: list[str] = field(default_factory=list)
    instrs: list[VerifyInstr] = field(default_factory=list)
    locs: dict[tuple, list[VerifyEvent]] = field(default_factory=dict)  # memory events by location
    wgroups: dict[int, list[VerifyEvent]] = field(default_factory=dict)
    rgroups: dict[int, list[VerifyEvent]] = field(default_factory=dict)
    flat_signature: str = ""
    #: event id -> z3 Bool over read values (``v<id>``): the event runs iff it holds.
    #: Empty for lowered protocols (every event runs); set for programs converted
    #: from the event interface (:mod:`collsim.verify.bridge`).
    guards: dict[int, Any] = field(default_factory=dict)

    def input_env(self, symbolic: bool = False) -> dict[tuple, int]:
        env = {}
        for r in range(self.bounds.ranks):
            for i in range(self.bounds.iterations):
                for e in range(self.elements):
                    env[("in", r, i, e)] = input_value(r, i, e, self.bounds, self.elements)
        return env

    def writes_at(self, loc: tuple) -> list[VerifyEvent]:
        return [e for e in self.locs.get(loc, ()) if e.is_write]

    def reads_at(self, loc: tuple) -> list[VerifyEvent]:
        return [e for e in self.locs.get(loc, ()) if e.is_read]

    @property
    def sentinel_polls(self) -> list[VerifyInstr]:
        """The polls that wait for data to overwrite a sentinel (``NotEqual``)."""
        return [i for i in self.instrs if i.kind == InstrKind.POLL and isinstance(i.predicate, NotEqual)]
