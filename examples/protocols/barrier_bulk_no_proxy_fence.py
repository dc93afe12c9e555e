"""barrier-bulk-no-proxy-fence: barrier_bulk.py without the fence.proxy.async before the bulk copies.

The barrier's acquire orders the peers' staging stores before the leader's
later generic-proxy accesses only. The bulk copy reads through the async
proxy, which that acquire does not order: it may read the staging lines as
they were before the peer wrote them (a stale read).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("barrier_bulk.py"))))


class BarrierBulkNoProxyFence(_Base):
    """barrier-bulk whose leader issues its bulk copies without a proxy fence after the barrier."""

    name = "barrier-bulk-no-proxy-fence"
    default_params = {**_Base.default_params, "proxy_fence": False}
    expected_violation = "stale-read"
