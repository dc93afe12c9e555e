"""mutant-sentinel-nan-ieee: the NaN poison compared as a float, so the sentinel itself reads as "arrived"."""
from __future__ import annotations

from collsim.ir.floats import Compare, FloatInputs, WordEncoding
from collsim.ir.protocol import DataDomain
from protocols.sentinel import POISON, Sentinel


class SentinelNanIeee(Sentinel):
    """Sentinel whose readers compare the NaN poison as a float (``while (v == poison_f)``).

    NaN equals nothing, itself included: the loop exits at its first read, on the poison, and
    the reader consumes the sentinel as data. The shipped protocol compares the integer word.
    """

    name = "mutant-sentinel-nan-ieee"
    expected_violation = "stale-read"
    sentinel = (POISON, Compare.IEEE)
    data_domain = DataDomain(POISON, Sentinel.data_domain.statement, WordEncoding("f32", FloatInputs.FINITE))
