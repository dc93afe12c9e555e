"""proxy-fifo-early-ack: proxy_fifo.py whose proxy acknowledges a request before it reads the payload.

The tail tells the kernel that the request slot is free. Posted before the
proxy's read, it lets the kernel finish and the next launch write its new
request into the slot while the proxy is still reading the old one: an early
overwrite (the peers may receive the next launch's input).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("proxy_fifo.py"))))


class ProxyFifoEarlyAck(_Base):
    """proxy-fifo whose proxy posts the tail before it reads the request's payload."""

    name = "proxy-fifo-early-ack"
    default_params = {**_Base.default_params, "ack_after_read": False}
    expected_violation = "early-overwrite"
