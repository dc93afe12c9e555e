"""The verification gate: only protocols whose verdict is "holds" are emitted without ``--unverified``."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from collsim.errors import is_interrupt
from collsim.ir.origin import shown_path
from collsim.ir.registry import USER_PROTOCOL_MODULE

__all__ = ["MODEL", "VerificationStatus", "verification_status", "status_of"]

#: The memory model the emitted code is checked against.
MODEL = "ptx"


@dataclass(frozen=True)
class VerificationStatus:
    """What the verifier says about one (protocol, algorithm)."""

    verdict: str  # "holds", "violated", "unknown", "not verified"
    detail: str = ""

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    def describe(self) -> str:
        return self.verdict + (f" ({self.detail})" if self.detail else "")


def status_of(result: Any, protocol: str, algorithm: str) -> VerificationStatus:
    """The gate's reading of a :class:`~collsim.verify.verifier.VerifyResult` (``None``: no verdict on record).

    Only a result whose every property holds is "holds"; one with a violated
    property is "violated", anything else (a property unknown) "unknown".
    """
    if result is None:
        return VerificationStatus("not verified", f"no verdict on record; run `collsim verify {protocol} "
                                                  f"--algorithm {algorithm}` first")
    if result.ok:
        parts = []
        bound = getattr(result, "bound", None)
        if bound is not None:
            parts.append(f"bound: {bound.describe()}")
        if result.depends_on:
            parts.append("depends on " + ", ".join(result.depends_on))
        return VerificationStatus("holds", "; ".join(parts))
    if result.violated:
        return VerificationStatus("violated", ", ".join(result.violated))
    return VerificationStatus("unknown", "some property could not be decided")


def verification_status(protocol: Any, algorithm: str, *, solve: bool = False) -> VerificationStatus:
    """The verifier's verdict for ``protocol``/``algorithm`` under the PTX model.

    ``protocol`` is a shipped or mutant name or a :class:`~collsim.ir.protocol.Protocol` instance: the
    verdict looked up is the instance's own (its class and parameters, as :func:`~collsim.verify.verify`
    stored it), so a protocol loaded from a file, or one with parameters of its own, is gated by its
    verdict and not by that of a protocol of the same name.
    By default only the verifier's on-disk cache is consulted
    (``solve=False``); ``solve=True`` runs the solver when nothing is
    cached. Without a cached verdict the protocol counts as "not verified",
    and so it does when the verifier fails.
    """
    from collsim.verify.verifier import verdict_for  # lazy: start-up (z3 loads with it; `import collsim.emit` stays light)

    try:
        result = verdict_for(protocol, algorithm, model=MODEL, solve=solve)
    except Exception as err:  # noqa: BLE001 - a verifier failure must not look like a proof
        if is_interrupt(err):
            raise
        return VerificationStatus("not verified", f"the verifier failed: {type(err).__name__}: {err}")
    return status_of(result, _spelled(protocol), algorithm)


def _spelled(protocol: Any) -> str:
    """How ``collsim verify`` names ``protocol``: its file for one loaded from a file, else its name."""
    if isinstance(protocol, str):
        return protocol
    module = sys.modules.get(type(protocol).__module__)
    file = getattr(module, "__file__", None)
    if file is not None and type(protocol).__module__.startswith(USER_PROTOCOL_MODULE):
        return shown_path(file)
    return protocol.name
