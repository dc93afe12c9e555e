"""The report's plotly figures, built from a checked results table.

Every interactive choice (rank count, size, configuration) is a plotly
``updatemenus`` dropdown or ``sliders`` slider that restyles the traces:
no custom JavaScript touches a plot. A protocol has one colour in every
figure (:func:`protocol_colors`); an algorithm has one dash and marker.

Each function returns a plotly figure as a plain ``{"data", "layout"}``
dict: the report renders it without plotly.py's validation (which costs more
than building the figure); ``plotly.graph_objects.Figure(fig)`` validates one
(the tests do).
"""
from __future__ import annotations

import colorsys
import math
from functools import cached_property, lru_cache
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from collsim.tune.ties import DEFAULT_TOLERANCE_PCT, rank_choices
from collsim.report.data import normalize_measured
from collsim.units import format_size
from collsim.algorithms import ALGORITHMS

Figure = dict  # {"data": [trace dicts], "layout": {...}}

__all__ = [
    "Figure",
    "PROTOCOL_COLORS",
    "UNMODELLED_COLOR",
    "COMPONENTS",
    "DEFAULT_SIZES",
    "ReportData",
    "protocol_colors",
    "size_label",
    "latency_vs_size",
    "latency_vs_ranks",
    "winner_map",
    "TIE_COLOR",
    "breakdown",
    "timeline_gantt",
    "busbw_vs_size",
    "log_ticks",
]

