"""ll-graph: NCCL's LL protocol with its launches replayed from a CUDA graph.

The epoch and slot derive from ``ITER``, which the kernel reads from its
launch counter in device memory and advances itself, so every replay of the
captured graph uses a fresh epoch although its kernel arguments are frozen.
The broken variant, ``mutant-ll-frozen-epoch`` (protocols/mutants/), passes
the step number as a kernel argument (``ARG_ITER``) instead: caught as a
stale read.
"""
from __future__ import annotations

from protocols.ll import LL


class LLGraph(LL):
    """LL under CUDA-graph replay: epochs from the device launch counter, so replays do not repeat them."""

    name = "ll-graph"
    algorithms = ("one-shot",)
    graph_replay = True
