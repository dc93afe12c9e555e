"""signal-pad-cas-store-put: signal_pad_cas.py whose put is a release store of 1, not a CAS loop.

The store does not wait for the slot to be empty. A rank that passed a barrier signals the next one while
a slower peer has not yet consumed its previous signal: the two signals merge into one 1, the peer's
wait_signal consumes it for the first barrier and then spins for the second forever (a lost signal).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("signal_pad_cas.py"))))


class SignalPadCasStorePut(_Base):
    """signal-pad-cas whose put_signal stores 1 without checking the slot."""

    name = "signal-pad-cas-store-put"
    default_params = {**_Base.default_params, "put_is_cas": False}
    expected_violation = "hang"
