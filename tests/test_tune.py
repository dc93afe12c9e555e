"""collsim tune: the NCCL tuner config against its grammar and results.csv, decision tables, ties, measurements.

The config is read back by :func:`parse_tuner_config`, written here from the
grammar of NCCL's example tuner plugin (not from collsim's writer): ten
comma-separated fields, the names it knows, integers where it reads
integers, comment lines that start with ``#``, lines that fit its 256-byte
buffer; per (collective, nNodes, nRanks) ranges that start at 0, follow each
other without gap or overlap and end at the largest size run.
"""
from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from collsim.tune import Timings, build_config, build_table, from_results, rank_choices
from collsim.tune.ranges import boundary, spans

COLLECTIVES = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
ALGORITHMS = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
PROTOCOLS = {"ll", "ll128", "simple"}
FIELDS = ["collective_type", "min_bytes", "max_bytes", "algorithm", "protocol", "channels", "nNodes", "nRanks",
          "numPipeOps", "regBuff"]
#: collsim's ring protocols are NCCL's ring protocols of the same name; its nvls two-shot is NCCL's NVLS (Simple)
NCCL_OF = {("ring", "ll"): ("ring", "ll"), ("ring", "ll128"): ("ring", "ll128"), ("ring", "simple"): ("ring", "simple"),
           ("two-shot", "nvls"): ("nvls", "simple")}

INT = re.compile(r"^-?[0-9]+$")


def parse_tuner_config(text: str) -> list[dict]:
    """The rules of a tuner config, checked field by field against the plugin's grammar."""
    assert text.endswith("\n"), "the last line must end with a newline"
    rules = []
    for number, line in enumerate(text.split("\n")[:-1], 1):
        assert len(line) + 1 <= 256, f"line {number} does not fit the plugin's 256-byte line buffer"
        assert "\r" not in line and "\t" not in line, f"line {number}: stray whitespace"
        if line == "" or line.startswith("#"):
            continue
        fields = line.split(",")
        assert len(fields) == 10, f"line {number}: {len(fields)} fields, not 10: {line!r}"
        assert all(f == f.strip() and f for f in fields), f"line {number}: empty or padded field: {line!r}"
        rule = dict(zip(FIELDS, fields))
        assert rule["collective_type"] in COLLECTIVES, f"line {number}: collective {rule['collective_type']!r}"
        assert rule["algorithm"] in ALGORITHMS, f"line {number}: algorithm {rule['algorithm']!r}"
        assert rule["protocol"] in PROTOCOLS, f"line {number}: protocol {rule['protocol']!r}"
        for key in FIELDS[1:3] + FIELDS[5:]:
            assert INT.match(rule[key]), f"line {number}: {key} {rule[key]!r} is not an integer"
            rule[key] = int(rule[key])
        assert 0 <= rule["min_bytes"] <= rule["max_bytes"], f"line {number}: empty or negative range"
        for key in ("channels", "nNodes", "nRanks", "numPipeOps"):
            assert rule[key] == -1 or rule[key] >= 1, f"line {number}: {key} {rule[key]}"
        assert rule["regBuff"] in (-1, 0, 1), f"line {number}: regBuff {rule['regBuff']}"
        rule["line"] = number
        rules.append(rule)
    return rules


def check_coverage(rules: list[dict], largest: dict[int, int]) -> None:
    """Per (collective, nNodes, nRanks): contiguous, non-overlapping, 0 .. the largest size of that rank count."""
    groups: dict[tuple, list[dict]] = {}
    for r in rules:
        groups.setdefault((r["collective_type"], r["nNodes"], r["nRanks"]), []).append(r)
    assert {k[2] for k in groups} == set(largest), "every rank count run, and only those, has rules"
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["min_bytes"])
        assert [r["line"] for r in rs] == sorted(r["line"] for r in rs), f"{key}: rules out of size order"
        assert rs[0]["min_bytes"] == 0, f"{key}: does not start at 0"
        for a, b in zip(rs, rs[1:]):
            assert b["min_bytes"] == a["max_bytes"] + 1, f"{key}: gap or overlap between lines {a['line']} and {b['line']}"
        assert rs[-1]["max_bytes"] == largest[key[2]], f"{key}: ends at {rs[-1]['max_bytes']}, not {largest[key[2]]}"


