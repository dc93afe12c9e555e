"""The bad-input corpus: every kind of wrong input, on every command, is one line, the right status, nothing left.

Each case builds its input in a fresh directory (the working directory of the
command, so a default output would land there), runs the command in-process
and asserts: the exit status (2 for bad input), exactly one line on stderr,
``collsim: error: `` and the text that names what is wrong (file, line, flag
or field, and the limit or the valid choices), no traceback anywhere, and
no file written (the directory holds only what the case put there).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "logs"
SIMPLE_RA = ROOT / "examples" / "protocols" / "simple_ra.py"

SCENARIO = "topology: hgx-h100\nranks: [2]\nsizes: [8]\nprotocols: [ll]\nalgorithms: [one-shot]\nmodel: analytic\n"
RESULTS_CSV = ("topology,gpu,ranks,algorithm,protocol,launch,size_bytes,count,dtype,op,latency_us,algbw_gbps,busbw_gbps,"
               "launch_us,sync_us,data_us,reduce_us,model,events,note\n"
               "hgx-h100,H100,2,one-shot,ll,graph,8,2,float32,sum,6.600,0.0012,0.0012,0.000,6.600,0.000,0.000,"
               "analytic,0,\n")
RESULTS_JSON = '{"columns": ["topology"], "rows": [{"topology": "hgx-h100"}]}\n'


def _scenario(extra: str = "", base: str = SCENARIO) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        (d / "s.yaml").write_text(base + extra, encoding="utf-8")
        return d / "s.yaml"
    return make


def _file(name: str, content: bytes | str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path
    return make


def _dir(name: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        (d / name).mkdir()
        return d / name
    return make


def _broken_protocol(d: Path) -> Path:
    """A protocol file whose exchange() raises: every command names its file, line and algorithm."""
    source = SIMPLE_RA.read_text(encoding="utf-8").replace('name = "simple-ra"', 'name = "broken-ra"')
    source = source.replace("    def exchange(self, b, ex):\n        seq = ex.seq\n",
                            "    def exchange(self, b, ex):\n        seq = ex.seq\n"
                            "        raise ValueError(\"depth must divide the ring\")\n")
    (d / "broken.py").write_text(source, encoding="utf-8")
    return d / "broken.py"


def _broken_line() -> int:
    lines = SIMPLE_RA.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == "seq = ex.seq") + 1


def _syntax_error_protocol(d: Path) -> Path:
    (d / "bad.py").write_text("from collsim.ir import Protocol\nclass P(Protocol):\n    name = 'p'\n    def x(:\n",
                              encoding="utf-8")
    return d / "bad.py"


BINARY = bytes(range(256)) * 4
LATIN1 = "size,time_us\n\xe9\xe8\n".encode("latin-1")
HUGE = "1180591620717411303424"  # 2**70 bytes per rank
BROKEN_AT = f"broken.py:{_broken_line()}: one-shot: ValueError: depth must divide the ring"

# (id, inputs to build: {name: builder}, argv with {name} placeholders, exit status, text the one line must hold)
CASES: list[tuple[str, dict[str, Callable[[Path], Path]], list[str], int, str]] = [
    # --- run: where results go, checked before any row runs
    ("run-out-is-a-file", {"s": _scenario(), "f": _file("taken", "x")}, ["run", "{s}", "--out", "{f}"], 2,
     "taken: --out: exists and is a file, not a directory"),
    ("run-out-under-a-file", {"s": _scenario(), "f": _file("taken", "x")}, ["run", "{s}", "--out", "{f}/sub"], 2,
     "--out: {f} is a file, not a directory"),
    ("run-out-in-proc", {"s": _scenario()}, ["run", "{s}", "--out", "/proc/collsim-out"], 2,
     "/proc/collsim-out: --out: the file system at /proc does not allow creating files there"),
    ("run-out-name-too-long", {"s": _scenario()}, ["run", "{s}", "--out", "x" * 300], 2,
     "--out: the name 'xxxxxxxx"),
    ("run-name-too-long", {"s": _scenario("name: " + "a" * 300 + "\n")}, ["run", "{s}"], 2,
     "s.yaml:7: name: reports/aaaa"),
    ("run-output-key-is-a-file", {"s": _scenario("output: taken\n"), "f": _file("taken", "x")}, ["run", "{s}"], 2,
     "s.yaml:7: output: taken: exists and is a file, not a directory"),
    ("run-output-key-in-proc", {"s": _scenario("output: /proc/x\n")}, ["run", "{s}"], 2,
     "s.yaml:7: output: /proc/x: the file system at /proc does not allow"),
    # --- run: absurd values
    ("run-size-2-to-the-70", {"s": _scenario(base=SCENARIO.replace("[8]", HUGE))}, ["run", "{s}"], 2,
     "s.yaml:3: sizes: 1073741824TiB per rank does not fit in a GPU's memory: the largest GPU of 'hgx-h100' (H100) "
     "holds 80GiB"),
    ("run-size-above-gpu-memory", {"s": _scenario(base=SCENARIO.replace("[8]", "[8, 81GiB]"))}, ["run", "{s}"], 2,
     "s.yaml:3: sizes[1]: 81GiB per rank does not fit"),
    ("run-channels-above-maximum", {"s": _scenario("channels: 100\n")}, ["run", "{s}"], 2,
     "s.yaml:7: channels: 100 channels requested; at most 64"),
    ("run-tolerance-out-of-range", {"s": _scenario()}, ["run", "{s}", "--tolerance", "200"], 2,
     "--tolerance: tolerance must be between 0 and 100 percent"),
    ("run-workers-zero", {"s": _scenario()}, ["run", "{s}", "--executor", "processes", "--workers", "0"], 2,
     "--workers: workers must be a positive whole number"),
    ("run-unknown-executor", {"s": _scenario()}, ["run", "{s}", "--executor", "threads"], 2,
     "--executor: unknown executor 'threads' (valid: auto, local, processes, dask)"),
    # --- run: files that are not what they should be
    ("run-topology-file-missing", {"s": _scenario(base=SCENARIO.replace("hgx-h100", "mine.yaml"))}, ["run", "{s}"], 2,
     "s.yaml:1: topology: topology file 'mine.yaml' not found"),
    ("run-topology-is-a-directory", {"s": _scenario(base=SCENARIO.replace("hgx-h100", "topo")), "d": _dir("topo")},
     ["run", "{s}"], 2, "s.yaml:1: topology: 'topo' is a directory; give a topology .yaml file or a preset name"),
    ("run-scenario-is-a-directory", {"d": _dir("scen")}, ["run", "{d}"], 2, "is a directory; give a scenario"),
    ("run-scenario-binary", {"s": _file("s.yaml", BINARY)}, ["run", "{s}"], 2,
     "s.yaml: is a binary file (it holds NUL bytes), not YAML"),
    ("run-scenario-not-utf8", {"s": _file("s.yaml", b"topology: hgx-h100\nname: caf\xe9\n")}, ["run", "{s}"], 2,
     "s.yaml:2: is not UTF-8 text"),
    ("run-profile-missing", {"s": _scenario()}, ["run", "{s}", "--profile", "nope.yaml"], 2, "nope.yaml"),
    # --- simulate and explain
    ("simulate-size-2-to-the-70", {}, ["simulate", "--size", HUGE], 2,
     "--size: 1073741824TiB per rank does not fit in a GPU's memory"),
    ("simulate-size-1TiB", {}, ["simulate", "--size", "1TiB"], 2, "--size: 1TiB per rank does not fit"),
    ("simulate-channels-10000", {}, ["simulate", "--channels", "10000"], 2,
     "--channels: 10000 channels requested; at most 64: a channel is one CTA"),
    ("simulate-channels-zero", {}, ["simulate", "--channels", "0"], 2, "--channels: channels must be at least 1"),
    ("simulate-size-bad-unit", {}, ["simulate", "--size", "8XB"], 2, "--size: unknown size unit 'XB'"),
    ("simulate-ranks-zero", {}, ["simulate", "--ranks", "0"], 2, "--ranks"),
    ("simulate-topology-directory", {"d": _dir("topo")}, ["simulate", "--topology", "{d}"], 2,
     "topo: is a directory, not a YAML file"),
    ("simulate-topology-binary", {"t": _file("t.yaml", BINARY)}, ["simulate", "--topology", "{t}"], 2,
     "t.yaml: is a binary file"),
    ("simulate-protocol-build-error", {"p": _broken_protocol}, ["simulate", "--protocol", "{p}"], 2, BROKEN_AT),
    ("simulate-protocol-syntax-error", {"p": _syntax_error_protocol}, ["simulate", "--protocol", "{p}"], 2,
     "bad.py:4: syntax error"),
    ("simulate-protocol-file-missing", {}, ["simulate", "--protocol", "nope.py"], 2, "nope.py: no such protocol file"),
    ("explain-max-steps-negative", {}, ["explain", "--max-steps", "-1"], 2,
     "--max-steps: needs at least 1 step, got -1"),
    ("explain-max-steps-zero", {}, ["explain", "--max-steps", "0"], 2, "--max-steps: needs at least 1 step"),
    ("explain-protocol-build-error", {"p": _broken_protocol}, ["explain", "--protocol", "{p}"], 2, BROKEN_AT),
    ("explain-cost-not-a-pair", {}, ["explain", "--cost", "fast"], 2, "--cost: expected NAME=VALUE"),
    ("explain-size-above-memory", {}, ["explain", "--size", "1TiB"], 2, "--size: 1TiB per rank does not fit"),
    # --- verify
    ("verify-lines-zero", {}, ["verify", "ll", "--lines", "0"], 2, "--lines: the bound needs at least 1 line"),
    ("verify-threads-zero", {}, ["verify", "ll", "--threads", "0"], 2, "--threads: the bound needs at least 1 thread"),
    ("verify-protocol-build-error", {"p": _broken_protocol}, ["verify", "{p}", "--no-cache"], 2, BROKEN_AT),
    ("verify-ranks-one", {}, ["verify", "ll", "--ranks", "1"], 2, "--ranks: the bound needs at least 2 ranks"),
    ("verify-iterations-zero", {}, ["verify", "ll", "--iterations", "0"], 2, "--iterations"),
    ("verify-timeout-zero", {}, ["verify", "ll", "--timeout", "0"], 2, "--timeout: the timeout must be positive"),
    ("verify-flag-bits-zero", {}, ["verify", "ll", "--flag-bits", "0"], 2, "--flag-bits"),
    ("verify-unknown-model", {}, ["verify", "ll", "--model", "tso"], 2, "tso"),
    ("verify-all-and-protocol", {}, ["verify", "ll", "--all"], 2, "give a protocol or --all, not both"),
    ("verify-workers-without-all", {}, ["verify", "ll", "--workers", "2"], 2, "--workers: only applies with --all"),
    ("verify-unknown-protocol", {}, ["verify", "lll"], 2, "unknown protocol 'lll'"),
    ("verify-unknown-mutant", {}, ["verify", "mutant-ll-nosuch"], 2,
     "unknown mutant 'mutant-ll-nosuch' (valid: mutant-atomic-counter-depth1, "),
    # --- emit
    ("emit-out-is-a-file", {"f": _file("taken", "x")}, ["emit", "ll", "--out", "{f}"], 2,
     "taken: --out: exists and is a file, not a directory"),
    ("emit-out-in-proc", {}, ["emit", "ll", "--out", "/proc/cuda"], 2, "/proc/cuda: --out: the file system at /proc"),
    ("emit-protocol-build-error", {"p": _broken_protocol}, ["emit", "{p}", "--unverified", "--out", "cuda"], 2,
     BROKEN_AT),
    ("emit-no-protocol", {}, ["emit", "--out", "cuda"], 2, "missing PROTOCOL (or use --all)"),
    ("emit-unknown-arch", {}, ["emit", "ll", "--unverified", "--arch", "sm_70", "--out", "cuda"], 2,
     "--arch: unknown architecture 'sm_70'"),
    # --- review
    ("review-ranks-zero", {}, ["review", "ll", "--ranks", "0", "-q"], 2, "--ranks: rank count must be positive, got 0"),
    ("review-sizes-bad-unit", {}, ["review", "ll", "--sizes", "8XB", "-q"], 2, "--sizes: unknown size unit 'XB'"),
    ("review-sizes-zero", {}, ["review", "ll", "--sizes", "0", "-q"], 2,
     "--sizes: size must be a positive number of bytes"),
    ("review-sizes-above-memory", {}, ["review", "ll", "--sizes", "1TiB", "-q"], 2, "--sizes: 1TiB per rank"),
    ("review-topology-unknown", {}, ["review", "ll", "--topology", "nope", "-q"], 2,
     "--topology: unknown topology preset 'nope'"),
    ("review-out-is-a-file", {"f": _file("taken", "x")}, ["review", "ll", "--out", "{f}", "-q"], 2,
     "taken: --out: exists and is a file"),
    ("review-protocol-build-error", {"p": _broken_protocol}, ["review", "{p}", "-q", "--no-compile"], 2, BROKEN_AT),
    # --- litmus
    ("litmus-binary", {"f": _file("t.jsonl", BINARY)}, ["litmus", "{f}"], 2,
     "t.jsonl: is a binary file (it holds NUL bytes), not a litmus file"),
    ("litmus-empty", {"f": _file("t.jsonl", "")}, ["litmus", "{f}"], 2, "t.jsonl: holds no tests"),
    ("litmus-blank-lines", {"f": _file("t.jsonl", "\n\n  \n")}, ["litmus", "{f}"], 2, "t.jsonl: holds no tests"),
    ("litmus-directory", {"d": _dir("suite")}, ["litmus", "{d}"], 2, "suite: is a directory, not a litmus file"),
    ("litmus-missing", {}, ["litmus", "nope.jsonl"], 2, "nope.jsonl: no such litmus file"),
    ("litmus-not-utf8", {"f": _file("t.jsonl", b'{"name": "caf\xe9"}\n')}, ["litmus", "{f}"], 2,
     "t.jsonl:1: is not UTF-8 text"),
    ("litmus-bound-zero", {"f": _file("t.jsonl", "{}\n")}, ["litmus", "{f}", "--bound", "0"], 2,
     "--bound: needs at least 1 unrolling"),
    ("litmus-unknown-model", {"f": _file("t.jsonl", "{}\n")}, ["litmus", "{f}", "--model", "tso"], 2,
     "--model: unknown memory model 'tso'"),
    # --- report
    ("report-verification-is-results", {"r": _file("results.csv", RESULTS_CSV), "v": _file("v.json", RESULTS_JSON)},
     ["report", "{r}", "--verification", "{v}", "-o", "r.html"], 2,
     "v.json: --verification: is a results file ('collsim run' wrote it), not verdicts"),
    ("report-verification-binary", {"r": _file("results.csv", RESULTS_CSV), "v": _file("v.json", BINARY)},
     ["report", "{r}", "--verification", "{v}", "-o", "r.html"], 2, "v.json: --verification: is a binary file"),
    ("report-verification-missing", {"r": _file("results.csv", RESULTS_CSV)},
     ["report", "{r}", "--verification", "none.json", "-o", "r.html"], 2,
     "none.json: --verification: no such verdicts file"),
    ("report-verification-not-json", {"r": _file("results.csv", RESULTS_CSV), "v": _file("v.json", "{not json")},
     ["report", "{r}", "--verification", "{v}", "-o", "r.html"], 2, "v.json:1: --verification: not valid JSON"),
    ("report-of-a-measurement-table", {"m": _file("m.csv", "size_bytes,time_us\n8,10.5\n")}, ["report", "{m}"], 2,
     "m.csv: is a measurement table, not simulated results"),
    ("report-of-a-directory", {"d": _dir("res")}, ["report", "{d}"], 2, "res: is a directory"),
    ("report-out-in-proc", {"r": _file("results.csv", RESULTS_CSV)}, ["report", "{r}", "-o", "/proc/r.html"], 2,
     "/proc/r.html: --out: the file system at /proc"),
    ("report-tolerance-negative", {"r": _file("results.csv", RESULTS_CSV)},
     ["report", "{r}", "--tolerance", "-1", "-o", "r.html"], 2, "--tolerance"),
    # --- ingest, compare
    ("ingest-binary", {"f": _file("log.txt", BINARY)}, ["ingest", "{f}", "-o", "m.csv"], 2, "log.txt"),
    ("ingest-empty", {"f": _file("log.txt", "")}, ["ingest", "{f}", "-o", "m.csv"], 2, "log.txt: empty file"),
    ("ingest-directory", {"d": _dir("logs")}, ["ingest", "{d}", "-o", "m.csv"], 2, "logs: is a directory"),
    ("ingest-output-is-a-directory", {"d": _dir("out")}, ["ingest", str(LOGS / "new_all_reduce_wrong_rows.txt"),
                                                           "-o", "{d}"], 2,
     "out: --output: is a directory; give a file name"),
    ("ingest-output-in-proc", {}, ["ingest", str(LOGS / "new_all_reduce_wrong_rows.txt"), "-o", "/proc/m.csv"], 2,
     "/proc/m.csv: --output: the file system at /proc"),
    ("ingest-a-results-file", {"r": _file("results.csv", RESULTS_CSV)}, ["ingest", "{r}", "-o", "m.csv"], 2,
     "results.csv: is a collsim results file (simulated by 'collsim run'), not measurements"),
    ("ingest-unknown-collective", {}, ["ingest", str(LOGS / "new_all_reduce_wrong_rows.txt"), "-o", "m.csv",
                                       "--collective", "gossip"], 2, "--collective: unknown collective 'gossip'"),
    ("ingest-not-nccl-tests", {"f": _file("log.txt", "hello\nworld\n")}, ["ingest", "{f}", "-o", "m.csv"], 2,
     "log.txt:1: not nccl-tests output"),
    ("compare-measured-is-results", {"r": _file("results.csv", RESULTS_CSV)}, ["compare", "{r}", "{r}"], 2,
     "is a collsim results file"),
    ("compare-html-in-proc", {"r": _file("results.csv", RESULTS_CSV)},
     ["compare", "{r}", str(LOGS / "new_all_reduce_wrong_rows.txt"), "--html", "/proc/c.html"], 2,
     "/proc/c.html: --html: the file system at /proc"),
    # --- calibrate, validate
    ("calibrate-unknown-param", {}, ["calibrate", str(LOGS / "new_all_reduce_wrong_rows.txt"), "--topology",
                                     "hgx-h100", "-o", "p.yaml", "--params", "foo"], 2,
     "--params: unknown parameter 'foo'"),
    ("calibrate-output-directory", {"d": _dir("prof")}, ["calibrate", str(LOGS / "new_all_reduce_wrong_rows.txt"),
                                                         "--topology", "hgx-h100", "-o", "{d}"], 2,
     "prof: --output: is a directory; give a file name"),
    ("calibrate-folds-negative", {}, ["calibrate", str(LOGS / "new_all_reduce_wrong_rows.txt"), "--topology",
                                      "hgx-h100", "-o", "p.yaml", "--folds", "-1"], 2, "--folds: must be 0 or more"),
    ("calibrate-jobs-zero", {}, ["calibrate", str(LOGS / "new_all_reduce_wrong_rows.txt"), "--topology",
                                 "hgx-h100", "-o", "p.yaml", "--jobs", "0"], 2,
     "--jobs: needs at least 1 worker process"),
    ("calibrate-rows-map-to-nothing", {}, ["calibrate", str(LOGS / "graph_sendrecv_G10_env_proto.txt"), "--topology",
                                           "hgx-h100", "-o", "p.yaml"], 2,
     "no measured row maps to a configuration on hgx-h100 (6 rows: collective sendrecv: collsim models AllReduce)"),
    ("calibrate-a-results-file", {"r": _file("results.csv", RESULTS_CSV)},
     ["calibrate", "{r}", "--topology", "hgx-h100", "-o", "p.yaml"], 2, "is a collsim results file"),
    ("validate-unknown-param", {}, ["validate", "--measured", str(LOGS / "new_all_reduce_wrong_rows.txt"),
                                    "--params", "foo"], 2, "--params: unknown parameter 'foo'"),
    ("validate-folds-one", {}, ["validate", "--folds", "1"], 2, "--folds: needs at least 2 folds, got 1"),
    ("validate-jobs-zero", {}, ["validate", "--jobs", "0"], 2, "--jobs: needs at least 1 worker process"),
    ("validate-measured-missing", {}, ["validate", "--measured", "nope.csv"], 2, "nope.csv: no such file"),
    ("validate-rows-map-to-nothing", {}, ["validate", "--measured", str(LOGS / "graph_sendrecv_G10_env_proto.txt")],
     2, "no measured row maps to a configuration this model can cost (6 rows: collective sendrecv"),
    # --- tune, topology
    ("tune-tolerance-too-large", {"r": _file("results.csv", RESULTS_CSV)}, ["tune", "{r}", "--tolerance", "500"], 2,
     "--tolerance: tolerance must be between 0 and 100 percent"),
    ("tune-config-in-proc", {"r": _file("results.csv", RESULTS_CSV)}, ["tune", "{r}", "--nccl-config", "/proc/t.conf"],
     2, "/proc/t.conf: --nccl-config: the file system at /proc"),
    ("tune-table-format", {"r": _file("results.csv", RESULTS_CSV)}, ["tune", "{r}", "--table", "t.txt"], 2,
     "--table: unknown decision-table format '.txt' (valid: .json, .md)"),
    ("topology-show-directory", {"d": _dir("topo")}, ["topology", "show", "{d}"], 2, "topo: is a directory"),
    ("topology-show-binary", {"t": _file("t.yaml", BINARY)}, ["topology", "show", "{t}"], 2, "t.yaml: is a binary"),
    # --- the command line itself
    ("unknown-command", {}, ["frobnicate"], 2, "No such command 'frobnicate'"),
    ("unknown-flag", {}, ["run", "--bogus"], 2, "No such option: --bogus"),
    ("flag-of-the-wrong-type", {}, ["verify", "ll", "--lines", "many"], 2, "Invalid value for '--lines'"),
]


def _tree(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


@pytest.mark.parametrize("case_id, inputs, argv, status, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_leaves_nothing(case_id, inputs, argv, status, needle, collsim_cli, tmp_path,
                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLSIM_CACHE_DIR", str(tmp_path / ".cache"))
    made = {name: os.path.relpath(build(tmp_path), tmp_path) for name, build in inputs.items()}
    before = _tree(tmp_path)
    code, out, err = collsim_cli(*[a.format(**made) for a in argv])
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = err.strip().splitlines()
    assert code == status, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("collsim: error: "), lines[0]
    assert needle.format(**made) in lines[0], lines[0]
    assert _tree(tmp_path) - before <= {".cache"}, sorted(_tree(tmp_path) - before)


def test_the_corpus_covers_every_command():
    from collsim.cli import app

    commands = {c.name or c.callback.__name__ for c in app.registered_commands} | {"topology"}
    tried = {argv[0] for _, _, argv, _, _ in CASES}
    assert len(CASES) >= 60
    assert commands - tried <= {"topologies"}, commands - tried  # `collsim topologies` takes no input


def test_run_names_the_protocol_line_that_failed_to_build_a_program(collsim_cli, tmp_path, monkeypatch):
    """A shipped protocol whose exchange() raises (as an edited protocols/*.py would): the run stops with the
    protocol's file, line and algorithm, exit 2, writes nothing, and does not retry the rows as failures."""
    from collsim.ir.registry import protocol_class

    def exchange(self, b, ex):
        raise ValueError("depth must divide the ring")

    line = exchange.__code__.co_firstlineno + 1
    monkeypatch.setattr(protocol_class("ll"), "exchange", exchange)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SCENARIO.replace("model: analytic\n", "model: des\n"), encoding="utf-8")
    code, out, err = collsim_cli("run", "s.yaml", "--executor", "local")
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collsim: error: "), err
    assert lines[0].endswith(f"{Path(__file__).name}:{line}: one-shot: ValueError: depth must divide the ring"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]
