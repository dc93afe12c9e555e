"""Broken on purpose: ll16 declaring LL's 8-byte-pair assumption instead of ``store-16B-untorn``.

The first 8-byte half of the line (two data words) carries no flag, so a
reader that sees the new epoch in ``.w`` may still read old data there: the
verifier reports a stale and torn read and `collsim review` exits 1.
"""
from __future__ import annotations

from pathlib import Path

from collsim.ir.registry import load_protocol_file

LL16 = type(load_protocol_file(str(Path(__file__).with_name("ll16.py"))))


class LL16Unassumed(LL16):
    """ll16 assuming only that each aligned 8-byte half of a store is untorn."""

    name = "ll16-unassumed"
    assumptions = ("vector-8B-pairs-untorn",)
    expected_violation = "stale-read"
