"""proxy-fifo-fenced: proxy_fifo.py for a weakly ordered host: explicit fences in the proxy body, no host-tso.

On an Arm host (NVIDIA Grace) the proxy thread's plain loads and stores to
pinned host memory are not ordered as x86-TSO orders them, so the protocol
cannot declare ``host-tso``. The body states the barriers such a host needs
(``host_fences``: every one of proxy_fifo.py's ``HOST_FENCES``): a fence
after the poll of the head (the payload read comes after it), one before
the acknowledgement (the read is done before the slot is released) and one
before each arrival flag (the forwarded payload lands first). It holds with
every host access relaxed; without any one of the fences it does not.
"""
from __future__ import annotations

import sys
from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("proxy_fifo.py"))))


class ProxyFifoFenced(_Base):
    """proxy-fifo whose proxy body orders its host accesses with fences instead of assuming x86-TSO."""

    name = "proxy-fifo-fenced"
    assumptions = ()
    default_params = {**_Base.default_params, "host_fences": sys.modules[_Base.__module__].HOST_FENCES}
