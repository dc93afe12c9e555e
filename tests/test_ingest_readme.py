"""Every shared nccl-tests log parses to what its README entry says.

The expectations (rows, first/last size, t0 = first out-of-place time in µs,
avg = the ``# Avg bus bandwidth`` value, failure signature) are read from the
README next to the logs, so logs added there later are covered too. The data
lives outside the repository (``../shared/data`` from the repo root, or
``$COLLSIM_SHARED_DATA``); the tests skip when it is absent.
"""
from __future__ import annotations

import csv
import math
import os
import re
from pathlib import Path

import pytest

from collsim.calibrate.ingest import parse_log

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("COLLSIM_SHARED_DATA", ROOT.parent / "shared" / "data"))
LOGS = SHARED / "nccl-tests-logs"
README = LOGS / "README.md"
MEASURED = SHARED / "measured" / "allreduce_measured.csv"

_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"


def parse_expectations(text: str) -> dict[str, dict]:
    """``{file name: {rows, first, last, t0, avg, failure}}`` from the README's ``### name`` entries."""
    out: dict[str, dict] = {}
    for block in re.split(r"^### ", text, flags=re.MULTILINE)[1:]:
        name = block.split("\n", 1)[0].strip().strip("`")
        m = re.search(r"\*\*Expected:\*\*(.*?)(?=\n- \*\*|\n#|\Z)", block, flags=re.DOTALL)
        if not m:
            continue
        exp_text = " ".join(m.group(1).split())
        exp: dict = {"text": exp_text}
        if r := re.search(r"\brows\s*[=:]\s*(\d+)", exp_text):
            exp["rows"] = int(r.group(1))
        if r := re.search(r"\bfirst\s*[=:]\s*(?:last\s*[=:]\s*)?(\d+)", exp_text):
            exp["first"] = int(r.group(1))
        if r := re.search(r"\blast\s*[=:]\s*(\d+)", exp_text):
            exp["last"] = int(r.group(1))
        if r := re.search(r"\bt0\s*[=:]\s*" + _NUM, exp_text):
            exp["t0"] = float(r.group(1))
        if r := re.search(r"\bavg\s*[=:]\s*" + _NUM, exp_text):
            exp["avg"] = float(r.group(1))
        elif re.search(r"\bavg\s*[=:]?\s*(?:—|–|-|none|absent|n/a)", exp_text, flags=re.IGNORECASE):
            exp["avg"] = None
        if r := re.search(r"failure signature\s*`([^`]+)`", exp_text):
            exp["failure"] = r.group(1)
        out[name] = exp
    return out


def test_parse_expectations_reads_the_readme_forms():
    text = (
        "## Files\n\n### a.txt\n- **Source:** x\n- **Expected:** rows=34; first=0; last=8589934592; "
        "t0=34.27; avg=58.2651.\n\n### b.txt\n- **Expected:** rows=0; avg —; failure signature "
        "`Test NCCL failure common.cu:392`.\n\n### c.txt\n- **Expected:** rows=1; first=last=33554432; "
        "t0=19.56; avg=0.\n\n## Gaps\n"
    )
    exp = parse_expectations(text)
    assert exp["a.txt"] == {"text": exp["a.txt"]["text"], "rows": 34, "first": 0, "last": 8589934592,
                            "t0": 34.27, "avg": 58.2651}
    assert exp["b.txt"]["rows"] == 0 and exp["b.txt"]["avg"] is None
    assert exp["b.txt"]["failure"] == "Test NCCL failure common.cu:392"
    assert exp["c.txt"]["first"] == exp["c.txt"]["last"] == 33554432 and exp["c.txt"]["avg"] == 0.0


def _expectations() -> dict[str, dict]:
    if not README.is_file():
        return {}
    return parse_expectations(README.read_text(encoding="utf-8"))


def _log_files() -> list[str]:
    if not LOGS.is_dir():
        return []
    return sorted(p.name for p in LOGS.iterdir() if p.is_file() and p.name != "README.md")


EXPECTED = _expectations()
NAMES = sorted(set(EXPECTED) | set(_log_files())) or ["<no shared logs>"]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_shared_log_matches_readme(name: str) -> None:
    if not LOGS.is_dir():
        pytest.skip(f"shared nccl-tests logs not found at {LOGS} (set COLLSIM_SHARED_DATA)")
    path = LOGS / name
    if not path.is_file():
        pytest.skip(f"{name} is described in the README but not present (held out)")
    log = parse_log(path)
    rows = log.rows
    exp = EXPECTED.get(name)
    assert exp is not None, f"{name} has no '**Expected:**' entry in {README.name}"
    if "rows" in exp:
        assert len(rows) == exp["rows"], (exp["text"], log.warnings)
    if "first" in exp:
        assert int(rows["size_bytes"].iloc[0]) == exp["first"]
    if "last" in exp:
        assert int(rows["size_bytes"].iloc[-1]) == exp["last"]
    if "t0" in exp:
        assert _close(float(rows["time_us"].iloc[0]), exp["t0"]), (rows["time_us"].iloc[0], exp["t0"])
    if "avg" in exp:
        if exp["avg"] is None:
            assert log.meta.get("avg_busbw") is None
        else:
            assert log.meta.get("avg_busbw") is not None and _close(log.meta["avg_busbw"], exp["avg"])
    if "failure" in exp:
        assert exp["failure"] in (log.meta.get("failure") or ""), log.meta.get("failure")
        assert log.meta["truncated"]
        assert any(exp["failure"] in w for w in log.warnings)
    # whatever the log, the parse is internally consistent
    assert (rows["source_line"] > 0).all()
    assert (rows["size_bytes"] >= 0).all()
    if len(rows):
        assert rows["collective"].ne("").all(), log.warnings
        if log.meta["truncated"]:
            assert rows["truncated"].all()


def test_shared_measured_csv_maps_every_row():
    if not MEASURED.is_file():
        pytest.skip(f"shared measured CSV not found at {MEASURED} (set COLLSIM_SHARED_DATA)")
    with MEASURED.open(newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    timed = [r for r in records if r["time_us"] or r["time_us_derived"] or r["time_us_inplace"]]
    derived = [r for r in records if not r["time_us"] and r["time_us_derived"]]
    log = parse_log(MEASURED)
    rows = log.rows
    assert len(rows) == len(timed)
    assert int(rows["time_derived"].sum()) == len(derived)
    assert (rows["collective"] == "allreduce").all()
    assert (rows["source_format"] == "published-csv").all()
    first = records[0]
    assert float(rows["time_us"].iloc[0]) == float(first["time_us"])
    assert rows["origin"].iloc[0].startswith(first["source_id"])
    # derived times are flagged, measured ones are not
    d = rows[rows["time_derived"]]
    assert d["time_us"].notna().all()
