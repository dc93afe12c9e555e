"""Running scenarios: rows expanded from a scenario, costed on an executor, written as results and a report.

:mod:`collsim.runner.rows` turns a scenario into rows and rows into records
(anywhere: here, a process pool, a Dask cluster; reused from the row cache
when unchanged); :mod:`collsim.runner.run` is the whole run, from a scenario
file to ``results.csv``, ``results.json`` and ``report.html``.
"""
from __future__ import annotations

from collsim.runner.rows import Row, TopologyRef, cached_topology, expand_rows, run_row, run_rows
from collsim.runner.run import RunOutput, execute, run_scenario

__all__ = ["Row", "TopologyRef", "RunOutput", "cached_topology", "expand_rows", "run_row", "run_rows", "execute",
           "run_scenario"]
