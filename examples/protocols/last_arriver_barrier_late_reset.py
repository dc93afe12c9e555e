"""last-arriver-barrier-late-reset: last_arriver_barrier.py whose last arriver resets the counter after the release.

A rank released by the flag may arrive at the next barrier (its fetch-add makes the counter 1) before the
last arriver's reset lands; the reset then erases that arrival, the counter never reaches NRANKS - 1 for
the next barrier, and every rank waits for a release that nobody sends (a lost signal: hang).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

_Base = type(load_protocol_file(str(Path(__file__).with_name("last_arriver_barrier.py"))))


class LastArriverBarrierLateReset(_Base):
    """last-arriver-barrier whose reset follows the release."""

    name = "last-arriver-barrier-late-reset"
    default_params = {**_Base.default_params, "reset_after_release": True}
    expected_violation = "hang"
