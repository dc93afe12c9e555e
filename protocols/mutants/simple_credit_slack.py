"""mutant-simple-credit-slack: ring credits off by one."""
from __future__ import annotations

from protocols.simple import Simple


class SimpleCreditSlack(Simple):
    """Simple ring whose sender waits for one credit too few (``credit_slack=1``).

    With two slots the sender may write step ``s`` only after the receiver
    consumed ``s - 2``; the off-by-one lets it write after ``s - 3``, into
    the slot the receiver is still reading.
    """

    name = "mutant-simple-credit-slack"
    algorithms = ("ring",)
    expected_violation = "early-overwrite"
    default_params = {**Simple.default_params, "credit_slack": 1}
