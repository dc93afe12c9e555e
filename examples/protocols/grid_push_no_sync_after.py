"""Broken on purpose: grid-push whose grid barrier leaves out its second ``bar.sync``.

Thread 0 of each CTA acquires the arrival count, but nothing holds the
CTA's other threads until it has: they load their slice of the peers'
data while the peers may still be writing it (a data race).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

GridPush = type(load_protocol_file(str(Path(__file__).with_name("grid_push.py"))))


class GridPushNoSyncAfter(GridPush):
    """grid-push without the ``bar.sync`` after the grid barrier's wait."""

    name = "grid-push-no-sync-after"
    expected_violation = "data-race"
    default_params = {**GridPush.default_params, "sync_after": False}
