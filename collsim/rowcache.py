"""Results of earlier runs, reused for rows whose inputs have not changed (``collsim run --reuse``).

A design-space sweep is re-run after small edits: one protocol changed, a
sweep point added, a cost nudged. A row's record is kept under a digest of
everything that can change it:

* the row's configuration (ranks, algorithm, launch, size, channels, dtype,
  operator, costs, sweep point) and model name;
* the topology's content (:attr:`collsim.runner.rows.TopologyRef.key`);
* the protocol: its identity (:attr:`collsim.ir.protocol.Protocol.key`:
  class, name and parameters), the program it generates for the row's
  algorithm, and the source files of its class and base classes;
* collsim's own code and data: every file of the installed package, plus
  the versions of Python, SimPy and networkx.

Change any of them and the row is simulated again. Rows whose model is not
one of collsim's own (a function registered by the caller, whose code the
digest cannot see) and rows whose topology cannot be described as data are
never reused. Failed rows are never stored.

The records live in one SQLite file, ``.collsim-cache/results.sqlite`` in
the current directory (``COLLSIM_CACHE_DIR`` overrides the directory);
a run reads them before dispatching rows and stores new ones in one
transaction after the last row, so a run that fails half way stores
nothing, and concurrent runs only ever see whole records.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import networkx
import simpy

from collsim.lru import LRUCache
from collsim.models import model_ref
from collsim.sim.model import program_for

__all__ = ["cache_path", "code_digest", "row_key", "load_records", "store_records"]

#: bump when the meaning of a stored record changes without a code change (never so far)
RECORD_VERSION = "rows-1"
_BUSY_TIMEOUT_S = 30.0


def cache_path() -> Path:
    """The SQLite file holding reusable rows."""
    return Path(os.environ.get("COLLSIM_CACHE_DIR", ".collsim-cache")) / "results.sqlite"


def _hash_files(paths: Iterable[Path], root: Path | None = None) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        name = str(path.relative_to(root)) if root is not None else str(path)
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of collsim's package files (code, cost and topology data) and the versions it runs on."""
    root = Path(__file__).resolve().parent
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    versions = f"{sys.version_info[:3]} simpy {simpy.__version__} networkx {networkx.__version__}"
    return hashlib.sha256((_hash_files(files, root) + versions).encode()).hexdigest()


@functools.lru_cache(maxsize=256)
def _class_sources(cls: type) -> str:
    """A digest of the source files defining ``cls`` and its base classes ("" when one has no source file)."""
    files = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        try:
            source = inspect.getsourcefile(klass)
        except TypeError:
            source = None
        if source is None:
            return ""  # defined where its code cannot be read: not reusable
        files.add(Path(source).resolve())
    return _hash_files(files)


#: The text of the program each protocol generates per algorithm, by protocol identity (Protocol.key): every
#: size and rank count of a scenario shares it, so it is printed once. Keyed by the class too: a protocol file
#: loaded twice in one process may define a changed class under the same name.
_PROGRAM_TEXTS: "LRUCache[str | None]" = LRUCache(maxsize=256)


def _program_text(protocol: Any, algorithm: str) -> str | None:
    def text() -> str | None:
        try:
            return repr(program_for(protocol, algorithm)[0])
        except Exception:  # noqa: BLE001 - no program means nothing to key it on: the row is simply run
            return None

    return _PROGRAM_TEXTS.get((type(protocol), protocol.key, algorithm), text)


def row_key(row: Any) -> str | None:
    """The digest a row's record is kept under, or ``None`` when the row cannot be reused (see the module
    docstring)."""
    ref = getattr(row, "topology_ref", None)
    if ref is None:
        return None
    ref_of_model = row.model_ref if row.model_ref is not None else model_ref(row.model)
    if ref_of_model is None or not ref_of_model[0].startswith("collsim."):
        return None
    protocol = row.protocol
    sources = _class_sources(type(protocol))
    program = _program_text(protocol, row.algorithm)
    if not sources or program is None:
        return None
    parts = {
        "version": RECORD_VERSION,
        "code": code_digest(),
        "topology": ref.key,
        "model": [row.model, *ref_of_model],
        "protocol": [*protocol.key, sources, program],
        "row": [row.ranks, row.algorithm, row.launch, row.size_bytes, row.channels, row.dtype, row.elem_bytes,
                row.op, repr(sorted(dict(row.costs).items())), repr(row.sweep)],
    }
    blob = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), timeout=_BUSY_TIMEOUT_S)
    connection.execute("CREATE TABLE IF NOT EXISTS rows (key TEXT PRIMARY KEY, record TEXT NOT NULL)")
    return connection


def load_records(keys: Sequence[str | None]) -> list[dict[str, Any] | None]:
    """The stored record of each key (``None`` for a key not stored, or ``None``)."""
    wanted = sorted({k for k in keys if k is not None})
    path = cache_path()
    if not wanted or not path.is_file():
        return [None] * len(keys)
    found: dict[str, dict[str, Any]] = {}
    try:
        with _connect(path) as connection:
            for start in range(0, len(wanted), 500):  # under SQLite's limit on bound parameters
                chunk = wanted[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, text in connection.execute(f"SELECT key, record FROM rows WHERE key IN ({marks})", chunk):
                    found[key] = json.loads(text)
        connection.close()
    except (sqlite3.Error, OSError, ValueError):
        return [None] * len(keys)  # an unreadable cache is an empty one
    return [found.get(k) if k is not None else None for k in keys]


def store_records(pairs: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
    """Store ``(key, record)`` pairs in one transaction; return how many were stored (0 when the cache
    cannot be written: a read-only tree just means nothing is reused next time)."""
    items = [(key, json.dumps(dict(record))) for key, record in pairs]
    if not items:
        return 0
    try:
        connection = _connect(cache_path())
        with connection:
            connection.executemany("INSERT OR REPLACE INTO rows (key, record) VALUES (?, ?)", items)
        connection.close()
    except (sqlite3.Error, OSError):
        return 0
    return len(items)
