"""The workshop's own charts: runs side by side, and the dashboard beside P0's P99.

Pure: summaries and frames in, plotly figures out (the timeline and P99 curves the lessons also
show come from `ui.charts.fig_timeline` and `ui.charts.fig_sweep`). Labels are translated here, with the
language of the run in progress (`ui.frame.i18n`).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..frame.i18n import N_, _
from .figures import CLASS_COLORS, FONT, class_color

RUN_COLORS = ["#24292f", "#0969da", "#bf8700", "#1a7f37", "#8250df", "#cf222e"]


def _style(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(height=height, font=FONT, margin=dict(l=10, r=10, t=40, b=10),
                      hovermode="closest", legend=dict(orientation="h", yanchor="top", y=-0.18, xanchor="left", x=0))
    return fig


def runs_bars(labels: list[str], summaries: list[dict], slos: dict[str, float | None]) -> go.Figure:
    """P99 TTFT per class (one panel each, own scale), one bar per run; the SLO as a dotted line.
    A class with requests turned away (rejected or unfinished) says so on its bar."""
    classes = list(summaries[0]["classes"]) if summaries else []

    def title(c: str) -> str:
        slo = slos.get(c)
        return (_("{cls} · P99 TTFT (s), SLO {s} s").format(cls=c, s=f"{slo:g}") if slo is not None
                else _("{cls} · P99 TTFT (s)").format(cls=c))

    fig = make_subplots(rows=1, cols=max(len(classes), 1), horizontal_spacing=0.06,
                        subplot_titles=[title(c) for c in classes])
    ticks = [str(k + 1) for k in range(len(labels))]  # runs by number under the bars, named in the legend
    for k, label in enumerate(labels):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"{k + 1} · {label}",
                                 marker=dict(color=RUN_COLORS[k % len(RUN_COLORS)], size=12, symbol="square")))
    for j, name in enumerate(classes, start=1):
        ys, texts = [], []
        for s in summaries:
            c = s["classes"].get(name, {})
            v = c.get("ttft_p99")
            ys.append(v if v is not None else 0.0)
            lost = int(c.get("rejected", 0)) + int(c.get("unfinished", 0))
            texts.append(f"{v:.3g} s" if v is not None else "–")
            if lost:
                texts[-1] += " · " + _("{n} not served").format(n=lost)
        fig.add_trace(go.Bar(x=ticks, y=ys, text=texts, textposition="outside", cliponaxis=False,
                             marker_color=[RUN_COLORS[k % len(RUN_COLORS)] for k in range(len(labels))],
                             showlegend=False, name=name, customdata=labels,
                             hovertemplate="%{customdata}: %{y:.3g} s<extra>" + name + "</extra>"), row=1, col=j)
        slo = slos.get(name)
        if slo is not None:  # the line only: its value is in the panel's title, where no bar covers it
            fig.add_hline(y=slo, line=dict(color=class_color(classes, name), dash="dot", width=1.5), row=1, col=j)
        fig.update_xaxes(tickangle=0, type="category", row=1, col=j)  # run numbers, not a scale (1.5 means nothing)
        fig.update_yaxes(rangemode="tozero", row=1, col=j)
    return _style(fig, 380)


DASH_PANELS = [  # (column, label, format)
    ("gpu_busy", N_("GPU busy"), ".0%"),
    ("kv_use", N_("KV cache use"), ".0%"),
    ("waiting", N_("Requests waiting (vllm:num_requests_waiting)"), ".1f"),
    ("served_tok_s", N_("Throughput (generated tok/s)"), ",.0f"),
    ("top_ttft_p99", N_("{top} P99 TTFT of the window's arrivals (s)"), ".2f"),
]


def dashboard_vs_p99(series: dict[str, pd.DataFrame], top: str, slo: float | None, window_s: float) -> go.Figure:
    """The usual dashboard (four panels) above the top class's P99 TTFT, one line per run, every
    value a mean over a `window_s` window (as a dashboard shows it)."""
    titles = [_(label).format(top=top) for _c, label, _f in DASH_PANELS]
    fig = make_subplots(rows=len(DASH_PANELS), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=titles)
    for k, (name, s) in enumerate(series.items()):
        color = RUN_COLORS[k % len(RUN_COLORS)]
        for i, (col, _label, fmt) in enumerate(DASH_PANELS, start=1):
            y = s[col]
            is_top = col == "top_ttft_p99"
            fig.add_trace(go.Scatter(
                x=s["t"] + window_s / 2, y=y, name=name, legendgroup=name, showlegend=i == 1,
                mode="lines+markers", line=dict(color=CLASS_COLORS[0] if is_top and k else color, width=2,
                                                dash="solid" if k else "dot", shape="linear" if is_top else "hv"),
                marker=dict(size=5, color=CLASS_COLORS[0] if is_top and k else color),
                hovertemplate=f"{name}: %{{y:{fmt}}}<extra></extra>"), row=i, col=1)
            if col in ("gpu_busy", "kv_use"):
                fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=i, col=1)
            else:
                fig.update_yaxes(rangemode="tozero", row=i, col=1)
    if slo is not None:
        fig.add_hline(y=slo, line=dict(color=CLASS_COLORS[0], dash="dot", width=1.2), row=len(DASH_PANELS), col=1,
                      annotation_text=_("SLO {s} s").format(s=f"{slo:g}"), annotation_position="top left")
    fig.update_xaxes(title_text=_("time (s)"), row=len(DASH_PANELS), col=1)
    _style(fig, 160 * len(DASH_PANELS) + 80)
    fig.update_layout(legend=dict(y=-0.06))
    return fig


def remedies_bars(table: pd.DataFrame, slo: float | None) -> go.Figure:
    """The recap: the top class's P99 TTFT per remedy (horizontal bars, best first) with the SLO (a
    dotted line, its value in the panel's title: as an annotation it sat on the best bar's label), and
    the served rate beside it (the offered load where everything finishes: not a cost)."""
    t = table.sort_values("p0_p99", ascending=True)
    left = (_("{cls} · P99 TTFT (s), SLO {s} s").format(cls="P0", s=f"{slo:g}") if slo is not None
            else _("P0 · P99 TTFT (s)"))
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04, column_widths=[0.62, 0.38],
                        subplot_titles=[left, _("Served rate (tok/s)")])
    colors = ["#1a7f37" if slo is not None and v <= slo else "#cf222e" for v in t["p0_p99"]]
    fig.add_trace(go.Bar(y=t["label"], x=t["p0_p99"], orientation="h", marker_color=colors, showlegend=False,
                         text=[f"{v:.3g} s" for v in t["p0_p99"]], textposition="outside", cliponaxis=False,
                         hovertemplate="%{y}: %{x:.3g} s<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(y=t["label"], x=t["throughput"], orientation="h", marker_color="#57606a", showlegend=False,
                         text=[f"{v:,.0f}" for v in t["throughput"]], textposition="inside",
                         hovertemplate="%{y}: %{x:,.0f} tok/s<extra></extra>"), row=1, col=2)
    if slo is not None:  # the line only: its value is in the panel's title, where no bar's label runs into it
        fig.add_vline(x=slo, line=dict(color=CLASS_COLORS[0], dash="dot", width=1.5), row=1, col=1)
    fig.update_yaxes(autorange="reversed")
    return _style(fig, 60 + 34 * len(t))
