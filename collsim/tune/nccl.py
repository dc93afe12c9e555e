"""NCCL tuner-plugin configuration from timings.

NCCL's example tuner plugin (``plugins/tuner/example`` in the NCCL
repository; loaded with ``NCCL_TUNER_PLUGIN``, configured by
``NCCL_TUNER_CONFIG_FILE``) reads one rule per line::

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

The facts this module relies on, read from the plugin's README and parser:

* ``collective_type`` is one of :data:`COLLECTIVE_TYPES`, ``algorithm`` one
  of :data:`ALGORITHMS`, ``protocol`` one of :data:`PROTOCOLS`. An unknown
  name is not an error there: it silently becomes ``allreduce``, ``ring`` or
  ``simple``, so this writer only ever writes names from those lists.
* A rule applies when ``min_bytes <= nBytes <= max_bytes`` (both inclusive;
  ``nBytes`` is the collective's size, for AllReduce the per-rank buffer,
  nccl-tests' "size") and ``nNodes``/``nRanks`` match (``-1``: any).
  ``channels`` ``-1`` keeps NCCL's channel choice, ``numPipeOps`` and
  ``regBuff`` ``-1`` match any value.
* Rules are tried in file order and the first that matches (and names a
  pair NCCL has not ruled out) wins, so overlapping ranges would make the
  later rule dead; a size no rule matches is left to NCCL's own tuning.
* Lines are read into a 256-byte buffer and a line is a comment only when it
  *starts* with ``#``: a longer comment would spill into a rule. Every line
  written here is at most :data:`MAX_LINE_CHARS` characters.

:data:`NCCL_EQUIVALENTS` is the one table from collsim's choices to NCCL's;
a protocol collsim models that NCCL runs is one line there (the multimem
two-shot, ``nvls``, is NCCL's ``nvls`` algorithm).
"""
from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from collsim.errors import InputError
from collsim.tune.ranges import spans
from collsim.tune.ties import DEFAULT_TOLERANCE_PCT, rank_choices
from collsim.tune.timings import Choice, Timings
from collsim.units import format_size
from collsim.version import __version__

__all__ = [
    "COLLECTIVE_TYPES",
    "ALGORITHMS",
    "PROTOCOLS",
    "FIELDS",
    "MAX_LINE_CHARS",
    "NCCL_EQUIVALENTS",
    "nccl_choice",
    "missing_nccl_message",
    "check_nccl_runnable",
    "ConfigRow",
    "TunerConfig",
    "build_config",
]

#: ``collective_type`` values of the plugin's grammar.
COLLECTIVE_TYPES: tuple[str, ...] = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
#: ``algorithm`` values of the plugin's grammar.
ALGORITHMS: tuple[str, ...] = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
#: ``protocol`` values of the plugin's grammar.
PROTOCOLS: tuple[str, ...] = ("ll", "ll128", "simple")
#: The columns of a rule, in order.
FIELDS: tuple[str, ...] = (
    "collective_type", "min_bytes", "max_bytes", "algorithm", "protocol",
    "channels", "nNodes", "nRanks", "numPipeOps", "regBuff",
)
#: Longest line the plugin reads whole (its buffer is 256 bytes, newline included).
MAX_LINE_CHARS = 254

#: collsim (algorithm, protocol) -> the NCCL (algorithm, protocol) it models. collsim's ring is NCCL's ring
#: AllReduce (reduce-scatter then all-gather around one ring per channel) and its ll, ll128 and simple
#: protocols are NCCL's line formats; its nvls two-shot (a multimem.ld_reduce reduce-scatter and a
#: multimem.st all-gather through the NVSwitch) is NCCL's NVLS AllReduce, which runs the Simple protocol
#: (src/device/all_reduce.h, src/graph/tuning.cc: NVLS has Simple only). Other one-shot and two-shot
#: designs (barrier, sentinel, the atomic ones, nvls one-shot, nvls-poison) have no NCCL counterpart a tuner
#: can select.
NCCL_EQUIVALENTS: Mapping[Choice, Choice] = {
    ("ring", "ll"): ("ring", "ll"),
    ("ring", "ll128"): ("ring", "ll128"),
    ("ring", "simple"): ("ring", "simple"),
    ("two-shot", "nvls"): ("nvls", "simple"),
}

for _algo, _proto in NCCL_EQUIVALENTS.values():  # a typo here would be read by NCCL as ring/simple
    if _algo not in ALGORITHMS or _proto not in PROTOCOLS:
        raise ValueError(f"NCCL_EQUIVALENTS names {_algo}/{_proto}, not in the tuner plugin's grammar")


