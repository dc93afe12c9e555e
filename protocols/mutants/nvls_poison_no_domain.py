"""mutant-nvls-poison-no-domain: the poison two-shot without its data-domain restriction."""
from __future__ import annotations

from protocols.nvls_poison import NVLSPoison


class NVLSPoisonNoDomain(NVLSPoison):
    """nvls-poison that does not restrict user data (no ``data_domain``).

    A reduced word equal to 0xFFFAFFFA is indistinguishable from "not
    arrived": every reader spins on it forever.
    """

    name = "mutant-nvls-poison-no-domain"
    expected_violation = "sentinel-collision"
    data_domain = None
