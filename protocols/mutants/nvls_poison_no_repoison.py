"""mutant-nvls-poison-no-repoison: the poison two-shot never restores the poison."""
from __future__ import annotations

from protocols.nvls_poison import NVLSPoison


class NVLSPoisonNoRepoison(NVLSPoison):
    """nvls-poison without the re-poison (``repoison=False``).

    When a result slot comes round again it still holds the results of
    three launches ago, which are not the poison: the poll passes at once
    and the reader takes old sums. Shows only once a slot is reused, so it
    is checked over four launches.
    """

    name = "mutant-nvls-poison-no-repoison"
    expected_violation = "stale-read"
    default_params = {**NVLSPoison.default_params, "repoison": False}
    verify_bounds = {"iterations": 4, "ranks": 2}
