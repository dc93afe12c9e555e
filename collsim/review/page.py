"""``review.html``: one self-contained page in the latency report's style (its CSS, its plotly embedding).

Sections: the verdict box, the well-formedness checks, the verification
table, each counterexample as a per-rank timeline (the offending read and
the write it read from highlighted), the latency comparison plots and the
winner map, the emitted CUDA with the IR operation beside each
synchronization instruction, and the commands that reproduce everything.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from collsim.atomicfile import atomic_write_text
from collsim.report import figures as F
from collsim.report.render import figure_html, page_templates
from collsim.resultsfile import check_frame, records_frame
from collsim.review.pipeline import Review
from collsim.verify.properties import PROPERTIES, PROPERTY_TITLES
from collsim.version import __version__

__all__ = ["build_page", "write_review", "counterexample_figure", "FIXED_FIGURES", "ACTION_COLORS"]

#: Figure div ids that every review page has (when the simulation produced rows).
FIXED_FIGURES = {"latency_size": "fig-latency-size", "latency_ranks": "fig-latency-ranks", "winner": "fig-winner"}

#: Marker colour of each step kind of a counterexample timeline.
ACTION_COLORS = {
    "writes": "#1f77b4",
    "reads": "#2ca02c",
    "polls": "#17becf",
    "rmw": "#9467bd",
    "fence": "#7f7f7f",
    "barrier": "#bcbd22",
}
_VIOLATION = "#d62728"
_SOURCE = "#ff7f0e"
_FROM = re.compile(r"\[from rank (\d+) t(\d+) (\S+) \(iteration (\d+)\)\]")


def _row(step: dict[str, Any]) -> str:
    return f"rank {step['rank']} · t{step['thread']}"


def _hover(step: dict[str, Any]) -> str:
    parts = [f"<b>{html.escape(step['op'])}</b> {html.escape(step['action'])} (iteration {step['iteration']})"]
    if step.get("target"):
        parts.append(html.escape(step["target"]))
    parts += [html.escape(v) for v in step.get("values", [])[:8]]
    if step.get("note"):
        parts.append("<i>" + html.escape(step["note"]) + "</i>")
    return "<br>".join(parts)


def offending(steps: list[dict[str, Any]]) -> tuple[set[int], set[int]]:
    """Indices of the marked steps (the violation) and of the writes they read from."""
    marked = {i for i, s in enumerate(steps) if s.get("mark")}
    sources: set[int] = set()
    for i in marked:
        for v in steps[i].get("values", []):
            m = _FROM.search(v)
            if not m:
                continue
            rank, thread, label, it = int(m[1]), int(m[2]), m[3], int(m[4])
            for j, s in enumerate(steps):
                if (j not in marked and s["rank"] == rank and s["thread"] == thread and s["op"] == label
                        and s["iteration"] == it and s["action"] in ("writes", "rmw")):
                    sources.add(j)
    return marked, sources


def counterexample_figure(cex: dict[str, Any], title: str) -> dict[str, Any]:
    """A per-rank timeline of one counterexample (plain plotly dict).

    x is the step's position in the explained execution, y its rank and
    thread; one trace per kind of step, then ``violation`` (the marked
    steps) and ``read from`` (the writes the marked reads saw), drawn large
    and joined to the violation by arrows.
    """
    steps = cex.get("steps", [])
    rows = list(dict.fromkeys(_row(s) for s in sorted(steps, key=lambda s: (s["rank"], s["thread"]))))
    marked, sources = offending(steps)
    traces: list[dict[str, Any]] = []
    # program order of each thread: a thin grey line
    for row in rows:
        xs = [i for i, s in enumerate(steps) if _row(s) == row]
        traces.append(dict(type="scatter", mode="lines", x=xs, y=[row] * len(xs), showlegend=False,
                           hoverinfo="skip", line=dict(color="#d5dbe3", width=2), name=f"{row} order"))
    kinds = [k for k in ACTION_COLORS if any(s["action"] == k for s in steps)]
    kinds += sorted({s["action"] for s in steps} - set(ACTION_COLORS))
    for kind in kinds:
        idx = [i for i, s in enumerate(steps) if s["action"] == kind and i not in marked and i not in sources]
        traces.append(dict(
            type="scatter", mode="markers+text", name=kind, x=idx, y=[_row(steps[i]) for i in idx],
            text=[steps[i]["op"] for i in idx], textposition="top center", textfont=dict(size=10),
            marker=dict(size=11, color=ACTION_COLORS.get(kind, "#555555"), line=dict(width=1, color="#ffffff")),
            hovertext=[_hover(steps[i]) for i in idx], hoverinfo="text"))
    for name, idx, color, symbol in (("violation", sorted(marked), _VIOLATION, "x"),
                                     ("read from", sorted(sources), _SOURCE, "diamond")):
        traces.append(dict(
            type="scatter", mode="markers+text", name=name, x=idx, y=[_row(steps[i]) for i in idx],
            text=[steps[i]["op"] for i in idx], textposition="bottom center",
            textfont=dict(size=11, color=color),
            marker=dict(size=18, color=color, symbol=symbol, line=dict(width=2, color="#1f2933")),
            hovertext=[_hover(steps[i]) for i in idx], hoverinfo="text"))
    annotations = []
    for j in sorted(sources):
        for i in sorted(marked):
            if any(_FROM.search(v) and _FROM.search(v)[3] == steps[j]["op"] for v in steps[i].get("values", [])):
                annotations.append(dict(x=i, y=_row(steps[i]), ax=j, ay=_row(steps[j]), xref="x", yref="y",
                                        axref="x", ayref="y", showarrow=True, arrowhead=3, arrowsize=1.2,
                                        arrowwidth=2, arrowcolor=_SOURCE, text=""))
    layout = dict(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=15)),
        template=dict(layout=dict(paper_bgcolor="#ffffff", plot_bgcolor="#ffffff")),
        font=dict(family="-apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif", size=12),
        xaxis=dict(title=dict(text="step of the violating execution"), gridcolor="#e5e9f0", zeroline=False,
                   range=[-0.8, max(len(steps), 1) - 0.2], dtick=1),
        yaxis=dict(title=dict(text=""), type="category", categoryorder="array", categoryarray=rows[::-1],
                   range=[-0.7, len(rows) - 0.3], gridcolor="#e5e9f0", automargin=True),
        legend=dict(orientation="h", y=-0.25),
        margin=dict(l=110, r=30, t=60, b=90),
        height=max(260, 110 + 70 * len(rows)),
        annotations=annotations,
        hovermode="closest",
    )
    return {"data": traces, "layout": layout}


# ---------------------------------------------------------------------------
# code listing
# ---------------------------------------------------------------------------

_MARKER = re.compile(r"collsim-ir op=(\d+)")
_IR_COMMENT = re.compile(r"^\s*// IR #(\d+) ")
_SYNC_INSTR = re.compile(r"\b(st|ld|atom|red)\.[a-z_.0-9]+|\bfence\.[a-z_.]+|__syncthreads\(\)")
_SYNC_OPS = ("PollUntil", "Fence", "Atomic", "SyncGroup", "KernelBoundary")


def _is_sync(info: dict[str, str]) -> bool:
    if info["op"] in _SYNC_OPS:
        return True
    d = info["describe"]
    return info["op"] == "Store" and (", flag " in d or not d.startswith("Store weak"))


def code_listing(kernel: str, ir_ops: dict[int, dict[str, str]]) -> list[dict[str, Any]]:
    """``kernel.cu`` as rows ``{n, code, ir}``: ``ir`` names the IR op of each memory/synchronization instruction."""
    rows = []
    current: int | None = None
    for n, line in enumerate(kernel.splitlines(), 1):
        m = _IR_COMMENT.match(line)
        if m:
            current = int(m[1])
        ir = ""
        cls = ""
        marker = _MARKER.search(line)
        op_id = int(marker[1]) if marker else None
        if op_id is None and _SYNC_INSTR.search(line) and "not an IR op" not in line and not line.lstrip().startswith("//"):
            op_id = current
        if op_id is not None and op_id in ir_ops:
            info = ir_ops[op_id]
            ir = f"IR #{op_id} {info['label']}: {info['describe']}"
            cls = "sync" if _is_sync(info) else "mem"
        rows.append({"n": n, "code": line, "ir": ir, "cls": cls})
    return rows


# ---------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------

_CSS = """
.verdict { border-left: 6px solid #9aa5b1; background: #f7f9fb; padding: 14px 18px; border-radius: 6px; margin: 12px 0 18px; }
.verdict.ok { border-left-color: #2f9e44; }
.verdict.bad { border-left-color: #c92a2a; background: #fff5f5; }
.verdict h2 { margin-top: 0; }
.verdict ul { margin: 6px 0 0 18px; padding: 0; }
.verdict li { margin: 3px 0; }
table.code { border-collapse: collapse; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; width: 100%; }
table.code td { border: none; padding: 0 8px; white-space: pre; vertical-align: top; }
table.code td.ln { color: #9aa5b1; text-align: right; user-select: none; width: 3em; }
table.code td.ir { white-space: normal; color: #5c6b7a; font-family: -apple-system, 'Segoe UI', Roboto, sans-serif; min-width: 22em; }
table.code tr.sync td.src { background: #fff4e0; }
table.code tr.sync td.ir { color: #8a4b00; font-weight: 600; }
table.code tr.mem td.src { background: #f1f6fb; }
.code-wrap { max-height: 720px; overflow: auto; border: 1px solid #e5e9f0; border-radius: 6px; }
pre.cmd { background: #f4f6f8; padding: 8px 10px; border-radius: 4px; overflow-x: auto; }
"""

_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="collsim {{ version }}">
<title>collsim review: {{ r.name }}</title>
<style>
{{ css|safe }}
{{ extra_css|safe }}
</style>
</head>
<body>
<nav class="toc" aria-label="sections">
  <span class="brand">collsim</span>
  <a href="#overview">Verdict</a>
  <a href="#checks">Checks</a>
  <a href="#verification">Verification</a>
  <a href="#counterexamples">Counterexamples</a>
  <a href="#performance">Performance</a>
  <a href="#code">Emitted code</a>
  <a href="#reproduce">Reproduce</a>
</nav>
<main>
<header id="overview" class="section">
  <h1>Protocol review: <span class="scenario">{{ r.name }}</span></h1>
  <p class="lead">{{ r.protocol.describe() }}</p>
  <p class="muted">source <code>{{ r.shown_path }}</code>{% if citation %} · {{ citation }}{% endif %}</p>
  <section id="verdict" class="verdict {{ 'ok' if r.ok else 'bad' }}" data-ok="{{ 'true' if r.ok else 'false' }}">
    <h2>{{ headline }}</h2>
    <ul>
      {% for line in verdict_lines %}<li>{{ line|safe }}</li>
      {% endfor %}
    </ul>
  </section>
  <div class="cards">
    <section class="card"><h2>Declarations</h2><dl>
      <dt>algorithms</dt><dd>{{ r.protocol.algorithms|join(", ") }}</dd>
      <dt>line layout</dt><dd>{{ layout }}</dd>
      <dt>assumptions</dt><dd>{{ r.protocol.assumptions|join(", ") if r.protocol.assumptions else "none" }}</dd>
      <dt>data domain</dt><dd>{{ r.protocol.data_domain.statement if r.protocol.data_domain else "unrestricted" }}</dd>
      <dt>parameters</dt><dd>{{ params }}</dd>
    </dl></section>
    <section class="card"><h2>Run</h2><dl>
      <dt>reviewed</dt><dd>{{ r.algorithms|join(", ") }}</dd>
      <dt>against</dt><dd>{{ r.against|join(", ") if r.against else "nothing" }}</dd>
      <dt>topology</dt><dd>{{ r.topology }}</dd>
      <dt>ranks</dt><dd>{{ r.ranks|join(", ") }}</dd>
      <dt>sizes</dt><dd>{{ sizes }}</dd>
      <dt>time</dt><dd>{{ timing }}</dd>
    </dl></section>
  </div>
</header>

<section id="checks" class="section">
  <h2>1. Well-formedness</h2>
  <p class="hint">check_program on tiny instances (declared buffers, indices in range, no poll on a location nobody writes, registers filled before use).</p>
  <table class="verdicts" id="check-table"><thead><tr><th>algorithm</th><th>result</th><th>IR ops</th><th>buffers</th></tr></thead><tbody>
  {% for alg, c in r.checks.items() %}<tr><td>{{ alg }}</td><td><span class="badge ok">well-formed</span></td><td class="num">{{ c.ops }}</td><td>{{ c.buffers|join(", ") }}</td></tr>
  {% endfor %}</tbody></table>
</section>

<section id="verification" class="section">
  <h2>2. Verification</h2>
  <p class="hint">Each property under the declared assumptions, then without each assumption (a property that fails then is what the protocol "depends on").</p>
  <table class="verdicts" id="verdict-table"><thead><tr><th>algorithm</th><th>model</th><th>bound</th>
    {% for p in props %}<th>{{ p.title }}</th>{% endfor %}<th>depends on</th><th>time</th></tr></thead><tbody>
  {% for v in vrows %}<tr><td>{{ v.algorithm }}</td><td>{{ v.model }}</td><td>{{ v.bound }}</td>
    {% for cell in v.cells %}<td><span class="badge {{ cell.cls }}" title="{{ cell.title }}">{{ cell.text }}</span></td>{% endfor %}
    <td>{{ v.depends }}</td><td class="num">{{ v.seconds }}</td></tr>
  {% endfor %}</tbody></table>
  {% for v in vrows %}{% for d in v.deps %}<p class="detail">{{ v.algorithm }} / {{ v.model }}: {{ d }}</p>{% endfor %}{% endfor %}
</section>

<section id="counterexamples" class="section">
  <h2>3. Counterexamples</h2>
  {% if cexs %}
  <p class="hint">Per-rank timelines of each violating execution: <span style="color:#d62728">✕ the violation</span> (the offending read, or the racing accesses), <span style="color:#ff7f0e">◆ the write it read from</span>, arrows from write to read; hover a step for its words and values.</p>
  {% for c in cexs %}
  <article class="cex-item" id="{{ c.anchor }}">
    <h3>{{ c.heading }}</h3>
    <p>{{ c.reason }}</p>
    <div class="plot cex-plot" data-traces="{{ c.ntraces }}">{{ c.fig|safe }}</div>
    <details class="cex"><summary>timeline as text</summary><pre>{{ c.text }}</pre></details>
  </article>
  {% endfor %}
  {% else %}
  <p class="muted" id="no-counterexamples">None: every property holds under the declared assumptions{% if r.protocol.assumptions %}, and no property needed an assumption that produced a counterexample{% endif %}.</p>
  {% endif %}
</section>

<section id="performance" class="section">
  <h2>4. Performance (des model, {{ r.topology }})</h2>
  {% if figs %}
  <p class="hint">{{ r.name }} against {{ r.against|join(", ") if r.against else "nothing" }}; one line per protocol (colour) × algorithm (dash).</p>
  <div id="latency-size" class="plot" data-traces="{{ trace_counts.latency_size }}">{{ figs.latency_size|safe }}</div>
  <div id="latency-ranks" class="plot" data-traces="{{ trace_counts.latency_ranks }}">{{ figs.latency_ranks|safe }}</div>
  <div id="winner" class="plot" data-traces="{{ trace_counts.winner }}">{{ figs.winner|safe }}</div>
  {% else %}
  <p class="muted">No simulated rows.</p>
  {% endif %}
  {% if r.sim_skipped %}<h3>Not simulated</h3><ul class="skipped">{% for s in r.sim_skipped[:20] %}<li>{{ s }}</li>{% endfor %}</ul>{% endif %}
</section>

<section id="code" class="section">
  <h2>5. Emitted CUDA</h2>
  <p class="hint">kernel.cu; beside each memory or synchronization instruction, the IR operation it implements (synchronization highlighted).</p>
  {% for e in emits %}
  <h3>{{ e.algorithm }}</h3>
  <p class="detail">{% if e.compiled %}<span class="badge {{ 'bad' if e.error else 'ok' }}">compiled with nvcc</span> {{ e.ptx_summary }}{% elif e.skipped %}<span class="badge unknown">not compiled</span> {{ e.skipped }}{% endif %}
  {% if e.error %}<span class="badge bad">error</span> {{ e.error }}{% endif %}</p>
  {% if e.rows %}
  <div class="code-wrap"><table class="code" id="code-{{ e.algorithm }}"><tbody>
  {% for row in e.rows %}<tr{% if row.cls %} class="{{ row.cls }}"{% endif %}><td class="ln">{{ row.n }}</td><td class="src">{{ row.code }}</td><td class="ir">{{ row.ir }}</td></tr>
  {% endfor %}</tbody></table></div>
  {% endif %}
  {% endfor %}
</section>

<section id="reproduce" class="section">
  <h2>6. Reproduce</h2>
  {% for what, cmd in commands %}<p class="detail">{{ what }}</p><pre class="cmd"><code>{{ cmd }}</code></pre>
  {% endfor %}
</section>
<footer>collsim {{ version }} · review of {{ r.name }}</footer>
</main>
</body>
</html>
"""


def _ranges(cells: list[dict[str, Any]]) -> str:
    """``2 ranks: 8 B–4 KiB; 8 ranks: 8 B`` from winner cells."""
    by: dict[int, list[int]] = {}
    for c in cells:
        by.setdefault(c["ranks"], []).append(c["size_bytes"])
    parts = []
    for n in sorted(by):
        s = sorted(by[n])
        parts.append(f"{n} ranks: {F.size_label(s[0])}" + (f"–{F.size_label(s[-1])}" if len(s) > 1 else "")
                     + (f" ({len(s)} sizes)" if len(s) > 2 else ""))
    return "; ".join(parts)


def verdict_lines(r: Review) -> tuple[str, list[str]]:
    """The verdict box: a headline and its bullet lines (HTML-escaped text)."""
    e = html.escape
    lines = []
    proved = sorted({(v.algorithm, v.model) for v in r.verifications if v.ok})
    broken = [v for v in r.verifications if not v.ok]
    assumed = ", ".join(r.protocol.assumptions) or "no hardware assumption"
    if r.ok:
        bound = r.verifications[0].result.bound
        headline = f"{r.name} holds under its declared assumptions"
        lines.append(f"<b>Proved</b> under {e(', '.join(sorted({m for _, m in proved})))} for "
                     f"{e(', '.join(dict.fromkeys(a for a, _ in proved)))}, assuming {e(assumed)} "
                     f"(bound {bound.ranks} ranks × {bound.iterations} iterations).")
    else:
        headline = f"{r.name} is NOT correct as declared"
        for v in broken:
            bad = [f"{res.title} ({res.status})" for res in v.result.properties.values() if res.violated]
            vacuous = [res.title for res in v.result.properties.values() if res.vacuous]
            other = [f"{res.title} (unknown)" for res in v.result.properties.values()
                     if not (res.holds or res.violated or res.vacuous)]
            if bad:
                lines.append(f"<b>Violated</b> ({e(v.algorithm)}, {e(v.model)}): {e(', '.join(bad + other))}.")
            if vacuous:
                lines.append(f"<b>Vacuous</b> ({e(v.algorithm)}, {e(v.model)}): {e(', '.join(vacuous))}: no execution "
                             f"of the bound reaches their premise (every thread finishing), so they are unknown, "
                             f"not proved.")
            if other and not bad:
                lines.append(f"<b>Unknown</b> ({e(v.algorithm)}, {e(v.model)}): {e(', '.join(other))}.")
        if proved:
            lines.append(f"Holds for {e(', '.join(f'{a}/{m}' for a, m in proved))}.")
    if r.depends_on:
        lines.append(f"<b>Depends on</b> {e(', '.join(r.depends_on))}: without "
                     f"{'it' if len(r.depends_on) == 1 else 'each'} a property fails (counterexamples below).")
    if r.not_needed:
        lines.append(f"Declares {e(', '.join(r.not_needed))} but no property needed "
                     f"{'it' if len(r.not_needed) == 1 else 'them'} at this bound.")
    wins = r.wins()
    if wins["cells"]:
        if wins["won"]:
            lines.append(f"<b>Fastest</b> in {len(wins['won'])} of {wins['cells']} (ranks, size) cells: "
                         f"{e(_ranges(wins['won']))}.")
        else:
            lines.append(f"<b>Never fastest</b> in the {wins['cells']} (ranks, size) cells simulated.")
        if wins["lost"]:
            by_to: dict[str, list[dict[str, Any]]] = {}
            for c in wins["lost"]:
                by_to.setdefault(c["to"], []).append(c)
            for to, cells in sorted(by_to.items(), key=lambda kv: -len(kv[1])):
                worst = max(cells, key=lambda c: c["slower_pct"])
                lines.append(f"<b>Loses to</b> {e(to)} at {e(_ranges(cells))} (up to {worst['slower_pct']:.0f} % "
                             f"slower).")
    for em in r.emits:
        if em.compiled and not em.error:
            lines.append(f"CUDA for {e(em.algorithm)} emitted and compiled (PTX check: {e(em.ptx_summary)}).")
        elif em.error:
            lines.append(f"CUDA for {e(em.algorithm)}: {e(em.error[:300])}.")
        else:
            lines.append(f"CUDA for {e(em.algorithm)} emitted, not compiled: {e(em.skipped or '')}.")
    return headline, lines


def _cell(res: Any) -> dict[str, str]:
    if res is None:
        return {"cls": "unknown", "text": "–", "title": "not checked"}
    cls = {"holds": "ok", "violated": "bad"}.get(res.status, "unknown")
    return {"cls": cls, "text": "VIOLATED" if res.violated else res.status, "title": res.reason or res.note or ""}


def build_page(r: Review) -> str:
    """The review page as one HTML string."""
    env, here = page_templates()
    first = True
    figs: dict[str, str] = {}
    trace_counts: dict[str, int] = {}
    # figures in page order: plotly.js is embedded once, with the first one
    cexs = []
    for i, c in enumerate(r.counterexamples()):
        cj = c["cex"].to_json()
        where = f"{c['algorithm']}, {c['model']}" + (f", without {c['without']}" if c["without"] else "")
        fig = counterexample_figure(cj, f"{c['title']} ({where})")
        anchor = f"cex-{i + 1}"
        cexs.append({"anchor": anchor, "heading": f"{c['title']}: {where}", "reason": cj["reason"],
                     "fig": figure_html(fig, f"fig-{anchor}", first), "ntraces": len(fig["data"]),
                     "text": c["cex"].render() + f"\n\nbound: {c['bound']}"})
        first = False
    rows = [rec for rec in r.records if rec.get("latency_us") is not None]
    if rows:
        frame = check_frame(records_frame(rows), "review")
        data = F.ReportData(frame, {})
        for key, fig in (("latency_size", F.latency_vs_size(data)), ("latency_ranks", F.latency_vs_ranks(data)),
                         ("winner", F.winner_map(data))):
            figs[key] = figure_html(fig, FIXED_FIGURES[key], first)
            trace_counts[key] = len(fig["data"])
            first = False
    vrows = []
    props = [{"name": p, "title": PROPERTY_TITLES[p]} for p in PROPERTIES]
    for v in r.verifications:
        res = v.result
        vrows.append({"algorithm": v.algorithm, "model": v.model,
                      "bound": f"{res.bound.ranks}×{res.bound.iterations}, {res.bound.lines} line(s), "
                               f"{res.bound.threads} thread(s)",
                      "cells": [_cell(res.properties.get(p)) for p in PROPERTIES],
                      "depends": ", ".join(res.depends_on) or "nothing",
                      "deps": [d.describe() for d in res.dependencies], "seconds": f"{res.seconds:.1f} s"})
    emits = [{"algorithm": e.algorithm, "compiled": e.compiled, "skipped": e.skipped, "error": e.error,
              "ptx_summary": e.ptx_summary, "rows": code_listing(e.kernel, e.ir_ops) if e.kernel else []}
             for e in r.emits]
    headline, lines = verdict_lines(r)
    layout = r.protocol.data_layout
    words = " ".join(f"{w.role.value}{w.nbytes * 8}" for w in layout.words)
    template = env.from_string(_TEMPLATE)
    return template.render(
        r=r, version=__version__, css=(here / "report.css").read_text(encoding="utf-8"), extra_css=_CSS,
        headline=headline, verdict_lines=lines, citation=r.protocol.citation,
        layout=f"{layout.name}: {{{words}}}, {layout.store_bytes}-B stores, {layout.payload_efficiency:.0%} payload",
        params=", ".join(f"{k}={getattr(v, 'value', v)}" for k, v in sorted(r.protocol.params.items())) or "none",
        sizes=f"{F.size_label(r.sizes[0])} … {F.size_label(r.sizes[-1])} ({len(r.sizes)} sizes)",
        timing=", ".join(f"{k} {v:.1f} s" for k, v in r.seconds.items()),
        props=props, vrows=vrows, cexs=cexs, figs=figs, trace_counts=trace_counts, emits=emits,
        commands=r.commands(),
    )


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, newline="\n")


def write_review(r: Review, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``review.html`` and ``review.json`` into ``out_dir``; return their paths."""
    out = Path(out_dir)
    page = out / "review.html"
    doc = out / "review.json"
    _atomic_write(page, build_page(r))
    _atomic_write(doc, json.dumps(r.to_json(), indent=2, default=str) + "\n")
    return page, doc
