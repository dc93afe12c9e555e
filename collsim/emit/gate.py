"""The verification gate: only protocols whose verdict is "holds" are emitted without ``--unverified``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["VerificationStatus", "_verification_status", "verification_status"]

#: The memory model the emitted code is checked against.
MODEL = "ptx"


@dataclass(frozen=True)
class VerificationStatus:
    """What the verifier says about one (protocol, algorithm)."""

    verdict: str  # "holds", "violated", "not verified", ...
    detail: str = ""

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    def describe(self) -> str:
        return self.verdict + (f" ({self.detail})" if self.detail else "")


def _verdict_text(result: Any) -> tuple[str, str]:
    """Read a verdict from whatever ``verdict_for`` returns (a string, or an object/dict with a verdict)."""
    if isinstance(result, str):
        return result.strip().lower(), ""
    if isinstance(result, dict):
        value = result.get("verdict", result.get("status", ""))
        detail = result.get("detail", result.get("reason", "")) or ""
        return str(getattr(value, "value", value)).strip().lower(), str(detail)
    for name in ("verdict", "status", "result"):
        value = getattr(result, name, None)
        if value is not None:
            detail = getattr(result, "detail", None) or getattr(result, "reason", None) or ""
            return str(getattr(value, "value", value)).strip().lower(), str(detail)
    return str(result).strip().lower(), ""


def _verification_status(protocol: str, algorithm: str) -> VerificationStatus:
    """The verifier's verdict for ``protocol``/``algorithm`` under the PTX model.

    Uses ``collsim.verify.verdict_for(protocol, algorithm, model="ptx")`` (which
    keeps an on-disk cache) when the verifier is installed; otherwise the
    protocol counts as "not verified".
    """
    try:
        from collsim.verify import verdict_for  # type: ignore[attr-defined]
    except ImportError:
        return VerificationStatus("not verified", "the verifier (collsim.verify.verdict_for) is not available")
    try:
        result = verdict_for(protocol, algorithm, model=MODEL)
    except Exception as err:  # a verifier failure must not look like a proof
        return VerificationStatus("not verified", f"the verifier failed: {type(err).__name__}: {err}")
    verdict, detail = _verdict_text(result)
    return VerificationStatus(verdict or "not verified", detail)


def verification_status(protocol: str, algorithm: str) -> VerificationStatus:
    """Public alias of :func:`_verification_status` (tests monkeypatch the private name)."""
    return _verification_status(protocol, algorithm)
