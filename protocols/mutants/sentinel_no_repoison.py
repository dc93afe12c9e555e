"""mutant-sentinel-no-repoison: readers never restore the sentinel."""
from __future__ import annotations

from protocols.sentinel import Sentinel


class SentinelNoRepoison(Sentinel):
    """Sentinel protocol whose readers never re-poison a consumed slot (``repoison=False``).

    When a slot comes round again it still holds the data of three phases
    ago, which is not the sentinel, so the reader's poll passes at once and
    it consumes old data. Shows only once a slot is reused, so it is checked
    over four launches.
    """

    name = "mutant-sentinel-no-repoison"
    algorithms = ("one-shot",)
    expected_violation = "stale-read"
    default_params = {**Sentinel.default_params, "repoison": False}
    verify_bounds = {"iterations": 4, "ranks": 2}
