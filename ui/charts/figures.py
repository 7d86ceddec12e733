"""Figure builders: result frames in, plotly figures out. Pure (no streamlit), unit-tested.

The shared look (class colours, font) and the smaller charts live here; the timeline is in
`ui.charts.fig_timeline`, the P99 curves in `ui.charts.fig_sweep`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..frame.i18n import _
from ..panels.vocab import look, shown

# Every chart's template, as plotly's default rather than named per figure: a template named in
# update_layout is deep-copied and validated each time (8 ms a figure, against 1 ms this way; a tenth
# of the server's CPU under an 8-session load). Every figure module imports this one. (`import
# streamlit` sets its own default; the app imports streamlit first, so this one holds.)
pio.templates.default = "plotly_white"

CLASS_COLORS = ["#cf222e", "#0969da", "#8250df", "#bf8700", "#1a7f37", "#57606a"]
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, Noto Sans CJK SC, Microsoft YaHei, sans-serif", size=12,
            color="#24292f")  # the CJK fallbacks draw the Chinese labels


def class_color(names: list[str], name: str) -> str:
    return CLASS_COLORS[names.index(name) % len(CLASS_COLORS)] if name in names else CLASS_COLORS[-1]


def _style(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    fig.update_layout(dict(  # one dict, not keywords: plotly parses each keyword as a property path (2× slower)
        height=height, font=FONT, margin=dict(l=10, r=10, t=40 if title else 20, b=10),
        title=dict(text=title, x=0, font=dict(size=15)) if title else None,
        legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),  # below: no clash with titles
        hovermode="x unified",
    ))
    return fig


def _replica_steps(steps: pd.DataFrame, replica: int) -> pd.DataFrame:
    return steps[steps["replica"] == replica] if "replica" in steps else steps


# A chart over time is about 1,200 px wide: more points than that add nothing a person sees, and
# cost the browser time (the Playground's two charts of ~3,000 steps were half of a first page's
# chromium CPU).
MAX_POINTS = 600


def thin(steps: pd.DataFrame, cols: list[str], max_points: int = MAX_POINTS, whole_rows: bool = False) -> pd.DataFrame:
    """At most `max_points` rows of a step frame, for a chart over time: consecutive steps are cut
    into equal runs, each drawn at its first step's time with the largest value of each column in
    it, so a peak (a burst of waiting requests) is never lost. `whole_rows`: the run's step with
    the largest sum of `cols` instead, every column from that one step: a stacked chart then never
    shows a total no step had (the KV classes' sum stays under the capacity). A short frame is
    returned as it is."""
    n = len(steps)
    if n <= max_points:
        return steps
    k = -(-n // max_points)
    starts = np.arange(0, n, k)
    values = steps[cols].to_numpy()
    if whole_rows:
        run = np.arange(n) // k
        order = np.lexsort((-values.sum(axis=1), run))  # within each run, the largest total first
        values = values[order[starts]]
    else:
        values = np.maximum.reduceat(values, starts, axis=0)
    out = pd.DataFrame(values, columns=cols)
    out.insert(0, "t_s", steps["t_s"].to_numpy(dtype=float)[starts])
    return out


def add_kv_traces(fig: go.Figure, steps: pd.DataFrame, classes: list[str], capacity: int, kv_reserve: int,
                  row: int | None = None, window: tuple[float, float] | None = None) -> None:
    """KV blocks held per class (stacked areas) plus the capacity and top-priority reserve lines."""
    s = steps
    if window is not None:
        s = s[(s["t_s"] >= window[0]) & (s["t_s"] <= window[1])]
    t = s["t_s"].to_numpy(dtype=float)
    where = dict(row=row, col=1) if row else {}
    for name in classes:
        fig.add_trace(go.Scatter(
            x=t, y=s[f"kv_{name}"].to_numpy(), name=_("{cls} KV").format(cls=name), stackgroup="kv", mode="lines",
            line=dict(width=0.5, color=class_color(classes, name), shape="hv"),
            hovertemplate=_("{cls}: %{{y}} blocks").format(cls=name) + "<extra></extra>",
        ), **where)
    span = [t.min(), t.max()] if len(t) else [0, 1]
    fig.add_trace(go.Scatter(x=span, y=[capacity, capacity], name=_("KV capacity"), mode="lines",
                             line=dict(color="#24292f", dash="dash", width=1.5), hoverinfo="skip"), **where)
    if kv_reserve > 0:
        y = capacity - kv_reserve
        fig.add_trace(go.Scatter(x=span, y=[y, y], name=_("{cls} KV reserve").format(cls=classes[0]), mode="lines",
                                 line=dict(color=class_color(classes, classes[0]), dash="dot", width=1.5),
                                 hoverinfo="skip"), **where)


def kv_usage(steps: pd.DataFrame, classes: list[str], capacity: int, kv_reserve: int = 0,
             replica: int = 0) -> go.Figure:
    """KV usage over time stacked by class, with capacity and reserve lines."""
    fig = go.Figure()
    add_kv_traces(fig, _replica_steps(steps, replica), classes, capacity, kv_reserve)
    fig.update_yaxes(title_text=_("KV blocks"), rangemode="tozero")
    fig.update_xaxes(title_text=_("time (s)"))
    return _style(fig, 360, _("KV cache held, by class"))


def over_time(steps: pd.DataFrame, classes: list[str], capacity: int, kv_reserve: int = 0,
              replica: int = 0) -> go.Figure:
    """The Playground's chart: KV held by class (stacked, with capacity and reserve lines) above the
    waiting requests by class, on one time axis. One figure rather than two, each series thinned
    to `MAX_POINTS` (`thin`): what a first page's browser spends on charts halves."""
    s = _replica_steps(steps, replica)
    kv = thin(s, [f"kv_{c}" for c in classes], whole_rows=True)
    s = thin(s, [f"waiting_{c}" for c in classes])
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=(_("KV cache held, by class"), _("Waiting queue, by class")))
    add_kv_traces(fig, kv, classes, capacity, kv_reserve, row=1)
    for name in classes:
        fig.add_trace(go.Scatter(x=s["t_s"].to_numpy(dtype=float), y=s[f"waiting_{name}"].to_numpy(),
                                 name=_("{cls} waiting").format(cls=name), mode="lines",
                                 line=dict(color=class_color(classes, name), width=1.5, shape="hv"),
                                 hovertemplate=_("{cls}: %{{y}} waiting").format(cls=name) + "<extra></extra>"),
                      row=2, col=1)
    fig.update_yaxes(title_text=_("KV blocks"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=_("waiting requests"), rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text=_("time (s)"), row=2, col=1)
    _style(fig, 640)
    fig.update_annotations(font=dict(size=15), x=0, xanchor="left")  # the subplot titles, as a figure title
    fig.update_layout(legend=dict(y=-0.1, traceorder="normal"))
    return fig


def waiting_queue(steps: pd.DataFrame, classes: list[str], replica: int = 0) -> go.Figure:
    """Waiting requests per class over time."""
    s = _replica_steps(steps, replica)
    fig = go.Figure()
    for name in classes:
        fig.add_trace(go.Scatter(x=s["t_s"], y=s[f"waiting_{name}"], name=name, mode="lines",
                                 line=dict(color=class_color(classes, name), width=1.5, shape="hv"),
                                 hovertemplate=_("{cls}: %{{y}} waiting").format(cls=name) + "<extra></extra>"))
    fig.update_yaxes(title_text=_("waiting requests"), rangemode="tozero")
    fig.update_xaxes(title_text=_("time (s)"))
    return _style(fig, 360, _("Waiting queue, by class"))


# --------------------------------------------------------------------------------------------
# Comparisons, memory


def alpha(hex_color: str, a: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{a})"


def ttft_cdf(runs: dict[str, pd.DataFrame], classes: list[str]) -> go.Figure:
    """TTFT CDF per class (one panel each), one line per configuration."""
    fig = make_subplots(rows=1, cols=len(classes), subplot_titles=classes, shared_yaxes=True,
                        horizontal_spacing=0.04)
    dashes = ["solid", "dash", "dot", "dashdot"]
    for k, (label, req) in enumerate(runs.items()):
        for j, name in enumerate(classes, start=1):
            x = np.sort(req.loc[(req["class"] == name) & req["measured"], "ttft_s"].dropna().to_numpy())
            y = np.arange(1, len(x) + 1) / len(x) if len(x) else x
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=label, legendgroup=label, showlegend=j == 1,
                                     line=dict(color=CLASS_COLORS[(k + 1) % len(CLASS_COLORS)] if k else "#24292f",
                                               dash=dashes[k % 4], width=2, shape="hv"),
                                     hovertemplate=f"{label}: %{{y:.0%}} ≤ %{{x:.2f}} s<extra></extra>"),
                          row=1, col=j)
            fig.update_xaxes(title_text=_("TTFT (s)"), row=1, col=j)
    fig.update_yaxes(title_text=_("fraction of requests"), tickformat=".0%", row=1, col=1)
    _style(fig, 400)
    fig.update_layout(hovermode="closest", legend=dict(y=-0.25))
    return fig