def nccl_choice(choice: Choice, kind: str) -> Choice | None:
    """The NCCL (algorithm, protocol) a choice selects, or None when NCCL cannot run it.

    ``kind`` is the :attr:`Timings.kind`: simulated choices go through
    :data:`NCCL_EQUIVALENTS`; measured ones are NCCL's names already.

    >>> nccl_choice(("ring", "ll128"), "simulated"), nccl_choice(("one-shot", "ll"), "simulated")
    (('ring', 'll128'), None)
    """
    if kind == "simulated":
        return NCCL_EQUIVALENTS.get(choice)
    algorithm, protocol = choice
    return choice if algorithm in ALGORITHMS and protocol in PROTOCOLS else None


@dataclass(frozen=True)
class ConfigRow:
    """One rule of the config and what it was decided from.

    ``sizes`` are the run sizes inside the range; ``excess_pct`` is the most
    the chosen pair is slower than the fastest NCCL pair at any of them (0
    when it is the fastest everywhere, at most the tolerance); ``rule`` how
    ``max_bytes`` was placed (:mod:`collsim.tune.ranges`).
    """

    nodes: int
    ranks: int
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int
    sizes: tuple[int, ...]
    excess_pct: float
    rule: str
    collective: str = "allreduce"

    def line(self) -> str:
        """The rule as the plugin reads it (numPipeOps and regBuff: any)."""
        return ",".join(str(v) for v in (
            self.collective, self.min_bytes, self.max_bytes, self.algorithm, self.protocol,
            self.channels, self.nodes, self.ranks, -1, -1,
        ))


@dataclass
class TunerConfig:
    """A tuner config: its rules in file order, its header, and the placements it leaves to NCCL."""

    rows: list[ConfigRow]
    header: list[str]
    uncovered: list[tuple[int, int]] = field(default_factory=list)
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT

    def text(self) -> str:
        lines = [f"# {h}" if h else "#" for h in self.header] + [r.line() for r in self.rows]
        for line in lines:
            if len(line) > MAX_LINE_CHARS:  # pragma: no cover - the header is wrapped below
                raise AssertionError(f"tuner config line longer than {MAX_LINE_CHARS} characters: {line[:60]}...")
        return "\n".join(lines) + "\n"


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, width=98, subsequent_indent="  ", break_on_hyphens=False) or [""]


def missing_nccl_message(choices: Iterable[Choice], kind: str) -> str:
    """Why no tuner config can be written from timings holding only ``choices`` (``kind``: simulated or measured)."""
    held: dict[str, list[str]] = {}
    for algorithm, protocol in choices:
        held.setdefault(algorithm, []).append(protocol)
    holds = "; ".join(f"{a} × {', '.join(ps)}" for a, ps in held.items()) or "nothing"
    if kind == "simulated":
        wanted: dict[str, list[str]] = {}
        for (a, p) in NCCL_EQUIVALENTS:
            wanted.setdefault(a, []).append(p)
        need = " or ".join(f"{a} with {', '.join(ps)}" for a, ps in wanted.items())
        return (f"no NCCL-runnable rows: an NCCL tuner config needs {need} (the NCCL algorithms and protocols "
                f"collsim models); these results hold {holds} (add them to the scenario, or write only --table)")
    return (f"no NCCL-runnable measurements: an NCCL tuner config needs rows whose algorithm is one of "
            f"{', '.join(ALGORITHMS)} and protocol one of {', '.join(PROTOCOLS)}; these hold {holds}")


def check_nccl_runnable(choices: Iterable[Choice], source: str) -> None:
    """Refuse simulated ``choices`` (a scenario's, before it runs) none of which NCCL can run."""
    choices = list(choices)
    if not any(c in NCCL_EQUIVALENTS for c in choices):
        raise InputError(missing_nccl_message(choices, "simulated"), file=source)


