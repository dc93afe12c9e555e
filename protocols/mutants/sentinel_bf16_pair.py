"""mutant-sentinel-bf16-pair: bf16 data viewed as 32-bit words, with a domain that forgets the pair forming the poison."""
from __future__ import annotations

from collsim.ir.floats import FloatInputs, WordEncoding
from collsim.ir.protocol import DataDomain
from protocols.sentinel import Sentinel


class SentinelBf16Pair(Sentinel):
    """Sentinel moving bf16 data: each polled 32-bit word is a pair of bf16 values.

    The poison 0xFFFAFFFA is, read as two bf16 halves, the pair (0xFFFA, 0xFFFA): two NaNs with a
    payload. The domain states bf16 pairs that may hold NaN payloads (masked or padded
    activations) and nothing more: it forgets to exclude the one pair that forms the sentinel
    word, so a word of user data can read as "not arrived". The shipped protocol states the
    exclusion; a bf16 domain of finite values only (no bf16 NaN) would state it too.
    """

    name = "mutant-sentinel-bf16-pair"
    expected_violation = "sentinel-collision"
    data_domain = DataDomain(None, "user data are bf16 pairs, NaN payloads allowed",
                             WordEncoding("bf16x2", FloatInputs.NAN_PAYLOADS))
