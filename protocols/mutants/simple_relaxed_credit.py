"""mutant-simple-relaxed-credit: the ring credit is polled without acquire."""
from __future__ import annotations

from collsim.ir.types import Sem
from protocols.simple import Simple


class SimpleRelaxedCredit(Simple):
    """Simple ring whose sender polls its credit with a volatile (relaxed) load and no fence.

    Nothing then orders the sender's next weak store into a slot after the
    receiver's weak loads of that slot's previous contents, which the
    receiver published with its release credit store: under PTX the load may
    read the newer data. The verifier found this in an earlier version of
    the shipped Simple protocol; it needs three ranks on a ring to show.
    """

    name = "mutant-simple-relaxed-credit"
    algorithms = ("ring",)
    expected_violation = "early-overwrite"
    default_params = {**Simple.default_params, "credit_sem": Sem.VOLATILE}
    verify_bounds = {"ranks": 3}
