"""What a tuning decision is made from: the latency of each choice, per placement and size.

A :class:`Timings` holds, for one machine in one launch mode, the latency of
every choice (an algorithm × protocol pair) at every (node count, rank count,
size) it was simulated or measured at. :func:`from_results` builds one from a
results table (``collsim run``), :func:`from_measurements` from a measurement
table (``collsim ingest``); the NCCL config (:mod:`collsim.tune.nccl`), the
decision table (:mod:`collsim.tune.table`) and the comparison
(:mod:`collsim.tune.compare`) read nothing else.

Simulated choices are named in collsim's words (``ring``/``ll``,
``one-shot``/``sentinel``); measured ones in NCCL's (``NCCL_ALGO``,
``NCCL_PROTO``, written as the tuner plugin spells them: ``nvls_tree``,
``collnet_direct``), or as the measurement names them when it is not NCCL.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from collsim.errors import InputError
from collsim.version import __version__

__all__ = ["Choice", "Timings", "from_results", "from_measurements", "result_groups", "choice_label"]

#: (algorithm, protocol)
Choice = tuple[str, str]

#: Columns of :attr:`Timings.rows`.
ROW_COLUMNS = ("nodes", "ranks", "size_bytes", "algorithm", "protocol", "latency_us")

#: Measured algorithm names (collsim.calibrate's canonical NCCL_ALGO values) as the tuner plugin spells them.
_MEASURED_ALGORITHMS = {
    "ring": "ring",
    "tree": "tree",
    "collnetdirect": "collnet_direct",
    "collnetchain": "collnet_chain",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "pat": "pat",
}


def choice_label(choice: Choice) -> str:
    """``protocol · algorithm``, as the report names a series.

    >>> choice_label(("ring", "ll128"))
    'll128 · ring'
    """
    algorithm, protocol = choice
    return f"{protocol} · {algorithm}"


@dataclass(frozen=True)
class Timings:
    """The latency of each choice per (nodes, ranks, size) for one machine and launch mode.

    Attributes
    ----------
    rows : pandas.DataFrame
        Columns ``nodes, ranks, size_bytes, algorithm, protocol, latency_us``,
        one row per choice and point, sorted.
    kind : str
        ``simulated`` or ``measured``.
    topology, description : str
        The machine and a line about it (for file headers).
    model : str
        The performance model (``des``, ``analytic``), or ``measured``.
    launch : str
        ``graph``, ``eager`` or ``""`` (not known).
    source : str
        The file the timings came from.
    collsim_version : str
        The collsim that produced them (simulated) or read them (measured).
    channels : int or None
        The channel count every row used, when the scenario fixed one.
    notes : tuple of str
        What was left out and why, one line each.
    scenario : str
        The scenario file the results came from, when they say.
    """

    rows: pd.DataFrame
    kind: str
    topology: str
    description: str
    model: str
    launch: str
    source: str
    collsim_version: str
    channels: int | None = None
    notes: tuple[str, ...] = field(default=())
    scenario: str = ""

    @property
    def origin(self) -> str:
        """What file headers name as the origin: the scenario when known, else the source."""
        if self.scenario:
            return f"scenario {self.scenario}"
        return f"{'measurements' if self.kind == 'measured' else 'results'} {self.source}"

    def placements(self) -> list[tuple[int, int]]:
        """The (nodes, ranks) pairs, in order."""
        pairs = self.rows[["nodes", "ranks"]].drop_duplicates()
        return sorted((int(n), int(r)) for n, r in zip(pairs["nodes"], pairs["ranks"]))

    def points(self, nodes: int, ranks: int) -> list[tuple[int, dict[Choice, float]]]:
        """``(size, {choice: latency_us})`` of one placement, by size."""
        sub = self.rows[(self.rows["nodes"] == nodes) & (self.rows["ranks"] == ranks)]
        out: dict[int, dict[Choice, float]] = {}
        for size, algorithm, protocol, lat in zip(sub["size_bytes"], sub["algorithm"], sub["protocol"], sub["latency_us"]):
            out.setdefault(int(size), {})[(str(algorithm), str(protocol))] = float(lat)
        return sorted(out.items())

    def choices(self) -> list[Choice]:
        """Every choice, in first-seen order."""
        return list(dict.fromkeys(zip(self.rows["algorithm"], self.rows["protocol"])))

    @property
    def sizes(self) -> list[int]:
        return sorted(set(int(s) for s in self.rows["size_bytes"]))


def _sorted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.loc[:, list(ROW_COLUMNS)].copy()
    for col in ("nodes", "ranks", "size_bytes"):
        out[col] = out[col].astype("int64")
    out["latency_us"] = out["latency_us"].astype("float64")
    return out.sort_values(["nodes", "ranks", "size_bytes", "algorithm", "protocol"], kind="mergesort").reset_index(drop=True)


def result_groups(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The (topology, launch) pairs of a results table, graph launches first."""
    pairs = sorted(set(zip(frame["topology"].astype(str), frame["launch"].astype(str))),
                   key=lambda p: (p[0], p[1] != "graph", p[1]))
    return pairs


