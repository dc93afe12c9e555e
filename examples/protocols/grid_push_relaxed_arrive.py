"""Broken on purpose: grid-push whose grid barrier arrives with ``red.relaxed.gpu`` instead of release.

The count still reaches every CTA, but a relaxed arrival carries no
ordering: CTA 1's slice is not ordered before the step CTA 0's thread
publishes after seeing the count, so a peer that acquired the step may load
the slice's old contents (a stale read).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir import Sem
from collsim.ir.registry import load_protocol_file

GridPush = type(load_protocol_file(str(Path(__file__).with_name("grid_push.py"))))


class GridPushRelaxedArrive(GridPush):
    """grid-push with a relaxed arrival on the grid barrier's counter."""

    name = "grid-push-relaxed-arrive"
    expected_violation = "stale-read"
    default_params = {**GridPush.default_params, "arrive_sem": Sem.RELAXED}
