"""The shipped protocols, one module each, written once in the collsim IR.

The simulator times them, the verifier proves them, the emitter prints them
as CUDA. ``collsim.ir.registry`` finds every :class:`~collsim.ir.protocol.Protocol`
subclass defined here (and in ``protocols.mutants``, the deliberately broken
variants the verifier must catch).
"""