def _pick_launch(launches: Sequence[str], launch: str | None, source: str) -> tuple[str, list[str]]:
    """The launch mode to tune for, and a note when the choice was made here."""
    known = sorted(set(launches) - {""}, key=lambda la: (la != "graph", la))
    if launch is not None:
        if launch not in known:
            if not known:
                return launch, [f"{source}: the rows do not say their launch mode; all are taken as {launch}"]
            raise InputError(f"no rows with launch mode {launch!r} in {source}", field="--launch", choices=known)
        return launch, []
    if len(known) <= 1:
        return (known[0] if known else ""), []
    return known[0], [f"{source} holds launch modes {', '.join(known)}: tuned for {known[0]} (--launch picks another)"]


def _scenario_channels(meta: Mapping[str, Any]) -> int | None:
    scen = meta.get("scenario")
    if isinstance(scen, Mapping):
        ch = scen.get("channels")
        if isinstance(ch, int) and not isinstance(ch, bool) and ch >= 1:
            return ch
    return None


def _scenario_source(meta: Mapping[str, Any]) -> str:
    scen = meta.get("scenario")
    return str(scen.get("source") or "") if isinstance(scen, Mapping) else ""


def from_results(
    frame: pd.DataFrame,
    meta: Mapping[str, Any] | None = None,
    *,
    launch: str | None = None,
    nodes: int = 1,
    source: str | None = None,
) -> Timings:
    """The timings of a checked results table (``collsim.resultsfile.load_results``' frame and meta).

    Parameters
    ----------
    frame : pandas.DataFrame
        Results rows (the columns of results.csv).
    meta : mapping, optional
        The results.json document without its rows (topology summary, scenario, model, version).
    launch : str, optional
        Launch mode to tune for; default: the only one, else ``graph``.
    nodes : int
        The node count NCCL will see for every rank count (collsim simulates
        one NVLink or PCIe domain; 1 for a single machine).
    source : str, optional
        The file named in notes and errors (default: ``meta["results_file"]``).

    Raises
    ------
    InputError
        Several topologies, an unknown ``launch``, or no rows.
    """
    meta = dict(meta or {})
    source = str(source or meta.get("results_file") or _scenario_source(meta) or "results")
    if len(frame) == 0:
        raise InputError("no result rows to tune from", file=source)
    topologies = sorted(set(frame["topology"].astype(str)))
    if len(topologies) > 1:
        raise InputError(f"results of several topologies ({', '.join(topologies)}): tune one machine at a time", file=source)
    chosen, notes = _pick_launch(list(frame["launch"].astype(str)), launch, source)
    sub = frame[frame["launch"].astype(str).isin([chosen, ""])] if chosen else frame
    if "sweep_point" in meta:
        notes.append(f"{source}: one sweep point ({', '.join(f'{k}={v}' for k, v in dict(meta['sweep_point']).items())})")
    rows = sub.assign(nodes=int(nodes))
    topo = meta.get("topology") if isinstance(meta.get("topology"), Mapping) else {}
    summary = topo.get("summary") if isinstance(topo.get("summary"), Mapping) else {}
    description = str(summary.get("description") or summary.get("interconnect") or "")
    models = sorted(set(frame["model"].astype(str)) - {""})
    return Timings(
        rows=_sorted_rows(rows),
        kind="simulated",
        topology=topologies[0],
        description=description,
        model=str(meta.get("model") or ", ".join(models) or "unknown"),
        launch=chosen,
        source=source,
        collsim_version=str(meta.get("collsim_version") or ""),
        channels=_scenario_channels(meta),
        notes=tuple(notes),
        scenario=_scenario_source(meta),
    )


