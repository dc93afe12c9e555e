"""Compare simulated results with measurements: join, then per-row and per-group error.

A measured row joins a simulated row when they agree on

* the collective (collsim simulates AllReduce),
* ranks and message size (bytes per rank), both required,
* the algorithm and protocol, where the measurement states them
  (``NCCL_ALGO``/``NCCL_PROTO``, or an implementation such as PyTorch's
  ``one_shot_all_reduce``; see :func:`collsim.calibrate.mapping.known_algorithm`),
* the launch mode, where the measurement's timing tells it (device time with
  hidden launches counts as ``graph``; see :func:`~collsim.calibrate.mapping.launch_of`),
* the topology, where the measurement names one, else the GPU model, where known.

A measured row whose protocol is not stated joins every simulated protocol
at its size, so each simulated (algorithm, protocol) curve gets its own
error. Errors are ``signed % = 100 × (simulated − measured) / measured``
and its absolute value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collsim.calibrate.mapping import (
    family_of,
    gpu_model,
    known_algorithm,
    known_protocol,
    launch_of,
    measured_time_us,
)
from collsim.calibrate.measurements import single_gpu_rows, usable
from collsim.errors import InputError
from collsim.resultsfile import load_results

__all__ = ["Comparison", "compare", "measured_keys", "load_simulated"]

#: Columns of :attr:`Comparison.rows`.
ROW_COLUMNS: tuple[str, ...] = (
    "family", "source", "line", "topology", "gpu", "ranks", "size_bytes", "algorithm", "protocol", "launch",
    "measured_us", "simulated_us", "signed_pct", "abs_pct", "model",
)
#: Columns of :attr:`Comparison.groups`.
GROUP_COLUMNS: tuple[str, ...] = (
    "family", "topology", "ranks", "algorithm", "protocol", "launch", "n",
    "median_signed_pct", "median_abs_pct", "max_abs_pct",
)


@dataclass
class Comparison:
    """The joined rows, per-group errors and the overall summary."""

    rows: pd.DataFrame
    groups: pd.DataFrame
    overall: dict[str, float]
    measured_rows: int
    joined_measured: int
    measured: pd.DataFrame = field(default_factory=pd.DataFrame)  # measured rows that joined (for overlays)

    def to_dict(self) -> dict[str, Any]:
        def records(df: pd.DataFrame) -> list[dict[str, Any]]:
            out = []
            for rec in df.to_dict("records"):
                clean = {}
                for k, v in rec.items():
                    if hasattr(v, "item"):
                        v = v.item()
                    if isinstance(v, float):
                        v = round(v, 4) if math.isfinite(v) else None
                    clean[k] = v
                out.append(clean)
            return out

        return {
            "measured_rows": self.measured_rows,
            "joined_measured_rows": self.joined_measured,
            "pairs": len(self.rows),
            "overall": {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v)
                        for k, v in self.overall.items()},
            "groups": records(self.groups),
            "rows": records(self.rows),
        }


def measured_keys(measured: pd.DataFrame, topology: str | None = None) -> pd.DataFrame:
    """The join keys of every measured row: ``collective, ranks, size_bytes, algorithm, protocol, launch,
    topology, gpu, family, measured_us`` (``""`` = not stated)."""
    out = []
    for i, row in enumerate(measured.to_dict("records")):
        launch, _ = launch_of(row)
        ranks = row.get("ranks")
        size = row.get("size_bytes")
        out.append({
            "index": i,
            "collective": str(row.get("collective") or ""),
            "ranks": int(ranks) if ranks is not None and ranks is not pd.NA and not (isinstance(ranks, float) and math.isnan(ranks)) else None,
            "size_bytes": int(size) if size is not None and size is not pd.NA and not (isinstance(size, float) and math.isnan(size)) else None,
            "algorithm": known_algorithm(row),
            "protocol": known_protocol(row),
            "launch": launch,
            "timing_ok": launch != "",
            "topology": str(row.get("topology") or "") or (topology or ""),
            "gpu": gpu_model(str(row.get("gpu") or ""))[0],
            "family": family_of(row)[1],
            "source": str(row.get("source") or ""),
            "line": row.get("source_line"),
            "measured_us": measured_time_us(row),
        })
    return pd.DataFrame(out)


def load_simulated(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``(frame, meta)`` of a collsim results file; a file that is not one is a one-line InputError."""
    p = Path(path)
    if p.is_file() and p.suffix.lower() == ".csv":
        try:
            header = p.open(encoding="utf-8", errors="replace").readline()
        except OSError:
            header = ""
        cols = {c.strip().strip('"') for c in header.split(",")}
        if not {"latency_us", "model", "protocol"} <= cols:
            raise InputError("not a collsim results file (no latency_us/model/protocol columns); give the "
                             "results.csv or results.json that 'collsim run' writes", file=str(path))
    return load_results(path)


def _describe(values: Any) -> str:
    vals = sorted({v for v in values if v not in (None, "") and not (isinstance(v, float) and math.isnan(v))})
    if not vals:
        return "none"
    if len(vals) > 6:
        return f"{vals[0]}..{vals[-1]} ({len(vals)} values)"
    return ", ".join(str(v) for v in vals)


