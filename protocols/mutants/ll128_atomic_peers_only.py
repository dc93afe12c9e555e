"""mutant-ll128-atomic-peers-only: the LL128-atomic reader waits for NRANKS - 1 contributions."""
from __future__ import annotations

from protocols.ll128_atomic import LL128Atomic


class LL128AtomicPeersOnly(LL128Atomic):
    """ll128-atomic whose reader waits until each count reaches ``NRANKS - 1`` per use (``waits_for="peers"``).

    It forgets that its own contribution is counted too: a line whose count
    reached ``NRANKS - 1`` may still lack one peer's data, and the reader
    takes a partial sum.
    """

    name = "mutant-ll128-atomic-peers-only"
    expected_violation = "stale-read"
    default_params = {**LL128Atomic.default_params, "waits_for": "peers"}
