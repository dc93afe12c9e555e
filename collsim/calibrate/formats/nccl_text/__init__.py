"""nccl-tests text output, as people paste it.

Handles every era of the result table (NCCL 1.x in-tree tests with time in
ms and a ``res`` column; nccl-tests v1 ``bytes N type op … res``; 2.0–2.12
``size count type [redop] [root] time algbw busbw error``; 2.13+ with
``redop root … #wrong``; the newest with ``cputime``, per-iteration and
timestamp columns), read by header, not by fixed columns, plus the noise
around it: ``NCCL INFO``/``WARN`` lines (also when they split a row in two),
mpirun ``--tag-output`` / srun / pdsh / kubectl prefixes, indentation, ssh and
OpenMPI banners, shell prompts, several tables per file, and runs that crash
(rows kept, marked ``truncated``, with a warning naming the line).

One concept per module: launcher prefixes (:mod:`.prefixes`), the line
patterns and token tests (:mod:`.recognise`), the column model
(:mod:`.columns`), lines and sections (:mod:`.section`), whole-file facts
(:mod:`.facts`), the per-stream section state machine (:mod:`.scanner`),
rows from tokens (:mod:`.rows`) and what each run's facts and rows are
(:mod:`.inference`).
"""
from __future__ import annotations

from typing import Any

from collsim.calibrate.formats.nccl_text.inference import Inference
from collsim.calibrate.formats.nccl_text.scanner import StreamScanner

__all__ = ["parse_text"]


def parse_text(text: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Parse nccl-tests text output; see the module docstring."""
    scan = StreamScanner(text, path)
    scan.parse_streams()
    rows, meta = Inference(scan).finish()
    return rows, meta, scan.warnings
