"""Broken on purpose: grid-push whose grid barrier counts arrivals at cta scope instead of gpu.

A CTA's ``red.release.cta`` and another CTA's ``ld.acquire.cta`` are not
morally strong (cta scope covers the issuing CTA only), so they do not
synchronize: CTA 0's thread signals the peers before CTA 1's slice is
ordered before the step, and a receiving CTA may load its slice before the
step its thread 0 acquired reaches it (a stale read).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir import Scope
from collsim.ir.registry import load_protocol_file

GridPush = type(load_protocol_file(str(Path(__file__).with_name("grid_push.py"))))


class GridPushCtaScope(GridPush):
    """grid-push with ``red.release.cta`` / ``ld.acquire.cta`` on the grid barrier's counter."""

    name = "grid-push-cta-scope"
    expected_violation = "stale-read"
    default_params = {**GridPush.default_params, "grid_scope": Scope.CTA}
