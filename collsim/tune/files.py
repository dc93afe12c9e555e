"""The files ``collsim tune`` writes: their default names, and writing several at once.

Every file goes to a temporary sibling first; only when all are written are
they renamed into place, so a failure leaves none of them half written (and
the previous versions untouched).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from collsim.atomicfile import write_temp

__all__ = ["CONFIG_NAME", "TABLE_NAME", "default_names", "write_files"]

#: Default file name of the NCCL tuner config (the example plugin's own default is nccl_tuner.conf).
CONFIG_NAME = "nccl_tuner.conf"
#: Default stem of the decision table (``.md`` and ``.json``).
TABLE_NAME = "decision_table"


def default_names(qualifier: str = "", prefix: str = "") -> dict[str, str]:
    """``{"config", "markdown", "json"}`` file names, with ``.qualifier`` before the suffix.

    >>> default_names("eager")["config"], default_names(prefix="lab.")["json"]
    ('nccl_tuner.eager.conf', 'lab.decision_table.json')
    """
    q = f".{qualifier}" if qualifier else ""
    stem = CONFIG_NAME.removesuffix(".conf")
    return {
        "config": f"{prefix}{stem}{q}.conf",
        "markdown": f"{prefix}{TABLE_NAME}{q}.md",
        "json": f"{prefix}{TABLE_NAME}{q}.json",
    }


def write_files(files: Mapping[Path, str]) -> list[Path]:
    """Write every ``{path: text}`` (their directories must exist); all are renamed into place at the end."""
    temps: list[tuple[Path, Path]] = []
    try:
        for target, text in files.items():
            temps.append((Path(target), write_temp(target, text, newline="\n")))
        for target, tmp in temps:
            os.replace(tmp, target)
        return [target for target, _ in temps]
    except BaseException:
        for _, tmp in temps:
            tmp.unlink(missing_ok=True)
        raise
