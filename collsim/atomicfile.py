"""Writing files so that a reader never sees half of one.

Every file collsim writes goes to a temporary sibling first and is renamed
into place only when complete, so an interrupted or failed run leaves the
previous file (or none), never a truncated one.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_temp", "atomic_write_text"]


def write_temp(target: str | os.PathLike[str], text: str, *, newline: str = "") -> Path:
    """Write ``text`` to a new temporary file beside ``target``; return its path.

    The file gets the permissions a plain ``open`` would (umask applied), is
    synced to disk, and is left for the caller to rename with
    :func:`os.replace` (or delete).
    """
    target = Path(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes files private; results are meant to be shared
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def atomic_write_text(target: str | os.PathLike[str], text: str, *, newline: str = "") -> Path:
    """Replace ``target`` with ``text`` atomically; return ``target``.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> atomic_write_text(d / "a.txt", "hello\\n").read_text()
    'hello\\n'
    """
    target = Path(target)
    tmp = write_temp(target, text, newline=newline)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
