"""Options that several commands share: where their tasks run (``--executor``, ``--scheduler``, ``--workers``).

Each function returns a fresh typer option; :func:`check_executor_options`
(from :mod:`collsim.executors`) validates the three together.
"""
from __future__ import annotations

from typing import Any

import typer

__all__ = ["executor_option", "scheduler_option", "workers_option"]


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
