"""mutant-nvls-poison-repoison-current: the poison two-shot re-poisons the slot it has just read."""
from __future__ import annotations

from protocols.nvls_poison import NVLSPoison


class NVLSPoisonRepoisonCurrent(NVLSPoison):
    """nvls-poison with ``repoison_offset=0``: a rank multicasts the poison into its chunk of the slot it has
    just read.

    Its own copy is done with, but the multicast reaches every copy: a
    slower peer still polling this rank's chunk of the same slot may see
    the poison land on top of the data it was waiting for, and spin forever.
    Re-poisoning the slot of the previous launch waits until every peer is
    past it (the launch's barrier says so).
    """

    name = "mutant-nvls-poison-repoison-current"
    expected_violation = "hang"
    default_params = {**NVLSPoison.default_params, "repoison_offset": 0}
