"""host-reset-barrier-racy: host_reset_barrier.py without the host barrier after the memset.

The memset is stream-ordered after this rank's previous launch only. A
faster peer that has started the next launch may already have stored its
first arrival flag into this rank's arrivals when the memset clears them:
the signal is lost, this rank waits for it forever (hang), and the peer
waits for this rank's closing arrival in turn.
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("host_reset_barrier.py"))))


class HostResetBarrierRacy(_Base):
    """host-reset-barrier whose host clears the arrival flags without meeting the other hosts first."""

    name = "host-reset-barrier-racy"
    default_params = {"host_barrier": False}
    expected_violation = "hang"
