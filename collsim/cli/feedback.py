"""Feedback while a long step runs: a status line on a terminal, and warnings before work that will be long.

:func:`working` shows what is running and for how long (a spinner and the
elapsed time, redrawn by rich's own thread, so it moves while a solver or a
fit holds the main thread), on stderr when it is a terminal, and nothing
otherwise, so piped output and tests see only results. :func:`warn` prints
one ``collsim: warning:`` line.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["working", "warn"]


def warn(message: str) -> None:
    """``collsim: warning: MESSAGE`` on stderr."""
    print(f"collsim: warning: {message}", file=sys.stderr, flush=True)


@contextmanager
def working(description: str) -> Iterator[Callable[[str], None]]:
    """A transient status line ``description ... elapsed`` on a terminal; yields ``update(text)``, which
    replaces the description (a no-op off a terminal)."""
    from rich.console import Console  # lazy: start-up

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda text: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # lazy: start-up

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task(description, total=None)
        yield lambda text: bar.update(task, description=text)