#: Fixed colours of the protocols collsim ships (every one in collsim.ir.registry.list_protocols(): a test
#: checks), so every report agrees.
PROTOCOL_COLORS: dict[str, str] = {
    "simple": "#1f77b4",
    "ll": "#d62728",
    "ll128": "#2ca02c",
    "atomic-counter": "#9467bd",
    "ll128-atomic": "#6a3d9a",
    "ll128-atomic-nvls": "#cab2d6",
    "sentinel": "#ff7f0e",
    "barrier": "#8c564b",
    "signal-pad": "#c49c94",
    "nvls": "#1b9e77",
    "nvls-poison": "#66c2a5",
}
#: Colours for any other protocol (mutants, user protocols), in name order; more are derived (:func:`_extra_color`).
_EXTRA_COLORS = ("#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
#: Report order of the shipped protocols (the others follow in name order; a test checks it names them all).
_PROTOCOL_ORDER = ("barrier", "signal-pad", "simple", "ll", "ll128", "atomic-counter", "ll128-atomic",
                   "ll128-atomic-nvls", "sentinel", "nvls", "nvls-poison")
#: Report order of the algorithms: the order collsim.algorithms declares them in.
_ALGORITHM_ORDER = ALGORITHMS
#: Colour of measured points whose protocol has no modelled series in the report.
UNMODELLED_COLOR = "#111111"
_DASHES = {"one-shot": "solid", "two-shot": "dash", "ring": "dot"}
_EXTRA_DASHES = ("dashdot", "longdash", "longdashdot")
_SYMBOLS = {"one-shot": "circle", "two-shot": "square", "ring": "diamond"}
_EXTRA_SYMBOLS = ("triangle-up", "cross", "star", "hexagon")
_ALGO_SHORT = {"one-shot": "1-shot", "two-shot": "2-shot", "ring": "ring"}

#: Time components of a result, their columns, labels and colours (greys and
#: browns, kept apart from the protocol colours).
COMPONENTS: tuple[tuple[str, str, str], ...] = (
    ("launch_us", "launch", "#c7c7c7"),
    ("sync_us", "synchronization", "#3b3b3b"),
    ("data_us", "data movement", "#7fa7c9"),
    ("reduce_us", "reduce", "#e0b874"),
)

#: Sizes the latency-vs-ranks figure shows by default (the nearest available are used).
DEFAULT_SIZES: tuple[int, ...] = (8, 4096, 1 << 20)
#: Size the breakdown figure opens at.
BREAKDOWN_SIZE = 4096

#: A small fixed template (white background, light grid): plotly's named
#: templates are large and cost more to validate than the figures themselves.
_AXIS_STYLE = dict(gridcolor="#e5e9f0", linecolor="#c3cad5", zerolinecolor="#e5e9f0", ticks="", automargin=True)
_TEMPLATE = dict(layout=dict(
    paper_bgcolor="#ffffff", plot_bgcolor="#ffffff", xaxis=_AXIS_STYLE, yaxis=_AXIS_STYLE,
    colorway=list(PROTOCOL_COLORS.values()) + list(_EXTRA_COLORS),
    title=dict(font=dict(color="#1f2933")), font=dict(color="#2a3f5f"),
))

_FONT = dict(family="-apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif", size=13)
_MENU_STYLE = dict(bgcolor="#f4f6f8", bordercolor="#9aa5b1", borderwidth=1, font=dict(size=12))


@lru_cache(maxsize=4096)
def size_label(nbytes: int) -> str:
    """``8 B``, ``4 KiB``, ``64 MiB`` (exact, see :func:`collsim.units.format_size`)."""
    text = format_size(int(nbytes))
    i = len(text.rstrip("KMGTPEiB"))
    return f"{text[:i]} {text[i:]}"


def _sort_key(order: Sequence[str]):
    def key(name: str) -> tuple[int, str]:
        return (order.index(name) if name in order else len(order), name)

    return key


def _extra_color(i: int) -> str:
    """The colour of the ``i``-th other protocol: :data:`_EXTRA_COLORS`, then hues a golden angle apart."""
    if i < len(_EXTRA_COLORS):
        return _EXTRA_COLORS[i]
    hue = ((i - len(_EXTRA_COLORS)) * 137.508 + 200.0) % 360.0 / 360.0
    lightness = (0.42, 0.56, 0.34)[(i - len(_EXTRA_COLORS)) % 3]
    r, g, b = colorsys.hls_to_rgb(hue, lightness, 0.62)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def protocol_colors(protocols: Sequence[str]) -> dict[str, str]:
    """A colour per protocol, the same for the same protocols whatever their order, never one colour twice.

    Shipped protocols have their :data:`PROTOCOL_COLORS`; the others get
    :func:`_extra_color` in name order.

    Examples
    --------
    >>> c = protocol_colors(["ll", "mine", "theirs"])
    >>> c["ll"] == PROTOCOL_COLORS["ll"], c["mine"], c["theirs"]
    (True, '#e377c2', '#17becf')
    >>> len(set(protocol_colors([f"p{i}" for i in range(40)]).values()))
    40
    """
    out = {}
    extra = sorted(p for p in set(protocols) if p not in PROTOCOL_COLORS)
    for p in protocols:
        if p in PROTOCOL_COLORS:
            out[p] = PROTOCOL_COLORS[p]
    used = set(out.values())
    i = 0
    for p in extra:
        color = _extra_color(i)
        while color in used:
            i += 1
            color = _extra_color(i)
        out[p] = color
        used.add(color)
        i += 1
    return out


def _mix(color: str, other: str, t: float) -> str:
    a = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(other[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _r(x: Any, nd: int = 4) -> Any:
    """A float rounded for the page (keeps the JSON small and stable); None for NaN."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    return round(x, nd)


@dataclass
class View:
    """One value of the rank selector: a (topology, ranks, launch) slice of the results."""

    topology: str
    ranks: int
    launch: str
    label: str


@dataclass
class ReportData:
    """The checked results plus what the figures share (series, views, colours)."""

    frame: pd.DataFrame
    meta: Mapping[str, Any] = field(default_factory=dict)
    measured: pd.DataFrame | None = None
    #: choices within this percentage of the fastest tie in the winner map (:mod:`collsim.tune.ties`)
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT

    def __post_init__(self) -> None:
        self.measured = normalize_measured(self.measured)
        f = self.frame
        self.protocols = sorted(set(f["protocol"]), key=_sort_key(_PROTOCOL_ORDER))
        self.algorithms = sorted(set(f["algorithm"]), key=_sort_key(_ALGORITHM_ORDER))
        self.colors = protocol_colors(self.protocols)
        present = set(zip(f["protocol"], f["algorithm"]))
        self.series = [(p, a) for p in self.protocols for a in self.algorithms if (p, a) in present]
        extra_algos = [a for a in self.algorithms if a not in _DASHES]
        self.dashes = {a: _DASHES.get(a) or _EXTRA_DASHES[extra_algos.index(a) % len(_EXTRA_DASHES)] for a in self.algorithms}
        self.symbols = {a: _SYMBOLS.get(a) or _EXTRA_SYMBOLS[extra_algos.index(a) % len(_EXTRA_SYMBOLS)] for a in self.algorithms}
        self.sizes = sorted(set(int(s) for s in f["size_bytes"]))
        topologies = sorted(set(f["topology"]))
        launches = sorted(set(f["launch"]), key=_sort_key(("graph", "eager")))
        ranks = sorted(set(int(r) for r in f["ranks"]))
        self.topologies, self.launches, self.ranks = topologies, launches, ranks
        views = []
        for t in topologies:
            for la in launches:
                for n in ranks:
                    sub = f[(f["topology"] == t) & (f["launch"] == la) & (f["ranks"] == n)]
                    if len(sub) == 0:
                        continue
                    label = f"{n} ranks"
                    if len(launches) > 1:
                        label += f" · {la or 'launch ?'}"
                    if len(topologies) > 1:
                        label = f"{t} · {label}"
                    views.append(View(t, n, la, label))
        self.views = views
        # default: the largest rank count, CUDA-graph launch when there is one
        best = 0
        for i, v in enumerate(views):
            b = views[best]
            if (v.topology == topologies[0]) and (v.launch == launches[0]) and (
                b.topology != topologies[0] or b.launch != launches[0] or v.ranks > b.ranks
            ):
                best = i
        self.default_view = best
        self._index = {
            (r.topology, int(r.ranks), r.launch, r.protocol, r.algorithm, int(r.size_bytes)): r
            for r in f.itertuples(index=False)
        }

    @cached_property
    def _groups(self) -> dict[tuple, pd.DataFrame]:
        """Each series' rows per view, by size (built when a figure first asks: picking timelines does not)."""
        return {
            key: sub.sort_values("size_bytes")
            for key, sub in self.frame.groupby(["topology", "ranks", "launch", "protocol", "algorithm"], sort=False)
        }

    # -- helpers ---------------------------------------------------------
    def series_name(self, protocol: str, algorithm: str) -> str:
        return f"{protocol} · {algorithm}"

    def view_rows(self, view: View, protocol: str, algorithm: str) -> pd.DataFrame:
        """The rows of one series in one view, by size (empty when the series has none there)."""
        sub = self._groups.get((view.topology, view.ranks, view.launch, protocol, algorithm))
        return sub if sub is not None else self.frame.iloc[0:0]

    def row(self, view: View, protocol: str, algorithm: str, size: int) -> Any:
        return self._index.get((view.topology, view.ranks, view.launch, protocol, algorithm, size))

    def nearest_size(self, target: int, sizes: Sequence[int] | None = None) -> int:
        sizes = list(sizes if sizes is not None else self.sizes)
        return min(sizes, key=lambda s: (abs(math.log2(max(s, 1)) - math.log2(max(target, 1))), s))

    def size_ticks(self, max_ticks: int = 12) -> tuple[list[int], list[str]]:
        """At most ``max_ticks`` run sizes to label, evenly spaced and always ending at the largest one.

        >>> d = ReportData(_tiny_frame([8 << (2 * i) for i in range(13)]))
        >>> d.size_ticks(max_ticks=6)[1]
        ['8 B', '512 B', '32 KiB', '2 MiB', '128 MiB']
        """
        sizes = [s for s in self.sizes if s > 0]
        step = max(1, math.ceil(len(sizes) / max_ticks))
        vals = sizes[::-1][::step][::-1]  # from the largest down: the axis ends on a labelled size
        return vals, [size_label(s) for s in vals]

    def measured_groups(self) -> list[tuple[str, str, str]]:
        """(label, protocol, algorithm) of each measured series."""
        m = self.measured
        if m is None:
            return []
        return sorted(set(zip(m["label"], m["protocol"], m["algorithm"])))

    def measured_points(self, view: View, key: tuple[str, str, str]) -> pd.DataFrame:
        m = self.measured
        label, proto, algo = key
        sub = m[(m["label"] == label) & (m["protocol"] == proto) & (m["algorithm"] == algo)]
        sub = sub[sub["ranks"].isna() | (sub["ranks"] == view.ranks)]
        if len(self.launches) > 1:
            sub = sub[(sub["launch"] == "") | (sub["launch"] == view.launch)]
        return sub.sort_values("size_bytes")


def _tiny_frame(sizes: Sequence[int]) -> pd.DataFrame:
    """A one-series results frame at ``sizes`` (for the examples)."""
    return pd.DataFrame([{"topology": "t", "ranks": 2, "launch": "graph", "protocol": "ll", "algorithm": "ring",
                          "size_bytes": s, "latency_us": 1.0} for s in sizes])


def _tick_text(value: float) -> str:
    """``1000``, ``10``, ``0.1``: a log-axis label written out, no exponent, no trailing zeros."""
    return f"{value:.6f}".rstrip("0").rstrip(".") if value < 1 else f"{value:.0f}"


def log_ticks(values: Any) -> tuple[list[float], list[str]]:
    """Labels for a log axis over ``values``: the decades only (1, 10, 100, ...), or, when fewer than two
    decades fall inside the data, 1-2-5 steps, so an axis is never unlabelled nor cluttered with the minor
    digits plotly prints between decades.

    >>> log_ticks([3.2, 1800.0])
    ([1.0, 10.0, 100.0, 1000.0, 10000.0], ['1', '10', '100', '1000', '10000'])
    >>> log_ticks([3.0, 8.0])[1]
    ['2', '5', '10']
    """
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not finite:
        return [], []
    lo, hi = min(finite), max(finite)
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0 ** k for k in range(k0, k1 + 1)]
    inside = [d for d in decades if lo <= d <= hi]
    if len(inside) >= 2:
        return decades, [_tick_text(d) for d in decades]
    steps = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in (1, 2, 5)]
    below = max(v for v in steps if v <= lo)
    above = min(v for v in steps if v >= hi)
    vals = [v for v in steps if below <= v <= above]
    return vals, [_tick_text(v) for v in vals]


def _log_axis(values: Any, **kw: Any) -> dict[str, Any]:
    """A log axis labelled by :func:`log_ticks`."""
    tickvals, ticktext = log_ticks(values)
    axis = dict(type="log", **kw)
    if tickvals:
        axis.update(tickmode="array", tickvals=tickvals, ticktext=ticktext)
    return axis


def _base_layout(title: str, **kw: Any) -> dict[str, Any]:
    layout = dict(
        title=dict(text=title, x=0.0, xanchor="left", xref="paper", y=0.985, yref="container", yanchor="top", font=dict(size=17)),
        template=_TEMPLATE,
        font=_FONT,
        hoverlabel=dict(font_size=12),
        legend=dict(title=dict(text="protocol · algorithm"), groupclick="toggleitem"),
        margin=dict(l=70, r=30, t=100, b=60),
    )
    layout.update(kw)
    return layout


def _view_menu(data: ReportData, buttons: list[dict[str, Any]], prefix: str = "ranks") -> dict[str, Any]:
    return dict(
        type="dropdown",
        direction="down",
        active=data.default_view,
        buttons=buttons,
        x=0.0,
        xanchor="left",
        y=1.025,
        yanchor="bottom",
        showactive=True,
        name=prefix,
        **_MENU_STYLE,
    )


# ---------------------------------------------------------------------------
# 2. latency vs size  and  7. bus bandwidth vs size


def _size_curve(data: ReportData, view: View, p: str, a: str, ycol: str) -> tuple[list, list, list]:
    sub = data.view_rows(view, p, a)
    xs = [int(s) for s in sub["size_bytes"]]
    ys = [_r(v, 4) for v in sub[ycol]]
    cd = [
        [size_label(s), _r(lat, 3), _r(alg, 4), _r(bus, 4)]
        for s, lat, alg, bus in zip(xs, sub["latency_us"], sub["algbw_gbps"], sub["busbw_gbps"])
    ]
    return xs, ys, cd


def _measured_curve(data: ReportData, view: View, key: tuple[str, str, str], ycol: str) -> tuple[list, list, list]:
    sub = data.measured_points(view, key)
    xs = [int(s) for s in sub["size_bytes"]]
    ys = [_r(v, 4) for v in sub[ycol]]
    cd = [[size_label(s), _r(lat, 3), _r(bus, 4)] for s, lat, bus in zip(xs, sub["latency_us"], sub["busbw_gbps"])]
    return xs, ys, cd


def _by_size(data: ReportData, ycol: str, title: str, ytitle: str, *, limit: Mapping[str, float] | None = None) -> Figure:
    view0 = data.views[data.default_view]
    traces: list[dict[str, Any]] = []
    hover = (
        "<b>%{fullData.name}</b><br>size %{customdata[0]}<br>latency %{customdata[1]:.3f} µs"
        "<br>algbw %{customdata[2]:.2f} GB/s<br>busbw %{customdata[3]:.2f} GB/s<extra></extra>"
    )
    for p, a in data.series:
        xs, ys, cd = _size_curve(data, view0, p, a, ycol)
        traces.append(
            dict(
                type="scatter", x=xs, y=ys, customdata=cd, mode="lines+markers", name=data.series_name(p, a),
                legendgroup=p, line=dict(color=data.colors[p], dash=data.dashes[a], width=2),
                marker=dict(symbol=data.symbols[a], size=6, color=data.colors[p]), hovertemplate=hover,
            )
        )
    mhover = "<b>%{fullData.name}</b><br>size %{customdata[0]}<br>latency %{customdata[1]:.3f} µs<br>busbw %{customdata[2]:.2f} GB/s<extra></extra>"
    for key in data.measured_groups():
        label, p, a = key
        xs, ys, cd = _measured_curve(data, view0, key, ycol)
        launches = sorted(set(data.measured_points(view0, key)["launch"]) - {""})
        bits = [x for x in (p, a) if x] + launches
        name = f"measured: {label}" + (f" ({', '.join(bits)})" if bits else "")
        color = data.colors.get(p, UNMODELLED_COLOR)
        traces.append(
            dict(
                type="scatter", x=xs, y=ys, customdata=cd, mode="markers", name=name, legendgroup="measured",
                marker=dict(symbol="x-thin-open", size=10, line=dict(width=2, color=color), color=color),
                hovertemplate=mhover,
            )
        )
    buttons = []
    for view in data.views:
        xs_all, ys_all, cd_all = [], [], []
        for p, a in data.series:
            xs, ys, cd = _size_curve(data, view, p, a, ycol)
            xs_all.append(xs), ys_all.append(ys), cd_all.append(cd)
        for key in data.measured_groups():
            xs, ys, cd = _measured_curve(data, view, key, ycol)
            xs_all.append(xs), ys_all.append(ys), cd_all.append(cd)
        buttons.append(dict(label=view.label, method="restyle", args=[{"x": xs_all, "y": ys_all, "customdata": cd_all}]))
    tickvals, ticktext = data.size_ticks()
    layout = _base_layout(
        title,
        xaxis=dict(title=dict(text="message size per rank (bytes, log scale)"), type="log", tickvals=tickvals, ticktext=ticktext),
        yaxis=_log_axis(list(data.frame[ycol]) + list(limit.values() if limit else []), title=dict(text=ytitle)),
        height=560,
    )
    if len(data.views) > 1:
        layout["updatemenus"] = [_view_menu(data, buttons)]
    else:
        layout["annotations"] = [dict(text=data.views[0].label, x=0, y=1.025, xref="paper", yref="paper",
                                      xanchor="left", yanchor="bottom", showarrow=False, font=dict(color="#52606d"))]
    if limit:
        shapes, notes = [], list(layout.get("annotations", []))
        for i, (name, value) in enumerate(limit.items()):
            shapes.append(dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=value, y1=value,
                               line=dict(color="#111111" if i == 0 else "#6b7280", width=2, dash="solid" if i == 0 else "dot")))
            notes.append(dict(text=f"per-GPU link limit, {name}: {value:g} GB/s", xref="paper", x=0.01, xanchor="left", yref="y", y=math.log10(value),
                              yanchor="bottom" if i == 0 else "top", showarrow=False,
                              font=dict(size=12, color="#111111" if i == 0 else "#4b5563"), bgcolor="rgba(255,255,255,0.7)"))
        layout["shapes"] = shapes
        layout["annotations"] = notes
        ymax = max([float(data.frame[ycol].max()), *limit.values()])
        ymin = max(float(data.frame[ycol][data.frame[ycol] > 0].min()) if (data.frame[ycol] > 0).any() else 1e-3, 1e-6)
        layout["yaxis"]["range"] = [math.log10(ymin) - 0.2, math.log10(ymax) + 0.3]
    return {"data": traces, "layout": layout}


