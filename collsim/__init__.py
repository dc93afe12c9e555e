"""collsim: a collective-communication simulator and verifier for GPU systems.

The public facade. Everything else is internal and may change.
"""
from __future__ import annotations

from collsim.errors import (
    CollsimError,
    InputError,
    ProtocolDefinitionError,
    UnsupportedError,
    VerificationRefused,
)

__version__ = "0.1.0"

# The API entry points load lazily, so ``import collsim`` stays cheap.
_LAZY = {
    "simulate": ("collsim.models", "simulate"),
    "run_scenario": ("collsim.results", "run_scenario"),
    "load_scenario": ("collsim.scenario", "load_scenario"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'collsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

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
