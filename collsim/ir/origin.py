"""Where in protocol code an operation was emitted, or an error raised while a program was built.

collsim's own code (this package, the algorithms, the library of
synchronization routines) is not where a protocol author looks for a
mistake, so a :class:`SourceLocation` keeps only the frames of *protocol
code*: every frame outside the ``collsim`` package (and the standard
library), innermost first. A
mutant that overrides one hook of a shipped protocol has frames in both
files; :meth:`SourceLocation.line_in` picks the one the user is looking at.

>>> loc = SourceLocation((("protocols/ll.py", 52), ("protocols/mutants/ll_depth1.py", 12)))
>>> str(loc), loc.line_in("protocols/mutants/ll_depth1.py"), loc.line_in("other.py") is None
('protocols/ll.py:52', 12, True)
"""
from __future__ import annotations

import os
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

__all__ = ["SourceLocation", "caller_location", "stack_depth", "traceback_location", "is_collsim_file", "shown_path"]

#: the directory of the collsim package: frames below it are collsim's own code
_COLLSIM_DIR = str(Path(__file__).resolve().parent.parent) + os.sep
#: the standard library's directory: its frames (contextlib, functools) are nobody's protocol code ...
_STDLIB_DIR = str(Path(sysconfig.get_paths()["stdlib"]).resolve()) + os.sep
#: ... but installed packages, often below it, may hold protocols
_INSTALLED_DIRS = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) + os.sep for key in ("purelib", "platlib"))


def is_collsim_file(filename: str) -> bool:
    """Whether ``filename`` (a code object's file) is part of the collsim package."""
    return os.path.abspath(filename).startswith(_COLLSIM_DIR)


def _is_protocol_code(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_COLLSIM_DIR) or filename.startswith("<"):
        return False
    return not path.startswith(_STDLIB_DIR) or path.startswith(_INSTALLED_DIRS)


@dataclass(frozen=True)
class SourceLocation:
    """The frames of protocol code, ``(file, line)`` innermost first, that led to an operation or an error."""

    frames: tuple[tuple[str, int], ...]

    @property
    def file(self) -> str:
        """The file of the innermost frame of protocol code."""
        return self.frames[0][0]

    @property
    def line(self) -> int:
        """The line of the innermost frame of protocol code."""
        return self.frames[0][1]

    def line_in(self, file: str | os.PathLike[str]) -> int | None:
        """The line of the innermost frame in ``file`` (compared as resolved paths), or None."""
        target = Path(file).resolve()
        for name, line in self.frames:
            if Path(name).resolve() == target:
                return line
        return None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _location(frames: list[tuple[str, int]]) -> SourceLocation | None:
    kept = tuple((name, line) for name, line in frames if _is_protocol_code(name))
    return SourceLocation(kept) if kept else None


def _depth(frame: FrameType | None) -> int:
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def caller_location(frame: FrameType | None, stop_depth: int) -> SourceLocation | None:
    """The protocol code on the stack from ``frame`` outward, down to stack depth ``stop_depth`` (exclusive).

    ``stop_depth`` is the depth (:func:`stack_depth`) of the frame that started building the program, so
    frames of whoever asked for the program (a test, the CLI) are never taken for protocol code.
    """
    frames: list[tuple[str, int]] = []
    depth = _depth(frame)
    while frame is not None and depth > stop_depth:
        frames.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
        depth -= 1
    return _location(frames)


def stack_depth(frame: FrameType | None) -> int:
    """How many frames ``frame`` and its callers make (the ``stop_depth`` of :func:`caller_location`)."""
    return _depth(frame)


def traceback_location(tb: TracebackType | None) -> SourceLocation | None:
    """The protocol code in a traceback, innermost first (where an exception raised while building came from)."""
    frames = [(frame.f_code.co_filename, line) for frame, line in traceback.walk_tb(tb)]
    return _location(frames[::-1])


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the working directory when it lies below it (as a user would type it), else as given."""
    try:
        resolved, here = Path(path).resolve(), Path.cwd().resolve()
    except OSError:
        return str(path)
    return str(resolved.relative_to(here)) if resolved.is_relative_to(here) else str(path)
