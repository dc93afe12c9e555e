"""The measurement table: one row per measured (collective, size) point.

Every input ``collsim ingest`` reads (nccl-tests text or JSON output, collsim's
own measurement CSV, the published-measurements CSV layout) becomes a
:class:`pandas.DataFrame` with the columns of :data:`MEASUREMENT_COLUMNS`, in
that order; columns an input does not know are empty (``""`` for text, ``NA``
for numbers). Extra columns of a collsim CSV are kept after the schema columns.

Conventions
-----------
* Times are µs, bandwidths GB/s (1e9 bytes/s, as nccl-tests prints them),
  sizes bytes. ``time_us``/``algbw_gbps``/``busbw_gbps`` are the
  **out-of-place** numbers; the ``*_inplace`` columns the in-place ones.
* Text columns never hold ``NA``: ``""`` means unknown or not applicable.
* ``collective`` is one of :data:`COLLECTIVES`; ``dtype`` one of the keys of
  :data:`DTYPE_SIZES` (nccl-tests' ``float``/``half``/``char`` … are mapped,
  unknown names are kept as written); ``protocol`` and ``algorithm`` are
  lower-case NCCL names (``ll``, ``ll128``, ``simple``; ``ring``, ``tree``,
  ``nvls`` …); ``launch`` is ``eager``, ``graph`` or ``""``.
* ``wrong`` marks a row whose data check failed (non-zero ``#wrong``, or an
  old-format max error above nccl-tests' tolerance). Such rows are kept for
  the record but must not feed a fit: :func:`usable` drops them by default.
* ``truncated`` marks rows of a run that ended before its footer (a crash or
  a cut-off paste); ``time_derived`` rows hold a time computed from a
  bandwidth, not a measured one.

:func:`write_measurements` writes the table as CSV atomically (temporary file,
then rename); :func:`normalize` coerces any frame to the schema.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.models import DTYPES
from collsim.atomicfile import atomic_write_text
from collsim.errors import InputError

__all__ = [
    "MEASUREMENT_COLUMNS",
    "COLUMN_DOCS",
    "COLLECTIVES",
    "DTYPE_SIZES",
    "LAUNCH_MODES",
    "canonical_collective",
    "canonical_dtype",
    "canonical_protocol",
    "canonical_algorithm",
    "empty_table",
    "normalize",
    "usable",
    "single_gpu_rows",
    "SINGLE_GPU_MODE",
    "write_measurements",
]

# (name, kind, description). kind: str | int | float | bool | boolean (nullable)
_SCHEMA: tuple[tuple[str, str, str], ...] = (
    ("source", "str", "file the row was read from (for a collsim CSV: the log it was first read from)"),
    ("source_line", "int", "1-based line of the row in `source`"),
    ("source_format", "str", "nccl-tests-text, nccl-tests-json, collsim-csv or published-csv"),
    ("section", "int", "0-based index of the result table within the source file"),
    ("origin", "str", "upstream reference of compiled data (e.g. 'S01 https://…'), else empty"),
    ("topology", "str", "collsim topology name (from --topology or the CSV)"),
    ("system", "str", "free-text system description, when the input has one"),
    ("gpu", "str", "GPU name(s) as reported ('NVIDIA H100 80GB HBM3'); several joined with ', '"),
    ("ranks", "int", "number of ranks (GPUs) in the communicator"),
    ("nodes", "int", "number of distinct hosts"),
    ("collective", "str", "allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, …"),
    ("algorithm", "str", "NCCL_ALGO (lower case) or the algorithm named by the input; empty = library default"),
    ("protocol", "str", "NCCL_PROTO (lower case) or the protocol named by the input; empty = library default"),
    ("library", "str", "NCCL, RCCL, or the library named by the input"),
    ("library_version", "str", "library version, e.g. '2.12.7+cuda11.4'"),
    ("nccl_tests_version", "str", "nccl-tests version when printed, e.g. '2.18.0'"),
    ("dtype", "str", "element type (float32, float16, bfloat16, …)"),
    ("redop", "str", "reduction operator (sum, prod, min, max, avg); empty when none"),
    ("root", "int", "root rank as printed (-1: none); NA when the log has no root column"),
    ("size_bytes", "int", "message size in bytes, as nccl-tests' size column"),
    ("count", "int", "element count, as nccl-tests' count column"),
    ("launch", "str", "eager, graph (CUDA-graph replay, nccl-tests -G) or empty if unknown"),
    ("graph_launches", "int", "nccl-tests 'graph: N' (0 = eager)"),
    ("validation", "boolean", "whether the run checked its results (nccl-tests -c)"),
    ("time_us", "float", "out-of-place time per collective, µs"),
    ("algbw_gbps", "float", "out-of-place algorithm bandwidth, GB/s"),
    ("busbw_gbps", "float", "out-of-place bus bandwidth, GB/s"),
    ("nwrong", "int", "out-of-place #wrong elements; NA when not checked (N/A)"),
    ("max_error", "float", "out-of-place max error (nccl-tests < 2.13 'error', NCCL 1.x 'res')"),
    ("time_us_inplace", "float", "in-place time per collective, µs"),
    ("algbw_gbps_inplace", "float", "in-place algorithm bandwidth, GB/s"),
    ("busbw_gbps_inplace", "float", "in-place bus bandwidth, GB/s"),
    ("nwrong_inplace", "int", "in-place #wrong elements; NA when not checked"),
    ("max_error_inplace", "float", "in-place max error (old formats)"),
    ("time_derived", "bool", "time computed from a bandwidth, not measured"),
    ("wrong", "bool", "the run's data check failed for this row: excluded by default"),
    ("truncated", "bool", "the run ended before its footer (crash or cut-off output)"),
    ("notes", "str", "free-text remarks (timing method, caveats)"),
)

#: Column names of the measurement table, in order.
MEASUREMENT_COLUMNS: tuple[str, ...] = tuple(name for name, _, _ in _SCHEMA)

#: Column name -> one-line description.
COLUMN_DOCS: dict[str, str] = {name: doc for name, _, doc in _SCHEMA}

_KIND: dict[str, str] = {name: kind for name, kind, _ in _SCHEMA}

#: Canonical collective names.
COLLECTIVES: tuple[str, ...] = (
    "allreduce",
    "allgather",
    "reducescatter",
    "alltoall",
    "alltoallv",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
)

#: Element size in bytes of every canonical dtype.
DTYPE_SIZES: dict[str, int] = dict(DTYPES)

#: Values of the ``launch`` column (besides ``""``).
LAUNCH_MODES: tuple[str, ...] = ("eager", "graph")

_COLLECTIVE_ALIASES: dict[str, str] = {
    "allreduce": "allreduce",
    "allgather": "allgather",
    "reducescatter": "reducescatter",
    "alltoall": "alltoall",
    "alltoallv": "alltoallv",
    "alltoallv2": "alltoallv",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
    "gather": "gather",
    "scatter": "scatter",
    "hypercube": "hypercube",
}

_DTYPE_ALIASES: dict[str, str] = {
    "char": "int8",
    "int8": "int8",
    "int8_t": "int8",
    "uint8": "uint8",
    "uint8_t": "uint8",
    "int": "int32",
    "int32": "int32",
    "int32_t": "int32",
    "uint32": "uint32",
    "uint32_t": "uint32",
    "int64": "int64",
    "int64_t": "int64",
    "long": "int64",
    "uint64": "uint64",
    "uint64_t": "uint64",
    "half": "float16",
    "fp16": "float16",
    "float16": "float16",
    "f16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float": "float32",
    "fp32": "float32",
    "float32": "float32",
    "f32": "float32",
    "double": "float64",
    "fp64": "float64",
    "float64": "float64",
    "f64": "float64",
    "f8e4m3": "float8_e4m3",
    "fp8_e4m3": "float8_e4m3",
    "float8_e4m3": "float8_e4m3",
    "float8_e4m3fn": "float8_e4m3",
    "f8e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2",
    "float8_e5m2": "float8_e5m2",
}

_PROTOCOLS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
_ALGORITHMS = {
    "ring": "ring",
    "tree": "tree",
    "collnet": "collnet",
    "collnetdirect": "collnetdirect",
    "collnetchain": "collnetchain",
    "nvls": "nvls",
    "nvlstree": "nvlstree",
    "pat": "pat",
}


def canonical_collective(name: str | None) -> str:
    """Map a collective name as people write it to :data:`COLLECTIVES` ("" if unknown).

    >>> canonical_collective("all_reduce_perf"), canonical_collective("AllGather")
    ('allreduce', 'allgather')
    """
    if not name:
        return ""
    key = str(name).strip().lower()
    for suffix in ("_perf_mpi", "_perf", ".cu"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    key = key.replace("_", "").replace("-", "").replace(" ", "")
    return _COLLECTIVE_ALIASES.get(key, "")


def canonical_dtype(name: str | None) -> str:
    """Map a dtype name (nccl-tests, NCCL 1.x, torch style) to :data:`DTYPE_SIZES`' keys.

    Unknown names are returned as written (stripped, lower case); ``""`` stays ``""``.
    """
    if name is None:
        return ""
    key = str(name).strip().lower()
    if key.startswith("torch."):
        key = key[len("torch."):]
    return _DTYPE_ALIASES.get(key, key)


def _canonical_choice(value: str | None, table: dict[str, str]) -> str:
    if value is None:
        return ""
    text = str(value).strip().strip("\"'")
    if not text:
        return ""
    parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
    out = []
    for part in parts:
        neg = part.startswith("^")
        key = part.lstrip("^").lower()
        out.append(("^" if neg else "") + table.get(key, key))
    return ",".join(out)


def canonical_protocol(value: str | None) -> str:
    """``NCCL_PROTO`` value in lower case (``LL`` -> ``ll``, ``Simple`` -> ``simple``)."""
    return _canonical_choice(value, _PROTOCOLS)


def canonical_algorithm(value: str | None) -> str:
    """``NCCL_ALGO`` value in lower case (``Ring`` -> ``ring``, ``NVLS`` -> ``nvls``)."""
    return _canonical_choice(value, _ALGORITHMS)


def empty_table() -> pd.DataFrame:
    """A measurement table with no rows."""
    return normalize(pd.DataFrame(columns=list(MEASUREMENT_COLUMNS)))


def _to_bool(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    if value is pd.NA:
        return False
    return bool(value)


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Return ``df`` with every schema column, in schema order, with the schema's dtypes.

    Missing columns are added empty; extra columns are kept after the schema
    columns. Values that cannot take the column's type raise
    :class:`~collsim.errors.InputError`.
    """
    out = pd.DataFrame(index=range(len(df)))
    src = df.reset_index(drop=True)
    for name in MEASUREMENT_COLUMNS:
        kind = _KIND[name]
        col = src[name] if name in src.columns else None
        try:
            if kind == "str":
                if col is None:
                    out[name] = pd.Series([""] * len(src), dtype=object)
                else:
                    out[name] = pd.Series(
                        ["" if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else str(v) for v in col],
                        dtype=object,
                    )
            elif kind == "int":
                if col is None:
                    out[name] = pd.array([pd.NA] * len(src), dtype="Int64")
                else:
                    values = pd.array(pd.to_numeric(col, errors="raise"), dtype="Float64")
                    out[name] = values.round().astype("Int64")
            elif kind == "float":
                values = pd.Series([math.nan] * len(src)) if col is None else pd.to_numeric(col, errors="raise")
                out[name] = pd.Series(values, dtype="float64").to_numpy()
            elif kind == "bool":
                out[name] = pd.Series([False] * len(src) if col is None else [_to_bool(v) for v in col], dtype=bool)
            elif kind == "boolean":
                if col is None:
                    out[name] = pd.array([pd.NA] * len(src), dtype="boolean")
                else:
                    out[name] = pd.array(
                        [pd.NA if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else bool(v) for v in col],
                        dtype="boolean",
                    )
        except (TypeError, ValueError) as exc:
            raise InputError(f"column {name!r} does not hold {kind} values ({exc})") from None
    for name in src.columns:
        if name not in out.columns:
            out[name] = src[name].to_numpy()
    return out


