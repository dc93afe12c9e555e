"""mutant-ll-flag-bits1: LL with a 1-bit epoch flag and no wrap-around clean-up."""
from __future__ import annotations

from protocols.ll import LL


class LLFlagBits1(LL):
    """LL whose epoch flag is 1 bit wide.

    The epoch of step 1 wraps to 0, the value fresh memory already holds, so
    the receiver accepts a line nobody has written yet. NCCL keeps 32-bit
    flags and rewrites every flag of a slot before they wrap.
    """

    name = "mutant-ll-flag-bits1"
    expected_violation = "stale-read"
    default_params = {**LL.default_params, "flag_bits": 1}