def latency_vs_size(data: ReportData) -> Figure:
    """Latency against message size, log-log; a dropdown picks the rank count."""
    return _by_size(data, "latency_us", "AllReduce latency vs message size", "latency (µs, log scale)")


def link_limits(meta: Mapping[str, Any]) -> dict[str, float]:
    """The per-GPU bandwidth limits of the topology summary, GB/s: ``{"nominal": …, "effective": …}``."""
    summary = ((meta.get("topology") or {}).get("summary")) or {}
    per_gpu = summary.get("per_gpu_gbps") if isinstance(summary, Mapping) else None
    out: dict[str, float] = {}
    if isinstance(per_gpu, Mapping):
        for key, label in (("nominal", "nominal"), ("effective", "effective")):
            try:
                value = float(per_gpu[key])
            except (KeyError, TypeError, ValueError):
                continue
            if value > 0 and math.isfinite(value):
                out[label] = value
    elif isinstance(per_gpu, (int, float)) and per_gpu > 0:
        out["nominal"] = float(per_gpu)
    return out


def busbw_vs_size(data: ReportData) -> Figure:
    """Bus bandwidth against message size, with the topology's per-GPU link limit as a line."""
    return _by_size(
        data, "busbw_gbps", "Bus bandwidth vs message size", "bus bandwidth (GB/s, log scale)",
        limit=link_limits(data.meta),
    )


