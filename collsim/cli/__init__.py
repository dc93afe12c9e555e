"""Command-line interface: ``collsim <command>``.

Each command lives in its own module and registers itself on
:data:`collsim.cli.app.app`. :func:`main` runs one; how it ends when it does not
succeed (a :class:`~collsim.errors.CollsimError`, Ctrl-C, an ``OSError`` on the
user's paths, a usage error, a bug) is decided in :mod:`collsim.cli.failures`:
one line on stderr and the status (2 bad input, 1 "no", 130 interrupted).
"""
from __future__ import annotations

import gc
import sys
from typing import Any

import typer
import typer.main

from collsim.cli.app import app
from collsim.cli.failures import exit_status, guard_command, interrupts_not_lost

# Importing a module registers its commands.
from collsim.cli import (  # noqa: F401  (imported for registration)
    run_cmd,
    topology_cmd,
    verify_cmd,
    emit_cmd,
    calibrate_cmd,
    report_cmd,
    litmus_cmd,
    explain_cmd,
    review_cmd,
    tune_cmd,
)

__all__ = ["app", "main", "console"]

_GROUP: Any = None


def _group() -> Any:
    """The click group of :data:`app`, built once, every command guarded (:func:`guard_command`)."""
    global _GROUP
    if _GROUP is None:
        group = typer.main.get_command(app)
        for command in getattr(group, "commands", {}).values():
            for sub in [command, *getattr(command, "commands", {}).values()]:
                guard_command(sub)
        _GROUP = group
    return _GROUP


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return 0 when the command succeeds, else exit with its status.

    The command is invoked directly, not through click's or typer's ``main``: those turn
    ``KeyboardInterrupt`` into a return value (which an entry point drops, exiting 0) and print their own
    messages. Every way a command can end is decided by :func:`collsim.cli.failures.exit_status`.
    """
    args = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        group = _group()
        with interrupts_not_lost(), group.make_context("collsim", args) as ctx:
            group.invoke(ctx)
    except BaseException as exc:  # noqa: BLE001 - every ending is decided in one place
        status = exit_status(exc)
        if status:
            sys.exit(status)
    return 0


def console() -> None:
    """The ``collsim`` command: :func:`main`, then freeze the collector's view of the heap.

    The process ends right after, and the interpreter's last collections would otherwise walk every object
    a run left (programs, cached simulations, the report's figures): half a second of a four-second
    ``collsim run scenarios/8gpu.yaml``. Frozen objects are still finalized; only that walk is skipped.
    """
    try:
        main()
    finally:
        gc.freeze()
