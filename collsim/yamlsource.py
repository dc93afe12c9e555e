"""YAML loading that remembers where every value came from.

collsim reads user files (topologies, scenarios) whose errors must point at
a file and a line. :func:`load_yaml_with_lines` returns the data *and* a
``line_of`` function that maps a key path, a tuple of mapping keys and
sequence indices such as ``("edges", 3, "count")``, to the 1-based line that
holds it. :class:`Locator` bundles a file name, a ``line_of`` and a path
prefix, so code that validates a nested piece of a document (a topology
inlined in a scenario) can raise :class:`~collsim.errors.InputError` with
the right file, line and field without knowing where it sits.

Examples
--------
>>> data, line_of = load_yaml_with_lines("name: x\\nedges:\\n  - {count: 2}\\n", "t.yaml")
>>> data["edges"][0]["count"], line_of(("edges", 0, "count"))
(2, 3)
>>> line_of(("edges", 0, "missing"))   # absent: the nearest existing parent
3
>>> Locator("t.yaml", line_of).error("must be positive", ("edges", 0, "count")).args[0]
't.yaml:3: edges[0].count: must be positive'
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from collsim.errors import InputError

__all__ = [
    "KeyPath",
    "LineOf",
    "Locator",
    "field_name",
    "load_yaml_with_lines",
    "looks_like_path",
    "no_lines",
]

#: A path into a YAML document: mapping keys and sequence indices.
KeyPath = tuple[Any, ...]
#: Maps a :data:`KeyPath` to its 1-based line, or ``None`` when unknown.
LineOf = Callable[[KeyPath], "int | None"]

_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def no_lines(path: KeyPath) -> int | None:
    """The ``line_of`` for data that did not come from a file (always ``None``).

    >>> no_lines(("a", 0)) is None
    True
    """
    return None


def field_name(path: Iterable[Any]) -> str:
    """Spell a key path the way error messages show fields.

    >>> field_name(("edges", 3, "between", 0))
    'edges[3].between[0]'
    >>> field_name(())
    ''
    """
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def looks_like_path(text: str) -> bool:
    """True when a one-line string names a file (or a directory, given by mistake) rather than holding YAML.

    >>> looks_like_path("my_topo.yaml"), looks_like_path("a: 1")
    (True, False)
    """
    if "\n" in text:
        return False
    return text.lower().endswith(_YAML_SUFFIXES) or os.path.isfile(text) or os.path.isdir(text)


def _read_source(path_or_text: str | os.PathLike[str], filename: str | None) -> tuple[str, str | None]:
    """Return (text, filename), reading the file when given a path."""
    is_path = isinstance(path_or_text, os.PathLike) or looks_like_path(str(path_or_text))
    if not is_path:
        return str(path_or_text), filename
    path = Path(path_or_text)
    shown = filename or str(path_or_text)
    if path.is_dir():
        raise InputError("is a directory, not a YAML file", file=shown)
    if not path.is_file():
        raise InputError("file not found", file=shown)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read file: {err.strerror or err}", file=shown) from None
    if b"\0" in data[:65536]:
        raise InputError("is a binary file (it holds NUL bytes), not YAML", file=shown)
    try:
        return data.decode("utf-8"), shown
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputError(f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})", file=shown,
                         line=line) from None


def _index_lines(
    node: yaml.Node,
    path: KeyPath,
    lines: dict[KeyPath, int],
    key_builder: yaml.constructor.SafeConstructor,
    filename: str | None,
    *,
    merged: bool = False,
    active: frozenset[int] = frozenset(),
) -> None:
    """Record the line of every value under ``node``.

    A mapping entry is recorded at its *key's* line, which is where a reader
    looks for ``count:`` even when its value is a block starting below it.
    Entries merged in with ``<<: *anchor`` never replace a line recorded for
    an explicit key, mirroring how the merge itself works.
    """
    if id(node) in active:
        return  # a recursive alias: its lines are already being recorded
    active = active | {id(node)}

    def record(key_path: KeyPath, line: int) -> None:
        if merged:
            lines.setdefault(key_path, line)
        else:
            lines[key_path] = line

    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    _index_lines(source, path, lines, key_builder, filename, merged=True, active=active)
                continue
            key = key_builder.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                key = str(key)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise InputError(
                    f"duplicate key '{key}'", file=filename, line=line, field=field_name(path + (key,)) or None
                )
            seen.add(key)
            record(path + (key,), line)
            _index_lines(value_node, path + (key,), lines, key_builder, filename, merged=merged, active=active)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            record(path + (index,), item.start_mark.line + 1)
            _index_lines(item, path + (index,), lines, key_builder, filename, merged=merged, active=active)


def load_yaml_with_lines(
    path_or_text: str | os.PathLike[str], filename: str | None = None
) -> tuple[Any, LineOf]:
    """Parse YAML (safe subset) and return ``(data, line_of)``.

    Parameters
    ----------
    path_or_text : str or os.PathLike
        A path (any ``os.PathLike``, or a one-line string ending in ``.yaml``,
        ``.yml`` or ``.json`` or naming an existing file) or YAML text.
    filename : str, optional
        Name shown in error messages; defaults to the path as given.

    Returns
    -------
    data : Any
        The document as plain Python objects (``None`` for an empty one).
    line_of : callable
        ``line_of(path)`` gives the 1-based line of the value at ``path``
        (a tuple of keys and indices). For a path that does not exist, e.g.
        a missing field, it gives the line of the nearest existing parent,
        which is where the field should have been written.

    Raises
    ------
    InputError
        On a missing or unreadable file, malformed YAML (with the line of
        the problem) or a key repeated within one mapping.

    Examples
    --------
    >>> load_yaml_with_lines("a: 1\\n  b: 2\\n", "bad.yaml")
    Traceback (most recent call last):
    ...
    collsim.errors.InputError: bad.yaml:2: malformed YAML: mapping values are not allowed here
    >>> load_yaml_with_lines("a: 1\\na: 2\\n", "dup.yaml")
    Traceback (most recent call last):
    ...
    collsim.errors.InputError: dup.yaml:2: a: duplicate key 'a'
    """
    text, shown = _read_source(path_or_text, filename)
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as err:  # a character YAML does not allow (a control character)
        line = text.count("\n", 0, err.position) + 1 if isinstance(err.position, int) else None
        raise InputError(f"malformed YAML: character {err.character!r} is not allowed in YAML", file=shown,
                         line=line) from None
    try:
        root = loader.get_single_node()
        if root is None:
            return None, no_lines
        lines: dict[KeyPath, int] = {(): root.start_mark.line + 1}
        _index_lines(root, (), lines, yaml.constructor.SafeConstructor(), shown)
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = " ".join(part for part in (err.context, err.problem) if part) or "invalid YAML"
        raise InputError(
            f"malformed YAML: {problem}", file=shown, line=(mark.line + 1) if mark else None
        ) from None
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1 if isinstance(err.position, int) else None
        raise InputError(f"malformed YAML: character {err.character!r} is not allowed in YAML", file=shown,
                         line=line) from None
    except yaml.YAMLError as err:
        raise InputError(f"malformed YAML: {' '.join(str(err).split())}", file=shown) from None
    finally:
        loader.dispose()

    def line_of(path: KeyPath) -> int | None:
        path = tuple(path)
        while path not in lines and path:
            path = path[:-1]
        return lines.get(path)

    return data, line_of


@dataclass(frozen=True)
class Locator:
    """Where a piece of input came from, for precise error messages.

    Parameters
    ----------
    file : str, optional
        File name shown in errors.
    line_of : callable, optional
        As returned by :func:`load_yaml_with_lines`; paths passed to it are
        ``prefix + path``.
    prefix : tuple, optional
        Path of the validated piece inside its document, e.g.
        ``("topology",)`` for a topology inlined in a scenario.

    Examples
    --------
    >>> data, line_of = load_yaml_with_lines("run:\\n  topology:\\n    gpu: X\\n", "s.yaml")
    >>> loc = Locator("s.yaml", line_of).child("run", "topology")
    >>> str(loc.error("unknown GPU model 'X'", ("gpu",), choices=["H100"]))
    "s.yaml:3: run.topology.gpu: unknown GPU model 'X' (valid: H100)"
    """

    file: str | None = None
    line_of: LineOf = field(default=no_lines, repr=False)
    prefix: KeyPath = ()

    def child(self, *path: Any) -> Locator:
        """A locator for the value at ``path`` below this one."""
        return Locator(self.file, self.line_of, self.prefix + tuple(path))

    def line(self, path: Iterable[Any] = ()) -> int | None:
        """The line of ``path`` (relative to this locator), if known."""
        return self.line_of(self.prefix + tuple(path))

    def error(
        self, message: str, path: Iterable[Any] = (), choices: Iterable[str] | None = None
    ) -> InputError:
        """Build (not raise) an :class:`InputError` located at ``path``."""
        full = self.prefix + tuple(path)
        return InputError(
            message,
            file=self.file,
            line=self.line_of(full),
            field=field_name(full) or None,
            choices=choices,
        )
