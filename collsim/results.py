"""The names ``collsim.results`` held before it was split, for code written against it.

Everything here lives elsewhere: the results files' schema and text in
:mod:`collsim.resultsfile`, rows and scenario runs in :mod:`collsim.runner`,
cost layering in :mod:`collsim.scenario.costs`. Nothing inside collsim imports
this module.
"""
from __future__ import annotations

from collsim.resultsfile import (COLUMNS, FLOAT_FORMAT, SWEEP_INDEX_COLUMNS, Failed, Skipped, format_csv,
                                 format_json, records_frame, result_columns, sweep_directories, write_results)
from collsim.runner.rows import Row, TopologyRef, cached_topology, expand_rows, run_row, run_rows
from collsim.runner.run import RunOutput, execute, rich_progress, run_scenario
from collsim.scenario.costs import merge_costs, with_profile

__all__ = [
    "COLUMNS",
    "FLOAT_FORMAT",
    "SWEEP_INDEX_COLUMNS",
    "Row",
    "Skipped",
    "Failed",
    "TopologyRef",
    "RunOutput",
    "result_columns",
    "sweep_directories",
    "cached_topology",
    "expand_rows",
    "run_row",
    "run_rows",
    "records_frame",
    "format_csv",
    "format_json",
    "write_results",
    "execute",
    "rich_progress",
    "run_scenario",
    "merge_costs",
    "with_profile",
]
