"""mutant-ll128-atomic-nvls-depth1: the multicast LL128-atomic lines are single-buffered."""
from __future__ import annotations

from protocols.ll128_atomic_nvls import LL128AtomicNVLS


class LL128AtomicNVLSDepth1(LL128AtomicNVLS):
    """ll128-atomic-nvls with ``depth=1``.

    A rank that has its sum multicasts its next launch's input into every
    copy, including that of a slower rank which has not read (or zeroed)
    the current sum yet: the slower rank reads a sum mixed with the next
    launch's data, or its zeroing wipes out an addition.
    """

    name = "mutant-ll128-atomic-nvls-depth1"
    expected_violation = "early-overwrite"
    default_params = {**LL128AtomicNVLS.default_params, "depth": 1}
