"""Command-line interface: ``collsim <command>``.

Each command lives in its own module and registers itself on
:data:`collsim.cli.app.app`. :func:`main` turns every :class:`CollsimError`
into one line on stderr and the error's exit code (2 for bad input).
"""
from __future__ import annotations

import sys

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
)

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and exit with) its status code."""
    try:
        app(args=argv, standalone_mode=False)
    except CollsimError as err:
        print(f"collsim: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except SystemExit as exc:  # typer/click --help, usage errors
        raise exc
    except KeyboardInterrupt:
        print("collsim: interrupted", file=sys.stderr)
        sys.exit(130)
    return 0
