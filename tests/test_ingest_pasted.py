"""nccl-tests output as people paste it: indented blocks, launcher prefixes, timestamps, elided rows.

Each shape is made from a log read cleanly (one in the repository, and the
shared real logs when they are there), so the expectation is the clean
parse itself: the same rows, sizes and times, less the rows a ``...``
elides, with a warning naming the elision.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from collsim.calibrate.formats.nccl_text.prefixes import split_prefixes
from collsim.calibrate.ingest import parse_log

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests" / "data" / "logs" / "new_all_reduce_wrong_rows.txt"
SHARED = Path(os.environ.get("COLLSIM_SHARED_DATA", ROOT.parent / "shared" / "data")) / "nccl-tests-logs"

# (id, how each line of a clean log is written in the paste)
SHAPES = [
    ("indented-4", lambda i, line: "    " + line),
    ("indented-tab", lambda i, line: "\t" + line),
    ("tag-output", lambda i, line: f"[1,0]<stdout>:{line}"),
    ("indented-tag-output", lambda i, line: f"    [1,0]<stdout>:{line}"),
    ("tag-output-indented-after", lambda i, line: f"[1,0]<stdout>:    {line}"),
    ("rank-colon", lambda i, line: f"rank 0: {line}"),
    ("rank-no-space", lambda i, line: f"rank0> {line}"),
    ("torchrun-rank", lambda i, line: f"[rank0]:{line}"),
    ("torchrun-default", lambda i, line: f"[default0]:{line}"),
    ("iso-timestamp", lambda i, line: f"2024-05-01T10:00:{i % 60:02d}.123Z {line}"),
    ("bracketed-timestamp", lambda i, line: f"[2024-05-01 10:00:{i % 60:02d}] {line}"),
    ("time-of-day", lambda i, line: f"10:00:{i % 60:02d} {line}"),
    ("timestamp-then-tag", lambda i, line: f"2024-05-01 10:00:{i % 60:02d} [1,0]<stdout>:{line}"),
    ("srun-label", lambda i, line: f"0: {line}"),
    ("markdown-quote", lambda i, line: f"> {line}"),
    ("quote-indented-tag", lambda i, line: f">     [1,0]<stdout>:{line}"),
    ("kubectl-prefix", lambda i, line: f"[pod/launcher-abc12] {line}"),
    ("ansi-coloured", lambda i, line: f"\x1b[32m{line}\x1b[0m"),
    ("crlf", lambda i, line: line + "\r"),
]


def _clean_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def _rows(path: Path):
    parsed = parse_log(path)
    return parsed, [(int(r.size_bytes), float(r.time_us)) for r in parsed.rows.itertuples()]


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("Output of the run:\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("shape, write", SHAPES, ids=[s[0] for s in SHAPES])
def test_a_pasted_log_reads_as_the_clean_one(shape, write, tmp_path):
    _, clean = _rows(LOG)
    lines = [write(i, line) for i, line in enumerate(_clean_lines(LOG))]
    parsed, rows = _rows(_write(tmp_path, f"{shape}.txt", lines))
    assert rows == clean and len(rows) == 6
    assert parsed.meta["ranks"] == 8


@pytest.mark.parametrize("elision", ["...", "…", "[...]", "(... 3 rows ...)", "<snip>", "[snip]"])
@pytest.mark.parametrize("shape, write", [SHAPES[3], SHAPES[0], SHAPES[10]], ids=[SHAPES[3][0], SHAPES[0][0],
                                                                               SHAPES[10][0]])
def test_elided_rows_are_left_out_with_a_warning(elision, shape, write, tmp_path):
    _, clean = _rows(LOG)
    lines = _clean_lines(LOG)
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("4096 "))
    kept = lines[:first] + [elision] + lines[first + 2:]  # 4096 and 16384 left out
    pasted = [write(i, line) for i, line in enumerate(kept)]
    parsed, rows = _rows(_write(tmp_path, "elided.txt", pasted))
    assert rows == [r for r in clean if r[0] not in (4096, 16384)]
    notes = [w for w in parsed.warnings if "elides rows" in w]
    assert len(notes) == 1 and f"elided.txt:{first + 3}:" in notes[0]


def test_prefix_splitting_names_the_stream():
    assert split_prefixes("    [1,3]<stdout>:#  size") == ("#  size", "rank3")
    assert split_prefixes("[rank5]:  1024  256") == ("1024  256", "rank5")
    assert split_prefixes("rank 2: # nThread 1") == ("# nThread 1", "rank2")
    assert split_prefixes("10:00:01.5 0: 8 2 float") == ("8 2 float", "task0")
    # a data row is not a timestamp, a size is not a rank label
    assert split_prefixes("        1024           256     float") == ("1024           256     float", "")


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"shared nccl-tests logs not found at {SHARED} (set COLLSIM_SHARED_DATA)")
    return path


@pytest.mark.parametrize("name", [
    "05_eks-efa_T4_2x1_tag-output_ncclinfo_zero-size.txt",
    "09_bitdeer_H100x8_single-node_indented.txt",
    "16_nccl-ebpf_RTX5090_v2.18.0_tag-output_stderr.txt",
    "13_dranet_H200_2x1_openmpi-banners.txt",
])
@pytest.mark.parametrize("shape, write", [SHAPES[0], SHAPES[10], SHAPES[15]], ids=[SHAPES[0][0], SHAPES[10][0],
                                                                                SHAPES[15][0]])
def test_real_logs_pasted_again_read_the_same(name, shape, write, tmp_path):
    """A real log (already tagged or indented) quoted once more, as in an issue or a blog post."""
    path = _shared(name)
    _, clean = _rows(path)
    assert clean
    lines = [write(i, line) for i, line in enumerate(_clean_lines(path))]
    _, rows = _rows(_write(tmp_path, name, lines))
    assert rows == clean
