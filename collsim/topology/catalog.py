"""Catalogs of GPU models and link technologies, read from packaged YAML.

The numbers live in ``collsim/data/topologies/_gpus.yaml`` and
``_links.yaml``, each with its source; this module only reads them.

Examples
--------
>>> gpu_properties("H100")["sm_count"]
132
>>> link_type_info("nvlink4")["effective_gbps"]
20.6
>>> "nvlink5" in link_type_names()
True
"""
from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

__all__ = [
    "GPU_FIELDS",
    "NODE_KINDS",
    "DATA_PACKAGE",
    "data_dir",
    "gpu_model_names",
    "gpu_properties",
    "gpu_memory_bytes",
    "link_type_names",
    "link_type_info",
    "traversal_latency_us",
]

#: Properties every GPU node carries.
GPU_FIELDS = ("model", "generation", "sm", "hbm_gbps", "sm_count")
#: Node kinds a topology file may declare.
NODE_KINDS = ("gpu", "nvswitch", "pcie-switch", "cpu")
#: Package and folder that hold the topology data files.
DATA_PACKAGE = ("collsim", "data", "topologies")


def data_dir() -> resources.abc.Traversable:
    """The folder of topology presets and catalogs inside the package."""
    package, *parts = DATA_PACKAGE
    folder = resources.files(package)
    for part in parts:
        folder = folder / part
    return folder


@cache
def _catalog(filename: str) -> dict[str, Any]:
    return yaml.safe_load((data_dir() / filename).read_text(encoding="utf-8"))


def gpu_model_names() -> list[str]:
    """Known GPU models, sorted.

    >>> gpu_model_names()[:3]
    ['A100', 'A100-PCIe', 'B200']
    """
    return sorted(_catalog("_gpus.yaml")["gpus"])


def gpu_properties(model: str) -> dict[str, Any]:
    """Properties of a GPU model: ``model, generation, sm, hbm_gbps, sm_count, nvlink``.

    Raises
    ------
    KeyError
        For an unknown model; callers turn it into an ``InputError``.
    """
    entry = _catalog("_gpus.yaml")["gpus"][model]
    props = {key: entry[key] for key in ("generation", "sm", "hbm_gbps", "sm_count", "nvlink")}
    return {"model": model, **props}


def gpu_memory_bytes(model: str | None = None) -> int:
    """Memory capacity of GPU ``model`` in bytes (``memory_gib``); for a model the catalog does not hold
    (or ``None``), the largest the catalog knows.

    >>> gpu_memory_bytes("H100") // 2**30, gpu_memory_bytes("no-such-gpu") // 2**30
    (80, 186)
    """
    gpus = _catalog("_gpus.yaml")["gpus"]
    if model in gpus and gpus[model].get("memory_gib"):
        return int(gpus[model]["memory_gib"] * 2**30)
    return int(max(entry.get("memory_gib") or 0 for entry in gpus.values()) * 2**30)


def link_type_names() -> list[str]:
    """Known link types, sorted."""
    return sorted(_catalog("_links.yaml")["link_types"])


def link_type_info(name: str) -> dict[str, Any]:
    """Defaults of one link type: ``family, bandwidth_gbps, effective_gbps, latency_us, sources``.

    Bandwidths are per link per direction; ``None`` where the type has no
    default (``cpu-interconnect``). Raises ``KeyError`` for an unknown type.
    """
    return dict(_catalog("_links.yaml")["link_types"][name])


def traversal_latency_us(kind: str) -> float:
    """Latency of passing through one node of ``kind`` (0 for unknown kinds).

    >>> traversal_latency_us("nvswitch")
    0.1
    """
    return float(_catalog("_links.yaml")["traversal_latency_us"].get(kind, 0.0))
