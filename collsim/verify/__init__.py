"""Memory-model verification: events, axiomatic models (SC, PTX) and litmus tests."""

__all__ = ["verify", "verdict_for", "verify_all", "VerifyResult", "PropertyResult", "Bound", "Summary", "FailedRun"]

# The protocol verifier's API (all of __all__), imported on first use (keeps `import collsim.verify` light:
# z3 loads with collsim.verify.verifier).
_VERIFIER_API = frozenset(__all__)


def __getattr__(name: str):
    if name in _VERIFIER_API:
        from collsim.verify import verifier  # lazy: start-up (z3 loads with the verifier)

        return getattr(verifier, name)
    raise AttributeError(f"module 'collsim.verify' has no attribute {name!r}")
