"""proxy-fifo-gpu-scope: proxy_fifo.py with the request's head published at gpu scope instead of sys.

The kernel's release of the head covers the threads of its own GPU only; the
proxy is a host thread, outside that scope. It sees the new head, but the
release does not synchronize with its acquire, so its read of the payload
may return what the slot held before (the previous launch's request, or the
fresh allocation): a stale read, forwarded to every peer.
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir import Scope
from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("proxy_fifo.py"))))


class ProxyFifoGpuScope(_Base):
    """proxy-fifo whose kernel publishes its request with a release at gpu scope, which leaves the host out."""

    name = "proxy-fifo-gpu-scope"
    default_params = {**_Base.default_params, "request_scope": Scope.GPU}
    expected_violation = "stale-read"
