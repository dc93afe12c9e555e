"""Load a topology by preset name, file path or inline mapping.

Examples
--------
>>> list_presets()[:3]
['dgx-a100', 'dgx1-v100', 'gb200-nvl72']
>>> load_topology("gb200-nvl72").num_gpus
72
>>> load_topology("hgx-h1000")
Traceback (most recent call last):
...
collsim.errors.InputError: unknown topology preset 'hgx-h1000' (valid: dgx-a100, dgx1-v100, gb200-nvl72, hgx-b200, hgx-h100, hgx-h200, pcie-gen4, pcie-gen5)
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

from collsim.topology.build import build_topology
from collsim.topology.catalog import data_dir
from collsim.topology.topology import Topology
from collsim.yamlsource import Locator, load_yaml_with_lines, looks_like_path

__all__ = ["list_presets", "presets_with", "load_topology", "TopologySpec"]

#: What :func:`load_topology` accepts.
TopologySpec = "str | os.PathLike[str] | Mapping[str, Any] | Topology"


def list_presets() -> list[str]:
    """Names of the packaged topology presets, sorted."""
    return list(_preset_names())


def presets_with(features: Any) -> list[str]:
    """The presets whose switches do every one of ``features`` (``multicast``, ``reduction``: NVLink SHARP).

    >>> presets_with({"multicast", "reduction"})
    ['gb200-nvl72', 'hgx-b200', 'hgx-h100', 'hgx-h200']
    """
    out = []
    for name in list_presets():
        declared = _preset_document(name)[0].get("nvls") or {}
        if all(declared.get(feature) is True for feature in features):
            out.append(name)
    return out


@cache
def _preset_names() -> tuple[str, ...]:
    return tuple(sorted(
        entry.name[: -len(".yaml")]
        for entry in data_dir().iterdir()
        if entry.name.endswith(".yaml") and not entry.name.startswith("_")
    ))


def _preset_text(name: str) -> str:
    return (data_dir() / f"{name}.yaml").read_text(encoding="utf-8")


@cache
def _preset_document(name: str) -> tuple[Any, Any]:
    """A preset file's YAML document and its line map (read once per process, like the preset names)."""
    return load_yaml_with_lines(_preset_text(name), f"{name}.yaml")


@lru_cache(maxsize=32)
def _built_preset(name: str, text: str) -> Topology:
    """The topology a preset file's ``text`` describes, built once per process and content (the GPU and
    link catalogs it reads are read once per process too): routing a 72-GPU preset is most of the cost of
    a 72-rank simulation, and what the simulator derives from a topology is cached on the object."""
    data, line_of = load_yaml_with_lines(text, f"{name}.yaml")
    return build_topology(data, Locator(f"{name}.yaml", line_of), default_name=name)


def _load_file(path: str | os.PathLike[str], shown: str) -> Topology:
    data, line_of = load_yaml_with_lines(os.fspath(path), shown)
    stem = os.path.splitext(os.path.basename(shown))[0]
    return build_topology(data, Locator(shown, line_of), default_name=stem)


def load_topology(spec: Any, *, locator: Locator | None = None) -> Topology:
    """Return the :class:`Topology` named, stored or described by ``spec``.

    Parameters
    ----------
    spec : str, os.PathLike, mapping or Topology
        A preset name (see :func:`list_presets`; every load of one preset in a process returns the
        same object, built once: treat it as read-only), a path to a ``.yaml`` file,
        an inline mapping in either topology format (see
        :mod:`collsim.topology.build`), or a ready :class:`Topology`
        (returned as is).
    locator : Locator, optional
        For a ``spec`` embedded in a larger document (a scenario): errors
        about an inline mapping or an unknown preset name then point into
        that document, e.g. ``Locator("s.yaml", line_of, ("topology",))``.

    Raises
    ------
    InputError
        Unknown preset (with the valid names), missing file, malformed
        YAML, or an invalid topology, located by file, line and field.
    """
    loc = locator or Locator()
    if isinstance(spec, Topology):
        return spec
    if isinstance(spec, Mapping):
        return build_topology(spec, loc)
    if isinstance(spec, os.PathLike):
        return _load_file(spec, os.fspath(spec))
    if isinstance(spec, str):
        if spec in _preset_names():
            return _built_preset(spec, _preset_text(spec))
        if looks_like_path(spec) or os.sep in spec:
            return _load_file(spec, spec)
        raise loc.error(f"unknown topology preset '{spec}'", choices=list_presets())
    raise loc.error(
        f"a topology is a preset name, a file path or a mapping, not {type(spec).__name__}"
    )
