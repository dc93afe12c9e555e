"""The one exception hierarchy of collsim.

Every error collsim raises on purpose is a :class:`CollsimError`. Its message
tells the user what went wrong and what to do; the CLI prints it on one line
and exits with :attr:`CollsimError.exit_code`, never with a traceback.
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "CollsimError",
    "InputError",
    "UnsupportedError",
    "ProtocolDefinitionError",
    "VerificationRefused",
]


class CollsimError(Exception):
    """Base class of every error collsim raises deliberately."""

    exit_code = 1


class InputError(CollsimError):
    """Bad user input: a file, a flag or an argument that collsim cannot accept.

    Parameters
    ----------
    message : str
        What is wrong, in one sentence.
    file, line, field : optional
        Where it is wrong. ``line`` is 1-based.
    choices : iterable of str, optional
        The valid values, listed in the message.

    Examples
    --------
    >>> str(InputError("unknown protocol 'lll'", file="s.yaml", line=4,
    ...                field="protocols[0]", choices=["ll", "ll128"]))
    "s.yaml:4: protocols[0]: unknown protocol 'lll' (valid: ll, ll128)"
    """

    exit_code = 2

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


class UnsupportedError(InputError):
    """A valid request the model cannot run, e.g. a protocol/algorithm pair it has no program for."""


class ProtocolDefinitionError(InputError):
    """A protocol file that does not load or breaks an IR well-formedness rule."""


class VerificationRefused(CollsimError):
    """An action that needs a verified protocol was asked for an unverified one."""

    exit_code = 1
