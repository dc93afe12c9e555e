"""mutant-sentinel-eager-repoison: sentinel with two buffers, re-poisoning the slot a peer may be writing."""
from __future__ import annotations

from protocols.sentinel import Sentinel


class SentinelEagerRepoison(Sentinel):
    """Sentinel with ``depth=2`` and ``repoison_offset=1``.

    After consuming ``seq`` the reader re-poisons the slot of ``seq + 1``,
    but a peer may be one phase ahead and have already written its data
    there: the poison lands on top of it and the reader waits forever for
    data that has come and gone. Three buffers keep the slot being cleared
    away from the ones peers can write.
    """

    name = "mutant-sentinel-eager-repoison"
    expected_violation = "hang"
    default_params = {**Sentinel.default_params, "depth": 2, "repoison_offset": 1}
