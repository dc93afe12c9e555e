"""Command-line interface: ``collsim <command>``.

Each command lives in its own module and registers itself on
:data:`collsim.cli.app.app`. :func:`main` turns every :class:`CollsimError`
into one line on stderr and the error's exit code (2 for bad input).
"""
from __future__ import annotations

import gc
import sys

import click

from collsim.cli.app import app
from collsim.errors import CollsimError

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

# typer may carry its own copy of click; catch usage errors from either.
_click_modules = [click.exceptions]
try:
    from typer._click import exceptions as _typer_click_exceptions
except ImportError:  # typer versions that use click itself
    pass
else:
    _click_modules.append(_typer_click_exceptions)
_NO_ARGS = tuple(m.NoArgsIsHelpError for m in _click_modules if hasattr(m, "NoArgsIsHelpError"))
_USAGE = tuple(m.UsageError for m in _click_modules)
_ABORT = tuple(m.Abort for m in _click_modules if hasattr(m, "Abort"))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and exit with) its status code."""
    try:
        app(args=argv, standalone_mode=False)
    except CollsimError as err:
        print(f"collsim: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except _NO_ARGS as err:  # a bare group: show its help
        err.show()
        sys.exit(2)
    except _USAGE as err:  # also BadParameter, NoSuchOption: one line, no traceback
        command = err.ctx.command_path if err.ctx is not None else "collsim"
        message = " ".join(err.format_message().split())
        print(f"collsim: error: {message} (see '{command} --help')", file=sys.stderr)
        sys.exit(2)
    except _ABORT:
        print("collsim: aborted", file=sys.stderr)
        sys.exit(1)
    except SystemExit as exc:  # typer/click --help, usage errors
        raise exc
    except KeyboardInterrupt:
        print("collsim: interrupted", file=sys.stderr)
        sys.exit(130)
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
