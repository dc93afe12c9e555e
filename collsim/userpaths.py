"""The user's paths: output locations checked before any work starts, input files read with one-line errors.

A command that will write results, a report or generated code checks where
they go first (:func:`check_output_dir`, :func:`check_output_file`), so a
mistyped ``--out`` fails in a second, not after every row was simulated,
and leaves nothing behind: the check creates what it must to be sure
(directories, a temporary file) and removes it again. A file the user names
as input is read with :func:`read_text`, which tells a missing file, a
directory and a binary file apart.

Every error is an :class:`~collsim.errors.InputError` naming the path and
where it came from (a flag, or a scenario file's line and key).

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> (d / "taken").write_text("x")
1
>>> check_output_dir(d / "taken", field="--out")
Traceback (most recent call last):
...
collsim.errors.InputError: ...taken: --out: exists and is a file, not a directory
>>> check_output_dir(d / "new" / "dir", field="--out")
>>> (d / "new").exists()
False
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collsim.errors import CollsimError, InputError, is_interrupt

__all__ = ["check_output_dir", "check_output_file", "check_report_path", "read_text", "removed_unless_done"]


def _shown(path: Path | str) -> str:
    """``path`` as messages show it: in full up to 100 characters, else its start and end."""
    text = str(path)
    return text if len(text) <= 100 else f"{text[:60]}...{text[-30:]} ({len(text)} characters)"


def _error(path: Path | str, message: str, field: str | None, file: str | None, line: int | None) -> InputError:
    """An error about ``path``: at the flag (``path: --out: ...``) or at a scenario's key (``s.yaml:3: output: ...``)."""
    path = _shown(path)
    if file:
        return InputError(f"{path}: {message}", file=file, line=line, field=field)
    return InputError(message, file=path, field=field)


def _name_max(existing: Path) -> int:
    try:
        return os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def _existing_ancestor(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def _why(err: OSError, anchor: Path) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "the name is longer than the file system allows"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "no permission to write there"
    if err.errno == errno.EROFS:
        return "the file system is read-only"
    if err.errno == errno.ENOSPC:
        return "no space left on the device"
    if err.errno == errno.ENOENT:  # the parent exists: a file system that makes no files (/proc, /sys)
        return f"the file system at {anchor} does not allow creating files there"
    return f"cannot create it there ({err.strerror or type(err).__name__})"


def check_output_dir(path: str | os.PathLike[str], *, field: str | None = None, file: str | None = None,
                     line: int | None = None) -> None:
    """Raise :class:`InputError` unless ``path`` is a directory collsim can create (if missing) and write in.

    Parameters
    ----------
    path : path
        The output directory.
    field : str, optional
        Where it was given: a flag (``--out``) or a scenario key (``output``).
    file, line : optional
        The scenario file and line that gave it, if any.

    Nothing is left behind: directories created to find out are removed again.
    """
    _check_dir(Path(path), Path(path), field, file, line)


def _check_dir(target: Path, shown: Path, field: str | None, file: str | None, line: int | None) -> None:
    """:func:`check_output_dir` of ``target``; errors name ``shown`` (the file about to be written in it)."""
    anchor = _existing_ancestor(target)
    if anchor == target and not target.is_dir():
        what = "exists and is a file, not a directory" if shown == target else f"{target} is a file, not a directory"
        raise _error(shown, what, field, file, line)
    if anchor != target and not anchor.is_dir():
        raise _error(shown, f"{anchor} is a file, not a directory", field, file, line)
    limit = _name_max(anchor)
    for part in shown.parts:
        if len(os.fsencode(part)) > limit:
            text = part if len(part) <= 40 else part[:37] + "..."
            raise _error(shown, f"the name {text!r} is {len(os.fsencode(part))} bytes long; the file system "
                                f"allows {limit}", field, file, line)
    made: list[Path] = []
    try:
        missing = [p for p in (target, *target.parents) if not os.path.lexists(p)]
        for directory in reversed(missing):
            directory.mkdir()
            made.append(directory)
        fd, probe = tempfile.mkstemp(prefix=".collsim-probe-", dir=target)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise _error(shown, _why(err, anchor), field, file, line) from None
    finally:
        for directory in reversed(made):
            try:
                directory.rmdir()
            except OSError:
                pass


def check_output_file(path: str | os.PathLike[str], *, field: str | None = None, file: str | None = None,
                      line: int | None = None, make_parents: bool = True) -> None:
    """Raise :class:`InputError` unless collsim can write the file ``path``: not a directory, a name the file
    system allows, in a directory that exists (or, with ``make_parents``, can be made) and that can be
    written (checked as :func:`check_output_dir` does, leaving nothing behind)."""
    target = Path(path)
    if target.is_dir():
        raise _error(target, "is a directory; give a file name", field, file, line)
    parent = target.parent
    if not make_parents and not os.path.lexists(parent):
        raise _error(target, f"directory {parent} does not exist", field, file, line)
    _check_dir(parent, target, field, file, line)


def check_report_path(path: str | os.PathLike[str], *, field: str | None = None) -> None:
    """Like :func:`check_output_file`, but an existing directory is accepted (the report goes in it as
    ``report.html``)."""
    if Path(path).is_dir():
        check_output_dir(path, field=field)
    else:
        check_output_file(path, field=field)


def read_text(path: str | os.PathLike[str], *, what: str, field: str | None = None) -> str:
    """The text of the user's file ``path`` (UTF-8), or an :class:`InputError` saying what it is instead.

    ``what`` names the file in messages (``"litmus file"``); ``field`` is the flag that named it, if any.
    """
    target = Path(path)
    if not os.path.lexists(target):
        raise InputError(f"no such {what}", file=str(target), field=field)
    if target.is_dir():
        raise InputError(f"is a directory, not a {what}", file=str(target), field=field)
    try:
        data = target.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read the {what}: {err.strerror or err}", file=str(target), field=field) from None
    if b"\0" in data[:65536]:
        raise InputError(f"is a binary file (it holds NUL bytes), not a {what}", file=str(target), field=field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputError(f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}), not a {what}",
                         file=str(target), line=line, field=field) from None


@contextmanager
def removed_unless_done(path: str | os.PathLike[str]) -> Iterator[None]:
    """A directory the block is about to create is removed again if the block is interrupted (Ctrl-C) or
    fails unexpectedly: a command that writes many files (emitted code, a review) leaves none half
    written. A deliberate "no" after complete files were written (a :class:`~collsim.errors.CollsimError`:
    some programs refused, a PTX check that failed) keeps them; a directory that existed before is left
    as it is.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> try:
    ...     with removed_unless_done(d):
    ...         d.mkdir(); _ = (d / "half.cu").write_text("x"); raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> d.exists()
    False
    """
    target = Path(path)
    existed = os.path.lexists(target)
    try:
        yield
    except BaseException as exc:
        if not existed and (is_interrupt(exc) or not isinstance(exc, CollsimError)):
            shutil.rmtree(target, ignore_errors=True)
        raise