#: The ``gpu_mode`` an emitted harness writes when every rank shares one GPU.
SINGLE_GPU_MODE = "single-gpu"


def single_gpu_rows(df: pd.DataFrame) -> int:
    """How many rows of ``df`` were measured with every rank on one GPU.

    Examples
    --------
    >>> single_gpu_rows(pd.DataFrame({"gpu_mode": ["single-gpu", "", None]}))
    1
    """
    if "gpu_mode" not in df.columns:
        return 0
    return int((df["gpu_mode"].fillna("").astype(str).str.strip().str.lower() == SINGLE_GPU_MODE).sum())


def usable(
    df: pd.DataFrame,
    *,
    include_wrong: bool = False,
    include_truncated: bool = True,
    include_derived: bool = True,
    include_single_gpu: bool = False,
) -> pd.DataFrame:
    """Rows fit to feed a model: by default everything except ``wrong`` rows
    and rows an emitted harness measured in ``single-gpu`` mode.

    Parameters
    ----------
    include_wrong : bool
        Keep rows whose data check failed (never do this for a fit).
    include_truncated : bool
        Keep rows of runs that ended before their footer (their numbers are
        real measurements, the run just did not finish).
    include_derived : bool
        Keep rows whose time was computed from a bandwidth.
    include_single_gpu : bool
        Keep rows whose ``gpu_mode`` is ``single-gpu``: the emitted harness ran
        every rank on one GPU, so the time is on-chip cost (L2, SM issue), not
        the interconnect a topology's simulation charges.

    Examples
    --------
    >>> df = pd.DataFrame({"time_us": [5.0, 3.0], "gpu_mode": ["multi-gpu", "single-gpu"]})
    >>> len(usable(df)), len(usable(df, include_single_gpu=True))
    (1, 2)
    """
    keep = pd.Series(True, index=df.index)
    if not include_wrong and "wrong" in df.columns:
        keep &= ~df["wrong"].fillna(False).astype(bool)
    if not include_truncated and "truncated" in df.columns:
        keep &= ~df["truncated"].fillna(False).astype(bool)
    if not include_derived and "time_derived" in df.columns:
        keep &= ~df["time_derived"].fillna(False).astype(bool)
    if not include_single_gpu and "gpu_mode" in df.columns:
        keep &= df["gpu_mode"].fillna("").astype(str).str.strip().str.lower() != SINGLE_GPU_MODE
    return df[keep]


def write_measurements(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``df`` (normalised to the schema) as CSV at ``path``, atomically.

    The table goes to a temporary file in the same directory, which is
    flushed, synced and renamed over ``path``: a reader never sees a half
    written file, and a failure leaves any previous file untouched.
    Returns the path written.
    """
    target = Path(path)
    table = normalize(df)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"cannot write {target}: directory {directory} does not exist")
    atomic_write_text(target, table.to_csv(index=False, lineterminator="\n"))
    return target
