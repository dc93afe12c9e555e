// harness_host.h: the host-side logic of the collsim-emit benchmark harness:
// options, message sizes, input values and the reference sum, tolerances,
// the result table and the measurement CSV. Plain C++17: it compiles with
// g++ alone (the tests do that); under nvcc the value functions are also
// __device__, so inputs are generated and outputs checked on the GPU with
// exactly the same code the host uses.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define COLLSIM_HD __host__ __device__
#else
#define COLLSIM_HD
#endif

namespace collsim_host {

// ---------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------
enum DType { kFp32 = 0, kBf16 = 1, kInt32 = 2 };

inline const char* dtype_option(int d) { return d == kFp32 ? "fp32" : d == kBf16 ? "bf16" : "int32"; }
// Name in collsim's measurement schema.
inline const char* dtype_schema(int d) { return d == kFp32 ? "float32" : d == kBf16 ? "bfloat16" : "int32"; }
// Name in the nccl-tests style table.
inline const char* dtype_label(int d) { return d == kFp32 ? "float" : d == kBf16 ? "bfloat16" : "int32"; }
COLLSIM_HD inline int dtype_size(int d) { return d == kBf16 ? 2 : 4; }

inline bool parse_dtype(const std::string& text, int* out) {
  if (text == "fp32" || text == "float" || text == "float32") { *out = kFp32; return true; }
  if (text == "bf16" || text == "bfloat16") { *out = kBf16; return true; }
  if (text == "int32" || text == "int") { *out = kInt32; return true; }
  return false;
}

COLLSIM_HD inline unsigned int float_bits(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
COLLSIM_HD inline float bits_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// float -> bfloat16 bits, round to nearest even (inputs here are finite).
COLLSIM_HD inline unsigned short float_to_bf16(float f) {
  const unsigned int u = float_bits(f);
  const unsigned int rounding = 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)((u + rounding) >> 16);
}
COLLSIM_HD inline float bf16_to_float(unsigned short b) { return bits_float((unsigned int)b << 16); }

// ---------------------------------------------------------------------------
// Inputs and the reference
// ---------------------------------------------------------------------------
// Element i of rank r's input in check round `salt` is code * unit, with an
// integer code in [-30, 30] and unit 1/8 for floats, 1 for int32. Every
// value and every partial sum of up to 8 ranks is exact in fp32 and bf16,
// so the result does not depend on summation order. Each code changes with
// every round (104729 mod 61 = 53, and 61 is prime), so reading a previous
// round's data (up to 60 rounds back) changes the sum. No 32-bit word of an
// input or partial sum is a NaN, so sentinel patterns (NaN payloads) never
// occur in the data.
COLLSIM_HD inline int input_code(int rank, unsigned long long salt, unsigned long long i) {
  const unsigned long long h = (unsigned long long)rank * 40503ull + salt * 104729ull + i * 31ull;
  return (int)(h % 61ull) - 30;
}

COLLSIM_HD inline double dtype_unit(int d) { return d == kInt32 ? 1.0 : 0.125; }

COLLSIM_HD inline long long reference_code(int nranks, unsigned long long salt, unsigned long long i) {
  long long sum = 0;
  for (int r = 0; r < nranks; ++r) sum += input_code(r, salt, i);
  return sum;
}

COLLSIM_HD inline void store_element(int d, void* base, long long i, double value) {
  if (d == kFp32) {
    static_cast<float*>(base)[i] = (float)value;
  } else if (d == kBf16) {
    static_cast<unsigned short*>(base)[i] = float_to_bf16((float)value);
  } else {
    static_cast<int*>(base)[i] = (int)value;
  }
}

COLLSIM_HD inline double load_element(int d, const void* base, long long i) {
  if (d == kFp32) return (double)static_cast<const float*>(base)[i];
  if (d == kBf16) return (double)bf16_to_float(static_cast<const unsigned short*>(base)[i]);
  return (double)static_cast<const int*>(base)[i];
}

COLLSIM_HD inline void write_input(int d, void* base, long long i, int rank, unsigned long long salt) {
  store_element(d, base, i, input_code(rank, salt, (unsigned long long)i) * dtype_unit(d));
}

// Tolerances: int32 exact; fp32 1e-5 relative; bf16 2^-7 relative (one bf16
// ulp), each relative to max(1, |expected|). With the inputs above every
// exact sum is representable, so a correct run matches exactly anyway.
COLLSIM_HD inline double tolerance(int d, double expected) {
  const double mag = expected < 0 ? -expected : expected;
  const double scale = mag > 1.0 ? mag : 1.0;
  if (d == kInt32) return 0.0;
  if (d == kFp32) return 1e-5 * scale;
  return scale / 128.0;
}

COLLSIM_HD inline bool element_ok(int d, double got, double expected) {
  const double diff = got > expected ? got - expected : expected - got;
  return diff <= tolerance(d, expected);  // false for NaN
}

inline const char* tolerance_text(int d) {
  return d == kInt32 ? "exact" : d == kFp32 ? "|err| <= 1e-5 * max(1, |ref|)" : "|err| <= max(1, |ref|) / 128";
}

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------
// "64", "4K", "16M", "1G" (binary multiples).
inline bool parse_size(const std::string& text, long long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || value < 0) return false;
  std::string suffix(end);
  double mult = 1;
  if (suffix == "" || suffix == "B" || suffix == "b") mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") mult = 1024.0;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") mult = 1024.0 * 1024.0;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") mult = 1024.0 * 1024.0 * 1024.0;
  else return false;
  const double bytes = value * mult;
  if (bytes != std::floor(bytes) || bytes > 9.0e15) return false;
  *out = (long long)bytes;
  return true;
}

