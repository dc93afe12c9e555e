"""CSV inputs: collsim's own measurement CSV and the published-measurements layout.

*collsim CSV* — what :func:`collsim.calibrate.measurements.write_measurements`
writes and the CUDA emitter produces: a header with (at least) ``size_bytes``
and ``time_us`` and any of the schema columns; ``mode`` is read as ``launch``,
``n_gpus``/``nranks`` as ``ranks``, ``gpu_name`` as ``gpu``. Columns outside the
schema are kept.

*published CSV* — the layout of compiled measurements with columns
``source_id, source, system, gpu, interconnect, n_gpus, library, algorithm,
protocol, lib_version, dtype, size_bytes, size_as_published, time_us,
time_us_inplace, busbw_GBps, algbw_GBps, time_us_derived, timing, cuda_graph,
notes``: ``time_us`` is taken as published (out-of-place); where it is empty,
``time_us_derived`` is used and the row marked ``time_derived``.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import PurePath
from typing import Any

from collsim.calibrate.formats.common import collective_from_filename, implied_time_unit
from collsim.calibrate.measurements import (
    SINGLE_GPU_MODE,
    MEASUREMENT_COLUMNS,
    canonical_algorithm,
    canonical_collective,
    canonical_dtype,
    canonical_protocol,
)
from collsim.errors import InputError

__all__ = ["csv_kind", "parse_collsim_csv", "parse_published_csv", "PUBLISHED_COLUMNS"]

#: Columns that identify the published-measurements layout.
PUBLISHED_COLUMNS = ("source_id", "size_bytes", "time_us", "time_us_derived", "n_gpus")

_ALIASES = {
    "mode": "launch",
    "launch_mode": "launch",
    "n_gpus": "ranks",
    "nranks": "ranks",
    "world_size": "ranks",
    "gpu_name": "gpu",
    "bytes": "size_bytes",
    "algbw_gbps": "algbw_gbps",
    "busbw_gbps": "busbw_gbps",
    "file": "source",
    "line": "source_line",
}

_KINDS = {
    "source_line": "int", "section": "int", "ranks": "int", "nodes": "int", "root": "int",
    "size_bytes": "int", "count": "int", "graph_launches": "int", "nwrong": "int", "nwrong_inplace": "int",
    "time_us": "float", "algbw_gbps": "float", "busbw_gbps": "float", "max_error": "float",
    "time_us_inplace": "float", "algbw_gbps_inplace": "float", "busbw_gbps_inplace": "float",
    "max_error_inplace": "float",
    "time_derived": "bool", "wrong": "bool", "truncated": "bool", "validation": "boolean",
}

_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


def _header(text: str) -> list[str]:
    first = next(csv.reader(io.StringIO(text)), [])
    return [h.strip() for h in first]


def csv_kind(text: str) -> str | None:
    """``"published"``, ``"collsim"`` (a measurement table), ``"results"`` (simulated: ``collsim run``'s
    results.csv) or ``None`` for a text that is none of these CSVs."""
    first_line = text.lstrip("\ufeff").split("\n", 1)[0]
    if "," not in first_line:
        return None
    cols = {h.lower() for h in _header(text.lstrip("\ufeff"))}
    if {c.lower() for c in PUBLISHED_COLUMNS} <= cols:
        return "published"
    if "size_bytes" in cols and "time_us" in cols:
        return "collsim"
    if {"size_bytes", "latency_us", "busbw_gbps", "model", "events"} <= cols:
        return "results"  # what `collsim run` simulated, not a measurement
    return None


def _records(text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header: list[str] = []
    out: list[tuple[int, list[str]]] = []
    prev = 0
    for rec in reader:
        start = prev + 1
        prev = reader.line_num
        if not header:
            header = [h.strip() for h in rec]
            continue
        if not rec or all(not c.strip() for c in rec):
            continue
        out.append((start, rec))
    return header, out


def _convert(kind: str, value: str, path: str, line: int, column: str) -> Any:
    v = value.strip()
    if kind == "float" and v.upper() == "NAN":
        return math.nan  # written as a number: not absent (ingest leaves rows with a NaN time out)
    if v == "" or v.upper() in ("NA", "N/A", "NAN", "<NA>", "NONE", "NULL"):
        return None
    try:
        if kind == "int":
            f = float(v)
            if not math.isfinite(f) or f != int(f):
                raise ValueError(v)
            return int(f)
        if kind == "float":
            return float(v)
    except ValueError:
        raise InputError(f"not a number: {value!r}", file=path, line=line, field=column) from None
    if kind in ("bool", "boolean"):
        low = v.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise InputError(f"not true/false: {value!r}", file=path, line=line, field=column)
    return value


def _check_units(rows: list[dict[str, Any]], path: str) -> None:
    points = [(r.get("size_bytes"), r.get("time_us"), r.get("algbw_gbps")) for r in rows]
    unit, ratio = implied_time_unit(points)
    if unit is not None and unit != "us":
        first = next((r for r in rows if r.get("time_us") is not None and r.get("algbw_gbps") is not None), rows[0])
        raise InputError(f"inconsistent units: time_us must be µs, but size/time matches algbw_gbps "
                         f"only with times in {unit}", file=path, line=first.get("_csv_line"), field="time_us")


def parse_collsim_csv(text: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Read a collsim measurement CSV."""
    warnings: list[str] = []
    header, records = _records(text)
    names = []
    for h in header:
        key = h.strip().lower()
        key = _ALIASES.get(key, key)
        names.append(key)
    rows: list[dict[str, Any]] = []
    for line, rec in records:
        if len(rec) != len(names):
            raise InputError(f"{len(rec)} fields, the header has {len(names)}", file=path, line=line)
        row: dict[str, Any] = {"_csv_line": line}
        for name, value in zip(names, rec):
            kind = _KINDS.get(name, "str")
            row[name] = _convert(kind, value, path, line, name) if kind != "str" else value
        if row.get("size_bytes") is None:
            raise InputError("empty size_bytes", file=path, line=line, field="size_bytes")
        if row["size_bytes"] < 0:
            raise InputError("negative size_bytes", file=path, line=line, field="size_bytes")
        if not row.get("source"):
            row["source"], row["source_line"] = path, line
        row["source_format"] = row.get("source_format") or "collsim-csv"
        coll = row.get("collective") or ""
        if coll and canonical_collective(coll):
            row["collective"] = canonical_collective(coll)
        elif coll:
            warnings.append(f"{path}:{line}: unknown collective {coll!r} kept as written")
        if row.get("dtype"):
            row["dtype"] = canonical_dtype(row["dtype"])
        if row.get("protocol"):
            row["protocol"] = canonical_protocol(row["protocol"])
        if row.get("algorithm"):
            row["algorithm"] = canonical_algorithm(row["algorithm"])
        launch = str(row.get("launch") or "").strip().lower()
        if launch in ("cuda-graph", "cudagraph", "cuda_graph", "graphs"):
            launch = "graph"
        row["launch"] = launch
        rows.append(row)
    if not rows:
        raise InputError("the CSV has a header but no rows", file=path, line=1)
    flagged = [str(r["_csv_line"]) for r in rows if r.get("wrong")]
    if flagged:
        shown = ", ".join(flagged[:10]) + (", …" if len(flagged) > 10 else "")
        warnings.append(f"{path}:{flagged[0]}: {len(flagged)} row(s) flagged wrong (lines {shown}): "
                        "excluded by default")
    single = [str(r["_csv_line"]) for r in rows if str(r.get("gpu_mode") or "").strip().lower() == SINGLE_GPU_MODE]
    if single:
        warnings.append(f"{path}:{single[0]}: {len(single)} row(s) measured with every rank on one GPU "
                        "(gpu_mode single-gpu): on-chip cost, not the interconnect; left out of calibrate, "
                        "validate and compare (compare --single-gpu joins them)")
    _check_units(rows, path)
    extra = [n for n in names if n not in MEASUREMENT_COLUMNS]
    meta = {
        "format": "collsim-csv",
        "rows": len(rows),
        "extra_columns": extra,
        "truncated": any(bool(r.get("truncated")) for r in rows),
        "wrong_rows": sum(1 for r in rows if r.get("wrong")),
        "collective": _single(rows, "collective"),
        "gpu": _single(rows, "gpu"),
        "ranks": _single(rows, "ranks"),
    }
    return rows, meta, warnings