# ---------------------------------------------------------------------------
# 3. latency vs rank count at chosen sizes


def chosen_sizes(data: ReportData, targets: Sequence[int] = DEFAULT_SIZES) -> list[int]:
    out: list[int] = []
    for t in targets:
        s = data.nearest_size(t)
        if s not in out:
            out.append(s)
    return out


def latency_vs_ranks(data: ReportData, sizes: Sequence[int] = DEFAULT_SIZES) -> Figure:
    """Latency against rank count, one panel per chosen size (nearest available)."""
    chosen = chosen_sizes(data, sizes)
    groups = sorted({(v.topology, v.launch) for v in data.views}, key=lambda g: (data.topologies.index(g[0]), data.launches.index(g[1])))
    default_group = (data.views[data.default_view].topology, data.views[data.default_view].launch)
    k = len(chosen)
    gap = 0.07
    width = (1.0 - gap * (k - 1)) / k
    domains = [[round(i * (width + gap), 4), round(i * (width + gap) + width, 4)] for i in range(k)]
    traces: list[dict[str, Any]] = []
    hover = "<b>%{fullData.name}</b><br>%{x} ranks, %{customdata[0]}<br>latency %{y:.3f} µs<br>busbw %{customdata[1]:.2f} GB/s<extra></extra>"

    f = data.frame
    cells = {key: sub.sort_values("ranks") for key, sub in
             f[f["size_bytes"].isin(chosen)].groupby(["topology", "launch", "protocol", "algorithm", "size_bytes"], sort=False)}
    empty = f.iloc[0:0]

    def curve(group: tuple[str, str], p: str, a: str, s: int) -> tuple[list, list, list]:
        sub = cells.get((group[0], group[1], p, a, s), empty)
        return ([int(n) for n in sub["ranks"]], [_r(v, 3) for v in sub["latency_us"]],
                [[size_label(s), _r(b, 4)] for b in sub["busbw_gbps"]])

    for col, s in enumerate(chosen, start=1):
        for p, a in data.series:
            xs, ys, cd = curve(default_group, p, a, s)
            suffix = "" if col == 1 else str(col)
            traces.append(
                dict(
                    type="scatter", x=xs, y=ys, customdata=cd, mode="lines+markers", name=data.series_name(p, a),
                    legendgroup=data.series_name(p, a), showlegend=col == 1, xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                    line=dict(color=data.colors[p], dash=data.dashes[a], width=2),
                    marker=dict(symbol=data.symbols[a], size=7, color=data.colors[p]), hovertemplate=hover,
                )
            )
    ranks = data.ranks
    xtype = "log" if len(ranks) > 2 and ranks[-1] / ranks[0] >= 8 else "linear"
    ticks: list[int] = []  # from the largest down, leaving out ranks too close to label (64 next to 72)
    for n in reversed(ranks):
        if not ticks or (math.log2(ticks[-1] / n) >= 0.3 if xtype == "log" else (ticks[-1] - n) >= (ranks[-1] - ranks[0]) / 12):
            ticks.append(n)
    ticks.reverse()
    layout = _base_layout("AllReduce latency vs rank count at fixed message sizes", height=560)
    annotations = []
    for col, (s, dom) in enumerate(zip(chosen, domains), start=1):
        suffix = "" if col == 1 else str(col)
        layout[f"xaxis{suffix}"] = dict(domain=dom, anchor=f"y{suffix}", title=dict(text="ranks (GPUs)"),
                                        tickvals=ticks, tickangle=0, type=xtype)
        layout[f"yaxis{suffix}"] = _log_axis(f.loc[f["size_bytes"] == s, "latency_us"], anchor=f"x{suffix}",
                                             title=dict(text="latency (µs, log scale)" if col == 1 else ""))
        annotations.append(dict(text=f"size {size_label(s)}", x=(dom[0] + dom[1]) / 2, y=1.0, xref="paper", yref="paper",
                                xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=15)))
    layout["annotations"] = annotations
    layout["legend"] = dict(title=dict(text="protocol · algorithm"), groupclick="togglegroup", tracegroupgap=0)
    if len(groups) > 1:
        buttons = []
        for g in groups:
            xs_all, ys_all, cd_all = [], [], []
            for s in chosen:
                for p, a in data.series:
                    xs, ys, cd = curve(g, p, a, s)
                    xs_all.append(xs), ys_all.append(ys), cd_all.append(cd)
            label = " · ".join(x for x in ((g[0] if len(data.topologies) > 1 else ""),
                                           (f"launch: {g[1] or '?'}" if len(data.launches) > 1 else "")) if x)
            buttons.append(dict(label=label or "all", method="restyle", args=[{"x": xs_all, "y": ys_all, "customdata": cd_all}]))
        menu = _view_menu(data, buttons, "launch")
        menu["active"] = groups.index(default_group)
        layout["updatemenus"] = [menu]
    if len(ranks) == 1:
        annotations.append(dict(text=f"only one rank count ({ranks[0]}) in these results", xref="paper", yref="paper",
                                x=1, y=1.08, xanchor="right", yanchor="bottom", showarrow=False, font=dict(color="#52606d")))
    return {"data": traces, "layout": layout}


