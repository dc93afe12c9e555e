"""mutant-sentinel-neg-zero-ieee: a -0.0 sentinel compared as a float, so +0.0 data reads as "not arrived"."""
from __future__ import annotations

from collsim.ir.floats import F32_NEG_ZERO, Compare, FloatInputs, WordEncoding
from collsim.ir.protocol import DataDomain
from protocols.sentinel import Sentinel


class SentinelNegZeroIeee(Sentinel):
    """Sentinel whose pattern is ``-0.0`` and whose readers compare it as a float (``v == -0.0f``).

    The domain keeps ``-0.0`` out of the data bitwise, but under IEEE equality ``+0.0 == -0.0``:
    an input of ``+0.0``, or a partial sum that cancels to it, satisfies "still the sentinel" and
    the reader spins on data that has arrived. The shipped protocol compares the integer word
    against a NaN pattern no finite value has.
    """

    name = "mutant-sentinel-neg-zero-ieee"
    expected_violation = "sentinel-collision"
    sentinel = (F32_NEG_ZERO, Compare.IEEE)
    data_domain = DataDomain(F32_NEG_ZERO, "user data are finite f32 values; no word is the pattern of -0.0",
                             WordEncoding("f32", FloatInputs.FINITE))
