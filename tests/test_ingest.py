"""collsim.calibrate.ingest on small logs that cover each variant (tests/data/logs/)."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from collsim.calibrate.ingest import (
    IngestWarning,
    ParsedLog,
    ingest_files,
    parse_log,
    read_measurements,
    write_measurements,
)
from collsim.calibrate.measurements import (
    COLUMN_DOCS,
    MEASUREMENT_COLUMNS,
    canonical_collective,
    canonical_dtype,
    canonical_protocol,
    normalize,
    usable,
)
from collsim.errors import InputError

LOGS = Path(__file__).parent / "data" / "logs"


def log(name: str) -> ParsedLog:
    return parse_log(LOGS / name)


# ---------------------------------------------------------------- schema


def test_schema_is_documented_and_has_the_required_columns():
    assert len(set(MEASUREMENT_COLUMNS)) == len(MEASUREMENT_COLUMNS)
    assert set(COLUMN_DOCS) == set(MEASUREMENT_COLUMNS)
    for required in ("topology", "gpu", "ranks", "collective", "algorithm", "protocol", "size_bytes",
                     "time_us", "algbw_gbps", "busbw_gbps", "launch", "source", "source_line", "wrong",
                     "truncated", "time_us_inplace", "nwrong", "nwrong_inplace", "dtype", "redop", "root",
                     "count"):
        assert required in MEASUREMENT_COLUMNS


def test_every_parse_returns_the_schema_in_order():
    for name in ("new_all_reduce_wrong_rows.txt", "nccl_tests_all_reduce_8xH200.json",
                 "collsim_emitter_measurements.csv", "published_allreduce_layout_sample.csv"):
        rows = log(name).rows
        assert tuple(rows.columns[: len(MEASUREMENT_COLUMNS)]) == MEASUREMENT_COLUMNS
        assert str(rows["size_bytes"].dtype) == "Int64"
        assert rows["wrong"].dtype == bool and rows["truncated"].dtype == bool


def test_canonical_names():
    assert canonical_collective("all_reduce_perf_mpi") == "allreduce"
    assert canonical_collective("ReduceScatter") == "reducescatter"
    assert canonical_collective("alltoall") == "alltoall"
    assert canonical_collective("nonsense") == ""
    assert canonical_dtype("float") == "float32" and canonical_dtype("half") == "float16"
    assert canonical_dtype("char") == "int8" and canonical_dtype("bfloat16") == "bfloat16"
    assert canonical_protocol('"Simple"') == "simple" and canonical_protocol("^LL128") == "^ll128"


# ---------------------------------------------------------------- text eras


def test_nccl1_in_tree_test_times_in_ms_and_res_tolerance():
    parsed = log("nccl1_all_reduce_test_K80x4.txt")
    rows, meta = parsed.rows, parsed.meta
    assert meta["era"] == "nccl1" and meta["time_unit"] == "ms"
    assert len(rows) == 12
    assert rows["time_us"].iloc[0] == pytest.approx(1020.0)  # 1.020 ms
    assert list(rows["dtype"].unique()) == ["int32", "float16", "float32"]
    assert list(rows["redop"].iloc[:4]) == ["sum", "prod", "max", "min"]
    assert meta["ranks"] == 4 and meta["gpu"] == "Tesla K80" and meta["nodes"] == 1
    assert meta["avg_busbw"] is None and not meta["truncated"]  # 1.x prints no footer
    # half: 4e-03 is within NCCL 1.x's 5e-2; float prod in-place 2e-04 is above 1e-5
    half_sum = rows[(rows["dtype"] == "float16") & (rows["redop"] == "sum")].iloc[0]
    assert half_sum["max_error"] == pytest.approx(4e-3) and not half_sum["wrong"]
    wrong = rows[rows["wrong"]]
    assert list(zip(wrong["dtype"], wrong["redop"])) == [("float32", "prod")]
    assert any("flagged wrong" in w and ":18:" in w for w in parsed.warnings)


def test_nccl_tests_v1_2017_ms_banner_and_footer_without_hash():
    parsed = log("v1_2017_all_reduce_perf_ms.txt")
    rows, meta = parsed.rows, parsed.meta
    assert meta["era"] == "nccl-tests-v1" and meta["time_unit"] == "ms"
    assert len(rows) == 9 and rows["size_bytes"].iloc[-1] == 524288
    assert rows["time_us"].iloc[-1] == pytest.approx(78.0)
    assert meta["avg_busbw"] == pytest.approx(1.02834)
    assert meta["nccl_version"] == "2.0" and meta["ranks"] == 2 and meta["collective"] == "allreduce"
    assert not meta["truncated"] and parsed.warnings == []


def test_old_format_broadcast_with_root_and_error_column():
    parsed = log("v2old_broadcast_root_error.txt")
    rows, meta = parsed.rows, parsed.meta
    assert meta["era"] == "nccl-tests-2.0-2.12"
    assert meta["collective"] == "broadcast" and meta["nccl_version"] == "2.4.8+cuda10.1"
    assert (rows["root"] == 0).all() and (rows["redop"] == "").all()
    assert rows["nwrong"].isna().all() and rows["max_error"].notna().all()
    # error 3e+02 on a float broadcast is far above 1e-5 × (4-1): flagged, never silently used
    assert rows.loc[rows["wrong"], "size_bytes"].tolist() == [32768]
    assert meta["out_of_bounds"] == 1
    assert any("32768" in w and "flagged wrong" in w for w in parsed.warnings)
    assert any("out-of-bounds" in w for w in parsed.warnings)
    assert 32768 not in usable(rows)["size_bytes"].tolist()
    assert len(usable(rows, include_wrong=True)) == len(rows)


def test_old_format_collective_inferred_from_table_shape():
    parsed = log("v2old_unnamed_table_8gpu.txt")
    # redop sum, size = count × 4 × 8 and busbw/algbw = 7/8: reduce_scatter
    assert parsed.meta["collective"] == "reducescatter"
    assert parsed.meta["collective_from"] == "table shape"
    assert not parsed.rows["wrong"].any()  # 5e-07 < 1e-5 × 7


def test_new_format_wrong_rows_are_flagged_and_warned():
    parsed = log("new_all_reduce_wrong_rows.txt")
    rows = parsed.rows
    flagged = rows[rows["wrong"]]
    assert flagged["size_bytes"].tolist() == [65536, 262144]
    assert flagged["nwrong"].tolist() == [12, 0] and flagged["nwrong_inplace"].tolist() == [0, 3]
    assert len([w for w in parsed.warnings if "flagged wrong" in w]) == 2
    assert any(":20:" in w and "#wrong=12" in w for w in parsed.warnings)
    assert len(usable(rows)) == 4


def test_graph_run_sendrecv_with_proto_algo_from_env():
    parsed = log("graph_sendrecv_G10_env_proto.txt")
    meta, rows = parsed.meta, parsed.rows
    assert meta["launch"] == "graph" and meta["graph"] == 10
    assert (rows["launch"] == "graph").all() and (rows["graph_launches"] == 10).all()
    assert meta["collective"] == "sendrecv"
    assert meta["protocol"] == "ll" and meta["algorithm"] == "ring"
    assert (rows["protocol"] == "ll").all() and (rows["algorithm"] == "ring").all()
    assert meta["validation"] is False and rows["nwrong"].isna().all() and not rows["wrong"].any()
    assert meta["nccl_version"] == "2.18.3+cuda12.2"


def test_truncated_run_keeps_rows_up_to_the_failure():
    parsed = log("truncated_crash_mid_row.txt")
    rows, meta = parsed.rows, parsed.meta
    assert meta["truncated"] and rows["truncated"].all()
    assert rows["size_bytes"].tolist() == [8, 16, 32, 64, 128, 256]
    last = rows.iloc[-1]  # crashed during its in-place half
    assert last["time_us"] == pytest.approx(9.01) and math.isnan(last["time_us_inplace"])
    assert "Test NCCL failure common.cu:392" in meta["failure"]
    assert any(w.startswith(f"{LOGS / 'truncated_crash_mid_row.txt'}:15:") and "truncated" in w
               for w in parsed.warnings)


def test_tag_output_multinode_with_info_lines_splitting_a_row():
    parsed = log("tag_output_2nodes_split_row.txt")
    rows, meta = parsed.rows, parsed.meta
    assert len(rows) == 7 and parsed.warnings == []
    assert meta["ranks"] == 4 and meta["nodes"] == 2 and meta["hostnames"] == ["node-a", "node-b"]
    assert meta["nccl_version"] == "2.21.5+cuda12.4" and meta["avg_busbw"] == pytest.approx(12.0834)
    split = rows[rows["size_bytes"] == 16384].iloc[0]
    assert split["time_us"] == pytest.approx(25.41) and split["time_us_inplace"] == pytest.approx(25.66)
    assert split["source_line"] == 23  # the line the row starts on


def test_indented_with_tabs_and_crlf():
    parsed = log("indented_tabs_crlf.txt")
    assert len(parsed.rows) == 4 and parsed.meta["avg_busbw"] == pytest.approx(13.6121)
    assert parsed.rows["time_us"].iloc[0] == pytest.approx(82.43)


def test_newest_format_cputime_per_iteration_and_timestamps():
    parsed = log("newest_cputime_per_iter_timestamp.txt")
    rows, meta = parsed.rows, parsed.meta
    assert meta["nccl_tests_version"] == "2.19.2" and meta["nccl_version"] == "2.28.3"
    assert meta["collective"] == "reducescatter" and meta["collective_from"] == "program"
    assert len(rows) == 3 and rows["time_us"].tolist() == pytest.approx([8.01, 8.13, 10.10])
    assert rows["busbw_gbps_inplace"].iloc[-1] == pytest.approx(77.12)
    assert meta["cputime"] and (rows["notes"] == "cputime").all()
    assert not meta["truncated"] and parsed.warnings == []


def test_rows_pasted_without_header():
    parsed = log("headerless_rows_in_prose.txt")
    assert len(parsed.rows) == 4 and parsed.meta["collective"] == "allreduce"
    assert any("without a column header" in w for w in parsed.warnings)


def test_separate_tables_of_two_processes():
    parsed = log("two_processes_separate_tables.txt")
    rows = parsed.rows
    assert len(rows) == 6 and sorted(rows["section"].unique().tolist()) == [0, 1]
    assert (rows["ranks"] == 1).all() and (rows["collective"] == "allreduce").all()
    assert sorted(rows["gpu"].unique()) == ["NVIDIA L40S"]
    assert len(parsed.meta["sections"]) == 2


# ---------------------------------------------------------------- JSON


def test_json_output():
    parsed = log("nccl_tests_all_reduce_8xH200.json")
    rows, meta = parsed.rows, parsed.meta
    assert meta["format"] == "nccl-tests-json" and meta["collective"] == "allreduce"
    assert meta["ranks"] == 8 and meta["nodes"] == 2 and meta["gpu"] == "NVIDIA H200"
    assert meta["nccl_version"] == "2.27.3" and meta["protocol"] == "simple" and meta["algorithm"] == "tree"
    assert meta["avg_busbw"] == pytest.approx(20.5) and meta["launch"] == "eager"
    assert len(rows) == 6 and rows["time_us"].iloc[0] == pytest.approx(10.00512)
    assert math.isnan(rows["busbw_gbps_inplace"].iloc[0])  # "nan" in the JSON
    assert rows.loc[rows["wrong"], "size_bytes"].tolist() == [65536]
    assert (rows["root"] == -1).all() and (rows["source_format"] == "nccl-tests-json").all()


def test_truncated_json_recovers_complete_results():
    parsed = log("nccl_tests_reduce_scatter_truncated.json")
    rows, meta = parsed.rows, parsed.meta
    assert meta["truncated"] and rows["truncated"].all()
    assert rows["size_bytes"].tolist() == [8192, 65536, 524288]
    assert meta["ranks"] == 4 and meta["launch"] == "graph" and meta["protocol"] == "ll128"
    assert rows["nwrong"].isna().all() and meta["validation"] is False
    assert any("ends early" in w for w in parsed.warnings)


# ---------------------------------------------------------------- CSVs


def test_collsim_csv_from_the_emitter():
    parsed = log("collsim_emitter_measurements.csv")
    rows = parsed.rows
    assert len(rows) == 3 and (rows["launch"] == ["graph", "graph", "eager"]).all()
    assert rows["protocol"].tolist() == ["ll", "ll", "simple"]
    assert "kernel" in rows.columns  # extra columns are kept, after the schema
    assert rows["source"].iloc[0] == "emit:oneshot_ll.cu"


def test_published_csv_layout():
    parsed = log("published_allreduce_layout_sample.csv")
    rows = parsed.rows
    assert len(rows) == 3  # the row without any time is skipped, with a warning
    assert any(":5:" in w and "skipped" in w for w in parsed.warnings)
    assert rows["time_derived"].tolist() == [False, True, False]
    assert rows["time_us"].iloc[1] == pytest.approx(18.35)
    assert rows["gpu"].tolist() == ["A100", "H100", "A100"]
    assert rows["launch"].tolist() == ["eager", "eager", "graph"]
    assert rows["dtype"].tolist() == ["float32", "bfloat16", ""]
    assert rows["origin"].iloc[0] == "X01 https://example.org/a"
    assert (rows["collective"] == "allreduce").all()  # from the file name
    assert math.isnan(rows["time_us"].iloc[2]) and rows["time_us_inplace"].iloc[2] == pytest.approx(16.5)


def test_write_then_read_round_trip(tmp_path):
    table, _, _ = ingest_files([LOGS / "new_all_reduce_wrong_rows.txt", LOGS / "nccl_tests_all_reduce_8xH200.json"],
                               topology="hgx-h100-8")
    out = write_measurements(table, tmp_path / "m.csv")
    assert not list(tmp_path.glob(".*.tmp"))
    with pytest.warns(IngestWarning, match="3 row\\(s\\) flagged wrong"):
        back = read_measurements(out)
    assert tuple(back.columns) == MEASUREMENT_COLUMNS
    assert len(back) == len(table) == 12
    assert (back["topology"] == "hgx-h100-8").all()
    pd.testing.assert_frame_equal(back, table, check_dtype=False)
    assert back["wrong"].sum() == 3 and back["source_format"].iloc[0] == "nccl-tests-text"


def test_write_is_atomic_and_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "m.csv"
    target.write_text("old\n")
    table = log("indented_tabs_crlf.txt").rows

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(OSError):
        write_measurements(table, target)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.csv"]


def test_read_measurements_issues_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = read_measurements(LOGS / "new_all_reduce_wrong_rows.txt")
    assert len(rows) == 6
    assert any(issubclass(w.category, IngestWarning) and "flagged wrong" in str(w.message) for w in caught)


def test_ingest_files_collective_override_fills_unknown(tmp_path):
    text = (LOGS / "two_processes_separate_tables.txt").read_text()
    plain = tmp_path / "run.txt"
    plain.write_text(text.replace("all_reduce_perf", "the_benchmark"))
    parsed = parse_log(plain)
    assert (parsed.rows["collective"] == "").all()
    assert any("--collective" in w for w in parsed.warnings)
    table, _, _ = ingest_files([plain], collective="all_reduce")
    assert (table["collective"] == "allreduce").all()
    with pytest.raises(InputError, match="unknown collective"):
        ingest_files([plain], collective="allsum")


def test_normalize_rejects_non_numeric():
    with pytest.raises(InputError, match="time_us"):
        normalize(pd.DataFrame({"time_us": ["fast"]}))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "name, message, line",
    [
        ("not_nccl_tests.txt", "not nccl-tests output", 1),
        ("binary_garbage.bin", "binary file", 1),
        ("empty.txt", "empty file", None),
        ("bad_units_header_us_data_ms.txt", "inconsistent units", 15),
        ("bad_units_mixed_header.txt", "inconsistent units", 9),
    ],
)
def test_bad_input_raises_input_error(name, message, line):
    with pytest.raises(InputError) as info:
        parse_log(LOGS / name)
    err = info.value
    assert message in str(err) and err.file == str(LOGS / name) and err.line == line
    assert "\n" not in str(err) and err.exit_code == 2


def test_more_bad_input(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\t\n")
    with pytest.raises(InputError, match="empty file"):
        parse_log(blank)
    with pytest.raises(InputError, match="no such file"):
        parse_log(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="directory"):
        parse_log(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 2, "config": {"ngpus": ')
    with pytest.raises(InputError, match="malformed JSON"):
        parse_log(broken)
    other = tmp_path / "other.json"
    other.write_text('{"hello": "world"}')
    with pytest.raises(InputError, match="not nccl-tests output"):
        parse_log(other)
    bad_csv = tmp_path / "m.csv"
    bad_csv.write_text("collective,size_bytes,time_us\nallreduce,1024,fast\n")
    with pytest.raises(InputError) as info:
        parse_log(bad_csv)
    assert info.value.line == 2 and info.value.field == "time_us"
    ms_csv = tmp_path / "ms.csv"
    ms_csv.write_text("collective,size_bytes,time_us,algbw_gbps\n"
                      "allreduce,1048576,0.05243,20.0\nallreduce,4194304,0.1398,30.0\n")
    with pytest.raises(InputError, match="inconsistent units"):
        parse_log(ms_csv)


def test_utf16_log_is_decoded(tmp_path):
    text = (LOGS / "indented_tabs_crlf.txt").read_text()
    p = tmp_path / "ps.txt"
    p.write_bytes(text.encode("utf-16"))
    assert len(parse_log(p).rows) == 4


def test_old_alltoall_prints_an_empty_redop():
    parsed = log("v2old_empty_redop_column.txt")
    rows = parsed.rows
    assert len(rows) == 4 and parsed.warnings == []
    assert (rows["redop"] == "").all() and rows["time_us"].iloc[0] == pytest.approx(12.02)
    # a redop column with blank cells only happens for alltoall before nccl-tests 2.13
    assert parsed.meta["collective"] == "alltoall" and parsed.meta["collective_from"] == "table shape"


def test_markdown_rendered_paste_without_hashes():
    parsed = log("markdown_rendered_no_hash.txt")
    meta = parsed.meta
    assert len(parsed.rows) == 6 and parsed.warnings == []
    assert meta["collective"] == "allgather" and meta["ranks"] == 4 and meta["gpu"] == "NVIDIA L4"
    assert meta["avg_busbw"] == pytest.approx(1.2345) and not meta["truncated"]


def test_srun_labels():
    parsed = log("srun_labelled_all_reduce.txt")
    meta = parsed.meta
    assert len(parsed.rows) == 3 and parsed.warnings == []
    assert meta["ranks"] == 2 and meta["nccl_version"] == "2.19.3+cuda12.3"
    assert meta["avg_busbw"] == pytest.approx(5.4321)


def test_compose_and_kubectl_prefixes(tmp_path):
    lines = (LOGS / "srun_labelled_all_reduce.txt").read_text().splitlines()
    body = [line[3:] for line in lines if line.startswith("0: ")]
    compose = tmp_path / "compose.txt"
    compose.write_text("\n".join(f"nccl-test-1  | {line}" for line in body) + "\n")
    pod = tmp_path / "pod.txt"
    pod.write_text("\n".join(f"[pod/nccl-0/worker] {line}" for line in body) + "\n")
    for path in (compose, pod):
        parsed = parse_log(path)
        assert len(parsed.rows) == 3 and parsed.meta["avg_busbw"] == pytest.approx(5.4321)


def test_wrong_reason_is_in_notes():
    rows = log("new_all_reduce_wrong_rows.txt").rows
    assert rows.loc[rows["wrong"], "notes"].tolist() == ["#wrong=12 (out-of-place)", "#wrong=3 (in-place)"]