# ---------------------------------------------------------------------------
# 4. winner map


def _algo_shade(color: str, algorithm: str, algorithms: Sequence[str]) -> str:
    i = list(algorithms).index(algorithm) if algorithm in algorithms else 0
    return [color, _mix(color, "#ffffff", 0.45), _mix(color, "#000000", 0.35), _mix(color, "#ffffff", 0.7)][i % 4]


#: Colour of a winner-map cell where choices tie (grey: no protocol colour claims it).
TIE_COLOR = "#d5d9e0"


def winner_map(data: ReportData) -> Figure:
    """For each (rank count, size), the fastest protocol × algorithm, or a tie; hover gives the margins.

    Choices within ``data.tolerance_pct`` of the fastest tie
    (:func:`collsim.tune.ties.rank_choices`, the rule of ``collsim tune``'s
    files): a tie cell is grey and lists the tied choices on hover, with how
    much slower the next choice is.
    """
    views, sizes = data.views, data.sizes
    tol = data.tolerance_pct
    winners: list[list[tuple[str, str] | str | None]] = []
    hovers: list[list[str]] = []
    texts: list[list[str]] = []
    for v in views:
        wrow, hrow, trow = [], [], []
        for s in sizes:
            cands = []
            for p, a in data.series:
                r = data.row(v, p, a, s)
                if r is not None:
                    cands.append(((p, a), float(r.latency_us)))
            if not cands:
                wrow.append(None), trow.append("")
                hrow.append(f"{v.label}, {size_label(s)}: no result")
                continue
            o = rank_choices(cands, tol)
            head = f"<b>{v.label}, {size_label(s)}</b>"
            if o.is_tie:
                wrow.append("tie")
                trow.append(f"tie<br>×{len(o.tied)}")
                tied = "<br>".join(f"  {p} · {a}, {lat:.3f} µs" for (p, a), lat in o.ranked[: len(o.tied)])
                text = f"{head}<br>tie within {tol:g}%:<br>{tied}"
            else:
                p, a = o.best  # type: ignore[misc]
                wrow.append((p, a))
                trow.append(f"{p}<br>{_ALGO_SHORT.get(a, a)}")
                text = f"{head}<br>fastest: {p} · {a}, {o.best_latency:.3f} µs"
            if o.runner_up is not None:
                p2, a2 = o.runner_up  # type: ignore[misc]
                lat, lat2 = o.best_latency, o.runner_up_latency
                label = "runner-up" if not o.is_tie else "next"
                text += (f"<br>{label}: {p2} · {a2}, {lat2:.3f} µs<br>margin: +{lat2 - lat:.3f} µs "
                         f"(+{(lat2 - lat) / lat * 100:.1f}%)")
            else:
                text += "<br>no runner-up"
            hrow.append(text)
        winners.append(wrow)
        hovers.append(hrow)
        texts.append(trow)
    won = [s for s in data.series if any(s in row for row in winners)]
    cats: list[tuple[str, str] | str] = list(won) + (["tie"] if any("tie" in row for row in winners) else [])
    index = {s: i for i, s in enumerate(cats)}
    k = max(len(cats), 1)
    colorscale = []
    for i, c in enumerate(cats):
        color = TIE_COLOR if c == "tie" else _algo_shade(data.colors[c[0]], c[1], data.algorithms)
        colorscale += [[i / k, color], [(i + 1) / k, color]]
    if not colorscale:
        colorscale = [[0, "#ffffff"], [1, "#ffffff"]]
    z = [[index[w] if w is not None else None for w in row] for row in winners]
    ticktext = [f"tie (within {tol:g}%)" if c == "tie" else data.series_name(*c) for c in cats]
    heat = dict(
            type="heatmap", z=z, x=[size_label(s) for s in sizes], y=[v.label for v in views], zmin=-0.5, zmax=k - 0.5,
            colorscale=colorscale,
            text=texts, texttemplate="%{text}", textfont=dict(size=10), customdata=hovers,
            hovertemplate="%{customdata}<extra></extra>", xgap=2, ygap=2, name="fastest",
            colorbar=dict(title=dict(text="fastest"), tickvals=list(range(len(cats))),
                          ticktext=ticktext, len=1.0, y=0.5, thickness=18),
    )
    return {"data": [heat], "layout": _base_layout(
            f"Fastest protocol · algorithm per rank count and message size (ties within {tol:g}%)",
            xaxis=dict(title=dict(text="message size per rank"), type="category", tickangle=-45),
            yaxis=dict(title=dict(text="ranks"), type="category", autorange="reversed"),
            height=max(330, 150 + 62 * len(views)),
            margin=dict(l=110, r=30, t=70, b=90),
    )}