GIB = 1024**3


def memory_bar(total: float, weights: float, activations: float, kv: float, title: str) -> go.Figure:
    """Per-GPU memory: weights, activation reserve, KV cache and what is left unused (GiB)."""
    unused = max(total - weights - activations - kv, 0.0)
    parts = [(_("weights"), weights, "#57606a"), (_("activations"), activations, "#bf8700"),
             (_("KV cache"), kv, "#0969da"), (_("unused (utilization limit)"), unused, "#d0d7de")]
    fig = go.Figure()
    for name, v, color in parts:
        fig.add_trace(go.Bar(y=["GPU"], x=[v / GIB], name=name, orientation="h", marker_color=color,
                             text=f"{name}<br>{v / GIB:.1f} GiB", textposition="inside",
                             hovertemplate=f"{name}: {v / GIB:.2f} GiB<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text=_("GiB per GPU"), range=[0, total / GIB])
    fig.update_yaxes(showticklabels=False)
    _style(fig, 220, title)
    fig.update_layout(hovermode="closest", legend=dict(y=-0.45))  # short figure: legend clear of the axis title
    return fig


def step_time_bars(rows: pd.DataFrame) -> go.Figure:
    """Compute vs memory time per step kind (ms); the step takes the larger plus overhead."""
    fig = go.Figure()
    for col, name, color in (("compute_ms", _("compute"), "#8250df"), ("memory_ms", _("memory"), "#0969da"),
                             ("step_ms", _("step (max + overhead)"), "#24292f")):
        fig.add_trace(go.Bar(x=rows["case"], y=rows[col], name=name, marker_color=color,
                             hovertemplate=f"{name}: %{{y:.2f}} ms<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=_("ms per step"))
    _style(fig, 340, _("Step time model: compute vs memory"))
    fig.update_layout(hovermode="closest")
    return fig


def reason_legend() -> list[tuple[str, str, str]]:
    """(label, colour, explanation) for every wait reason, for the page's legend table."""
    return [(r.label, look(r.label).color, look(r.label).explain) for r in shown()]
