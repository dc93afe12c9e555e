"""The harness' host-side logic (harness_host.h), compiled with plain g++ and run: no GPU, no nvcc."""
from __future__ import annotations

import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from collsim.calibrate.formats.tables import csv_kind, parse_collsim_csv
from collsim.calibrate.measurements import MEASUREMENT_COLUMNS, normalize

CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) on PATH")

TEST_PROGRAM = r"""
#include "harness_host.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace collsim_host;

static int failures = 0;
#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "CHECK failed at line %d: %s\n", __LINE__, #cond); \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

static bool parse(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "collsim_bench");
  return parse_options((int)args.size(), args.data(), o, err);
}

int main(int argc, char** argv) {
  std::vector<long long> v;
  std::string err;
  // sizes
  CHECK(parse_sizes("8:64M:x2", &v, &err));
  CHECK(v.size() == 24 && v.front() == 8 && v.back() == 64LL << 20);
  CHECK(parse_sizes("1K:4K:+1K", &v, &err) && v == std::vector<long long>({1024, 2048, 3072, 4096}));
  CHECK(parse_sizes("64,4K,1M", &v, &err) && v == std::vector<long long>({64, 4096, 1 << 20}));
  CHECK(parse_sizes("8:64", &v, &err) && v == std::vector<long long>({8, 16, 32, 64}));
  CHECK(!parse_sizes("64:8", &v, &err));
  CHECK(!parse_sizes("8:64:x1", &v, &err));
  CHECK(!parse_sizes("8:64:y2", &v, &err));
  CHECK(!parse_sizes("lots", &v, &err));
  CHECK(!parse_sizes("1.5", &v, &err));
  long long s = 0;
  CHECK(parse_size("2G", &s) && s == 2LL << 30);

  // options
  Options o;
  CHECK(parse({"--ranks", "8", "--sizes=8:1K", "--dtype", "bf16", "--eager", "--ctas", "2", "--threads", "256",
               "--csv", "out.csv", "--timeout-ms", "500", "--mode", "single", "--check-iters", "2", "--iters",
               "7", "--warmup", "0"}, &o, &err));
  CHECK(o.ranks == 8 && o.dtype == kBf16 && !o.graph && o.ctas == 2 && o.threads == 256 && o.csv == "out.csv");
  CHECK(o.timeout_ms == 500 && o.mode == "single" && o.check_iters == 2 && o.iters == 7 && o.warmup == 0);
  CHECK(o.sizes.size() == 8 && o.sizes.back() == 1024);
  Options d;
  CHECK(parse({}, &d, &err) && d.graph && d.ranks == 2 && d.dtype == kFp32 && d.sizes.size() == 24);
  Options bad;
  CHECK(!parse({"--threads", "100"}, &bad, &err) && err.find("multiple of 32") != std::string::npos);
  CHECK(!parse({"--ranks", "1"}, &bad, &err));
  CHECK(!parse({"--ranks", "17"}, &bad, &err));
  CHECK(!parse({"--dtype", "fp64"}, &bad, &err));
  CHECK(!parse({"--frobnicate"}, &bad, &err) && err.find("frobnicate") != std::string::npos);
  CHECK(!parse({"--dtype", "int32", "--sizes", "6"}, &bad, &err) && err.find("multiple") != std::string::npos);
  CHECK(!parse({"--iters"}, &bad, &err) && err.find("needs a value") != std::string::npos);
  CHECK(!parse({"--mode", "both"}, &bad, &err));
  Options help;
  CHECK(parse({"--help"}, &help, &err) && help.help);

  // inputs: every element changes with every round (a stale read changes the sum)
  for (int r = 0; r < 8; ++r)
    for (unsigned long long salt = 1; salt < 70; ++salt)
      for (unsigned long long i = 0; i < 257; ++i) {
        const int now = input_code(r, salt, i);
        CHECK(now >= -30 && now <= 30);
        for (unsigned long long back = 1; back <= 3 && back < salt; ++back) CHECK(now != input_code(r, salt - back, i));
      }
  // the reference is the sum of the inputs, exact in every dtype for 8 ranks
  for (int d = 0; d < 3; ++d) {
    float fbuf[8];
    unsigned short hbuf[8];
    int ibuf[8];
    void* bufs[3] = {fbuf, hbuf, ibuf};
    for (unsigned long long i = 0; i < 64; ++i) {
      double sum = 0;
      for (int r = 0; r < 8; ++r) {
        write_input(d, bufs[d], r, r, 5);
        sum += load_element(d, bufs[d], r);
        CHECK(load_element(d, bufs[d], r) == input_code(r, 5, (unsigned long long)r) * dtype_unit(d));
      }
      (void)i;
      (void)sum;
    }
    const double expected = (double)reference_code(8, 9, 1234) * dtype_unit(d);
    CHECK(element_ok(d, expected, expected));
    CHECK(!element_ok(d, expected + (d == kInt32 ? 1.0 : 0.5), expected));
  }
  // bf16: exact for k/8, |k| <= 240; rounding to nearest even
  for (int k = -240; k <= 240; ++k) CHECK(bf16_to_float(float_to_bf16(k / 8.0f)) == k / 8.0f);
  CHECK(float_to_bf16(1.0f + 1.0f / 256) == float_to_bf16(1.0f));
  CHECK(!element_ok(kFp32, 0.0 / 1.0 * 0.0 + __builtin_nan(""), 1.0));
  CHECK(busbw_factor(8) == 1.75);
  CHECK(algbw_gbps(1000000, 1000.0) == 1.0);
  CHECK(cuda_version_text(12080) == "12.8" && cuda_version_text(13000) == "13.0");
  CHECK(csv_escape("a,b") == "\"a,b\"" && csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"" && csv_escape("x") == "x");
  CHECK(round_up(17, 8) == 24 && round_up(16, 8) == 16);

  // reference values for the Python cross-check
  std::printf("REF %d %d %d %lld\n", input_code(0, 1, 0), input_code(3, 7, 123), input_code(15, 1000, 33554431),
              reference_code(8, 42, 999));

  // a CSV with one row
  if (argc > 1) {
    ResultRow row;
    row.gpu = "NVIDIA H200";
    row.gpu_mode = "single-gpu";
    row.system = "8 ranks as block groups on one NVIDIA H200 (device 0): on-chip cost, not the interconnect";
    row.protocol = "ll";
    row.algorithm = "one-shot";
    row.launch = "graph";
    row.verification = "holds (bound: 2 ranks, 2 iterations)";
    row.date = utc_now();
    row.driver = "13.0";
    row.runtime = "13.0";
    row.notes = "single-gpu: ranks share one GPU; on-chip cost. cooperative launches";
    row.ranks = 8;
    row.ctas = 1;
    row.threads = 512;
    row.iters = 20;
    row.warmup = 5;
    row.check_iters = 4;
    row.dtype = kFp32;
    row.size_bytes = 65536;
    row.time_us = 12.5;
    FILE* f = std::fopen(argv[1], "w");
    std::fputs(csv_header().c_str(), f);
    std::fputs(csv_line(row).c_str(), f);
    std::fclose(f);
    std::printf("%s%s", table_header().c_str(), table_line(row).c_str());
  }
  if (failures) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
"""