// "8:64M:x2" (geometric), "1K:8K:+1K" (arithmetic), "8:64M" (x2), "64" or
// comma-separated lists of those.
inline bool parse_sizes(const std::string& spec, std::vector<long long>* out, std::string* err) {
  out->clear();
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    std::vector<std::string> parts;
    size_t p = 0;
    while (true) {
      size_t colon = item.find(':', p);
      parts.push_back(item.substr(p, colon == std::string::npos ? std::string::npos : colon - p));
      if (colon == std::string::npos) break;
      p = colon + 1;
    }
    long long lo = 0, hi = 0;
    if (parts.size() > 3 || !parse_size(parts[0], &lo)) {
      *err = "bad size range '" + item + "' (expected START[:END[:xF|+STEP]], e.g. 8:64M:x2)";
      return false;
    }
    if (parts.size() == 1) {
      out->push_back(lo);
      continue;
    }
    if (!parse_size(parts[1], &hi) || hi < lo) {
      *err = "bad end of size range '" + item + "'";
      return false;
    }
    std::string step = parts.size() == 3 ? parts[2] : "x2";
    if (step.size() < 2 || (step[0] != 'x' && step[0] != '*' && step[0] != '+')) {
      *err = "bad step '" + step + "' (use xF for a factor or +N for an increment)";
      return false;
    }
    long long inc = 0;
    double factor = 0;
    if (step[0] == '+') {
      if (!parse_size(step.substr(1), &inc) || inc <= 0) {
        *err = "bad increment '" + step + "'";
        return false;
      }
    } else {
      factor = std::strtod(step.c_str() + 1, nullptr);
      if (!(factor > 1.0)) {
        *err = "bad factor '" + step + "' (must be > 1)";
        return false;
      }
      if (lo == 0) {
        *err = "a geometric range cannot start at 0";
        return false;
      }
    }
    for (long long s = lo; s <= hi;) {
      out->push_back(s);
      long long next = inc ? s + inc : (long long)std::llround((double)s * factor);
      if (next <= s) next = s + 1;
      s = next;
    }
  }
  if (out->empty()) {
    *err = "no sizes in '" + spec + "'";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------
struct Options {
  int ranks = 2;
  std::string sizes_spec = "8:64M:x2";
  std::vector<long long> sizes;
  int dtype = kFp32;
  int iters = 20;
  int warmup = 5;
  bool graph = true;
  int ctas = 1;
  int threads = 512;
  long long timeout_ms = 10000;
  std::string csv;
  std::string mode = "auto";  // auto | single | multi
  int check_iters = 4;
  bool check_all = false;
  int device = 0;
  bool help = false;
};

inline std::string usage(const char* prog) {
  std::string p = prog ? prog : "collsim_bench";
  return "usage: " + p +
         " [options]\n"
         "  --ranks N          ranks (default 2; at most 16)\n"
         "  --sizes SPEC       message sizes in bytes per rank: 8:64M:x2 (default), 1K:8K:+1K, 64,4K\n"
         "  --dtype T          fp32 (default), bf16, int32\n"
         "  --iters N          timed launches per size (default 20)\n"
         "  --warmup N         untimed launches before timing (default 5)\n"
         "  --graph | --eager  time a CUDA graph of the launches (default) or plain launches\n"
         "  --ctas N           blocks (channels) per rank (default 1)\n"
         "  --threads N        threads per block, a multiple of 32 (default 512)\n"
         "  --timeout-ms N     a poll waiting longer than this aborts the run (default 10000)\n"
         "  --csv FILE         write the results as a collsim measurement CSV\n"
         "  --mode M           auto (default), single (all ranks on one GPU), multi (one GPU per rank)\n"
         "  --device N         the GPU of single-GPU mode (default 0)\n"
         "  --check-iters N    checked launches before and after timing (default 4)\n"
         "  --check-all        also check every timed launch (eager, timed one by one)\n"
         "  --help\n"
         "exit status: 0 ok, 2 bad options, 3 wrong result, 4 timeout, 5 CUDA error, 6 refused configuration\n";
}

inline bool parse_int(const std::string& text, long long lo, long long hi, long long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

inline bool parse_options(int argc, const char* const* argv, Options* o, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto need = [&](const char* name) -> bool {
      if (has_value) return true;
      if (i + 1 >= argc) {
        *err = std::string(name) + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    long long v = 0;
    if (arg == "--help" || arg == "-h") {
      o->help = true;
    } else if (arg == "--graph") {
      o->graph = true;
    } else if (arg == "--eager") {
      o->graph = false;
    } else if (arg == "--check-all") {
      o->check_all = true;
    } else if (arg == "--ranks") {
      if (!need("--ranks")) return false;
      if (!parse_int(value, 2, 16, &v)) { *err = "--ranks must be an integer from 2 to 16"; return false; }
      o->ranks = (int)v;
    } else if (arg == "--sizes") {
      if (!need("--sizes")) return false;
      o->sizes_spec = value;
    } else if (arg == "--dtype") {
      if (!need("--dtype")) return false;
      if (!parse_dtype(value, &o->dtype)) { *err = "--dtype must be fp32, bf16 or int32"; return false; }
    } else if (arg == "--iters") {
      if (!need("--iters")) return false;
      if (!parse_int(value, 1, 1000000000, &v)) { *err = "--iters must be a positive integer"; return false; }
      o->iters = (int)v;
    } else if (arg == "--warmup") {
      if (!need("--warmup")) return false;
      if (!parse_int(value, 0, 1000000000, &v)) { *err = "--warmup must be a non-negative integer"; return false; }
      o->warmup = (int)v;
    } else if (arg == "--ctas") {
      if (!need("--ctas")) return false;
      if (!parse_int(value, 1, 1024, &v)) { *err = "--ctas must be an integer from 1 to 1024"; return false; }
      o->ctas = (int)v;
    } else if (arg == "--threads") {
      if (!need("--threads")) return false;
      if (!parse_int(value, 32, 1024, &v) || v % 32) {
        *err = "--threads must be a multiple of 32 from 32 to 1024";
        return false;
      }
      o->threads = (int)v;
    } else if (arg == "--timeout-ms") {
      if (!need("--timeout-ms")) return false;
      if (!parse_int(value, 1, 86400000, &v)) { *err = "--timeout-ms must be a positive integer"; return false; }
      o->timeout_ms = v;
    } else if (arg == "--csv") {
      if (!need("--csv")) return false;
      o->csv = value;
    } else if (arg == "--mode") {
      if (!need("--mode")) return false;
      if (value != "auto" && value != "single" && value != "multi") {
        *err = "--mode must be auto, single or multi";
        return false;
      }
      o->mode = value;
    } else if (arg == "--device") {
      if (!need("--device")) return false;
      if (!parse_int(value, 0, 1023, &v)) { *err = "--device must be a non-negative integer"; return false; }
      o->device = (int)v;
    } else if (arg == "--check-iters") {
      if (!need("--check-iters")) return false;
      if (!parse_int(value, 0, 1000000, &v)) { *err = "--check-iters must be a non-negative integer"; return false; }
      o->check_iters = (int)v;
    } else {
      *err = "unknown option '" + arg + "'";
      return false;
    }
  }
  if (!parse_sizes(o->sizes_spec, &o->sizes, err)) return false;
  for (long long s : o->sizes) {
    if (s <= 0 || s % dtype_size(o->dtype)) {
      *err = "size " + std::to_string(s) + " is not a positive multiple of the " + dtype_option(o->dtype) +
             " element size (" + std::to_string(dtype_size(o->dtype)) + " B)";
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Results: table and CSV
// ---------------------------------------------------------------------------
inline double busbw_factor(int nranks) { return 2.0 * (nranks - 1) / nranks; }  // allreduce
inline double algbw_gbps(long long bytes, double time_us) { return time_us > 0 ? (double)bytes / time_us / 1e3 : 0.0; }

struct ResultRow {
  // gpu_mode: "single-gpu" or "multi-gpu". The schema's `topology` column names a collsim topology
  // (what `collsim compare` joins on), which a benchmark cannot know: it is left empty, so
  // `collsim compare --topology NAME` or `collsim ingest --topology NAME` can supply it.
  std::string gpu, gpu_mode, topology, system, protocol, algorithm, launch, verification, date, driver, runtime, notes;
  int ranks = 0, ctas = 0, threads = 0, iters = 0, warmup = 0, check_iters = 0, dtype = kFp32;
  long long size_bytes = 0, nwrong = 0;
  double time_us = 0;
  bool unverified = false;
};

// The columns of collsim's measurement schema (collsim.calibrate.measurements)
// that this harness knows, then its own extra columns.
inline std::vector<std::string> csv_columns() {
  return {"source", "source_format", "topology", "system", "gpu", "ranks", "nodes", "collective", "algorithm",
          "protocol", "library", "library_version", "dtype", "redop", "size_bytes", "count", "launch",
          "graph_launches", "validation", "time_us", "algbw_gbps", "busbw_gbps", "nwrong", "wrong",
          "truncated", "notes", "gpu_mode", "ctas", "threads", "iters", "warmup", "check_iters", "verification",
          "unverified", "date", "driver_version", "cuda_runtime_version"};
}

inline std::string csv_escape(const std::string& text) {
  bool quote = text.find_first_of(",\"\n\r") != std::string::npos;
  if (!quote) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += "\"\"";
    else out += c;
  }
  return out + "\"";
}

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

inline std::string csv_header() {
  std::string line;
  for (const std::string& c : csv_columns()) line += (line.empty() ? "" : ",") + c;
  return line + "\n";
}

inline std::string csv_line(const ResultRow& r) {
  const double alg = algbw_gbps(r.size_bytes, r.time_us);
  const std::vector<std::string> values = {
      "collsim-emit",
      "collsim-csv",
      r.topology,
      r.system,
      r.gpu,
      std::to_string(r.ranks),
      "1",
      "allreduce",
      r.algorithm,
      r.protocol,
      "collsim-emit",
      "1",
      dtype_schema(r.dtype),
      "sum",
      std::to_string(r.size_bytes),
      std::to_string(r.size_bytes / dtype_size(r.dtype)),
      r.launch,
      r.launch == "graph" ? std::to_string(r.iters) : "0",
      "true",
      fmt("%.3f", r.time_us),
      fmt("%.4f", alg),
      fmt("%.4f", alg * busbw_factor(r.ranks)),
      std::to_string(r.nwrong),
      r.nwrong ? "true" : "false",
      "false",
      r.notes,
      r.gpu_mode,
      std::to_string(r.ctas),
      std::to_string(r.threads),
      std::to_string(r.iters),
      std::to_string(r.warmup),
      std::to_string(r.check_iters),
      r.verification,
      r.unverified ? "true" : "false",
      r.date,
      r.driver,
      r.runtime,
  };
  std::string line;
  for (size_t i = 0; i < values.size(); ++i) line += (i ? "," : "") + csv_escape(values[i]);
  return line + "\n";
}

inline std::string table_header() {
  return "#\n"
         "#       size         count      type    time   algbw   busbw  #wrong\n"
         "#        (B)    (elements)              (us)  (GB/s)  (GB/s)\n";
}

inline std::string table_line(const ResultRow& r) {
  const double alg = algbw_gbps(r.size_bytes, r.time_us);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%12lld  %12lld  %8s  %7.2f  %6.2f  %6.2f  %6lld\n", r.size_bytes,
                r.size_bytes / dtype_size(r.dtype), dtype_label(r.dtype), r.time_us, alg,
                alg * busbw_factor(r.ranks), r.nwrong);
  return buf;
}

inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm_utc{};
#if defined(_WIN32)
  gmtime_s(&tm_utc, &t);
#else
  gmtime_r(&t, &tm_utc);
#endif
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  return buf;
}

// CUDA versions are encoded as 1000 * major + 10 * minor.
inline std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

inline long long round_up(long long x, long long m) { return m <= 0 ? x : (x + m - 1) / m * m; }

}  // namespace collsim_host
