"""The HTML report without a browser: inputs, errors, determinism, self-containment, CLI.

Fixtures are synthetic results (:func:`synthetic_results`), so these tests do
not depend on the simulator; one end-to-end test runs the analytic model.
"""
from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from collsim.errors import InputError
from collsim.report import FIGURE_IDS, build_report, load_results, write_report
from collsim.report import figures as F
from collsim.report.data import normalize_timelines

#: Ceiling on the report of an 8-GPU-sized result set (1008 rows, 14 timelines).
MAX_REPORT_BYTES = 10_000_000

_SUPPORT = {
    "barrier": ("one-shot", "two-shot"),
    "simple": ("one-shot", "two-shot", "ring"),
    "ll": ("one-shot", "two-shot", "ring"),
    "ll128": ("one-shot", "two-shot", "ring"),
    "atomic-counter": ("one-shot",),
    "sentinel": ("one-shot", "two-shot"),
}
_SYNC = {"barrier": 13.0, "simple": 11.0, "ll": 6.0, "ll128": 9.0, "atomic-counter": 9.5, "sentinel": 6.5}
_BW = {"barrier": 300.0, "simple": 330.0, "ll": 140.0, "ll128": 300.0, "atomic-counter": 280.0, "sentinel": 200.0}


def synthetic_results(
    ranks=(2, 4, 8), sizes=None, launches=("graph",), protocols=tuple(_SUPPORT), topology="hgx-h100"
) -> pd.DataFrame:
    """A results table shaped like ``collsim run scenarios/8gpu.yaml`` (1008 rows by default)."""
    from collsim.resultsfile import COLUMNS

    sizes = list(sizes) if sizes is not None else [8 << (i) for i in range(24)]  # 8 B .. 64 MiB, x2
    rows = []
    for n in ranks:
        for algo in ("one-shot", "two-shot", "ring"):
            for p in protocols:
                if algo not in _SUPPORT.get(p, ("one-shot", "two-shot", "ring")):
                    continue
                for launch in launches:
                    for s in sizes:
                        steps = {"one-shot": 1, "two-shot": 2, "ring": 2 * (n - 1)}[algo]
                        sync = _SYNC.get(p, 8.0) + 0.4 * steps
                        traffic = {"one-shot": (n - 1) * s, "two-shot": 2 * s * (n - 1) / n, "ring": 2 * s * (n - 1) / n}[algo]
                        data = traffic / (_BW.get(p, 200.0) * 1e3)
                        reduce = s * (n - 1) / 3.0e6
                        launch_us = 4.0 if launch == "eager" else 0.0
                        lat = launch_us + sync + data + reduce
                        algbw = s / (lat * 1e3)
                        rows.append({
                            "topology": topology, "gpu": "H100", "ranks": n, "algorithm": algo, "protocol": p,
                            "launch": launch, "size_bytes": s, "count": s // 4, "dtype": "float32", "op": "sum",
                            "latency_us": round(lat, 3), "algbw_gbps": round(algbw, 4),
                            "busbw_gbps": round(algbw * 2 * (n - 1) / n, 4), "launch_us": round(launch_us, 3),
                            "sync_us": round(sync, 3), "data_us": round(data, 3), "reduce_us": round(reduce, 3),
                            "model": "analytic", "events": 0, "note": "",
                        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def synthetic_meta(**extra) -> dict:
    meta = {
        "collsim_version": __import__("collsim").__version__,
        "scenario": {"name": "synthetic-8gpu", "description": "synthetic 8-GPU sweep", "topology": "hgx-h100",
                     "costs": {"sync_round_latency_us": {"nvswitch": 1.5}}},
        "topology": {"name": "hgx-h100", "num_gpus": 8, "summary": {
            "gpu_model": "H100", "gpus": 8, "interconnect": "nvlink4 x18 via 4 nvswitch",
            "per_link_gbps": {"nvlink4": {"nominal": 25.0, "effective": 20.6}},
            "per_gpu_gbps": {"nominal": 450.0, "effective": 370.8}}},
        "model": "analytic",
        "costs": {"sync_round_latency_us": {"nvswitch": 1.5}},
        "skipped": [{"ranks": 2, "algorithm": "ring", "protocol": "barrier", "reason": "protocol 'barrier' has no 'ring' program", "rows": 24}],
    }
    meta.update(extra)
    return meta


def synthetic_timelines(frame: pd.DataFrame, ranks: int = 8, size: int = 4096) -> list[dict]:
    """One timeline per protocol × algorithm (barrier wait, poll, store, fence, reduce per rank)."""
    out = []
    for (p, a), _ in frame.groupby(["protocol", "algorithm"], sort=True):
        events = []
        for r in range(ranks):
            t = 0.0
            for kind, dt in (("barrier wait", 3.0 + 0.1 * r), ("store", 0.8), ("fence", 0.3), ("poll", 1.2), ("reduce", 0.4)):
                events.append({"rank": r, "kind": kind, "start_us": round(t, 3), "end_us": round(t + dt, 3),
                               "peer": (r + 1) % ranks if kind in ("store", "poll") else None,
                               "bytes": size if kind in ("store", "reduce") else 0, "label": f"{kind} r{r}"})
                t += dt
        out.append({"protocol": p, "algorithm": a, "ranks": ranks, "size_bytes": size, "launch": "graph", "events": events})
    return out


VERIFICATION = [
    {"protocol": "ll", "verdict": "verified", "model": "PTX (scoped, release/acquire)",
     "assumptions": ["vector-8B-pairs-untorn"], "hardware": ["8-byte stores are single-copy atomic"]},
    {"protocol": "ll128", "verdict": "verified", "model": "PTX", "assumptions": ["line-128B-ordered"],
     "hardware": ["NVLink delivers a warp's 128-byte line in order"]},
    {"protocol": "sentinel", "verdict": "counterexample", "model": "PTX", "assumptions": ["store-16B-untorn"],
     "counterexample": {"title": "torn float4 read", "trace": ["r0: st.v4 x", "r1: ld.v4 x (sees w only)"]}},
    {"protocol": "barrier", "verdict": "verified", "model": "PTX", "assumptions": []},
]


def measured_points() -> pd.DataFrame:
    rows = []
    for s in (8, 1024, 65536, 1 << 20, 16 << 20):
        for n in (2, 8):
            t = 20.0 + s / 2.0e5
            rows.append({"collective": "allreduce", "ranks": n, "size_bytes": s, "time_us": t, "protocol": "",
                         "algorithm": "", "source": "nccl-tests-h100.log", "wrong": False})
    return pd.DataFrame(rows)


#: Sizes of the small fixture: few, so most tests build a report in a fraction of the full one's time.
SMALL_SIZES = (8, 64, 4096, 65536, 1 << 20, 16 << 20)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """Small results: every protocol × algorithm at 2, 4, 8 ranks, 6 sizes (252 rows)."""
    return synthetic_results(sizes=SMALL_SIZES)


@pytest.fixture(scope="module")
def tiny() -> pd.DataFrame:
    """The least a report is built from quickly: two protocols, one rank count, two sizes."""
    return synthetic_results(ranks=(8,), sizes=(8, 4096), protocols=("simple", "ll"))


@pytest.fixture(scope="module")
def big_frame() -> pd.DataFrame:
    """8-GPU-sized results (1008 rows), as scenarios/8gpu.yaml gives."""
    return synthetic_results()


_FULL_REPORT: dict[str, Path] = {}


def full_report(folder: Path) -> Path:
    """The 8-GPU-sized report with timelines, verdicts and measurements, built once per test session.

    The browser tests load the same file (building it takes seconds)."""
    if "path" not in _FULL_REPORT:
        frame = synthetic_results()
        _FULL_REPORT["path"] = write_report(frame, synthetic_meta(), folder / "report.html",
                                            timeline=synthetic_timelines(frame), verification=VERIFICATION,
                                            measured=measured_points())
    return _FULL_REPORT["path"]


@pytest.fixture(scope="module")
def full_html(tmp_path_factory) -> tuple[Path, str]:
    path = full_report(tmp_path_factory.getbasetemp())
    return path, path.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------
# the written file


def test_write_report_is_atomic_and_returns_path(tiny, tmp_path):
    out = write_report(tiny, synthetic_meta(), tmp_path / "sub" / "report.html")
    assert out == tmp_path / "sub" / "report.html" and out.is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html"]  # no temporary left behind
    assert write_report(tiny, synthetic_meta(), tmp_path / "sub") == out  # a directory means <dir>/report.html


def test_same_input_gives_byte_identical_report(tiny, tmp_path):
    meta = synthetic_meta()
    tl = synthetic_timelines(tiny)
    a = write_report(tiny, meta, tmp_path / "a.html", timeline=tl, verification=VERIFICATION, measured=measured_points())
    b = write_report(tiny.sample(frac=1.0, random_state=3), meta, tmp_path / "b.html", timeline=tl,
                     verification=VERIFICATION, measured=measured_points())  # row order does not matter
    assert a.read_bytes() == b.read_bytes()


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str | None] = []
        self.links: list[str | None] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts.append(a.get("src"))
        if tag == "link":
            self.links.append(a.get("href"))
        if "id" in a:
            self.ids.append(a["id"])


def test_self_contained_no_external_references(full_html):
    _, html = full_html
    refs = _Refs()
    refs.feed(html)
    assert all(src is None for src in refs.scripts), refs.scripts  # every script inline
    assert refs.links == []  # no stylesheet (or any) links
    styles = re.findall(r"<style[^>]*>(.*?)</style>", html, flags=re.S)
    assert styles and not any(re.search(r"@import|url\(\s*['\"]?https?:", s) for s in styles)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", html)
    # plotly.js embedded exactly once
    assert html.count("window.PlotlyConfig") == 1
    assert len(refs.ids) == len(set(refs.ids)), "duplicate element ids"


def test_report_size_for_8gpu_sized_results(full_html, big_frame):
    path, _ = full_html
    assert len(big_frame) == 1008
    assert path.stat().st_size < MAX_REPORT_BYTES


def test_every_section_is_present(full_html):
    _, html = full_html
    for div in FIGURE_IDS.values():
        assert f'id="{div}"' in html
    for anchor in ("overview", "latency-size", "latency-ranks", "winner", "breakdown", "timeline", "busbw", "verification", "results"):
        assert f'id="{anchor}"' in html
    assert "synthetic-8gpu" in html and "H100" in html and "analytic" in html
    assert "nvlink4 x18 via 4 nvswitch" in html and "450 GB/s nominal" in html
    assert "sync_round_latency_us.nvswitch" in html  # overridden cost shown
    assert "not recorded in the results" in html  # no date given: none invented


def test_date_comes_from_results_only(tiny):
    failed = [{"topology": "hgx-h100", "ranks": 8, "algorithm": "ring", "protocol": "ll", "launch": "graph",
               "size_bytes": 4096, "error": "model crashed", "attempts": 2}]
    html = build_report(tiny, synthetic_meta(date="2026-01-02", failed=failed))
    assert "2026-01-02" in html
    assert "Failed (1)" in html and "ll/ring/8/graph/4 KiB: model crashed" in html


def test_verification_table_and_counterexample_anchor(full_html):
    _, html = full_html
    assert 'id="verdict-table"' in html
    assert 'class="badge bad">counterexample' in html and 'class="badge ok">verified' in html
    assert 'href="#cex-sentinel-1"' in html and 'id="cex-sentinel-1"' in html
    assert "vector-8B-pairs-untorn" in html and "torn float4 read" in html
    assert 'id="measured-table"' in html and "nccl-tests-h100.log" in html


def test_missing_timeline_explains_how_to_get_one(tiny):
    html = build_report(tiny, synthetic_meta())
    assert 'id="timeline-missing"' in html and "--timeline auto" in html
    assert 'id="fig-timeline"' not in html
    assert 'id="verification-missing"' in html and 'id="measured-missing"' in html


# ---------------------------------------------------------------------------
# the figures


def test_figures_have_titles_axes_legends_and_expected_traces(frame):
    data = F.ReportData(frame, synthetic_meta(), None)
    assert len(data.series) == 14 and [v.label for v in data.views] == ["2 ranks", "4 ranks", "8 ranks"]
    assert data.views[data.default_view].ranks == 8
    # go.Figure validates the plain dicts the report renders unvalidated
    figs = {
        "size": go.Figure(F.latency_vs_size(data)), "ranks": go.Figure(F.latency_vs_ranks(data)),
        "winner": go.Figure(F.winner_map(data)), "breakdown": go.Figure(F.breakdown(data)),
        "busbw": go.Figure(F.busbw_vs_size(data)),
        "timeline": go.Figure(F.timeline_gantt(normalize_timelines(synthetic_timelines(frame)))),
    }
    assert len(figs["size"].data) == 14 and len(figs["busbw"].data) == 14
    assert len(figs["ranks"].data) == 14 * 3  # three sizes: 8 B, 4 KiB, 1 MiB
    # the breakdown: four components and the latency written above each bar
    assert len(figs["winner"].data) == 1 and len(figs["breakdown"].data) == 5 and len(figs["timeline"].data) == 14 * 5
    for name, fig in figs.items():
        assert fig.layout.title.text, name
        assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text, name
    assert "µs" in figs["size"].layout.yaxis.title.text and "GB/s" in figs["busbw"].layout.yaxis.title.text
    assert figs["size"].layout.xaxis.type == "log" and figs["size"].layout.yaxis.type == "log"
    hover = figs["size"].data[0].hovertemplate
    assert "latency" in hover and "algbw" in hover and "busbw" in hover
    # the rank selector: one restyle button per rank count, each with different data
    menu = figs["size"].layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == ["2 ranks", "4 ranks", "8 ranks"] and menu.active == 2
    ys = [b.args[0]["y"][0] for b in menu.buttons]
    assert ys[0] != ys[2]
    # link limit drawn as horizontal lines
    assert [s.y0 for s in figs["busbw"].layout.shapes] == [450.0, 370.8]
    assert F.link_limits(synthetic_meta()) == {"nominal": 450.0, "effective": 370.8}
    # breakdown: a slider per rank count, only the selected one visible
    sliders = figs["breakdown"].layout.sliders
    assert [s.visible for s in sliders] == [False, False, True]
    assert sliders[2].steps[sliders[2].active].label == "4 KiB"


def test_axes_are_clean(frame):
    """Log axes label decades only; the size axis is labelled up to the largest size run."""
    data = F.ReportData(frame, synthetic_meta(), None)
    for fig in (F.latency_vs_size(data), F.busbw_vs_size(data)):
        y = fig["layout"]["yaxis"]
        assert y["type"] == "log" and y["tickmode"] == "array"
        assert all(math.log10(v) == round(math.log10(v)) for v in y["tickvals"])  # 1, 10, 100 ...: no "2", "5"
        assert y["ticktext"] == [f"{v:g}" if v < 1 else f"{v:.0f}" for v in y["tickvals"]]
        x = fig["layout"]["xaxis"]
        assert x["tickvals"][-1] == max(frame.size_bytes) and x["ticktext"][-1] == F.size_label(max(frame.size_bytes))
    ranks = F.latency_vs_ranks(data)["layout"]
    assert all(ranks[k]["tickmode"] == "array" for k in ranks if k.startswith("yaxis"))
    assert F.log_ticks([3.0, 8.0]) == ([2.0, 5.0, 10.0], ["2", "5", "10"])  # less than a decade: 1-2-5


def test_breakdown_is_readable_for_every_protocol(frame):
    """Each bar is its own latency (normalised to 100 %), the latency written above it: a fast protocol next to a
    slow one is not a sliver."""
    data = F.ReportData(frame, synthetic_meta(), None)
    fig = F.breakdown(data)
    assert fig["layout"]["barnorm"] == "percent" and fig["layout"]["barmode"] == "stack"
    labels = fig["data"][-1]
    view = data.views[data.default_view]
    size = data.nearest_size(F.BREAKDOWN_SIZE)
    for (p, a), text in zip(data.series, labels["text"]):
        latency = float(data.row(view, p, a, size).latency_us)
        assert text.endswith(" µs") and float(text.split()[0]) == pytest.approx(latency, rel=5e-3, abs=0.006)
    # the components stay in µs (the hover and the browser tests read them)
    sync = fig["data"][1]["y"]
    assert sync[0] == pytest.approx(float(data.row(view, *data.series[0], size).sync_us), abs=1e-4)


def test_a_protocol_has_one_colour_everywhere(frame):
    data = F.ReportData(frame, synthetic_meta(), measured_points())
    seen: dict[str, set] = {}
    for fig in (go.Figure(F.latency_vs_size(data)), go.Figure(F.latency_vs_ranks(data)), go.Figure(F.busbw_vs_size(data))):
        for tr in fig.data:
            if tr.name.startswith("measured"):
                continue
            seen.setdefault(tr.name.split(" · ")[0], set()).add(tr.line.color)
    assert all(len(c) == 1 for c in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and protocols differ
    assert seen["ll"] == {F.PROTOCOL_COLORS["ll"]}
    bars = go.Figure(F.breakdown(data)).data[1]
    assert list(bars.marker.line.color) == [data.colors[p] for p, _ in data.series]


def test_winner_map_names_fastest_and_margin(frame):
    data = F.ReportData(frame, synthetic_meta(), None)
    hm = go.Figure(F.winner_map(data)).data[0]
    row8 = [v.label for v in data.views].index("8 ranks")
    col = data.sizes.index(8)
    sub = frame[(frame.ranks == 8) & (frame.size_bytes == 8)].sort_values("latency_us")
    best, second = sub.iloc[0], sub.iloc[1]
    text = hm.customdata[row8][col]
    assert f"fastest: {best.protocol} · {best.algorithm}" in text
    assert f"runner-up: {second.protocol} · {second.algorithm}" in text
    margin = (second.latency_us - best.latency_us) / best.latency_us * 100
    assert f"+{margin:.1f}%" in text


def test_several_launch_modes_become_selector_entries():
    f = synthetic_results(ranks=(4,), sizes=[8, 4096, 1 << 20], launches=("eager", "graph"))
    data = F.ReportData(f, {}, None)
    assert [v.label for v in data.views] == ["4 ranks · graph", "4 ranks · eager"]
    fig = go.Figure(F.latency_vs_ranks(data))
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["launch: graph", "launch: eager"]
    assert len(fig.data) == 14 * 3  # 8 B, 4 KiB, 1 MiB
    html = build_report(f, {"collsim_version": __import__("collsim").__version__})
    assert "only one rank count" in html


def test_unknown_protocols_get_distinct_stable_colours():
    c = F.protocol_colors(["ll", "mutant-b", "mutant-a"])
    assert c["ll"] == F.PROTOCOL_COLORS["ll"]
    assert c["mutant-a"] != c["mutant-b"] and c == F.protocol_colors(["mutant-a", "mutant-b", "ll"])
    many = F.protocol_colors([f"user-{i}" for i in range(50)] + list(F.PROTOCOL_COLORS))
    assert len(set(many.values())) == len(many) == 50 + len(F.PROTOCOL_COLORS)  # derived past the palette, never twice


def test_every_shipped_protocol_has_its_colour_and_place():
    from collsim.algorithms import ALGORITHMS
    from collsim.ir.registry import list_protocols

    assert set(F.PROTOCOL_COLORS) == set(list_protocols()) == set(F._PROTOCOL_ORDER)
    assert tuple(F._ALGORITHM_ORDER) == tuple(ALGORITHMS)


# ---------------------------------------------------------------------------
# loading and bad input


def _json_doc(frame: pd.DataFrame, **extra) -> dict:
    from collsim.resultsfile import COLUMNS

    doc = {**synthetic_meta(), "columns": list(COLUMNS), "rows": json.loads(frame.to_json(orient="records"))}
    doc.update(extra)
    return doc


def test_load_results_json_and_csv_round_trip(tiny, tmp_path):
    frame = tiny
    d = tmp_path / "reports" / "sweep"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(_json_doc(frame)))
    frame.to_csv(d / "results.csv", index=False)
    fj, mj = load_results(d / "results.json")
    fc, mc = load_results(d / "results.csv")
    assert len(fj) == len(fc) == len(frame)
    assert mj["scenario"]["name"] == "synthetic-8gpu" and mj["results_file"].endswith("results.json")
    assert mc["model"] == "analytic" and mc["topology"]["summary"]["per_gpu_gbps"]["nominal"] == 450.0  # from results.json beside it
    pd.testing.assert_frame_equal(fj, fc, check_dtype=False)
    mc["results_file"] = mj["results_file"]
    assert build_report(fj, mj) == build_report(fc, mc)
    (d / "results.json").unlink()
    _, inferred = load_results(d / "results.csv")
    assert inferred["scenario"]["name"] == "sweep" and inferred["model"] == "analytic"


def _one_line_error(call, *needles):
    with pytest.raises(InputError) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


def test_bad_results_files_are_one_line_input_errors(frame, tmp_path):
    from collsim.resultsfile import COLUMNS

    missing = tmp_path / "nope.json"
    _one_line_error(lambda: load_results(missing), "nope.json", "no such file")

    other = tmp_path / "other.json"
    other.write_text(json.dumps(_json_doc(frame, collsim_version="9.3.0")))
    _one_line_error(lambda: load_results(other), "other.json", "collsim 9.3.0")

    nover = tmp_path / "nover.json"
    doc = _json_doc(frame)
    del doc["collsim_version"]
    nover.write_text(json.dumps(doc))
    _one_line_error(lambda: load_results(nover), "nover.json", "collsim_version")

    cols = tmp_path / "cols.json"
    cols.write_text(json.dumps(_json_doc(frame, columns=[c for c in COLUMNS if c != "sync_us"])))
    _one_line_error(lambda: load_results(cols), "cols.json", "sync_us")

    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(_json_doc(frame.iloc[0:0])))
    _one_line_error(lambda: load_results(empty), "empty.json", "no result rows")

    broken = tmp_path / "broken.json"
    broken.write_text('{"rows": [')
    _one_line_error(lambda: load_results(broken), "broken.json", "not valid JSON")

    short = tmp_path / "short.csv"
    frame.drop(columns=["busbw_gbps", "note"]).to_csv(short, index=False)
    _one_line_error(lambda: load_results(short), "short.csv", "busbw_gbps", "note")

    header_only = tmp_path / "header.csv"
    header_only.write_text(",".join(COLUMNS) + "\n")
    _one_line_error(lambda: load_results(header_only), "header.csv", "no result rows")

    blank = tmp_path / "blank.csv"
    blank.write_text("")
    _one_line_error(lambda: load_results(blank), "blank.csv", "empty file")

    badnum = tmp_path / "badnum.csv"
    f = frame.head(5).astype({"latency_us": object})
    f.loc[3, "latency_us"] = "fast"
    f.to_csv(badnum, index=False)
    _one_line_error(lambda: load_results(badnum), "badnum.csv", "line 5", "latency_us", "'fast'")

    txt = tmp_path / "results.txt"
    txt.write_text("x")
    _one_line_error(lambda: load_results(txt), "results.txt", ".csv")