def _contrast(hex_color: str) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


# ---------------------------------------------------------------------------
# 5. breakdown


def breakdown(data: ReportData, size: int = BREAKDOWN_SIZE) -> Figure:
    """Stacked launch / synchronization / data / reduce per protocol × algorithm, each bar its own latency.

    Every bar is normalised to its protocol's latency (``barnorm="percent"``: segments are shares), with the
    latency itself written above it, so a 3 µs protocol is as readable as a 900 µs one beside it (on one
    linear axis the slowest bar would flatten every other). Traces hold the components in µs (hover shows
    both). A dropdown picks the rank count; a slider per rank count picks the size (the dropdown shows that
    rank count's slider).
    """
    views, sizes = data.views, data.sizes
    cats = [f"{p}<br>{a}" for p, a in data.series]
    default_size = data.nearest_size(size)
    s0 = sizes.index(default_size)

    def values(view: View, s: int) -> tuple[list[list], list[list], list[list], list[str]]:
        ys, cds, texts = [], [], []
        rows = [data.row(view, p, a, s) for p, a in data.series]
        for col, _, _ in COMPONENTS:
            y, cd, tx = [], [], []
            for r in rows:
                if r is None:
                    y.append(None), cd.append(["", None, None]), tx.append("")
                    continue
                v = float(getattr(r, col))
                total = float(r.latency_us)
                share = v / total if total > 0 else 0.0
                y.append(_r(v, 4))
                cd.append([size_label(s), _r(share * 100, 1), _r(total, 3)])
                tx.append(f"{share * 100:.0f}%" if share >= 0.08 else "")
            ys.append(y), cds.append(cd), texts.append(tx)
        totals = ["" if r is None else f"{float(r.latency_us):.{2 if float(r.latency_us) < 100 else 0}f} µs"
                  for r in rows]
        return ys, cds, texts, totals

    def restyle(y: list[list], cd: list[list], tx: list[list], totals: list[str]) -> dict[str, Any]:
        """New values for the component traces and the latency labels above the bars (the last trace)."""
        return {"y": [*y, [100.0] * len(cats)], "customdata": [*cd, [[t] for t in totals]],
                "text": [*tx, totals]}

    view0 = views[data.default_view]
    ys, cds, texts, totals = values(view0, default_size)
    traces: list[dict[str, Any]] = []
    hover = ("<b>%{x}</b><br>%{fullData.name}: %{y:.3f} µs (%{customdata[1]:.1f}% of %{customdata[2]:.3f} µs)"
             "<br>size %{customdata[0]}<extra></extra>")
    outline = [data.colors[p] for p, _ in data.series]
    for i, (_, name, color) in enumerate(COMPONENTS):
        traces.append(
            dict(
                type="bar", x=cats, y=ys[i], customdata=cds[i], text=texts[i], name=name, hovertemplate=hover,
                marker=dict(color=color, line=dict(color=outline, width=2)), textposition="inside",
                insidetextanchor="middle", textfont=dict(color=_contrast(color), size=11),
            )
        )
    # each bar's latency, written above it (at 100 % of the normalised axis)
    traces.append(dict(type="scatter", mode="text", x=cats, y=[100.0] * len(cats), text=totals,
                       customdata=[[t] for t in totals], textposition="top center", name="latency",
                       textfont=dict(size=12, color="#1f2933"), showlegend=False, hoverinfo="skip", cliponaxis=False))
    sliders, buttons = [], []
    for vi, view in enumerate(views):
        steps = []
        for s in sizes:
            steps.append(dict(label=size_label(s), method="restyle", args=[restyle(*values(view, s))]))
        sliders.append(
            dict(
                active=s0, steps=steps, visible=vi == data.default_view, x=0.0, len=1.0, y=-0.07, yanchor="top",
                pad=dict(t=38, b=0), currentvalue=dict(prefix=f"{view.label}, message size: ", font=dict(size=13)),
                font=dict(size=10), name=f"size-{vi}",
            )
        )
        relayout: dict[str, Any] = {f"sliders[{j}].visible": j == vi for j in range(len(views))}
        relayout[f"sliders[{vi}].active"] = s0
        buttons.append(dict(label=view.label, method="update",
                            args=[restyle(*values(view, default_size)), relayout]))
    layout = _base_layout(
        "Where the time goes: launch, synchronization, data movement, reduce (each bar: its own latency)",
        barmode="stack",
        barnorm="percent",
        xaxis=dict(title=dict(text="protocol · algorithm"), type="category"),
        yaxis=dict(title=dict(text="share of the latency (%)"), range=[0, 112], tickvals=[0, 25, 50, 75, 100],
                   ticksuffix="%"),
        height=620,
        sliders=sliders,
        margin=dict(l=70, r=30, t=110, b=170),
        uniformtext=dict(minsize=9, mode="hide"),
        legend=dict(title=dict(text="component"), traceorder="normal"),
    )
    if len(views) > 1:
        layout["updatemenus"] = [_view_menu(data, buttons)]
    return {"data": traces, "layout": layout}


