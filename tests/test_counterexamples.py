"""Counterexamples that explain: a hang names the write the stuck poll needed and what erased it or why it never
came, and every step names its operation in protocol-source terms (file:line where protocol code emitted it)."""
from __future__ import annotations

import re
from pathlib import Path

from collsim.verify import verify

ROOT = Path(__file__).resolve().parents[1]
_SOURCE = re.compile(r"^(?P<file>[^:()]+\.py):(?P<line>\d+)")


def source_line(source: str) -> str:
    """The text of the protocol line a counterexample step's ``source`` (``file:line``) names."""
    m = _SOURCE.match(source)
    assert m, source
    path = Path(m["file"])
    path = path if path.is_absolute() else ROOT / path
    return path.read_text().splitlines()[int(m["line"]) - 1]


def test_a_reset_that_erases_a_peers_store_shows_that_store():
    r = verify("mutant-sentinel-eager-repoison", properties=["hang"], dependencies=False, use_cache=False)
    cex = r.properties["hang"].counterexample
    # the peer's data store the poll needed, and the re-poison that erased it, each with its source line
    assert "store_lines" in cex.facts["needed"] and "repoison" in cex.facts["overwritten_by"]
    assert "overwrote it before the poll saw it" in cex.reason
    assert "protocols/sentinel.py:" in cex.facts["needed"] and "protocols/sentinel.py:" in cex.facts["overwritten_by"]
    marked = {step.note.split(";")[0]: step for step in cex.steps if step.mark}
    assert {"the write the poll needed", "overwrote it", "waits forever"} <= set(marked)
    assert "Store(" in source_line(marked["overwrote it"].source)
    assert "PollUntil(" in source_line(marked["waits forever"].source)
    assert marked["the write the poll needed"].rank != marked["waits forever"].rank  # the peer's store


def test_a_write_never_produced_names_the_thread_that_stopped():
    r = verify(str(ROOT / "examples/protocols/host_reset_barrier_racy.py"), properties=["hang"], dependencies=False,
               use_cache=False)
    cex = r.properties["hang"].counterexample
    assert cex.facts.get("needed") and "host_reset_barrier.py:" in cex.facts["needed"]
    assert "overwrote it" in cex.reason or "never produced" in cex.reason
