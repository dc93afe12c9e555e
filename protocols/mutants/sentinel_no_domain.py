"""mutant-sentinel-no-domain: the sentinel protocol without its data-domain restriction."""
from __future__ import annotations

from protocols.sentinel import Sentinel


class SentinelNoDomain(Sentinel):
    """Sentinel that does not restrict user data (no ``data_domain``).

    Any input word equal to the poison pattern is indistinguishable from
    "not arrived yet": the reader spins on it forever. The shipped protocol
    states the restriction (no word of user data equals 0xFFFAFFFA).
    """

    name = "mutant-sentinel-no-domain"
    expected_violation = "sentinel-collision"
    data_domain = None
