"""Memory-model verification: events, axiomatic models (SC, PTX) and litmus tests."""

# The protocol verifier's API, imported on first use (keeps `import collsim.verify` light).
_VERIFIER_API = ("verify", "verdict_for", "verify_all", "VerifyResult", "PropertyResult", "Bound", "Summary",
                 "FailedRun")


def __getattr__(name: str):
    if name in _VERIFIER_API:
        from collsim.verify import verifier

        return getattr(verifier, name)
    raise AttributeError(f"module 'collsim.verify' has no attribute {name!r}")