# ---------------------------------------------------------------------------
# 6. timeline

#: Colours of event kinds in the Gantt; other kinds get _EXTRA_KIND_COLORS in name order.
KIND_COLORS: dict[str, str] = {
    "launch": "#c7c7c7",
    "sync": "#5b6478",
    "loop": "#d5d9e0",
    "barrier": "#3b3b3b",
    "barrier wait": "#3b3b3b",
    "barrier_wait": "#3b3b3b",
    "wait": "#8a8a8a",
    "poll": "#f2a93b",
    "store": "#4a7fb5",
    "flag store": "#e07b91",
    "data": "#7fa7c9",
    "load": "#63b3c8",
    "fence": "#8e5bb5",
    "atomic": "#c2505a",
    "reduce": "#5e9e57",
    "write": "#a3c586",
    "output": "#a3c586",
}
_EXTRA_KIND_COLORS = ("#b07aa1", "#9c755f", "#ff9da7", "#76b7b2", "#edc948", "#59a14f", "#e15759")


_COARSE_KINDS = ("launch", "sync", "data", "reduce")
#: (label prefix, category) for events that carry only a coarse kind: the
#: simulator's labels start with what the operation does.
_LABEL_CATEGORIES = (
    ("poll", "poll"),
    ("fence", "fence"),
    ("release fence", "fence"),
    ("store", "store"),
    ("issues store", "store"),
    ("issues stage", "store"),
    ("load", "load"),
    ("issues load", "load"),
    ("syncs the thread group", "wait"),
    ("waits", "wait"),
    ("loop", "loop"),
)
#: Drawing order and bar height of event categories: spans that contain
#: others (launch, loops, waits, polls) are drawn first and tallest, the work
#: inside them on top and thinner, so concurrent events on a rank stay visible.
_LAYERS: dict[str, tuple[int, float]] = {
    "launch": (0, 0.8), "loop": (1, 0.8), "sync": (2, 0.8), "wait": (3, 0.8), "barrier wait": (4, 0.8),
    "barrier": (4, 0.8), "barrier_wait": (4, 0.8), "reduce": (5, 0.8), "write": (5, 0.8), "output": (5, 0.8),
    "poll": (6, 0.6), "fence": (7, 0.6), "atomic": (8, 0.6), "data": (9, 0.45), "load": (10, 0.45),
    "flag store": (11, 0.4), "store": (12, 0.4),
}


