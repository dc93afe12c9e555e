"""``collsim review``: exit status, review.json/review.html contents, bad input with file:line."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import collsim.cli.review_cmd  # noqa: F401  (registers the command until collsim.cli imports it)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "protocols"
SMALL = ("--ranks", "2", "--sizes", "8,4KiB", "--algorithm", "one-shot", "--verify-ranks", "2", "--no-compile",
         "--quiet")

#: (protocol file, comparison protocols, expected exit status, a property its counterexample shows)
CASES = [
    ("ll16.py", "ll", 0, None),
    ("ll16_unassumed.py", "ll", 1, "stale-read"),
    ("counter_barrier.py", "barrier", 0, None),
    ("counter_barrier_short.py", "barrier", 1, "data-race"),
    ("simple_ra.py", "simple", 0, None),
    ("simple_ra_relaxed.py", "simple", 1, "data-race"),
]


def _has(page: str, text: str) -> bool:
    """``text in page`` without pytest diffing a multi-megabyte page on failure."""
    return text in page


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("COLLSIM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "verify-cache"))


@pytest.mark.parametrize("name,against,status,prop", CASES, ids=[c[0] for c in CASES])
def test_example_protocols_review(collsim_cli, tmp_path, name, against, status, prop):
    out = tmp_path / "rev"
    code, stdout, stderr = collsim_cli("review", str(EXAMPLES / name), "--against", against, *SMALL, "--out", out)
    assert code == status, stdout + stderr
    doc = json.loads((out / "review.json").read_text())
    html = (out / "review.html").read_text()
    assert doc["exit_code"] == status and doc["ok"] is (status == 0)
    assert {(v["algorithm"], v["model"]) for v in doc["verification"]} == {("one-shot", "sc"), ("one-shot", "ptx")}
    protocols = {row["protocol"] for row in doc["simulation"]["rows"]}
    assert protocols == {doc["protocol"], against}
    assert _has(html, 'id="verdict"') and _has(html, "fig-winner") and _has(html, "collsim review")
    assert _has(html, "<script") and not _has(html, "<script src=")
    if prop is None:
        assert not _has(html, "NOT correct")
        assert _has(html, 'id="fig-cex-1"') is bool(doc["depends_on"])  # counterexamples without an assumption
        assert _has(html, "no-counterexamples") is not bool(doc["depends_on"])
    else:
        ptx = next(v for v in doc["verification"] if v["model"] == "ptx")
        assert ptx["properties"][prop]["status"] == "violated"
        assert ptx["properties"][prop]["counterexample"]["steps"]
        assert _has(html, 'id="fig-cex-1"') and _has(html, "NOT correct")


def test_review_depends_on_and_code(collsim_cli, tmp_path):
    out = tmp_path / "rev"
    code, stdout, _ = collsim_cli("review", str(EXAMPLES / "ll16.py"), "--against", "ll", *SMALL, "--out", out)
    assert code == 0
    assert "depends on: store-16B-untorn" in stdout
    doc = json.loads((out / "review.json").read_text())
    assert doc["depends_on"] == ["store-16B-untorn"]
    # without the assumption there is a counterexample, drawn on the page
    html = (out / "review.html").read_text()
    assert _has(html, "without store-16B-untorn")
    # emitted code, each synchronization instruction named by its IR op
    assert doc["emit"][0]["skipped"].startswith("compilation not requested")
    assert _has(html, "st.volatile.global.v4.u32") and _has(html, "IR #2 store_lines: Store volatile.sys")
    assert (out / "emitted" / "ll16__one-shot" / "kernel.cu").exists()
    whats = [c["what"] for c in doc["commands"]]
    assert "this review" in whats and "verify one-shot under ptx" in whats


def test_review_lists_the_host_ordering_a_proxy_depends_on(tmp_path):
    from collsim.review import review

    r = review(str(EXAMPLES / "proxy_fifo.py"), against=["simple"], ranks="2", sizes="4KiB", algorithm="one-shot",
               verify_ranks=2, compile=False, out_dir=tmp_path)
    assert r.ok and r.depends_on == ["host-tso"]
    html = (tmp_path / "review.html").read_text()
    assert _has(html, "without host-tso") and _has(html, "proxy_read_request")
    fenced = review(str(EXAMPLES / "proxy_fifo_fenced.py"), against=["simple"], ranks="2", sizes="4KiB",
                    algorithm="one-shot", verify_ranks=2, compile=False, out_dir=tmp_path / "fenced")
    assert fenced.ok and fenced.depends_on == [] and fenced.protocol.assumptions == ()


def test_review_shipped_name_and_winner(tmp_path, monkeypatch):
    from collsim.review import review

    r = review("ll", against=["barrier"], ranks="2,4", sizes="8,64KiB", algorithm="one-shot", verify_ranks=2,
               compile=False, out_dir=tmp_path)
    assert r.ok and r.depends_on == ["vector-8B-pairs-untorn"]
    wins = r.wins()
    assert wins["cells"] == 4 and len(wins["won"]) + len(wins["lost"]) == 4
    from collsim.review.page import verdict_lines

    _, lines = verdict_lines(r)
    assert any("Fastest" in line or "Never fastest" in line for line in lines)


def test_counterexample_figure_highlights_read_and_write():
    import plotly.graph_objects as go

    from collsim.review import counterexample_figure
    from collsim.verify import verify

    res = verify("mutant-ll-flag-bits1", "one-shot", ranks=2, dependencies=False, use_cache=False)
    cex = res.properties["stale-read"].counterexample.to_json()
    fig = counterexample_figure(cex, "stale read")
    go.Figure(fig)  # valid plotly
    names = [t["name"] for t in fig["data"]]
    assert "violation" in names and "read from" in names
    violation = next(t for t in fig["data"] if t["name"] == "violation")
    assert violation["x"]


#: a protocol that moves data correctly; the cases append one bad operation to its exchange (line 16)
_MOVER = """
        from collsim.ir import NRANKS, RANK, AtLeast, Buffer, Input, Load, PollUntil, Protocol, Ref, Scope, Sem, Store
        from collsim.ir import ceil_div, counter_layout, plain_layout
        L = plain_layout()
        class P(Protocol):
            name = "p"
            algorithms = ("one-shot",)
            data_layout = L
            def buffers(self, n):
                return (Buffer("b", L, depth=1, regions=NRANKS, lines=ceil_div(n, 16)),
                        Buffer("flags", counter_layout(8), depth=1, regions=1, lines=1))
            def exchange(self, b, ex):
                self.sends_then_recvs(b, ex, lambda b, s: b.emit(Store(
                    Ref("b", s.to, region=RANK, lines=ceil_div(s.nbytes, 16)), s.data, Sem.WEAK, Scope.SYS)),
                    lambda b, r: b.emit(Load(r.into, Ref("b", RANK, region=r.frm, lines=ceil_div(r.nbytes, 16)),
                                             Sem.WEAK, Scope.SYS, into_offset=r.into_offset)))"""

BAD = {
    "syntax": ("""
        from collsim.ir import Protocol
        class P(Protocol)
            name = "p"
        """, 2),
    "unknown_op": ("""
        from collsim.ir import NRANKS, RANK, Buffer, Protocol, Ref, Scope, Sem, plain_layout
        L = plain_layout()
        class P(Protocol):
            name = "p"
            algorithms = ("one-shot",)
            data_layout = L
            def buffers(self, n):
                return (Buffer("b", L, depth=1, regions=NRANKS, lines=1),)
            def exchange(self, b, ex):
                b.emit(Shout(Ref("b", RANK), Sem.WEAK, Scope.SYS))
        """, 10),
    "poll_nobody_writes": (_MOVER + """
                b.emit(PollUntil(Ref("flags", RANK), AtLeast(1), Sem.ACQUIRE, Scope.SYS, label="wait_forever"))
        """, 16),
    "index_out_of_range": (_MOVER + """
                b.emit(Store(Ref("b", RANK, slot=1), Input(0), Sem.WEAK, Scope.SYS, label="store_slot1"))
        """, 16),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_protocol_file_exit_2_with_line(collsim_cli, tmp_path, case):
    source, line = BAD[case]
    path = tmp_path / f"{case}.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    code, stdout, stderr = collsim_cli("review", str(path), *SMALL, "--out", tmp_path / "rev")
    assert code == 2, stdout + stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert f"{path}:{line}:" in lines[0], lines[0]
    assert not (tmp_path / "rev" / "review.html").exists()


def test_bad_options(collsim_cli, tmp_path):
    code, _, err = collsim_cli("review", "ll", "--against", "nope", *SMALL, "--out", tmp_path)
    assert code == 2 and "--against" in err
    code, _, err = collsim_cli("review", "ll", "--ranks", "2", "--algorithm", "sideways", "--no-compile", "-q",
                               "--out", tmp_path)
    assert code == 2 and "--algorithm" in err


@pytest.mark.cuda
def test_review_compiles_with_nvcc(tmp_path):
    from collsim.emit.toolchain import find_nvcc
    from collsim.review import review

    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    r = review(str(EXAMPLES / "ll16.py"), against=[], ranks="2", sizes="8", algorithm="one-shot", verify_ranks=2,
               out_dir=tmp_path)
    (e,) = r.emits
    assert e.compiled and e.error is None, e.error
    assert "0 error(s)" in e.ptx_summary
