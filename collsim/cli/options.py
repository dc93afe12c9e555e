"""Options that several commands share: where their tasks run (``--executor``, ``--scheduler``, ``--workers``),
and the flags of one configuration (``collsim simulate``, ``collsim explain``).

Each ``*_option`` function returns a fresh typer option; :func:`check_executor_options`
(from :mod:`collsim.executors`) validates the three together.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from collsim.errors import InputError

__all__ = ["executor_option", "scheduler_option", "workers_option", "CONFIG_FLAGS", "errors_at_flags", "at_least"]

#: The flag that sets each field of a configuration (:class:`collsim.config.RunConfig`, the model, its costs).
CONFIG_FLAGS: dict[str, str] = {
    "topology": "--topology",
    "ranks": "--ranks",
    "algorithm": "--algorithm",
    "protocol": "--protocol",
    "size": "--size",
    "launch": "--launch",
    "channels": "--channels",
    "dtype": "--dtype",
    "op": "--op",
    "model": "--model",
    "costs": "--cost",
}


def at_least(value: int | None, minimum: int, flag: str, what: str) -> None:
    """Refuse a count below ``minimum`` (``None``, a default, passes); ``what`` is the counted noun as the
    minimum needs it (``"step"``, ``"folds"``).

    >>> at_least(0, 1, "--jobs", "worker process")
    Traceback (most recent call last):
    ...
    collsim.errors.InputError: --jobs: needs at least 1 worker process, got 0
    """
    if value is not None and value < minimum:
        raise InputError(f"needs at least {minimum} {what}, got {value}", field=flag)


@contextmanager
def errors_at_flags() -> Iterator[None]:
    """Report a configuration's errors at the flag that set the field: ``--size: ...``, ``--cost NAME: ...``.

    An error located in a file (a topology or protocol file given as a flag's value) keeps its location.
    """
    try:
        yield
    except InputError as err:
        if err.file or not err.field:
            raise
        head, dot, rest = err.field.partition(".")
        flag = CONFIG_FLAGS.get(head)
        if flag is None:
            raise
        field = f"{flag} {rest}" if head == "costs" and rest else flag + (dot + rest if rest else "")
        raise type(err)(err.message, field=field, choices=err.choices) from None


def executor_option(what: str) -> Any:
    """``--executor/-x``: auto, local, processes or dask; ``what`` names the tasks in the help ("rows")."""
    return typer.Option(
        "auto", "--executor", "-x",
        help=f"Where {what} run: auto (here, moving the rest to a local process pool once they are estimated "
             "to take 4 s or more and there is more than one CPU), local (here, one after the other), "
             "processes (a local process pool) or dask (a Dask cluster). Results are identical.",
    )


def scheduler_option() -> Any:
    """``--scheduler``: a running Dask scheduler's address."""
    return typer.Option(None, "--scheduler",
                        help="Dask scheduler address, tcp://HOST:8786 (default: start a local cluster). "
                             "Needs --executor dask.")


def workers_option() -> Any:
    """``--workers/-w``: processes for ``processes``, ``auto``'s pool or the local Dask cluster."""
    return typer.Option(None, "--workers", "-w",
                        help="Worker processes for processes, for auto's pool, or for the local Dask cluster "
                              "(default: one per CPU).")