def matching_rule(rules: list[dict], ranks: int, size: int, nodes: int = 1) -> dict:
    """The rule the plugin applies: the first whose range and placement match."""
    for r in rules:
        if r["min_bytes"] <= size <= r["max_bytes"] and r["nRanks"] in (-1, ranks) and r["nNodes"] in (-1, nodes):
            return r
    raise AssertionError(f"no rule for {ranks} ranks, {size} B")


def check_choices_against_results(rules: list[dict], results: pd.DataFrame, tolerance_pct: float) -> None:
    """At every run size, the rule's pair is within the tolerance of the fastest NCCL pair in results.csv."""
    nccl = results[[(a, p) in NCCL_OF for a, p in zip(results["algorithm"], results["protocol"])]]
    for (ranks, size), sub in nccl.groupby(["ranks", "size_bytes"]):
        rule = matching_rule(rules, int(ranks), int(size))
        lat = {NCCL_OF[(a, p)]: t for a, p, t in zip(sub["algorithm"], sub["protocol"], sub["latency_us"])}
        chosen = lat[(rule["algorithm"], rule["protocol"])]
        best = min(lat.values())
        assert chosen <= best * (1 + tolerance_pct / 100) + 1e-9, (
            f"{ranks} ranks, {size} B: {rule['algorithm']}/{rule['protocol']} {chosen} us, fastest {best} us")


def scenario_text(**over: str) -> str:
    base = {
        "topology": "hgx-h100", "ranks": "[2, 4, 8]", "sizes": "8B..64MiB x2", "launch": "graph", "model": "analytic",
    }
    base.update(over)
    return "".join(f"{k}: {v}\n" for k, v in base.items())


@pytest.fixture(scope="module")
def analytic_run(tmp_path_factory):
    """An 8-GPU-shaped sweep (every protocol and algorithm, 8 B..64 MiB) with the analytic model."""
    from collsim.resultsfile import load_results
    from collsim import run_scenario

    d = tmp_path_factory.mktemp("analytic")
    run_scenario({"topology": "hgx-h100", "ranks": [2, 4, 8], "sizes": "8B..64MiB x2", "launch": "graph",
                  "model": "analytic", "name": "a8"}, out=d, report=False)
    frame, meta = load_results(d / "results.json")
    return d, frame, meta


@pytest.mark.parametrize("tolerance", [0.0, 1.0, 5.0])
def test_config_parses_covers_and_every_choice_holds_against_results(analytic_run, tolerance):
    d, frame, meta = analytic_run
    config = build_config(from_results(frame, meta), tolerance)
    rules = parse_tuner_config(config.text())
    largest = {int(n): int(frame[frame["ranks"] == n]["size_bytes"].max()) for n in frame["ranks"].unique()}
    check_coverage(rules, largest)
    check_choices_against_results(rules, frame, tolerance)
    assert all(r["nNodes"] == 1 and r["channels"] == -1 and r["collective_type"] == "allreduce" for r in rules)


def test_zero_tolerance_is_the_strict_fastest_and_tolerance_merges(analytic_run):
    d, frame, meta = analytic_run
    strict = build_config(from_results(frame, meta), 0.0)
    loose = build_config(from_results(frame, meta), 5.0)
    assert len(loose.rows) <= len(strict.rows)
    for row in strict.rows:
        assert row.excess_pct == 0.0
    for row in loose.rows:
        assert 0.0 <= row.excess_pct <= 5.0 + 1e-9


