"""Where simulated and measured choices disagree.

Both sides are put in NCCL's words where NCCL runs the choice
(:func:`collsim.tune.nccl.nccl_choice`; a custom kernel keeps its own
name) and compared at every (nodes, ranks, size) both hold, over the
choices both hold there (a choice one side never ran decides nothing). The
simulated choice *disagrees* when, on the measured side, it is not within
the tolerance of the fastest: deploying it would cost more than the
tolerance on the real machine. ``penalty_pct`` says how much more.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from collsim.errors import InputError
from collsim.tune.nccl import nccl_choice
from collsim.tune.ties import DEFAULT_TOLERANCE_PCT, rank_choices
from collsim.tune.timings import Choice, Timings

__all__ = ["Disagreement", "Comparison", "compare"]


@dataclass(frozen=True)
class Disagreement:
    """One point where the simulated choice is not the measured one (nor tied with it)."""

    nodes: int
    ranks: int
    size: int
    simulated: Choice
    measured: Choice
    simulated_us: dict[Choice, float]
    measured_us: dict[Choice, float]

    @property
    def penalty_pct(self) -> float:
        """How much slower the simulated choice measured than the measured fastest, percent."""
        best = self.measured_us[self.measured]
        return (self.measured_us[self.simulated] - best) / best * 100.0


@dataclass
class Comparison:
    """The points compared, the disagreements among them, and what to know when reading them."""

    compared: int
    disagreements: list[Disagreement]
    tolerance_pct: float
    notes: list[str] = field(default_factory=list)


def _common_words(timings: Timings) -> dict[tuple[int, int, int], dict[Choice, float]]:
    out: dict[tuple[int, int, int], dict[Choice, float]] = {}
    for nodes, ranks in timings.placements():
        for size, lats in timings.points(nodes, ranks):
            mapped: dict[Choice, float] = {}
            for choice, lat in lats.items():
                key = nccl_choice(choice, timings.kind) or choice
                if key not in mapped or lat < mapped[key]:
                    mapped[key] = lat
            out[(nodes, ranks, size)] = mapped
    return out


def compare(simulated: Timings, measured: Timings, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> Comparison:
    """Compare the choices of ``simulated`` with those of ``measured``.

    Raises
    ------
    InputError
        When the two share no point with two or more choices in common.
    """
    sim, meas = _common_words(simulated), _common_words(measured)
    compared = 0
    found: list[Disagreement] = []
    for key in sorted(set(sim) & set(meas)):
        common = sorted(set(sim[key]) & set(meas[key]))
        if len(common) < 2:
            continue
        compared += 1
        s = rank_choices([(c, sim[key][c]) for c in common], tolerance_pct)
        m = rank_choices([(c, meas[key][c]) for c in common], tolerance_pct)
        if s.best not in m.tied:
            nodes, ranks, size = key
            found.append(Disagreement(nodes, ranks, size, s.best, m.best,  # type: ignore[arg-type]
                                      {c: sim[key][c] for c in common}, {c: meas[key][c] for c in common}))
    if compared == 0:
        def span(t: Timings) -> str:
            placements = ", ".join(f"{r} ranks/{n} node{'s' if n != 1 else ''}" for n, r in t.placements())
            choices = ", ".join(f"{a}/{p}" for a, p in t.choices())
            return f"{placements}; {choices}"

        raise InputError(
            "nothing to compare: no (nodes, ranks, size) with two or more choices in both "
            f"(simulated {simulated.source}: {span(simulated)}; measured {measured.source}: {span(measured)})",
            field="--against",
        )
    notes = []
    if simulated.topology and measured.topology and simulated.topology != measured.topology:
        notes.append(f"the simulation is of {simulated.topology}, the measurements of {measured.topology}")
    if simulated.launch and measured.launch and simulated.launch != measured.launch:
        notes.append(f"the simulation is of {simulated.launch} launches, the measurements of {measured.launch} launches")
    return Comparison(compared, found, tolerance_pct, notes)