def _single(rows: list[dict[str, Any]], key: str) -> Any:
    values = {r.get(key) for r in rows if r.get(key) not in (None, "")}
    return next(iter(values)) if len(values) == 1 else None


def _not_stated(value: str) -> bool:
    v = value.strip().lower()
    return not v or v.startswith("not stated") or v in ("unknown", "n/a", "na", "-")


def parse_published_csv(text: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Read the published-measurements CSV layout (see the module docstring)."""
    warnings: list[str] = []
    header, records = _records(text)
    names = [h.strip() for h in header]
    lower = [n.lower() for n in names]
    coll_default = collective_from_filename(path)
    rows: list[dict[str, Any]] = []
    for line, rec in records:
        if len(rec) != len(names):
            raise InputError(f"{len(rec)} fields, the header has {len(names)}", file=path, line=line)
        f = {k: v for k, v in zip(lower, rec)}

        def num(col: str, kind: str = "float") -> Any:
            return _convert(kind, f.get(col, ""), path, line, col) if col in f else None

        size = num("size_bytes", "int")
        if size is None:
            raise InputError("empty size_bytes", file=path, line=line, field="size_bytes")
        time_us = num("time_us")
        derived = num("time_us_derived")
        time_ip = num("time_us_inplace")
        is_derived = False
        if time_us is None and derived is not None:
            time_us, is_derived = derived, True
        if time_us is None and time_ip is None:
            warnings.append(f"{path}:{line}: no time_us, time_us_derived or time_us_inplace: row skipped")
            continue
        notes = []
        gpu_raw = f.get("gpu", "").strip()
        gpu = gpu_raw.split(" (")[0].strip()
        if gpu != gpu_raw:
            notes.append(f"gpu: {gpu_raw}")
        dtype_raw = f.get("dtype", "")
        dtype = "" if _not_stated(dtype_raw) else canonical_dtype(dtype_raw.split()[0].strip(",;"))
        if dtype_raw and dtype and dtype_raw.strip() != dtype_raw.split()[0]:
            notes.append(f"dtype: {dtype_raw.strip()}")
        graph = f.get("cuda_graph", "").strip().lower()
        launch = "graph" if graph.startswith("yes") else "eager" if graph.startswith("no") else ""
        if graph and launch == "":
            notes.append(f"cuda_graph: {f.get('cuda_graph', '').strip()}")
        for key in ("timing", "interconnect", "notes"):
            if f.get(key, "").strip():
                notes.append(f"{key}: {f[key].strip()}" if key != "notes" else f[key].strip())
        algorithm = "" if _not_stated(f.get("algorithm", "")) else f.get("algorithm", "").strip()
        if algorithm.lower().startswith("nccl default"):
            # the library chose: leave the column empty, keep what the source said
            if algorithm.lower() != "nccl default":
                notes.append(f"algorithm: {algorithm}")
            algorithm = ""
        coll = canonical_collective(f.get("collective", "")) if "collective" in f else ""
        row = {
            "_csv_line": line,
            "source": path,
            "source_line": line,
            "source_format": "published-csv",
            "origin": " ".join(x for x in (f.get("source_id", "").strip(), f.get("source", "").strip()) if x),
            "system": f.get("system", "").strip(),
            "gpu": gpu,
            "ranks": num("n_gpus", "int"),
            "collective": coll or coll_default,
            "algorithm": algorithm,
            "protocol": "" if _not_stated(f.get("protocol", "")) else f.get("protocol", "").strip(),
            "library": f.get("library", "").strip(),
            "library_version": "" if _not_stated(f.get("lib_version", "")) else f.get("lib_version", "").strip(),
            "dtype": dtype,
            "size_bytes": size,
            "launch": launch,
            "time_us": time_us,
            "time_us_inplace": time_ip,
            "algbw_gbps": num("algbw_gbps"),
            "busbw_gbps": num("busbw_gbps"),
            "time_derived": is_derived,
            "notes": "; ".join(notes),
        }
        rows.append(row)
    if not rows:
        raise InputError("the CSV has a header but no usable rows", file=path, line=1)
    if not any(r["collective"] for r in rows):
        warnings.append(f"{path}: no collective column and none in the file name: collective left empty "
                        "(name it with --collective)")
    measured = [r for r in rows if not r["time_derived"]]
    if measured:
        _check_units(measured, path)
    meta = {
        "format": "published-csv",
        "rows": len(rows),
        "sources": sorted({r["origin"].split(" ")[0] for r in rows if r["origin"]}),
        "derived_rows": sum(1 for r in rows if r["time_derived"]),
        "truncated": False,
        "wrong_rows": 0,
        "collective": _single(rows, "collective"),
        "file": PurePath(path).name,
    }
    return rows, meta, warnings

