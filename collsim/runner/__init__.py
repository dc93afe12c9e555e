"""Running scenarios: rows expanded from a scenario, costed on an executor, written as results and a report.

:mod:`collsim.runner.rows` turns a scenario into rows and rows into records
(anywhere: here, a process pool, a Dask cluster; reused from the row cache
when unchanged); :mod:`collsim.runner.run` is the whole run, from a scenario
file to ``results.csv``, ``results.json`` and ``report.html``.

This package module imports neither: a worker that unpickles a row imports
:mod:`collsim.runner.rows` alone, not the report stack above it.
"""
from __future__ import annotations

__all__: list[str] = []
