"""Broken on purpose: simple-ra whose step counter is stored relaxed instead of release.

Nothing then orders the weak data stores before the counter: a receiver
that acquires the new step may still load old data (a data race).
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir import Sem
from collsim.ir.registry import load_protocol_file

SimpleRA = type(load_protocol_file(str(Path(__file__).with_name("simple_ra.py"))))


class SimpleRARelaxed(SimpleRA):
    """simple-ra with ``st.relaxed`` for the step counter."""

    name = "simple-ra-relaxed"
    expected_violation = "data-race"
    default_params = {**SimpleRA.default_params, "post_sem": Sem.RELAXED}
