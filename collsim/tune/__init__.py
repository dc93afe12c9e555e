"""From simulated (or measured) winners to deployable configuration.

* :mod:`~collsim.tune.ties` - the tie rule every decision uses (a choice
  wins only by more than the tolerance, default 1 %);
* :mod:`~collsim.tune.timings` - what decisions are made from: the latency
  of each algorithm × protocol per (nodes, ranks, size), from a results
  table or a measurement table;
* :mod:`~collsim.tune.ranges` - contiguous byte ranges from decisions at
  run sizes (boundaries at latency crossovers);
* :mod:`~collsim.tune.nccl` - NCCL's example tuner-plugin config, and the
  one table from collsim's choices to NCCL's;
* :mod:`~collsim.tune.table` - decision tables for custom kernels (JSON, Markdown);
* :mod:`~collsim.tune.compare` - where simulated and measured choices disagree;
* :mod:`~collsim.tune.source` - reading results, running scenarios, reading
  measurements (imported on its own: the rest reads no files).

>>> import pandas as pd
>>> from collsim.tune import Timings, build_config
>>> rows = pd.DataFrame({"nodes": 1, "ranks": 8, "size_bytes": [1024, 1024, 2048, 2048],
...                      "algorithm": "ring", "protocol": ["ll", "simple", "ll", "simple"],
...                      "latency_us": [10.0, 20.0, 30.0, 20.0]})
>>> t = Timings(rows, "simulated", "hgx-h100", "", "des", "graph", "results.csv", "0.1.0")
>>> [r.line() for r in build_config(t).rows]
['allreduce,0,1536,ring,ll,-1,1,8,-1,-1', 'allreduce,1537,2048,ring,simple,-1,1,8,-1,-1']
"""
from __future__ import annotations

from collsim.tune.compare import Comparison, Disagreement, compare
from collsim.tune.nccl import NCCL_EQUIVALENTS, ConfigRow, TunerConfig, build_config, nccl_choice
from collsim.tune.table import DecisionTable, TableRange, build_table
from collsim.tune.ties import DEFAULT_TOLERANCE_PCT, Outcome, check_tolerance, rank_choices
from collsim.tune.timings import Choice, Timings, choice_label, from_measurements, from_results, result_groups

__all__ = [
    "DEFAULT_TOLERANCE_PCT",
    "NCCL_EQUIVALENTS",
    "Choice",
    "Comparison",
    "ConfigRow",
    "DecisionTable",
    "Disagreement",
    "Outcome",
    "TableRange",
    "Timings",
    "TunerConfig",
    "build_config",
    "build_table",
    "check_tolerance",
    "choice_label",
    "compare",
    "from_measurements",
    "from_results",
    "nccl_choice",
    "rank_choices",
    "result_groups",
]