def test_des_8gpu_scenario_end_to_end(collsim_cli, tmp_path, monkeypatch):
    """``collsim tune scenarios/8gpu.yaml`` writes the config, both tables and a report that embeds them."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "8gpu.yaml").write_text((root / "scenarios" / "8gpu.yaml").read_text())
    code, out, err = collsim_cli("tune", "scenarios/8gpu.yaml", "-q")
    assert code == 0, err
    d = tmp_path / "reports" / "8gpu"
    results = pd.read_csv(d / "results.csv")
    text = (d / "nccl_tuner.conf").read_text()
    rules = parse_tuner_config(text)
    check_coverage(rules, {n: int(results[results.ranks == n].size_bytes.max()) for n in (2, 4, 8)})
    check_choices_against_results(rules, results, 1.0)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("hgx-h100" in h for h in header) and any("model: des" in h for h in header)
    assert any(f"collsim {__import__('collsim').__version__}" in h for h in header)
    doc = json.loads((d / "decision_table.json").read_text())
    assert [p["ranks"] for p in doc["placements"]] == [2, 4, 8]
    for placement in doc["placements"]:
        ranges = placement["ranges"]
        assert ranges[0]["min_bytes"] == 0 and ranges[-1]["max_bytes"] == 64 << 20
        assert all(b["min_bytes"] == a["max_bytes"] + 1 for a, b in zip(ranges, ranges[1:]))
    # the report links the same files, byte for byte
    page = (d / "report.html").read_text()
    links = dict(re.findall(r'href="data:[^;]+;charset=utf-8;base64,([A-Za-z0-9+/=]+)" download="([^"]+)"', page)[i][::-1]
                 for i in range(3))
    assert set(links) == {"nccl_tuner.conf", "decision_table.md", "decision_table.json"}
    for name, b64 in links.items():
        assert base64.b64decode(b64).decode() == (d / name).read_text(), name


# -- ranges and boundaries --------------------------------------------------------------------------------------


def linear_timings(lines: dict[tuple[str, str], tuple[float, float]], sizes, ranks=8) -> Timings:
    """Latency = a + b·size for each choice (the α-β form), at ``sizes``."""
    rows = [{"nodes": 1, "ranks": ranks, "size_bytes": s, "algorithm": c[0], "protocol": c[1], "latency_us": a + b * s}
            for c, (a, b) in lines.items() for s in sizes]
    return Timings(pd.DataFrame(rows), "simulated", "hgx-h100", "", "des", "graph", "results.csv", "0.1.0")


def test_boundary_sits_at_the_latency_crossover():
    # ll: 5 + s/1000; simple: 20 + s/4000 -> equal at s = 20000
    t = linear_timings({("ring", "ll"): (5.0, 1e-3), ("ring", "simple"): (20.0, 2.5e-4)}, [1024 << i for i in range(8)])
    rules = parse_tuner_config(build_config(t, 0.0).text())
    assert [(r["min_bytes"], r["max_bytes"], r["protocol"]) for r in rules] == [
        (0, 20000, "ll"), (20001, 1024 << 7, "simple")]


def test_boundary_rules():
    assert boundary(1000, 2000, 2.0, 8.0, 4.0, 6.0) == (1500, "crossover")
    assert boundary(1000, 2000, 4.0, 8.0, 4.0, 6.0) == (1000, "crossover")  # b no slower at lo: a keeps lo only
    assert boundary(1000, 2000, 2.0, 5.0, 4.0, 6.0) == (1999, "crossover")  # a still faster at hi
    assert boundary(1024, 4096, None, 1.0, 1.0, 1.0) == (2048, "midpoint")
    out = spans([8, 16, 32], ["a", "a", "b"], ["a", "a", "b"], lambda c, i: None)
    assert [(s.key, s.min_bytes, s.max_bytes, s.rule) for s in out] == [("a", 0, 22, "midpoint"), ("b", 23, 32, "end")]


def test_nothing_is_extrapolated_beyond_the_largest_size():
    t = linear_timings({("ring", "ll"): (5.0, 1e-3), ("ring", "simple"): (20.0, 2.5e-4)}, [8, 64, 4096])
    rules = parse_tuner_config(build_config(t).text())
    assert max(r["max_bytes"] for r in rules) == 4096
    assert "above 4096 bytes no rule matches" in build_config(t).text()


def test_tolerance_keeps_a_range_unbroken_where_choices_alternate_within_it():
    # ll and ll128 trade places by 0.2 % at every size; simple is far behind
    sizes = [1 << i for i in range(3, 13)]
    rows = []
    for i, s in enumerate(sizes):
        for proto, lat in (("ll", 10.0 if i % 2 else 10.02), ("ll128", 10.02 if i % 2 else 10.0), ("simple", 30.0)):
            rows.append({"nodes": 1, "ranks": 4, "size_bytes": s, "algorithm": "ring", "protocol": proto, "latency_us": lat})
    t = Timings(pd.DataFrame(rows), "simulated", "x", "", "des", "graph", "r.csv", "0.1.0")
    assert len(build_config(t, 1.0).rows) == 1
    assert len(build_config(t, 0.0).rows) == len(sizes)


# -- decision table and ties ------------------------------------------------------------------------------------


def test_tie_rule():
    o = rank_choices({"a": 10.0, "b": 10.01, "c": 10.5})
    assert o.tied == ("a", "b") and o.is_tie and o.runner_up == "c"
    assert math.isclose(o.margin_pct, 5.0)
    assert rank_choices({"a": 10.0, "b": 10.01}, 0.0).tied == ("a",)
    assert rank_choices({"a": 10.0, "b": 10.0}, 0.0).is_tie  # equal is a tie whatever the tolerance


def test_decision_table_marks_ties_and_margins():
    sizes = [8, 16, 32, 64]
    rows = []
    for s in sizes:
        # one-shot ll and sentinel within 0.1 % up to 16 B, then sentinel 5 % behind; ring simple far behind
        rows += [{"algorithm": "one-shot", "protocol": "ll", "latency_us": 10.0},
                 {"algorithm": "one-shot", "protocol": "sentinel", "latency_us": 10.01 if s <= 16 else 10.5},
                 {"algorithm": "ring", "protocol": "simple", "latency_us": 20.0}]
        for r in rows[-3:]:
            r.update(nodes=1, ranks=8, size_bytes=s)
    t = Timings(pd.DataFrame(rows), "simulated", "hgx-h100", "", "des", "graph", "r.csv", "0.1.0")
    table = build_table(t, 1.0)
    assert [(r.min_bytes, r.max_bytes, r.tie) for r in table.ranges] == [(0, 22, True), (23, 64, False)]
    tie, win = table.ranges
    assert set(tie.choices) == {("one-shot", "ll"), ("one-shot", "sentinel")}
    assert tie.weakest.runner_up == ("ring", "simple")
    assert win.choices == (("one-shot", "ll"),) and math.isclose(win.margin_range[0], 5.0)
    doc = json.loads(table.to_json())
    first = doc["placements"][0]["ranges"][0]
    assert first["tie"] is True and len(first["choices"]) == 2 and doc["tolerance_pct"] == 1.0
    md = table.to_markdown()
    assert "tie: ll · one-shot, sentinel · one-shot" in md and "**ll · one-shot**" in md and "5.00 %" in md
    # with no tolerance the 0.1 % difference is a win
    assert not build_table(t, 0.0).ranges[0].tie


def test_winner_map_shows_ties_as_ties():
    import plotly.graph_objects as go

    from collsim.report import figures as F
    from collsim.results import COLUMNS

    base = {c: "" for c in COLUMNS}
    rows = []
    for proto, lat in (("ll", 3.562), ("sentinel", 3.563), ("simple", 9.0)):
        rows.append({**base, "topology": "hgx-h100", "gpu": "H100", "ranks": 8, "algorithm": "one-shot", "protocol": proto,
                     "launch": "graph", "size_bytes": 8, "count": 2, "dtype": "float32", "op": "sum", "latency_us": lat,
                     "algbw_gbps": 0.0, "busbw_gbps": 0.0, "launch_us": 0.0, "sync_us": lat, "data_us": 0.0,
                     "reduce_us": 0.0, "model": "des", "events": 1})
    from collsim.resultsfile import check_frame

    frame = check_frame(pd.DataFrame(rows))
    hm = go.Figure(F.winner_map(F.ReportData(frame, {}))).data[0]
    assert hm.text[0][0].startswith("tie")
    assert "tie within 1%" in hm.customdata[0][0] and "sentinel · one-shot, 3.563" in hm.customdata[0][0]
    assert "tie (within 1%)" in list(hm.colorbar.ticktext)
    strict = go.Figure(F.winner_map(F.ReportData(frame, {}, tolerance_pct=0.0))).data[0]
    assert strict.text[0][0] == "ll<br>1-shot" and "runner-up: sentinel · one-shot" in strict.customdata[0][0]


def test_report_without_nccl_pairs_says_why_and_still_links_the_table(analytic_run):
    from collsim.report import build_report

    d, frame, meta = analytic_run
    page = build_report(frame[frame["algorithm"] == "one-shot"], meta)
    assert "No NCCL tuner config: no NCCL-runnable rows" in page
    assert 'download="decision_table.md"' in page and 'download="nccl_tuner.conf"' not in page


# -- measurements and --against ---------------------------------------------------------------------------------


def write_measured(path: Path, rows: list[dict]) -> Path:
    from collsim.calibrate.measurements import write_measurements

    base = {"collective": "allreduce", "topology": "hgx-h100", "launch": "graph", "nodes": 1, "dtype": "float32"}
    write_measurements(pd.DataFrame([{**base, **r} for r in rows]), path)
    return path


def measured_rows(sizes, ranks=(2, 4, 8), faster_simple_from=1 << 20):
    """ll fastest below ``faster_simple_from``, simple above; ll128 always between."""
    out = []
    for n in ranks:
        for s in sizes:
            ll = 10 + s / 5e3
            simple = 25 + s / 4e4 if s < faster_simple_from else (10 + s / 5e3) * 0.5
            out += [{"ranks": n, "size_bytes": s, "algorithm": "ring", "protocol": "ll", "time_us": ll},
                    {"ranks": n, "size_bytes": s, "algorithm": "ring", "protocol": "ll128", "time_us": (ll + simple) / 2 * 1.2},
                    {"ranks": n, "size_bytes": s, "algorithm": "ring", "protocol": "simple", "time_us": simple}]
    return out


def test_measured_config_and_table(collsim_cli, tmp_path):
    sizes = [8 << i for i in range(24)]
    rows = measured_rows(sizes) + [{"ranks": 8, "size_bytes": 8, "algorithm": "", "protocol": "", "time_us": 5.0}]
    m = write_measured(tmp_path / "lab.csv", rows)
    code, out, err = collsim_cli("tune", "--measured", m, "--tolerance", "0")
    assert code == 0, err
    assert "1 row left out: measured with the library's own algorithm or protocol" in err
    rules = parse_tuner_config((tmp_path / "lab.nccl_tuner.conf").read_text())
    check_coverage(rules, {2: sizes[-1], 4: sizes[-1], 8: sizes[-1]})
    for r in rules:
        assert r["nNodes"] == 1 and r["algorithm"] == "ring"
    for n in (2, 4, 8):
        assert matching_rule(rules, n, 8)["protocol"] == "ll"
        assert matching_rule(rules, n, 64 << 20)["protocol"] == "simple"
    assert (tmp_path / "lab.decision_table.md").exists() and (tmp_path / "lab.decision_table.json").exists()


def test_measured_nodes_are_kept(collsim_cli, tmp_path):
    rows = [{**r, "nodes": 2} for r in measured_rows([1024, 2048], ranks=(16,))]
    m = write_measured(tmp_path / "two.csv", rows)
    cfg = tmp_path / "two.conf"
    code, out, err = collsim_cli("tune", "--measured", m, "--nccl-config", cfg)
    assert code == 0, err
    assert {(r["nNodes"], r["nRanks"]) for r in parse_tuner_config(cfg.read_text())} == {(2, 16)}
    assert not (tmp_path / "two.decision_table.md").exists()  # only what was asked for


def test_against_prints_where_choices_disagree(collsim_cli, analytic_run, tmp_path):
    d, frame, meta = analytic_run
    sizes = sorted(set(frame["size_bytes"]))
    sim = build_config(from_results(frame, meta), 1.0)
    # the measured machine prefers ring/ll everywhere, by 2x: every other simulated choice disagrees
    rows = []
    for n in (2, 4, 8):
        for s in sizes:
            for algorithm, proto in (("ring", "ll"), ("ring", "ll128"), ("ring", "simple"), ("nvls", "simple")):
                t = 10.0 if proto == "ll" else 20.0
                rows.append({"ranks": n, "size_bytes": s, "algorithm": algorithm, "protocol": proto, "time_us": t})
    m = write_measured(tmp_path / "m.csv", rows)
    code, out, err = collsim_cli("tune", d / "results.csv", "--against", m, "--table", tmp_path / "t.json")
    assert code == 0, err
    expected = sum(1 for n in (2, 4, 8) for s in sizes
                   if next(r for r in sim.rows if r.ranks == n and r.min_bytes <= s <= r.max_bytes).protocol != "ll")
    assert f"{3 * len(sizes)} points compared, {expected} where the simulated choice is not within 1%" in out
    assert expected > 0 and len([line for line in out.splitlines() if "ring/ll " in line and "+100.0%" in line]) == expected
    # and the other way round: tune from the measurements against the simulation
    code, out, err = collsim_cli("tune", "--measured", m, "--against", d / "results.json", "-q")
    assert code == 0, err
    assert f"{expected} where the simulated choice" in out


# -- channels, launch modes --------------------------------------------------------------------------------------


def test_channels_come_from_the_scenario_or_the_flag(collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = tmp_path / "c.yaml"
    s.write_text(scenario_text(sizes="[1024, 65536]", ranks="[8]", algorithms="[ring]", channels="4"))
    code, out, err = collsim_cli("tune", s, "--nccl-config", tmp_path / "c.conf", "-q")
    assert code == 0, err
    assert {r["channels"] for r in parse_tuner_config((tmp_path / "c.conf").read_text())} == {4}
    code, out, err = collsim_cli("tune", tmp_path / "reports/c/results.csv", "--nccl-config", tmp_path / "d.conf",
                                 "--channels", "16", "-q")
    assert code == 0, err
    assert {r["channels"] for r in parse_tuner_config((tmp_path / "d.conf").read_text())} == {16}


def test_several_launch_modes(collsim_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = tmp_path / "l.yaml"
    s.write_text(scenario_text(sizes="[1024, 65536]", ranks="[4]", launch="[eager, graph]", algorithms="[ring, one-shot]"))
    code, out, err = collsim_cli("tune", s, "-q")
    assert code == 0, err
    assert "tuned for graph (--launch picks another)" in err
    assert (tmp_path / "reports/l/nccl_tuner.graph.conf").exists()
    code, out, err = collsim_cli("tune", tmp_path / "reports/l/results.json", "--launch", "eager", "-q")
    assert code == 0, err
    assert "launch: eager" in (tmp_path / "reports/l/nccl_tuner.eager.conf").read_text()
    page = (tmp_path / "reports/l/report.html").read_text()
    assert 'download="nccl_tuner.eager.conf"' in page and 'download="nccl_tuner.graph.conf"' in page


# -- bad input: one line, exit 2, nothing written ---------------------------------------------------------------


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


BAD = [
    ("no-source", lambda d: [], "give a scenario or results file, or --measured"),
    ("both", lambda d: [d / "r.csv", "--measured", d / "m.csv"], "one of them"),
    ("negative-tolerance", lambda d: [d / "r.csv", "--tolerance", "-1"], "--tolerance: tolerance must be between 0 and 100"),
    ("huge-tolerance", lambda d: [d / "r.csv", "--tolerance", "500"], "between 0 and 100"),
    ("table-suffix", lambda d: [d / "r.csv", "--table", d / "t.txt"], "--table: unknown decision-table format '.txt' (valid: .json, .md)"),
    ("config-dir-missing", lambda d: [d / "r.csv", "--nccl-config", d / "nope" / "x.conf"], "does not exist"),
    ("config-is-dir", lambda d: [d / "r.csv", "--nccl-config", d], "is a directory"),
    ("results-missing", lambda d: [d / "missing.csv"], "missing.csv: no such file"),
    ("not-a-source", lambda d: [d / "m.txt"], "not a scenario or results file"),
    ("bad-launch", lambda d: [d / "r.csv", "--launch", "eager"], "--launch: no rows with launch mode 'eager'"),
    ("model-mismatch", lambda d: [d / "r.csv", "--model", "des"], "--model: "),
    ("bad-nodes", lambda d: [d / "r.csv", "--nodes", "0"], "--nodes: must be a positive node count"),
    ("bad-channels", lambda d: [d / "r.csv", "--channels", "0"], "--channels: must be a positive channel count"),
    ("results-as-measurements", lambda d: [d / "r.csv", "--against", d / "r.csv"], "not measurements"),
    ("no-ring", lambda d: [d / "noring.yaml"], "no NCCL-runnable rows: an NCCL tuner config needs ring with ll, ll128, simple"),
    ("sweep", lambda d: [d / "sweep.yaml"], "sweep: a scenario with a sweep writes one result set per point"),
    ("measured-unusable", lambda d: ["--measured", d / "empty.csv"], "no measurement of allreduce names its algorithm and protocol"),
    ("measured-model", lambda d: ["--measured", d / "m.csv", "--model", "des"], "--model: a model runs a scenario"),
    ("nothing-in-common", lambda d: [d / "r.csv", "--against", d / "other.csv"], "nothing to compare"),
    ("against-read-before-the-run", lambda d: [d / "ok.yaml", "--against", d / "empty.csv"], "no measurement of allreduce"),
]


@pytest.mark.parametrize("name,argv,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_writes_nothing(collsim_cli, tmp_path, monkeypatch, name, argv, message):
    from collsim import run_scenario

    monkeypatch.chdir(tmp_path)
    run_scenario({"topology": "hgx-h100", "ranks": [2], "sizes": [8, 1024], "model": "analytic",
                  "algorithms": ["ring"], "protocols": ["ll", "simple"]}, out=tmp_path / "r", report=False)
    (tmp_path / "r.csv").write_text((tmp_path / "r" / "results.csv").read_text())
    write_measured(tmp_path / "m.csv", [{"ranks": 2, "size_bytes": 8, "algorithm": "ring", "protocol": p, "time_us": t}
                                        for p, t in (("ll", 1.0), ("simple", 2.0))])
    write_measured(tmp_path / "other.csv", [{"ranks": 4, "size_bytes": 8, "algorithm": "ring", "protocol": p, "time_us": 1.0}
                                            for p in ("ll", "simple")])
    write_measured(tmp_path / "empty.csv", [{"ranks": 2, "size_bytes": 8, "algorithm": "", "protocol": "", "time_us": 1.0}])
    (tmp_path / "m.txt").write_text("hello\n")
    (tmp_path / "ok.yaml").write_text(scenario_text(ranks="[2]", sizes="[8]"))
    (tmp_path / "noring.yaml").write_text(scenario_text(algorithms="[one-shot]", ranks="[2]", sizes="[8]"))
    (tmp_path / "sweep.yaml").write_text(scenario_text(ranks="[2]", sizes="[8]", model="des",
                                                       sweep="{launch_overhead_us: [1, 2]}"))
    before = _files(tmp_path)
    code, out, err = collsim_cli("tune", *argv(tmp_path))
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert message in lines[0], lines[0]
    assert _files(tmp_path) == before, "bad input left files behind"


def test_readme_and_tuning_doc_say_how_to_deploy():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "collsim tune" in readme and "NCCL_TUNER_CONFIG_FILE=" in readme and "NCCL_TUNER_PLUGIN=" in readme
    docs = (Path(__file__).resolve().parents[1] / "docs" / "TUNING.md").read_text()
    for needle in ("tree", "collnet", "pat", "nccl-tests", "-1"):
        assert needle in docs
