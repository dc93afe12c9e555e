"""mutant-nvls-relaxed-arrive: the multicast barrier's arrival is a relaxed multimem.red."""
from __future__ import annotations

from collsim.ir.types import Sem
from protocols.nvls import NVLS


class NVLSRelaxedArrive(NVLS):
    """nvls whose barrier arrivals are ``multimem.red.relaxed`` instead of ``.release``.

    A peer that sees the counter reach ``NRANKS`` learns nothing about the
    staging stores issued before the arrival: its ``multimem.ld_reduce``
    reads the staged buffers concurrently with them (the counter's acquire
    has no release to pair with).
    """

    name = "mutant-nvls-relaxed-arrive"
    expected_violation = "data-race"
    default_params = {**NVLS.default_params, "arrive_sem": Sem.RELAXED}
