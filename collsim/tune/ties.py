"""The tie rule: when two choices are too close to call.

A model's latencies carry its error, and a measurement its noise: a choice
that wins by 0.1 % is not a recommendation. At one rank count and size, the
choices whose latency is within ``tolerance_pct`` of the fastest *tie*; a
choice *wins* only when every other is slower than that. The winner map of
the report, the decision table and the NCCL tuner config all decide with
:func:`rank_choices`, so a tie is a tie everywhere.

>>> o = rank_choices({"ll": 10.0, "ll128": 10.05, "simple": 12.0})
>>> o.tied, o.is_tie, o.runner_up, round(o.margin_pct, 1)
(('ll', 'll128'), True, 'simple', 20.0)
>>> rank_choices({"ll": 10.0, "simple": 12.0}).tied
('ll',)
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collsim.errors import InputError

__all__ = ["DEFAULT_TOLERANCE_PCT", "MAX_TOLERANCE_PCT", "Outcome", "rank_choices", "check_tolerance"]

#: Default tie tolerance, percent of the fastest latency.
DEFAULT_TOLERANCE_PCT = 1.0
#: Largest tolerance accepted: beyond it a choice twice as slow would tie.
MAX_TOLERANCE_PCT = 100.0


def check_tolerance(value: Any, field: str = "--tolerance") -> float:
    """``value`` as a tolerance in percent, or an :class:`InputError` naming ``field``.

    >>> check_tolerance("2.5")
    2.5
    """
    try:
        pct = float(value)
    except (TypeError, ValueError):
        raise InputError(f"tolerance must be a number of percent, not {value!r}", field=field) from None
    if not math.isfinite(pct) or pct < 0 or pct > MAX_TOLERANCE_PCT:
        raise InputError(
            f"tolerance must be between 0 and {MAX_TOLERANCE_PCT:g} percent, not {value}", field=field
        )
    return pct


@dataclass(frozen=True)
class Outcome:
    """The choices at one rank count and size, fastest first, and what the tie rule makes of them.

    Attributes
    ----------
    ranked : tuple of (choice, latency_us)
        Every choice, fastest first (equal latencies keep the order given).
    tolerance_pct : float
        The tolerance the outcome was decided with.
    """

    ranked: tuple[tuple[Hashable, float], ...]
    tolerance_pct: float

    @property
    def best(self) -> Hashable:
        """The fastest choice (the first of a tie)."""
        return self.ranked[0][0]

    @property
    def best_latency(self) -> float:
        return self.ranked[0][1]

    @property
    def tied(self) -> tuple[Hashable, ...]:
        """The choices within the tolerance of the fastest, fastest first (one: an outright winner)."""
        return tuple(c for c, _ in self.ranked[: self._tie_count])

    @property
    def is_tie(self) -> bool:
        return self._tie_count > 1

    @property
    def _tie_count(self) -> int:
        limit = self.best_latency * (1.0 + self.tolerance_pct / 100.0)
        # 1e-9 relative slack: latencies printed to 3 decimals compare equal when they are equal
        return sum(1 for _, lat in self.ranked if lat <= limit * (1.0 + 1e-9))

    @property
    def runner_up(self) -> Hashable | None:
        """The fastest choice outside the tie (None when every choice ties)."""
        n = self._tie_count
        return self.ranked[n][0] if n < len(self.ranked) else None

    @property
    def runner_up_latency(self) -> float | None:
        n = self._tie_count
        return self.ranked[n][1] if n < len(self.ranked) else None

    @property
    def margin_pct(self) -> float | None:
        """How much slower the runner-up is than the fastest, percent (None without a runner-up)."""
        lat = self.runner_up_latency
        return None if lat is None else (lat - self.best_latency) / self.best_latency * 100.0

    @property
    def spread_pct(self) -> float:
        """How much slower the slowest tied choice is than the fastest, percent (0 for a winner)."""
        slowest = self.ranked[self._tie_count - 1][1]
        return (slowest - self.best_latency) / self.best_latency * 100.0

    def latency(self, choice: Hashable) -> float | None:
        for c, lat in self.ranked:
            if c == choice:
                return lat
        return None


def rank_choices(
    latencies: Mapping[Hashable, float] | Iterable[tuple[Hashable, float]],
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
) -> Outcome:
    """Order the choices at one rank count and size and apply the tie rule.

    Parameters
    ----------
    latencies : mapping or iterable of (choice, latency_us)
        At least one choice; latencies positive.
    tolerance_pct : float
        Choices within this percentage of the fastest latency tie with it.

    Returns
    -------
    Outcome
    """
    items = list(latencies.items()) if isinstance(latencies, Mapping) else list(latencies)
    if not items:
        raise ValueError("rank_choices needs at least one choice")
    ranked = tuple(sorted(((c, float(lat)) for c, lat in items), key=lambda item: item[1]))
    return Outcome(ranked, float(tolerance_pct))