def test_write_report_refuses_bad_frames_and_writes_nothing(frame, tmp_path):
    out = tmp_path / "r.html"
    _one_line_error(lambda: write_report(frame.drop(columns=["protocol"]), {}, out), "protocol")
    _one_line_error(lambda: write_report(frame.iloc[0:0], {"results_file": "x/results.json"}, out), "x/results.json", "no result rows")
    nolat = frame.head(3).copy()
    nolat["latency_us"] = math.nan
    _one_line_error(lambda: write_report(nolat, {}, out), "no costed rows")
    dup = pd.concat([frame.head(2), frame.head(1)])
    _one_line_error(lambda: write_report(dup, {}, out), "duplicate")
    assert list(tmp_path.iterdir()) == []


def test_bad_timeline_is_an_input_error(frame):
    _one_line_error(lambda: build_report(frame, {}, timeline=[{"rank": 0, "kind": "poll"}]), "start_us")
    _one_line_error(lambda: build_report(frame, {}, timeline=[{"rank": 0, "kind": "x", "start_us": 2, "end_us": 1}]), "ends before")


# ---------------------------------------------------------------------------
# command line


def test_cli_report_builds_and_fails_cleanly(tiny, tmp_path, capsys, monkeypatch):
    from collsim.cli import main

    frame = tiny
    src = tmp_path / "results.json"
    src.write_text(json.dumps(_json_doc(frame)))
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url) or True)
    main(["report", str(src), "--open"])
    assert (tmp_path / "report.html").is_file()
    assert opened == [(tmp_path / "report.html").resolve().as_uri()]
    main(["report", str(src), "-o", str(tmp_path / "other.html")])
    assert (tmp_path / "other.html").read_bytes() == (tmp_path / "report.html").read_bytes()
    capsys.readouterr()

    bad = tmp_path / "bad.csv"
    bad.write_text("topology,gpu\nx,y\n")
    with pytest.raises(SystemExit) as info:
        main(["report", str(bad)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("collsim: error:") and "bad.csv" in err and "\n" not in err
    assert not (tmp_path / "report.html").with_name("bad.html").exists()


def test_cli_bad_timeline_spec(frame, tmp_path, capsys):
    from collsim.cli import main

    src = tmp_path / "results.json"
    src.write_text(json.dumps(_json_doc(frame)))
    with pytest.raises(SystemExit) as info:
        main(["report", str(src), "--timeline", "ll/one-shot/eight/4KiB"])
    assert info.value.code == 2
    assert "--timeline" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# end to end with the analytic model


def test_end_to_end_analytic_run_then_report(tmp_path):
    from collsim.runner.run import run_scenario

    scenario = {"name": "e2e", "topology": "hgx-h100", "ranks": [2, 4], "sizes": "8B..1MiB x16", "launch": "graph",
                "protocols": ["simple", "ll", "ll128"], "algorithms": ["one-shot", "ring"]}
    frame = run_scenario(scenario, out=tmp_path / "e2e", model="analytic")
    results = tmp_path / "e2e" / "results.json"
    assert results.is_file()
    loaded, meta = load_results(results)
    assert len(loaded) == len(frame) > 0
    from collsim.report import timelines_for

    tl = timelines_for(loaded, meta, ["auto", "ll/ring/2/8B"])
    assert {(t["protocol"], t["algorithm"], t["ranks"]) for t in tl} >= {("ll", "ring", 2), ("ll", "one-shot", 4)}
    out = write_report(loaded, meta, tmp_path / "e2e" / "report.html", timeline=tl)
    html = out.read_text(encoding="utf-8")
    assert 'id="fig-timeline"' in html and "e2e" in html and "analytic" in html
    assert out.stat().st_size < MAX_REPORT_BYTES


def _verify_json(protocol: str, ok: bool) -> dict:
    """A result shaped like ``collsim verify PROTOCOL --json`` prints (VerifyResult.to_json)."""
    bound = {"ranks": 3, "iterations": 2, "lines": 1, "threads": 1, "model": "ptx",
             "assumptions": ["store-16B-untorn"], "data_domain": False, "notes": []}
    cex = {"property": "torn-read", "reason": "rank 0 consumes a line mixing two writes",
           "steps": [{"rank": 1, "thread": 0, "iteration": 0, "op": "store_lines[k=1]", "action": "writes",
                      "target": "buf@rank0[line 0]", "values": ["w0 = 7"], "note": "", "mark": False},
                     {"rank": 0, "thread": 0, "iteration": 0, "op": "poll_lines[k=0]", "action": "polls",
                      "target": "buf@rank0[line 0]", "values": ["w3 = flag"], "note": "torn", "mark": True}],
           "facts": {}}
    prop = lambda status, c=None: {"property": "x", "status": status, "bound": bound, "seconds": 0.1,  # noqa: E731
                                   "reason": None, "note": None, "counterexample": c}
    return {
        "protocol": protocol, "algorithm": "one-shot", "model": "ptx", "engine": "native", "bound": bound,
        "ok": ok, "seconds": 1.0, "depends_on": ["store-16B-untorn"], "expected_violation": None, "caught": None,
        "properties": {"data-race": prop("holds"), "torn-read": prop("holds" if ok else "violated", None if ok else cex)},
        "dependencies": [{"name": "store-16B-untorn", "kind": "assumption", "statement": "a 16-byte store arrives whole",
                          "needed": True, "results": {"torn-read": prop("violated", cex)}}],
    }


def test_verification_reads_collsim_verify_json():
    from collsim.report.data import normalize_verification

    summary = {"ok": False, "seconds": 3.0, "protocols": [_verify_json("sentinel", True), _verify_json("ll", False)],
               "mutants": [_verify_json("ll-no-fence", False)]}
    rows = normalize_verification(summary)
    assert [(r["protocol"], r["verdict"]) for r in rows] == [("sentinel", "verified"), ("ll", "violated: torn-read")]
    s = rows[0]
    assert s["model"] == "ptx" and s["assumptions"] == ["store-16B-untorn"]
    assert s["hardware"] == ["store-16B-untorn: a 16-byte store arrives whole (without it: torn-read violated)"]
    assert [c["title"] for c in s["counterexamples"]] == ["without store-16B-untorn: torn-read"]
    assert "rank 0 consumes a line mixing two writes" in s["counterexamples"][0]["body"]
    assert "poll_lines[k=0]" in s["counterexamples"][0]["body"]
    assert [c["title"] for c in rows[1]["counterexamples"]][0] == "torn-read"
    assert normalize_verification(_verify_json("ll", True))[0]["verdict"] == "verified"


def test_timeline_categories_refine_coarse_kinds():
    cat = F.event_category
    assert cat("sync", "poll barrier.publish.wait[k=0]") == "barrier wait"
    assert cat("sync", "poll poll_lines[k=0]") == "poll"
    assert cat("sync", "fence fence_acquire") == "fence"
    assert cat("sync", "release fence before the store credit.return") == "fence"
    assert cat("data", "store store_lines[k=1]") == "store"
    assert cat("sync", "store credit.return") == "flag store"
    assert cat("reduce", "reduce reduce") == "reduce" and cat("launch", "kernel launch and start") == "launch"
    assert cat("poll", "anything") == "poll"  # specific kinds are kept
    assert cat("sync", "something new") == "sync"


def test_auto_timelines_show_the_largest_run(tmp_path):
    """auto simulates the largest rank count run (72 here, not a smaller one); its timeline shows as many ranks
    as fit in the bar budget, rank 0 and the slowest among them, and says so in its title."""
    from collsim.report import timelines_for
    from collsim.report.timelines import MAX_RANKS_SHOWN, TIMELINE_BARS
    from collsim.runner.run import run_scenario

    scenario = {"name": "wide", "topology": "gb200-nvl72", "ranks": [4, 16, 72], "sizes": [4096],
                "launch": "graph", "protocols": ["ll"], "algorithms": ["one-shot", "ring"]}
    run_scenario(scenario, out=tmp_path / "wide", model="analytic")
    loaded, meta = load_results(tmp_path / "wide" / "results.json")
    configs = timelines_for(loaded, meta, ["auto"])
    assert {t["ranks"] for t in configs} == {72}
    for t in configs:
        shown = sorted({e["rank"] for e in t["events"]})
        assert shown == t["ranks_shown"] and 0 in shown and 2 <= len(shown) <= MAX_RANKS_SHOWN
        assert len(t["events"]) <= TIMELINE_BARS * 1.5
        assert t["title"].endswith(f"ranks {', '.join(map(str, shown))} of 72 shown")
    small = timelines_for(loaded, meta, ["ll/one-shot/4/4KiB"])[0]
    assert "title" not in small and sorted({e["rank"] for e in small["events"]}) == [0, 1, 2, 3]  # all fit
    fig = F.timeline_gantt(normalize_timelines(configs))
    menu = fig["layout"]["updatemenus"][0]
    assert [b["args"][1]["yaxis.categoryarray"] for b in menu["buttons"]] == [
        [f"rank {r}" for r in t["ranks_shown"]] for t in configs]