def _header(timings: Timings, tolerance_pct: float, channels: int, given: bool, considered: list[Choice],
            uncovered: list[tuple[int, int]]) -> list[str]:

    sizes = timings.sizes
    what = "simulated" if timings.kind == "simulated" else "measured"
    lines = [
        f"NCCL tuner config written by collsim {__version__} for NCCL's example tuner plugin "
        "(NCCL_TUNER_PLUGIN, NCCL_TUNER_CONFIG_FILE)",
        ",".join(FIELDS),
        f"topology: {timings.topology or 'not named'}" + (f" ({timings.description})" if timings.description else ""),
        f"from: {timings.origin}; model: {timings.model}"
        + (f"; results by collsim {timings.collsim_version}" if timings.kind == "simulated" and timings.collsim_version else "")
        + f"; launch: {timings.launch or 'not known'}",
        f"choices: the fastest {what} of {', '.join(f'{a}/{p}' for a, p in considered)} per nRanks and size, "
        f"or one within {tolerance_pct:g}% of it where that keeps a range unbroken",
        f"sizes: bytes per rank (NCCL's nBytes, nccl-tests' size), {what} at {format_size(sizes[0])} .. "
        f"{format_size(sizes[-1])}; a boundary sits where the two choices' latencies cross, taken as linear "
        "in bytes between those sizes; the first range starts at 0",
        f"above {sizes[-1]} bytes no rule matches and NCCL chooses: nothing is extrapolated",
        (f"channels {channels}: " + ("as given" if given else "the count the scenario fixed for every row")
         if channels != -1 else
         "channels -1: NCCL's own channel choice (the model chose its own count, as NCCL does); the example "
         "plugin as published may then cap NCCL at one channel: check the channels NCCL uses with "
         "NCCL_DEBUG=INFO and nccl-tests before deploying (collsim's docs/TUNING.md)"),
        "numPipeOps -1, regBuff -1: any (collsim times one AllReduce per launch, buffers not registered)",
    ]
    for nodes, ranks in uncovered:
        lines.append(f"nNodes {nodes}, nRanks {ranks}: nothing NCCL can run was {what}; left to NCCL")
    out: list[str] = []
    for line in lines:
        out += _wrap(line)
    return out


def build_config(
    timings: Timings,
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    channels: int | None = None,
    collective: str = "allreduce",
) -> TunerConfig:
    """The NCCL tuner config of ``timings``: per placement, contiguous ranges from 0 to the largest size.

    At each size, the choices NCCL can run (:func:`nccl_choice`) are ranked
    with the tie rule; the config keeps a choice while it stays within the
    tolerance of the fastest and otherwise switches to the tied choice that
    stays within it longest (so as few rules as the tolerance allows; with
    ``tolerance_pct=0`` always the fastest). Ranges are placed by
    :func:`collsim.tune.ranges.spans`.

    Parameters
    ----------
    timings : Timings
    tolerance_pct : float
        Tie tolerance, percent.
    channels : int, optional
        Channel count to write; default the count the scenario fixed, else -1 (NCCL's choice).
    collective : str
        ``collective_type`` of every rule.

    Raises
    ------
    InputError
        When no placement has a choice NCCL can run (the message names what the timings hold).
    """
    if collective not in COLLECTIVE_TYPES:
        raise InputError(f"unknown collective {collective!r}", choices=COLLECTIVE_TYPES)
    ch = channels if channels is not None else (timings.channels if timings.channels is not None else -1)
    rows: list[ConfigRow] = []
    uncovered: list[tuple[int, int]] = []
    considered: dict[Choice, None] = {}
    for nodes, ranks in timings.placements():
        sizes: list[int] = []
        cands: list[dict[Choice, float]] = []
        for size, lats in timings.points(nodes, ranks):
            mapped: dict[Choice, float] = {}
            for choice, lat in lats.items():
                target = nccl_choice(choice, timings.kind)
                if target is not None and (target not in mapped or lat < mapped[target]):
                    mapped[target] = lat
                    considered[target] = None
            if mapped:
                sizes.append(size)
                cands.append(mapped)
        if not sizes:
            uncovered.append((nodes, ranks))
            continue
        outcomes = [rank_choices(sorted(c.items()), tolerance_pct) for c in cands]
        tied = [set(o.tied) for o in outcomes]

        def run_length(choice: Choice, start: int) -> int:
            n = 0
            while start + n < len(tied) and choice in tied[start + n]:
                n += 1
            return n

        keys: list[Choice] = []
        current: Choice | None = None
        for i, o in enumerate(outcomes):
            if current is None or current not in tied[i]:
                current = max(enumerate(o.tied), key=lambda item: (run_length(item[1], i), -item[0]))[1]
            keys.append(current)
        for span in spans(sizes, keys, keys, lambda c, i: cands[i].get(c)):
            algorithm, protocol = span.key
            inside = range(span.first, span.last + 1)
            excess = max((cands[i][span.key] - outcomes[i].best_latency) / outcomes[i].best_latency * 100 for i in inside)
            rows.append(ConfigRow(nodes, ranks, span.min_bytes, span.max_bytes, algorithm, protocol, ch,
                                  tuple(sizes[i] for i in inside), round(excess, 6), span.rule, collective))
    if not rows:
        raise InputError(missing_nccl_message(timings.choices(), timings.kind), file=timings.source)
    header = _header(timings, tolerance_pct, ch, channels is not None, sorted(considered), uncovered)
    return TunerConfig(rows, header, uncovered, tolerance_pct)
