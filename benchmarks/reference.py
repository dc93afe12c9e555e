"""The machine's Python speed at the time of a benchmark, so figures from shared machines can be compared.

Benchmarks print :func:`reference_loop_s` before and after their runs; dividing a CPU time by it (or
quoting both) puts figures taken while a machine was loaded or throttled in proportion.
"""
from __future__ import annotations

import time


def reference_loop_s() -> float:
    """CPU seconds of 10 million integer additions in a Python loop (about 0.4 s on an idle modern core)."""
    start, total = time.process_time(), 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - start
