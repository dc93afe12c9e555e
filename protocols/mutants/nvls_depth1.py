"""mutant-nvls-depth1: NVLS one-shot with a single staging buffer and no closing barrier."""
from __future__ import annotations

from protocols.nvls import NVLS


class NVLSDepth1(NVLS):
    """nvls one-shot with ``depth=1``.

    With one barrier per launch, a rank that finished launch ``i`` stages
    launch ``i + 1``'s input into the buffer a slower peer is still
    ``ld_reduce``-ing for launch ``i``: that peer sums part of the next
    launch's data. Two slots (or a closing barrier) keep them apart.
    """

    name = "mutant-nvls-depth1"
    algorithms = ("one-shot",)
    expected_violation = "early-overwrite"
    default_params = {**NVLS.default_params, "depth": 1}
