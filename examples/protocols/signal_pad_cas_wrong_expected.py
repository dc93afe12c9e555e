"""signal-pad-cas-wrong-expected: signal_pad_cas.py whose put spins on CAS(slot, 1, 1) instead of CAS(slot, 0, 1).

The put waits for a full slot where it should wait for an empty one: a fresh slot holds 0, so the first
put never succeeds and every rank spins in its first barrier forever.
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("signal_pad_cas.py"))))


class SignalPadCasWrongExpected(_Base):
    """signal-pad-cas whose put_signal compares against 1."""

    name = "signal-pad-cas-wrong-expected"
    default_params = {**_Base.default_params, "put_expects": 1}
    expected_violation = "hang"
