"""The review page in headless Chromium: no console errors, no network, every plot drawn with its traces."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from browser import chromium_driver, console_errors, skip_reason

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(skip_reason() is not None, reason=f"browser tests need headless Chromium: {skip_reason()}"),
    pytest.mark.timeout(240),
]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "protocols"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from collsim.review import review

    out = tmp_path_factory.mktemp("review")
    r = review(str(EXAMPLES / "ll16_unassumed.py"), against=["ll"], ranks="2,4", sizes="8,4KiB", algorithm="one-shot",
               verify_ranks=2, compile=False, use_cache=False, out_dir=out)
    expected_plots = 3 + len(r.counterexamples())
    with chromium_driver(width=1440, height=1000) as driver:
        driver.get((out / "review.html").as_uri())
        deadline = time.time() + 60
        while time.time() < deadline:
            done = driver.execute_script(
                "return Array.from(document.querySelectorAll('.js-plotly-plot'))"
                ".filter(function (g) { return g._fullLayout && g.querySelector('.main-svg'); }).length")
            if done == expected_plots:
                break
            time.sleep(0.2)
        yield driver, r, expected_plots


def test_no_console_errors_and_no_network(page):
    driver, _, _ = page
    assert console_errors(driver) == []
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
    assert [x for x in resources if not x.startswith(("file:", "data:", "blob:"))] == []


def test_plots_rendered_with_expected_traces(page):
    driver, r, expected_plots = page
    traces = driver.execute_script(
        "var out = {}; document.querySelectorAll('.js-plotly-plot').forEach(function (g) {"
        " out[g.id] = [g.data.length, g._fullData.length, g.querySelectorAll('.main-svg').length,"
        " g.getBoundingClientRect().width, g.getBoundingClientRect().height,"
        " g.data.map(function (t) { return t.name; })]; }); return out;")
    assert len(traces) == expected_plots
    series = 2  # ll16-unassumed and ll, one-shot... plus ll's other algorithms
    nseries = len({(rec["protocol"], rec["algorithm"]) for rec in r.records})
    assert series <= nseries
    assert traces["fig-latency-size"][0] == nseries
    assert traces["fig-winner"][0] == 1
    for key, (n, full, svgs, width, height, names) in traces.items():
        assert n == full and svgs >= 1 and width > 300 and height > 200, key
        if key.startswith("fig-cex-"):
            assert "violation" in names and "read from" in names, names


def test_verdict_box_and_code(page):
    driver, r, _ = page
    box = driver.execute_script(
        "var v = document.getElementById('verdict'); return [v.dataset.ok, v.innerText];")
    assert box[0] == "false" and "NOT correct" in box[1] and "stale read" in box[1]
    sync_rows = driver.execute_script("return document.querySelectorAll('table.code tr.sync').length")
    assert sync_rows >= 2  # the store and the poll of the line
