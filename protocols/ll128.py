"""ll128: NCCL's LL128: 128-byte lines, 120 bytes of data and an 8-byte flag."""
from __future__ import annotations

from collsim.ir.layout import LineLayout, Word, WordRole
from protocols.ll import FlaggedLines

#: 16 u64 words; words 0..14 data, word 15 the flag. Eight lanes store 16 B
#: each; the last lane's second word is the flag.
LL128_LINE = LineLayout("ll128-128B", (Word(WordRole.DATA, 8),) * 15 + (Word(WordRole.FLAG, 8),), store_bytes=16)


class LL128(FlaggedLines):
    """NCCL LL128: eight lanes write a 128-byte line; lane 7's second word is a 64-bit epoch flag.

    Readers spin until the flag words of their lines match, then use the
    line: correct only if a warp's 128-byte store becomes visible whole and
    in order, which NCCL trusts only on verified NVLink/NVSwitch platforms.
    93.75 % payload. Source: NCCL src/device/prims_ll128.h,
    src/include/device.h; NVIDIA/nccl#786, #281.
    """

    name = "ll128"
    algorithms = ("one-shot", "two-shot", "ring")
    data_layout = LL128_LINE
    assumptions = ("line-128B-ordered",)
    analytic_family = "ll128"
    citation = "NVIDIA/nccl src/device/prims_ll128.h, src/include/device.h; NVIDIA/nccl#786"
    default_params = {"depth": 2, "flag_bits": 64, "credit_slack": 0}
