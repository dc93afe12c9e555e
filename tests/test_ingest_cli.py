"""`collsim ingest` through collsim.cli.main."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collsim.calibrate.measurements import MEASUREMENT_COLUMNS
from collsim.cli import main

LOGS = Path(__file__).parent / "data" / "logs"


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # main exits with the error's code
        return int(exc.code or 0)


def test_ingest_writes_one_table(tmp_path, capsys):
    out = tmp_path / "measured.csv"
    code = run(["ingest", str(LOGS / "new_all_reduce_wrong_rows.txt"), str(LOGS / "graph_sendrecv_G10_env_proto.txt"),
                str(LOGS / "nccl_tests_all_reduce_8xH200.json"), "--topology", "hgx-h100-8", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0
    table = pd.read_csv(out)
    assert list(table.columns) == list(MEASUREMENT_COLUMNS)
    assert len(table) == 18
    assert set(table["collective"]) == {"allreduce", "sendrecv"}
    assert (table["topology"] == "hgx-h100-8").all()
    assert table["wrong"].sum() == 3
    assert "wrote 18 rows from 3 file(s)" in err and "3 flagged wrong" in err
    warnings = [line for line in err.splitlines() if line.startswith("collsim: warning:")]
    assert any("new_all_reduce_wrong_rows.txt:20:" in w for w in warnings)
    assert not list(tmp_path.glob(".*.tmp"))


def test_ingest_truncated_run_is_written_but_marked(tmp_path, capsys):
    out = tmp_path / "m.csv"
    assert run(["ingest", str(LOGS / "truncated_crash_mid_row.txt"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    table = pd.read_csv(out)
    assert len(table) == 6 and table["truncated"].all()
    assert "truncated" in err and "6 from truncated runs" in err


def test_ingest_to_stdout(capsys):
    assert run(["ingest", str(LOGS / "indented_tabs_crlf.txt"), "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("source,source_line,")
    assert len(out.splitlines()) == 5


@pytest.mark.parametrize("name", ["not_nccl_tests.txt", "binary_garbage.bin", "empty.txt",
                                  "bad_units_header_us_data_ms.txt"])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, name):
    out = tmp_path / "m.csv"
    code = run(["ingest", str(LOGS / "indented_tabs_crlf.txt"), str(LOGS / name), "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("collsim: error: ") and name in lines[0]
    assert "Traceback" not in captured.err
    assert not out.exists()  # one bad file: nothing is written, not even the good one's rows


def test_failed_run_without_rows_exits_2(tmp_path, capsys):
    bad = tmp_path / "failed.txt"
    text = (LOGS / "truncated_crash_mid_row.txt").read_text().splitlines()
    bad.write_text("\n".join(line for line in text if not line.strip()[:1].isdigit()) + "\n")
    out = tmp_path / "m.csv"
    assert run(["ingest", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no result rows" in err and "Test NCCL failure" in err and not out.exists()


def test_missing_file_and_bad_collective(tmp_path, capsys):
    assert run(["ingest", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "m.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert run(["ingest", str(LOGS / "indented_tabs_crlf.txt"), "--collective", "allsum",
                "-o", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert "unknown collective" in err and len(err.strip().splitlines()) == 1
