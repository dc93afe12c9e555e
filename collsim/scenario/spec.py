"""The shape of a scenario file (pydantic) and the resolved :class:`Scenario`."""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt

__all__ = ["ScenarioFile", "Scenario", "FIELD_HELP", "apply_cost"]

Number = StrictInt | StrictFloat | str


class ScenarioFile(BaseModel):
    """Keys a scenario file may hold; names and values are checked after this by the loader."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str | None = None
    topology: str | dict[str, Any]
    ranks: Number | list[Number]
    sizes: Number | list[Number]
    algorithms: str | list[str] | None = None
    protocols: str | list[str] | None = None
    launch: str | list[str] = "graph"
    channels: StrictInt | None = None
    dtype: str = "float32"
    op: str = "sum"
    model: str | None = None
    output: str | None = None
    costs: dict[str, Any] | None = None
    profile: str | None = None
    sweep: Any = None


#: One line per key, for error messages and ``--help``.
FIELD_HELP: dict[str, str] = {
    "name": "scenario name (default: the file name without .yaml); names reports/<name>",
    "description": "free text, copied into results.json",
    "topology": "preset name (collsim topologies) or an inline topology mapping",
    "ranks": "rank counts: a number, a list, or a range such as '2..8' or '2..72 x2'",
    "sizes": "bytes per rank: a size, a list, or a range such as '8B..64MiB x2' or '8B..1KiB +8B'",
    "algorithms": "one-shot, two-shot, ring (default: all)",
    "protocols": "protocol names (default: all)",
    "launch": "eager (pays kernel-launch overhead) or graph (CUDA-graph steady state); a list runs both",
    "channels": "channels per collective, or null to choose like NCCL",
    "dtype": "element type (sets the element size)",
    "op": "reduction operator",
    "model": "performance model (default: the registry's default)",
    "output": "output directory (default: reports/<name>)",
    "costs": "cost-parameter overrides, checked by the model",
    "profile": "a calibrated cost profile (collsim calibrate), relative to the scenario file; its costs apply "
    "under costs:",
    "sweep": "cost parameters to sweep, each a list or a range such as '0.05..0.2 +0.05'; one result set per "
    "combination, each in its own directory, listed in sweep.csv",
}


@dataclass(frozen=True)
class Scenario:
    """A checked scenario, ready to expand into rows.

    Attributes
    ----------
    name : str
    topology : Topology
        The loaded topology.
    topology_spec : str or dict
        What the file said (a preset name or an inline mapping).
    ranks, sizes : tuple of int
    algorithms, protocols, launch : tuple of str
    channels : int or None
    dtype : str
    elem_bytes : int
    op : str
    model : str or None
        ``None`` means the registry default at run time.
    output : Path
    costs : dict
        The cost overrides: the profile's (if any) with the file's ``costs:`` on top.
    description : str or None
    source : str or None
        The file it came from.
    sweep : tuple of (str, tuple)
        ``(parameter, values)`` pairs in file order; empty without a ``sweep:``.
        A parameter ``a.b`` sets entry ``b`` of the table ``a``.
    output_from : (str, int or None) or None
        The key that set ``output`` and its line in :attr:`source`: ``("output", 7)``, or ``("name", 1)``
        for the default ``reports/<name>`` (errors about the directory point there).
    """

    name: str
    topology: Any
    topology_spec: Any
    ranks: tuple[int, ...]
    sizes: tuple[int, ...]
    algorithms: tuple[str, ...]
    protocols: tuple[str, ...]
    launch: tuple[str, ...]
    channels: int | None
    dtype: str
    elem_bytes: int
    op: str
    model: str | None
    output: Path
    costs: dict[str, Any] = field(default_factory=dict)
    description: str | None = None
    source: str | None = None
    sweep: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    profile: str | None = None
    output_from: tuple[str, int | None] | None = None

    @property
    def sweep_keys(self) -> tuple[str, ...]:
        """The swept parameters, in file order (also the extra result columns)."""
        return tuple(key for key, _ in self.sweep)

    def sweep_points(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every combination of the swept values, ``((key, value), ...)``; ``[()]`` without a sweep.

        The last parameter varies fastest:

        >>> s = Scenario("s", None, "t", (2,), (8,), (), (), (), None, "float32", 4, "sum", None, Path("r"),
        ...              sweep=(("a", (1, 2)), ("b", (0.5, 1.0))))
        >>> s.sweep_points()
        [(('a', 1), ('b', 0.5)), (('a', 1), ('b', 1.0)), (('a', 2), ('b', 0.5)), (('a', 2), ('b', 1.0))]
        """
        keys = self.sweep_keys
        return [tuple(zip(keys, values)) for values in itertools.product(*(vals for _, vals in self.sweep))]

    def costs_for(self, point: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
        """``costs`` with one sweep point applied (see :func:`apply_cost`)."""
        costs = copy.deepcopy(self.costs)
        for key, value in point:
            apply_cost(costs, key, value)
        return costs

    def to_dict(self) -> dict[str, Any]:
        """The scenario as plain data, with every list expanded (for results.json)."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "topology": self.topology_spec,
            "ranks": list(self.ranks),
            "sizes": list(self.sizes),
            "algorithms": list(self.algorithms),
            "protocols": list(self.protocols),
            "launch": list(self.launch),
            "channels": self.channels,
            "dtype": self.dtype,
            "op": self.op,
            "model": self.model,
            "costs": self.costs,
            **({"profile": self.profile} if self.profile else {}),
            **({"sweep": {key: list(values) for key, values in self.sweep}} if self.sweep else {}),
        }


def apply_cost(costs: dict[str, Any], key: str, value: Any) -> None:
    """Set cost parameter ``key`` to ``value`` in ``costs`` (in place).

    A plain name replaces that parameter. ``a.b`` sets entry ``b`` of table
    ``a`` (``{"a": {"b": value}}``, merged with what ``costs`` already says
    about ``a``), the form both models take for one entry of a table; a key
    ``costs`` already holds as written is replaced as is.

    >>> c = {"base_latency_us": {"ll": 6.0}}
    >>> apply_cost(c, "base_latency_us.ll128", 12.0); c
    {'base_latency_us': {'ll': 6.0, 'll128': 12.0}}
    >>> apply_cost(c, "poll_period_us", 0.1); c["poll_period_us"]
    0.1
    """
    if key in costs:  # written the same way under costs: replace it there
        costs[key] = value
        return
    parts = key.split(".")
    node = costs
    for part in parts[:-1]:
        inner = node.get(part)
        if not isinstance(inner, dict):
            inner = node[part] = {}
        node = inner
    node[parts[-1]] = value
