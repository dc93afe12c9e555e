"""How a command ends when it does not succeed: one line on stderr and an exit status, decided here only.

:func:`exit_status` is the one place the CLI turns an exception into what
the user sees:

* a :class:`~collsim.errors.CollsimError`: its one line, its ``exit_code``
  (2 for bad input, 1 for a "no");
* Ctrl-C, however a library wrapped it (:func:`~collsim.errors.is_interrupt`):
  ``collsim: interrupted``, status 130;
* an :class:`OSError` on a path the user gave (a flag's or an argument's
  value, or a file inside such a directory): one line naming the path and
  the flag, status 2; on any other path, one line, status 1;
* a usage error of the command line (unknown flag, missing argument, a
  value of the wrong type): one line pointing at ``--help``, status 2;
* anything else is a bug in collsim: its traceback, then one line asking
  for a bug report, status 1.

:func:`guard_command` wraps each command so that an ``OSError`` is matched
against the command's own parameters while they are still known.
"""
from __future__ import annotations

import errno
import functools
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from collsim.errors import CollsimError, InputError, is_interrupt
from collsim.version import __version__

__all__ = ["EXIT_INTERRUPTED", "exit_status", "guard_command", "path_error", "interrupts_not_lost"]

#: The status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130

# typer may carry its own copy of click (and its own Exit and Abort); catch the exceptions of each.
_click_modules: list[Any] = [click.exceptions]
for _name in ("typer._click.exceptions", "typer.exceptions"):
    try:
        _click_modules.append(importlib.import_module(_name))
    except ImportError:  # typer versions that use click itself
        pass
_NO_ARGS = tuple(m.NoArgsIsHelpError for m in _click_modules if hasattr(m, "NoArgsIsHelpError"))
_USAGE = tuple(m.UsageError for m in _click_modules if hasattr(m, "UsageError"))
_ABORT = tuple(m.Abort for m in _click_modules if hasattr(m, "Abort"))
_EXIT = tuple(m.Exit for m in _click_modules if hasattr(m, "Exit"))


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr itself is gone: the status still tells
        pass


def _ignore_unraisable(unraisable: Any) -> None:
    """Drop an exception raised in a finalizer after an interrupt (see :func:`exit_status`)."""


def exit_status(exc: BaseException) -> int:
    """Tell the user what ``exc`` means (one line on stderr; a traceback only for a bug); return the status."""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        _say(f"collsim: error: {code}")
        return 1
    if is_interrupt(exc):
        # Ctrl-C can land inside a library object's constructor (a z3 term half-built, with no context yet);
        # its finalizer then fails when the interpreter collects it on the way out. The user asked to stop:
        # those reports of objects abandoned mid-construction are not theirs to read.
        sys.unraisablehook = _ignore_unraisable
        _say("collsim: interrupted")
        return EXIT_INTERRUPTED
    if isinstance(exc, CollsimError):
        _say("collsim: error: " + " ".join(line.strip() for line in str(exc).splitlines() if line.strip()))
        return exc.exit_code
    if isinstance(exc, _EXIT):
        return int(getattr(exc, "exit_code", 0) or 0)
    if isinstance(exc, _NO_ARGS):  # a bare group: show its help
        exc.show()
        return 2
    if isinstance(exc, _USAGE):  # also BadParameter, NoSuchOption
        command = exc.ctx.command_path if exc.ctx is not None else "collsim"
        message = " ".join(exc.format_message().split())
        _say(f"collsim: error: {message} (see '{command} --help')")
        return 2
    if isinstance(exc, _ABORT):
        _say("collsim: aborted")
        return 1
    if isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE):
        # the reader went away (`collsim run ... | head`): nothing left to tell it
        _silence_stdout()
        return 1
    if isinstance(exc, OSError) and (exc.filename is not None or exc.filename2 is not None):
        path = exc.filename if exc.filename is not None else exc.filename2
        _say(f"collsim: error: {os.fsdecode(path) if isinstance(path, bytes) else path}: "
             f"{exc.strerror or type(exc).__name__}")
        return 1
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    _say(f"collsim: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}; this is a bug in "
         f"collsim {__version__}: please report it with the command and the traceback above")
    return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _flag(param: Any) -> str:
    """``--out`` for an option (its long name), ``FILE`` for an argument."""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")] or list(getattr(param, "opts", ()))
    if getattr(param, "param_type_name", "") == "argument" or not opts:
        return (param.name or "argument").upper()
    return max(opts, key=len)


def _values(value: Any) -> Iterator[str]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _values(item)
    elif isinstance(value, (str, os.PathLike)) and str(value) not in ("", "-"):
        yield os.fspath(value)


def _under(path: str, given: str) -> bool:
    """Whether ``path`` is ``given`` or lies inside it (both made absolute, not resolved)."""
    a, b = os.path.abspath(path), os.path.abspath(given)
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def path_error(err: OSError, params: dict[str, Any], parameters: list[Any]) -> InputError | None:
    """``err`` as an :class:`InputError` naming the path and the flag that gave it, or ``None`` when its path
    is none of the user's (``params``: a command's parsed values; ``parameters``: its click parameters).

    >>> class P:  # a click option, as far as this needs one
    ...     name, opts, param_type_name = "out", ["-o", "--out"], "option"
    >>> str(path_error(FileNotFoundError(2, "No such file or directory", "/proc/x/results.csv"),
    ...                {"out": "/proc/x"}, [P()]))
    '/proc/x/results.csv: --out: No such file or directory'
    """
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    paths = [os.fsdecode(p) if isinstance(p, bytes) else str(p) for p in paths]
    best: tuple[int, str] | None = None
    for param in parameters:
        for given in _values(params.get(param.name)):
            for path in paths:
                if _under(path, given) and (best is None or len(given) > best[0]):
                    best = (len(given), _flag(param))
    if best is None:
        return None
    return InputError(err.strerror or type(err).__name__, file=paths[0], field=best[1])


def guard_command(command: Any) -> None:
    """Wrap a click command's callback so that an ``OSError`` on one of its paths is raised as an
    :class:`InputError` naming the flag (see :func:`path_error`); everything else passes through to
    :func:`exit_status`. Wrapping twice is harmless."""
    callback = command.callback
    if callback is None or getattr(callback, "_collsim_guarded", False):
        return
    parameters = list(command.params)

    @functools.wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except OSError as err:
            if is_interrupt(err):
                raise
            known = path_error(err, kwargs, parameters)
            if known is None:
                raise
            raise known from None

    guarded._collsim_guarded = True  # type: ignore[attr-defined]
    command.callback = guarded


#: Seconds after which a Ctrl-C that Python dropped is delivered again.
_REDELIVER_S = 0.02


@contextmanager
def interrupts_not_lost() -> Iterator[None]:
    """Meanwhile, a Ctrl-C that Python drops is delivered again.

    A ``KeyboardInterrupt`` raised inside a finalizer (``__del__``), a weakref callback or a ctypes callback
    is "unraisable": Python prints "Exception ignored in ..." and the command runs on as if nothing had
    been pressed; z3's objects free themselves in ``__del__`` all the time, so a Ctrl-C during a
    verification often lands there. ``sys.unraisablehook`` sees it first: it sends SIGINT again a moment
    later (from a timer thread), when the main thread is elsewhere, and prints nothing. Other unraisable
    errors go to the hook that was in place.
    """
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            timer = threading.Timer(_REDELIVER_S, os.kill, (os.getpid(), signal.SIGINT))
            timer.daemon = True
            timer.start()
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
