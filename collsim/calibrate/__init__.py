"""Calibration against measurements: ingest measured collective benchmarks.

``collsim.calibrate.ingest`` reads nccl-tests output (text or JSON), collsim
measurement CSVs and the published-measurements CSV into one measurement
table whose columns are :data:`MEASUREMENT_COLUMNS` (see
``collsim.calibrate.measurements``).
"""
from __future__ import annotations

from collsim.calibrate.ingest import (
    IngestWarning,
    ParsedLog,
    ingest_files,
    parse_log,
    read_measurements,
)
from collsim.calibrate.measurements import (
    COLUMN_DOCS,
    MEASUREMENT_COLUMNS,
    usable,
    write_measurements,
)

__all__ = [
    "COLUMN_DOCS",
    "MEASUREMENT_COLUMNS",
    "IngestWarning",
    "ParsedLog",
    "ingest_files",
    "parse_log",
    "read_measurements",
    "usable",
    "write_measurements",
]