def compare(
    simulated: pd.DataFrame,
    measured: pd.DataFrame,
    *,
    simulated_source: str = "simulated",
    measured_source: str = "measured",
    topology: str | None = None,
    single_gpu: bool = False,
) -> Comparison:
    """Join ``simulated`` (a results table, ``collsim.resultsfile.COLUMNS``) with ``measured`` (a measurement table).

    Rows flagged ``wrong``, and unless ``single_gpu`` rows an emitted harness
    measured with every rank on one GPU (``gpu_mode`` ``single-gpu``: on-chip
    cost only), are left out of ``measured`` first.

    Raises
    ------
    InputError
        When no measured row joins any simulated row; the message names the
        measured file and says which keys differ.
    """
    good = usable(measured, include_single_gpu=single_gpu).reset_index(drop=True)
    keys = measured_keys(good, topology)
    sim = simulated.reset_index(drop=True)
    sim_gpu = sim["gpu"].astype(str)
    pairs = []
    joined = set()
    if len(keys):
        for k in keys.to_dict("records"):
            if k["collective"] not in ("", "allreduce") or k["ranks"] is None or k["size_bytes"] is None:
                continue
            if k["measured_us"] is None or not k["timing_ok"]:
                continue
            mask = (sim["ranks"] == k["ranks"]) & (sim["size_bytes"] == k["size_bytes"])
            if k["algorithm"]:
                mask &= sim["algorithm"] == k["algorithm"]
            if k["protocol"]:
                mask &= sim["protocol"] == k["protocol"]
            if k["launch"] and k["launch"] in set(sim["launch"]):
                mask &= sim["launch"] == k["launch"]
            elif k["launch"]:
                mask &= False
            if k["topology"]:
                mask &= sim["topology"] == k["topology"]
            elif k["gpu"]:
                mask &= sim_gpu.str.split("+").map(lambda parts, g=k["gpu"]: g in parts)
            for s in sim[mask].to_dict("records"):
                joined.add(k["index"])
                simulated_us = float(s["latency_us"])
                signed = 100.0 * (simulated_us - k["measured_us"]) / k["measured_us"]
                pairs.append({
                    "family": k["family"], "source": k["source"], "line": k["line"],
                    "topology": s["topology"], "gpu": s["gpu"], "ranks": int(s["ranks"]),
                    "size_bytes": int(s["size_bytes"]), "algorithm": s["algorithm"], "protocol": s["protocol"],
                    "launch": s["launch"], "measured_us": float(k["measured_us"]), "simulated_us": simulated_us,
                    "signed_pct": signed, "abs_pct": abs(signed), "model": s["model"],
                })
    if not pairs:
        usable_keys = keys[keys["timing_ok"]] if len(keys) else keys
        why = (
            f"measured: ranks {_describe(usable_keys.get('ranks', []))}, sizes {_describe(usable_keys.get('size_bytes', []))}, "
            f"GPU {_describe(usable_keys.get('gpu', []))}, launch {_describe(usable_keys.get('launch', []))}, "
            f"algorithm {_describe(usable_keys.get('algorithm', []))}, protocol {_describe(usable_keys.get('protocol', []))}; "
            f"simulated ({simulated_source}): ranks {_describe(sim['ranks'])}, sizes {_describe(sim['size_bytes'])}, "
            f"GPU {_describe(sim['gpu'])}, launch {_describe(sim['launch'])}, "
            f"algorithm {_describe(sim['algorithm'])}, protocol {_describe(sim['protocol'])}"
        )
        if len(keys) == 0:
            single = single_gpu_rows(measured)
            why = (
                f"its {single} row(s) were measured with every rank on one GPU (gpu_mode single-gpu): they time "
                "on-chip cost, not the interconnect; measure with collsim_bench --mode multi on one GPU per rank "
                "(single_gpu=True joins them anyway)"
                if single and single == len(measured) else "it has no usable rows (all flagged wrong?)"
            )
        raise InputError(f"nothing joins: no measured row matches a simulated row ({why})", file=measured_source)
    rows = pd.DataFrame(pairs, columns=list(ROW_COLUMNS))
    group_keys = ["family", "topology", "ranks", "algorithm", "protocol", "launch"]
    groups = (
        rows.groupby(group_keys, sort=True)
        .agg(n=("abs_pct", "size"), median_signed_pct=("signed_pct", "median"),
             median_abs_pct=("abs_pct", "median"), max_abs_pct=("abs_pct", "max"))
        .reset_index()
    )
    overall = {
        "pairs": int(len(rows)),
        "median_signed_pct": float(np.median(rows["signed_pct"])),
        "median_abs_pct": float(np.median(rows["abs_pct"])),
        "max_abs_pct": float(np.max(rows["abs_pct"])),
    }
    jk = keys.set_index("index").loc[sorted(joined)]
    overlay = pd.DataFrame({
        "size_bytes": jk["size_bytes"].to_numpy(),
        "time_us": jk["measured_us"].to_numpy(dtype=float),
        "ranks": jk["ranks"].to_numpy(),
        "protocol": jk["protocol"].to_numpy(),
        "algorithm": jk["algorithm"].to_numpy(),
        "launch": jk["launch"].to_numpy(),
        "label": jk["family"].to_numpy(),
    })
    return Comparison(rows=rows, groups=groups, overall=overall, measured_rows=len(good),
                      joined_measured=len(joined), measured=overlay)