def event_category(kind: str, label: str) -> str:
    """What the Gantt colours an event by.

    An event with a specific kind (``poll``, ``barrier wait`` …) keeps it. One
    with only a time-breakdown kind (``launch``, ``sync``, ``data``,
    ``reduce``) is refined from its label: barrier operations become
    ``barrier wait``, then polls, fences, stores (``flag store`` when they
    synchronize), loads and waits; anything else keeps its kind.
    """
    if kind not in _COARSE_KINDS or kind in ("launch", "reduce"):
        return kind
    text = label.lower().strip()
    if "barrier" in text:
        return "barrier wait"
    for prefix, category in _LABEL_CATEGORIES:
        if text.startswith(prefix):
            if category == "store" and kind == "sync":
                return "flag store"
            if category == "load" and kind == "sync":
                return "wait"
            return category
    if text.startswith("issues") and kind == "sync":
        return "flag store"
    return kind


def timeline_gantt(configs: Sequence[Mapping[str, Any]]) -> Figure:
    """A per-rank Gantt of simulated events; a dropdown picks the configuration."""
    configs = [
        {**c, "events": [{**ev, "kind": event_category(ev["kind"], ev["label"]), "phase": ev["kind"]} for ev in c["events"]]}
        for c in configs
    ]
    kinds_all = sorted({ev["kind"] for c in configs for ev in c["events"]}, key=lambda k: (_LAYERS.get(k, (5, 0.6))[0], k))
    extra = [k for k in kinds_all if k not in KIND_COLORS]
    colors = {k: KIND_COLORS.get(k) or _EXTRA_KIND_COLORS[extra.index(k) % len(_EXTRA_KIND_COLORS)] for k in kinds_all}
    traces: list[dict[str, Any]] = []
    visible_sets = []
    hover = ("<b>%{customdata[0]}</b><br>rank %{customdata[1]}<br>%{base:.3f} – %{customdata[2]:.3f} µs"
             " (%{x:.3f} µs)<br>%{customdata[3]}<extra>%{fullData.name}</extra>")  # noqa: RUF001
    max_rank = 0
    for ci, c in enumerate(configs):
        members = []
        kinds = sorted({ev["kind"] for ev in c["events"]}, key=lambda k: kinds_all.index(k))
        for kind in kinds:
            evs = sorted((ev for ev in c["events"] if ev["kind"] == kind), key=lambda e: (e["rank"], e["start_us"]))
            max_rank = max(max_rank, max(ev["rank"] for ev in evs))
            details = []
            for ev in evs:
                bits = [f"counted as {ev['phase']}"] if ev["phase"] != kind else []
                if ev.get("peer") is not None:
                    bits.append(f"peer {ev['peer']}")
                if ev.get("bytes"):
                    bits.append(f"{ev['bytes']} B")
                details.append(", ".join(bits))
            members.append(len(traces))
            traces.append(
                dict(
                    type="bar", orientation="h", y=[f"rank {ev['rank']}" for ev in evs],
                    x=[_r(ev["end_us"] - ev["start_us"], 4) for ev in evs], base=[_r(ev["start_us"], 4) for ev in evs],
                    customdata=[[ev["label"], ev["rank"], _r(ev["end_us"], 4), d] for ev, d in zip(evs, details)],
                    name=kind, legendgroup=kind, width=_LAYERS.get(kind, (5, 0.6))[1],
                    marker=dict(color=colors[kind], line=dict(width=0.5, color="#ffffff")),
                    hovertemplate=hover, visible=ci == 0,
                )
            )
        visible_sets.append(members)
    n = len(traces)
    buttons = []
    for ci, c in enumerate(configs):
        vis = [False] * n
        for i in visible_sets[ci]:
            vis[i] = True
        buttons.append(dict(label=c["title"], method="update", args=[{"visible": vis}, {"title.text": f"Timeline: {c['title']}"}]))
    # the ranks each configuration shows (a large run shows some of them: collsim.report.timelines)
    shown = [sorted({int(ev["rank"]) for ev in c["events"]}) for c in configs]
    for ci, c in enumerate(configs):
        buttons[ci]["args"][1]["yaxis.categoryarray"] = [f"rank {r}" for r in shown[ci]]
    ranks = [f"rank {r}" for r in shown[0]]
    max_rank = max(len(r) for r in shown) - 1
    layout = _base_layout(
        f"Timeline: {configs[0]['title']}",
        barmode="overlay",
        xaxis=dict(title=dict(text="time since the collective started (µs)"), rangemode="tozero"),
        yaxis=dict(title=dict(text="rank"), type="category", categoryorder="array", categoryarray=ranks, autorange="reversed"),
        height=max(360, 190 + 34 * (max_rank + 1)),
        legend=dict(title=dict(text="event")),
        bargap=0.25,
    )
    if len(configs) > 1:
        layout["updatemenus"] = [dict(type="dropdown", direction="down", active=0, buttons=buttons, x=0.0, xanchor="left",
                                      y=1.025, yanchor="bottom", name="configuration", **_MENU_STYLE)]
    return {"data": traces, "layout": layout}
