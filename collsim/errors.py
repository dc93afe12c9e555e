"""The one exception hierarchy of collsim.

Every error collsim raises on purpose is a :class:`CollsimError`. Its message
tells the user what went wrong and what to do; the CLI prints it on one line
and exits with :attr:`CollsimError.exit_code`, never with a traceback.

Exit statuses
-------------
``2``
    :class:`InputError`: the user asked for something collsim cannot accept
    (a bad file, flag or value, a protocol file that does not load, a
    protocol/algorithm pair with no program). Fix the input; the message
    names the file, line, field and the valid choices.
``1``
    Everything else that stops a command: :class:`UnsupportedError` (a valid
    request that collsim itself cannot carry out yet: an IR construct the
    verifier does not model or the emitter cannot print, a configuration a
    performance model has no formula for), :class:`VerificationRefused`, a
    failed compilation. The same status as a protocol that is not verified
    or a row that could not be costed: the input is fine, the answer is "no".
``130``
    Interrupted (Ctrl-C): the command stops, its workers with it, and
    leaves no partial output. :func:`is_interrupt` tells an interrupt from
    an error wherever a library wrapped it in one of its own.

An unexpected exception is a bug in collsim: the CLI prints its traceback
and one line asking for a report, and exits 1.
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterable

__all__ = [
    "CollsimError",
    "InputError",
    "UnsupportedError",
    "ProtocolDefinitionError",
    "VerificationRefused",
    "is_interrupt",
]


class CollsimError(Exception):
    """Base class of every error collsim raises deliberately; the CLI exits with :attr:`exit_code`.

    Parameters
    ----------
    message : str
        What is wrong, in one sentence.
    file, line, field : optional
        Where it is wrong. ``line`` is 1-based.
    choices : iterable of str, optional
        The valid values, listed in the message.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        choices: Iterable[str] | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.choices = list(choices) if choices is not None else None
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        if self.field:
            where += f"{self.field}: "
        text = where + self.message
        if self.choices:
            text += f" (valid: {', '.join(self.choices)})"
        return text


class InputError(CollsimError):
    """Bad user input: a file, a flag or an argument that collsim cannot accept (exit status 2).

    Examples
    --------
    >>> str(InputError("unknown protocol 'lll'", file="s.yaml", line=4,
    ...                field="protocols[0]", choices=["ll", "ll128"]))
    "s.yaml:4: protocols[0]: unknown protocol 'lll' (valid: ll, ll128)"
    """

    exit_code = 2


class UnsupportedError(CollsimError):
    """A valid request that collsim cannot carry out: a limitation of collsim, not the user's error (exit status 1).

    Raised for an IR construct a consumer does not model (the verifier, the
    emitter) and for a configuration a performance model has no formula for.
    A request that names something that does not exist (an algorithm a
    protocol has no program for) is an :class:`InputError` instead.

    Examples
    --------
    >>> err = UnsupportedError("atomic min is not modelled (add and exch are)")
    >>> err.exit_code, isinstance(err, InputError)
    (1, False)
    """


class ProtocolDefinitionError(InputError):
    """A protocol file that does not load or breaks an IR well-formedness rule."""


class VerificationRefused(CollsimError):
    """An action that needs a verified protocol was asked for an unverified one."""


def is_interrupt(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a Ctrl-C: a :class:`KeyboardInterrupt`, one that a library wrapped, or an error
    raised while one was being handled.

    z3's Python API calls into C through ctypes, and a Ctrl-C that arrives while ctypes converts an
    argument surfaces as ``ctypes.ArgumentError: argument 1: KeyboardInterrupt``, an ``Exception``; code
    that reports every ``Exception`` as a failure (an executor's retry, a verifier's error row) asks this
    first and lets an interrupt through.

    Examples
    --------
    >>> is_interrupt(KeyboardInterrupt()), is_interrupt(ValueError("x"))
    (True, False)
    >>> is_interrupt(ctypes.ArgumentError("argument 1: <class 'KeyboardInterrupt'>: "))
    True
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        if isinstance(exc, ctypes.ArgumentError) and "KeyboardInterrupt" in str(exc):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
