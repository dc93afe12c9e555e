"""Linear value terms: what a protocol's data is, in the verifier's instances.

A :class:`Lin` is ``const + sum(coeff * atom)`` over atoms ``("in", rank,
iteration, element)`` (an input element), ``("rd", event_id)`` (the value a
read event returned) and ``("sym", name)``. The lowering builds every value of
a protocol instance as one; the encoding turns it into a z3 sum, the
reference run evaluates it, and a counterexample decodes it back into the
inputs it is made of.
"""
from __future__ import annotations

from typing import Mapping

__all__ = ["Lin"]


class Lin:
    """A linear integer term: ``const + sum(coeff * atom)``.

    >>> (Lin.const(2) + Lin.atom(("rd", 7))).terms
    {('rd', 7): 1}
    >>> (Lin.atom(("rd", 7)) + Lin.const(3)).evaluate({("rd", 7): 4})
    7
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
