"""The report in a real browser: headless system Chromium driven by Selenium.

One 8-GPU-sized report (with timelines, verdicts and measurements) is loaded
once per module; every test inspects or clicks that page. Set
``COLLSIM_REPORT_SCREENSHOTS=<dir>`` to save a 1440-px screenshot of each
section there (for looking at the layout; never committed).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from browser import chromium_driver, console_errors, skip_reason
from collsim.report import FIGURE_IDS
from test_report import full_report, synthetic_results

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(skip_reason() is not None, reason=f"browser tests need headless Chromium: {skip_reason()}"),
    pytest.mark.timeout(240),
]

SECTIONS = ("summary", "overview", "latency-size", "latency-ranks", "winner", "breakdown", "timeline", "busbw", "verification", "results")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return full_report(tmp_path_factory.getbasetemp()), synthetic_results()


@pytest.fixture(scope="module")
def page(report):
    path, frame = report
    with chromium_driver(width=1440, height=1000) as driver:
        driver.get(path.as_uri())
        # plotly draws on load; wait until every plot div has its graph
        deadline = time.time() + 60
        while time.time() < deadline:
            done = driver.execute_script(
                "return Array.from(document.querySelectorAll('.js-plotly-plot'))"
                ".filter(function (g) { return g._fullLayout && g.querySelector('.main-svg'); }).length"
            )
            if done == len(FIGURE_IDS):
                break
            time.sleep(0.2)
        yield driver, frame


def _js(driver, script, *args):
    return driver.execute_script(script, *args)


def test_no_console_errors_and_no_network(page):
    driver, _ = page
    assert console_errors(driver) == []
    assert _js(driver, "return document.readyState") == "complete"
    resources = _js(driver, "return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
    assert [r for r in resources if not r.startswith(("file:", "data:", "blob:"))] == []


def test_every_plot_rendered_with_expected_traces(page):
    driver, _ = page
    traces = _js(
        driver,
        "var out = {}; document.querySelectorAll('.js-plotly-plot').forEach(function (g) {"
        " out[g.id] = [g.data.length, g._fullData.length, g.querySelectorAll('.main-svg').length,"
        " g.getBoundingClientRect().width, g.getBoundingClientRect().height]; }); return out;",
    )
    expected = {
        "fig-latency-size": 14 + 1,  # 14 protocol × algorithm series + one measured series
        "fig-latency-ranks": 14 * 3,  # three sizes
        "fig-winner": 1,
        "fig-breakdown": 5,  # launch, sync, data, reduce, and the latency above each bar
        "fig-timeline": 14 * 5,  # 14 configurations × 5 event kinds
        "fig-busbw": 14 + 1,
    }
    assert {k: v[0] for k, v in traces.items()} == expected
    for div, (n, full, svgs, width, height) in traces.items():
        assert full == n and svgs >= 1, div
        assert width > 1000 and height > 250, (div, width, height)  # laid out at the page's width
    # the drawn SVG holds the lines, not just the data
    assert _js(driver, "return document.querySelectorAll('#fig-latency-size .scatterlayer .trace').length") == 15
    assert _js(driver, "return document.querySelectorAll('#fig-winner .hm, #fig-winner image').length") >= 1
    titles = _js(driver, "return Array.from(document.querySelectorAll('.js-plotly-plot .gtitle')).map(function (t) { return t.textContent; })")
    assert len(titles) == len(FIGURE_IDS) and all(titles)


def _pick(driver, div, label):
    """Open the dropdown of plot ``div`` and click the entry ``label`` (real clicks on plotly's SVG menu)."""
    header = driver.find_element("css selector", f"#{div} .updatemenu-header")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", header)
    header.click()
    for button in driver.find_elements("css selector", f"#{div} .updatemenu-dropdown-button"):
        if (button.get_attribute("textContent") or "").strip() == label:
            driver.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", button)
            button.click()
            return
    raise AssertionError(f"no entry {label!r} in the menu of {div}")


def test_rank_selector_changes_plotted_data(page):
    driver, frame = page
    read = "var g = document.getElementById(arguments[0]); return g.data.map(function (t) { return Array.from(t.y); });"
    before = _js(driver, read, "fig-latency-size")
    _pick(driver, "fig-latency-size", "2 ranks")
    time.sleep(0.3)
    after = _js(driver, read, "fig-latency-size")
    assert after != before
    # the first series is barrier · one-shot: the plot now shows its 2-rank latencies
    want = frame[(frame.ranks == 2) & (frame.protocol == "barrier") & (frame.algorithm == "one-shot")].sort_values("size_bytes")
    assert after[0] == pytest.approx(list(want.latency_us))
    assert _js(driver, "return document.querySelector('#fig-latency-size .updatemenu-header').textContent").startswith("2 ranks")
    _pick(driver, "fig-latency-size", "8 ranks")
    time.sleep(0.3)
    assert _js(driver, read, "fig-latency-size") == before
    assert console_errors(driver) == []


def test_breakdown_selector_switches_rank_count_and_its_size_slider(page):
    driver, frame = page
    state = ("var g = document.getElementById('fig-breakdown'); return [g.data[1].y.slice(),"
             " g.layout.sliders.map(function (s) { return s.visible; })];")
    y8, vis8 = _js(driver, state)
    assert vis8 == [False, False, True]
    _pick(driver, "fig-breakdown", "4 ranks")
    time.sleep(0.3)
    y4, vis4 = _js(driver, state)
    assert vis4 == [False, True, False] and y4 != y8
    want = frame[(frame.ranks == 4) & (frame.size_bytes == 4096)].set_index(["protocol", "algorithm"])
    # synchronization bar of the first series (barrier · one-shot) at 4 ranks, 4 KiB
    assert y4[0] == pytest.approx(want.loc[("barrier", "one-shot"), "sync_us"])
    assert console_errors(driver) == []


def test_timeline_menu_switches_configuration(page):
    driver, _ = page
    visible = ("return document.getElementById('fig-timeline').data"
               ".map(function (t, i) { return t.visible === false ? -1 : i; }).filter(function (i) { return i >= 0; })")
    first = _js(driver, visible)
    assert first == [0, 1, 2, 3, 4]
    labels = _js(driver, "return document.getElementById('fig-timeline').layout.updatemenus[0].buttons.map(function (b) { return b.label; })")
    _pick(driver, "fig-timeline", labels[3])
    time.sleep(0.3)
    assert _js(driver, visible) == [15, 16, 17, 18, 19]
    assert labels[3] in _js(driver, "return document.querySelector('#fig-timeline .gtitle').textContent")


def test_table_rows_sorting_filter_and_csv(page):
    driver, frame = page
    assert _js(driver, "return document.querySelectorAll('#results-table tbody tr').length") == len(frame)
    assert _js(driver, "return document.getElementById('results-count').textContent") == f"{len(frame)} of {len(frame)} rows"
    header = driver.find_element("xpath", "//table[@id='results-table']//th[text()='latency_us']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", header)
    col = list(frame.columns).index("latency_us")
    first = "return document.querySelector('#results-table tbody tr').cells[arguments[0]].textContent"
    header.click()
    assert float(_js(driver, first, col)) == pytest.approx(frame.latency_us.min())
    assert header.get_attribute("aria-sort") == "ascending"
    box = driver.find_element("id", "results-filter")
    box.send_keys("atomic-counter")
    n = int((frame.protocol == "atomic-counter").sum())
    assert _js(driver, "return document.querySelectorAll('#results-table tbody tr:not([hidden])').length") == n
    assert _js(driver, "return document.getElementById('results-count').textContent") == f"{n} of {len(frame)} rows"
    csv = _js(driver, "return window.collsimShownCsv()").splitlines()
    assert csv[0].split(",") == list(frame.columns) and len(csv) == n + 1
    assert all(",atomic-counter," in line for line in csv[1:])
    driver.find_element("id", "results-download").click()  # builds a Blob download; must not throw
    assert console_errors(driver) == []


def test_counterexample_anchor_opens_details(page):
    driver, _ = page
    link = driver.find_element("css selector", "#verdict-table a[href='#cex-sentinel-1']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center', behavior: 'instant'})", link)
    link.click()
    assert _js(driver, "return location.hash") == "#cex-sentinel-1"
    assert _js(driver, "return document.getElementById('cex-sentinel-1').tagName") == "DETAILS"


def test_screenshots_of_each_section(page, request):
    """Save 1440-px screenshots when COLLSIM_REPORT_SCREENSHOTS names a folder (layout review)."""
    folder = os.environ.get("COLLSIM_REPORT_SCREENSHOTS")
    if not folder:
        pytest.skip("set COLLSIM_REPORT_SCREENSHOTS=<dir> to save screenshots")
    driver, _ = page
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    height = _js(driver, "return document.body.scrollHeight")
    driver.set_window_size(1440, min(height + 100, 16000))
    time.sleep(1.0)
    for section in SECTIONS:
        driver.find_element("id", section).screenshot(str(out / f"{section}.png"))
    driver.set_window_size(1440, 1000)


# ---------------------------------------------------------------------------
# the first screen of a real run's report


@pytest.fixture(scope="module")
def run_report(tmp_path_factory):
    """A report written by a real run (analytic model: fast), and its results.csv."""
    from collsim.runner.run import run_scenario

    out = tmp_path_factory.mktemp("run") / "r"
    run_scenario({"name": "first-screen", "topology": "hgx-h100", "ranks": [2, 4, 8], "sizes": "8B..64MiB x4",
                  "launch": "graph", "model": "analytic"}, out=out)
    return out / "report.html", out / "results.csv"


def test_summary_is_the_first_screen_and_matches_results_csv(run_report):
    import csv

    path, results = run_report
    with open(results, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    latency = {(r["ranks"], r["launch"], r["protocol"], r["algorithm"], r["size_bytes"]): r["latency_us"] for r in rows}
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    with chromium_driver(width=1440, height=1000) as driver:
        driver.get(path.as_uri())
        box = _js(driver, "var r = document.getElementById('summary').getBoundingClientRect();"
                          " return [r.top, r.bottom, window.innerHeight, window.scrollY];")
        bands = _js(driver, "return Array.from(document.querySelectorAll('#summary .band')).map(function (b) {"
                            " var d = b.dataset; return [d.ranks, d.launch, d.choices, d.firstSize, d.lastSize,"
                            " d.firstLatency, d.lastLatency, b.getBoundingClientRect().bottom]; });")
        verdicts = _js(driver, "return Array.from(document.querySelectorAll('#summary-verdicts li'))"
                               ".map(function (li) { return li.dataset.protocol; });")
        assert console_errors(driver) == []
    top, bottom, fold, scrolled = box
    assert scrolled == 0 and 0 <= top < fold / 3, box   # the page opens on it
    assert bottom <= fold, box                          # all of it on the first screen at 1440 px
    assert bands and all(b[7] <= fold for b in bands)
    by_ranks: dict[str, list] = {}
    for ranks, launch, choices, first, last, lat_first, lat_last, _ in bands:
        by_ranks.setdefault(ranks, []).append((first, last))
        first_choice = choices.split("|")[0].split("/")
        # the numbers are results.csv's, to the digit
        assert latency[(ranks, launch, *first_choice, first)] == lat_first
        assert latency[(ranks, launch, *first_choice, last)] == lat_last
        # and the choice is the fastest there (every choice named is within 1 % of the fastest)
        for size in (first, last):
            here = [float(v) for k, v in latency.items() if k[0] == ranks and k[1] == launch and k[4] == size]
            for choice in choices.split("|"):
                assert float(latency[(ranks, launch, *choice.split("/"), size)]) <= min(here) * 1.01 + 1e-9
    # every rank count of the run, its bands in size order covering every size run
    assert sorted(by_ranks, key=int) == ["2", "4", "8"]
    for spans in by_ranks.values():
        covered = [s for first, last in spans for s in sizes if int(first) <= s <= int(last)]
        assert covered == sizes
    # one verdict line per protocol of the run, each once
    assert sorted(verdicts) == sorted({r["protocol"] for r in rows})
