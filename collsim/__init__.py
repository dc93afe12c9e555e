"""collsim: a collective-communication simulator and verifier for GPU systems.

The public facade. Everything else is internal and may change.
"""
from __future__ import annotations

from typing import Any

from collsim.errors import (
    CollsimError,
    InputError,
    ProtocolDefinitionError,
    UnsupportedError,
    VerificationRefused,
)
from collsim.version import __version__

_ENTRY_POINTS = ("simulate", "run_scenario", "load_scenario")


def __getattr__(name: str) -> Any:
    # The API entry points load on first use, so ``import collsim`` stays cheap.
    if name == "simulate":
        from collsim.models import simulate as value  # lazy: start-up
    elif name == "run_scenario":
        from collsim.runner.run import run_scenario as value  # lazy: start-up
    elif name == "load_scenario":
        from collsim.scenario import load_scenario as value  # lazy: start-up
    else:
        raise AttributeError(f"module 'collsim' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ENTRY_POINTS))


__all__ = [
    "__version__",
    "CollsimError",
    "InputError",
    "ProtocolDefinitionError",
    "UnsupportedError",
    "VerificationRefused",
    "simulate",
    "run_scenario",
    "load_scenario",
]
