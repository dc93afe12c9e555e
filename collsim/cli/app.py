"""The typer application every command module registers on."""
from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(
    name="collsim",
    help="Simulate, verify and emit low-latency GPU collective protocols.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
