"""``collsim review PROTOCOL``: everything collsim can say about one protocol, on one page.

>>> from collsim.review import review                       # doctest: +SKIP
>>> r = review("examples/protocols/ll16.py", ranks="2,4",
...            sizes="8B..4KiB x8", algorithm="one-shot", out_dir="rev")   # doctest: +SKIP
>>> r.ok, r.depends_on                                       # doctest: +SKIP
(True, ['store-16B-untorn'])

Stages: the IR well-formedness checks of every algorithm; verification
under ``sc`` and ``ptx`` with and without each declared hardware
assumption; des simulation of the protocol and comparison protocols over
ranks x sizes; emission of its CUDA and an nvcc compile with the PTX
translation check (skipped, with the reason, without nvcc). The result is
written as ``review.html`` (self-contained) and ``review.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from collsim.review.page import build_page, counterexample_figure, write_review
from collsim.review.pipeline import DEFAULT_AGAINST, DEFAULT_RANKS, DEFAULT_SIZES, Review, run_review

__all__ = ["DEFAULT_AGAINST", "DEFAULT_RANKS", "DEFAULT_SIZES", "Review", "build_page", "counterexample_figure",
           "review", "run_review", "write_review"]


def review(spec: str, *, out_dir: str | Path = "review", **kwargs: Any) -> Review:
    """Run a review of ``spec`` (see :func:`run_review` for the options) and write its files into ``out_dir``."""
    r = run_review(spec, out_dir=out_dir, **kwargs)
    write_review(r, out_dir)
    return r
