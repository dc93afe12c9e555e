"""Deliberately broken protocol variants: each declares the property the verifier must find violated.

Many mutants are a shipped protocol with one operation dropped or changed; :class:`RewritingBuilder` does
that without copying the protocol's code: it hands every operation the protocol emits to ``rewrite``, which
returns the operation to emit, a changed one, or None to drop it.
"""
from __future__ import annotations

from typing import Callable

from collsim.ir.ops import Op
from collsim.ir.program import ProgramBuilder


class RewritingBuilder:
    """A :class:`~collsim.ir.program.ProgramBuilder` whose ``emit`` passes each operation through ``rewrite``."""

    def __init__(self, inner: ProgramBuilder, rewrite: Callable[[Op], Op | None]) -> None:
        self._inner = inner
        self._rewrite = rewrite

    def emit(self, op: Op) -> Op:
        changed = self._rewrite(op)
        return op if changed is None else self._inner.emit(changed)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)
