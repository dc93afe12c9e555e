"""mutant-ll128-unordered: LL128 on hardware that does not deliver a 128-byte line in order."""
from __future__ import annotations

from protocols.ll128 import LL128


class LL128Unordered(LL128):
    """LL128 declaring no ``line-128B-ordered`` assumption.

    Under the PTX model alone, the eight lanes' 16-byte stores of a line
    (and the elements within each) become visible in any order, so a reader
    can see the flag word of the last lane with data words of an older use
    of the slot: a torn line. NCCL enables LL128 only where the hardware
    keeps the line together.
    """

    name = "mutant-ll128-unordered"
    expected_violation = "torn-read"
    assumptions = ()
