"""On-disk verdict cache, so consumers (the CUDA emitter) can ask "was this verified?" without re-solving.

A verdict is stored under a hash of everything it depends on: the verifier
version, the protocol's identity (:attr:`collsim.ir.protocol.Protocol.key`:
class, name and parameters), the algorithm, the flattened program of every
rank and launch at the bound, the bound, the memory model, the assumptions,
the data domain, the properties checked and whether the dependencies are
re-checked. Change any of them and the key changes. The cache lives in ``.collsim-cache/verify/`` of the
current directory (``COLLSIM_CACHE_DIR`` overrides the root).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from collsim.atomicfile import atomic_write_text

__all__ = ["cache_dir", "cache_key", "load", "store", "VERIFIER_VERSION"]

#: bump when the encoding or the properties change meaning
VERIFIER_VERSION = "verify-4"  # verify-2: a verdict that holds records its premise; verify-3: or its slice;
# verify-4: the default-bound note names only the threads or lines the defaults chose


def cache_dir() -> Path:
    root = Path(os.environ.get("COLLSIM_CACHE_DIR", ".collsim-cache"))
    return root / "verify"


def cache_key(parts: dict[str, Any]) -> str:
    blob = json.dumps({"version": VERIFIER_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def load(key: str) -> dict[str, Any] | None:
    path = cache_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store(key: str, data: dict[str, Any]) -> None:
    """Write a verdict atomically: concurrent writers of one key (worker processes) each replace the whole file."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / f"{key}.json", json.dumps(data, indent=1, sort_keys=True, default=str))
    except OSError:
        pass  # a read-only tree just means no cache