def _measured_algorithm(name: str) -> str:
    return _MEASURED_ALGORITHMS.get(name, name)


def from_measurements(
    table: pd.DataFrame,
    source: str,
    *,
    launch: str | None = None,
    nodes: int = 1,
    collective: str = "allreduce",
) -> Timings:
    """The timings of a measurement table (``collsim ingest`` output, normalised).

    Rows are kept when they measure ``collective``, passed their data check,
    name both an algorithm and a protocol (``NCCL_ALGO``/``NCCL_PROTO`` or
    a custom kernel's names: a row of NCCL's own choice decides nothing) and
    have a rank count and a positive time (out-of-place; in-place when only
    that was measured). Repeated points take the median time. A row without
    a node count is taken to run on ``nodes`` nodes.

    Raises
    ------
    InputError
        Measurements of several machines, an unknown ``launch``, or no row left.
    """

    if len(table) == 0:
        raise InputError("no measurement rows", file=source)
    t = table
    notes: list[str] = []

    def drop(mask: pd.Series, why: str) -> None:
        nonlocal t
        n = int(mask.sum())
        if n:
            notes.append(f"{source}: {n} row{'s' if n != 1 else ''} left out: {why}")
            t = t[~mask]

    drop(t["collective"].astype(str) != collective, f"not {collective}")
    drop(t["wrong"].fillna(False).astype(bool), "their data check failed")
    algo, proto = t["algorithm"].astype(str), t["protocol"].astype(str)
    drop((algo == "") | (proto == ""), "measured with the library's own algorithm or protocol (NCCL_ALGO and NCCL_PROTO unset)")
    algo, proto = t["algorithm"].astype(str), t["protocol"].astype(str)
    drop(algo.str.contains(r"[,^;]") | proto.str.contains(r"[,^;]"), "measured with a list of algorithms or protocols")
    drop(t["ranks"].isna(), "no rank count")
    time = pd.to_numeric(t["time_us"], errors="coerce")
    if "time_us_inplace" in t.columns:
        time = time.where(time.notna(), pd.to_numeric(t["time_us_inplace"], errors="coerce"))
    t = t.assign(latency_us=time)
    drop(~t["latency_us"].map(lambda v: isinstance(v, float) and math.isfinite(v) and v > 0), "no positive time")
    if len(t) == 0:
        raise InputError(
            f"no measurement of {collective} names its algorithm and protocol"
            + (f" ({'; '.join(n.split(': ', 1)[1] for n in notes)})" if notes else ""),
            file=source,
        )
    topologies = sorted(set(t["topology"].astype(str)) - {""})
    if len(topologies) > 1:
        raise InputError(f"measurements of several machines ({', '.join(topologies)}): tune one at a time", file=source)
    chosen, launch_notes = _pick_launch(list(t["launch"].astype(str)), launch, source)
    notes += launch_notes
    if chosen:
        t = t[t["launch"].astype(str).isin([chosen, ""])]
    missing_nodes = t["nodes"].isna()
    if missing_nodes.any():
        notes.append(f"{source}: {int(missing_nodes.sum())} rows do not say their node count: taken as {nodes} (--nodes)")
    rows = pd.DataFrame({
        "nodes": t["nodes"].astype("Float64").fillna(nodes).astype("int64").to_numpy(),
        "ranks": t["ranks"].astype("int64").to_numpy(),
        "size_bytes": t["size_bytes"].astype("int64").to_numpy(),
        "algorithm": [_measured_algorithm(a) for a in t["algorithm"].astype(str)],
        "protocol": t["protocol"].astype(str).to_numpy(),
        "latency_us": t["latency_us"].astype("float64").to_numpy(),
    })
    key = ["nodes", "ranks", "size_bytes", "algorithm", "protocol"]
    repeated = int(rows.duplicated(subset=key).sum())
    if repeated:
        notes.append(f"{source}: {repeated} repeated measurements: the median time of each point is used")
        rows = rows.groupby(key, as_index=False, sort=False)["latency_us"].median()
    gpus = sorted(set(t["gpu"].astype(str)) - {""})
    return Timings(
        rows=_sorted_rows(rows),
        kind="measured",
        topology=topologies[0] if topologies else "",
        description=", ".join(gpus),
        model="measured",
        launch=chosen,
        source=source,
        collsim_version=__version__,
        channels=None,
        notes=tuple(notes),
    )
