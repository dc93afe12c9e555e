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

__all__ = [
    "__version__",
    "CollsimError",
    "InputError",
    "ProtocolDefinitionError",
    "UnsupportedError",
    "VerificationRefused",
]