def _input_code(rank: int, salt: int, i: int) -> int:
    """The documented input function, reimplemented: harness_host.h must agree."""
    h = (rank * 40503 + salt * 104729 + i * 31) % (1 << 64)
    return h % 61 - 30


@pytest.fixture(scope="module")
def host_program(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("harness_host")
    header = resources.files("collsim.emit").joinpath("templates", "harness_host.h").read_text()
    (work / "harness_host.h").write_text(header)
    (work / "test_host.cpp").write_text(TEST_PROGRAM)
    exe = work / "test_host"
    proc = subprocess.run([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "test_host.cpp", "-o", exe.name],
                          cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return exe


def test_host_logic_checks_pass(host_program, tmp_path):
    csv_path = tmp_path / "row.csv"
    proc = subprocess.run([str(host_program), str(csv_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("OK")
    ref = next(line for line in proc.stdout.splitlines() if line.startswith("REF")).split()[1:]
    assert [int(x) for x in ref] == [
        _input_code(0, 1, 0),
        _input_code(3, 7, 123),
        _input_code(15, 1000, 33554431),
        sum(_input_code(r, 42, 999) for r in range(8)),
    ]
    assert "65536" in proc.stdout and "float" in proc.stdout  # the table line


def test_csv_is_a_collsim_measurement_csv(host_program, tmp_path):
    csv_path = tmp_path / "row.csv"
    subprocess.run([str(host_program), str(csv_path)], check=True, capture_output=True, timeout=120)
    text = csv_path.read_text()
    assert csv_kind(text) == "collsim"
    rows, meta, warnings = parse_collsim_csv(text, str(csv_path))
    # the row is a single-gpu one: the one warning says it is left out of calibrate, validate and compare
    assert meta["rows"] == 1 and len(warnings) == 1 and "every rank on one GPU" in warnings[0]
    table = normalize(__import__("pandas").DataFrame(rows))
    row = table.iloc[0]
    assert list(table.columns[: len(MEASUREMENT_COLUMNS)]) == list(MEASUREMENT_COLUMNS)
    assert row["collective"] == "allreduce" and row["protocol"] == "ll" and row["algorithm"] == "one-shot"
    assert row["gpu"] == "NVIDIA H200" and row["gpu_mode"] == "single-gpu" and row["launch"] == "graph"
    assert row["topology"] == ""  # a collsim topology name, which only the user knows (compare --topology)
    assert row["ranks"] == 8 and row["size_bytes"] == 65536 and row["count"] == 16384
    assert row["time_us"] == pytest.approx(12.5)
    assert row["algbw_gbps"] == pytest.approx(65536 / 12.5 / 1e3, rel=1e-3)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 1.75, rel=1e-3)
    assert row["dtype"] == "float32" and row["source"] == "collsim-emit" and not row["wrong"]
    for extra in ("driver_version", "cuda_runtime_version", "date", "verification", "ctas"):
        assert extra in table.columns
