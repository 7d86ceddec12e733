"""A room's predictions as figures: the estimates as a histogram over the seed band, the
multiple-choice answers as counts, and the drawn curves (a sweep lesson's) faintly over the band.

Pure: numbers in, plotly figures out (the presenter's live panel, `ui.teach.room_view`, polls the store
and redraws). Estimates spread over orders of magnitude (a ratio guessed ×0.5 by one person and ×50
by another) are binned on a log scale when they are all positive and span more than ×20, so one
wild guess does not squash everyone else into one bar.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..frame.i18n import _
from .figures import FONT

BAND = "rgba(9, 105, 218, 0.15)"
BAR = "#57606a"
RIGHT = "#1a7f37"
ACTUAL = "#cf222e"


def _style(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(height=height, font=FONT, margin=dict(l=10, r=10, t=40, b=10), showlegend=False,
                      plot_bgcolor="white", bargap=0.05)
    return fig


def _log_wanted(values: Sequence[float], lo: float | None, hi: float | None) -> bool:
    xs = [v for v in [*values, lo, hi] if v is not None]
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) > 20


def estimates_histogram(values: Sequence[float], lo: float | None, hi: float | None, actual: float | None,
                        unit: str, fmt=lambda v: f"{v:.3g}") -> go.Figure:
    """The room's estimates (one bar per bin: how many people), the seed band [lo, hi] shaded, and
    the value on the run shown as a line. `fmt` writes a value on the axis and in the hover."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    log = _log_wanted(vals, lo, hi)

    def x(v: float) -> float:
        return math.log10(v) if log else v

    fig = go.Figure()
    if lo is not None and hi is not None:
        fig.add_vrect(x0=x(lo), x1=x(hi) if hi > lo else x(hi) + 1e-9, fillcolor=BAND, line_width=0, layer="below",
                      annotation_text=_("seed band"), annotation_position="top left")
    if vals:
        xs = np.array([x(v) for v in vals])
        span = [*xs, *([x(lo), x(hi)] if lo is not None and hi is not None else [])]
        a, b = min(span), max(span)
        width = (b - a) / 20 if b > a else (abs(a) * 0.1 or 1.0)
        edges = np.arange(a - width / 2, b + width, width)
        counts, edges = np.histogram(xs, bins=edges)
        mids = (edges[:-1] + edges[1:]) / 2
        keep = counts > 0
        fig.add_trace(go.Bar(x=mids[keep].tolist(), y=counts[keep].tolist(), width=width * 0.95, marker_color=BAR,
                             customdata=[fmt(10 ** m if log else m) for m in mids[keep]],
                             hovertemplate=_("about %{customdata}: %{y} estimate(s)") + "<extra></extra>"))
    if actual is not None and math.isfinite(actual) and (actual > 0 or not log):
        fig.add_vline(x=x(actual), line_color=ACTUAL, line_width=2, annotation_text=_("this run"),
                      annotation_position="top right")
    fig.update_yaxes(title=_("participants"), rangemode="tozero", dtick=1 if len(vals) <= 10 else None,
                     gridcolor="#eaeef2")
    title = _("Estimates: {n}").format(n=len(vals)) + (f" ({unit})" if unit else "")
    if log:
        ticks = [t for t in range(-6, 13) if fig_range_contains(vals, lo, hi, t)]
        fig.update_xaxes(tickvals=ticks, ticktext=[fmt(10.0 ** t) for t in ticks], title=_("log scale"))
    fig.update_layout(title=title)
    return _style(fig, 280)


def fig_range_contains(vals: Sequence[float], lo: float | None, hi: float | None, t: int) -> bool:
    """Whether 10**t lies within a decade of the values shown (the log axis's ticks)."""
    xs = [v for v in [*vals, lo, hi] if v is not None and v > 0]
    return bool(xs) and math.log10(min(xs)) - 1 <= t <= math.log10(max(xs)) + 1


def choices_bars(counts: Sequence[int], options: Sequence[str], answer: int | None) -> go.Figure:
    """How many chose each option; the simulation's answer in green (None: not revealed yet, all grey)."""
    colors = [RIGHT if answer is not None and k == answer else BAR for k in range(len(options))]
    labels = [f"{k + 1}. {o}" for k, o in enumerate(options)]
    fig = go.Figure(go.Bar(y=labels, x=list(counts), orientation="h", marker_color=colors, text=list(counts),
                           textposition="auto", hovertemplate="%{y}: %{x}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(rangemode="tozero", dtick=1 if max(counts, default=0) <= 10 else None, gridcolor="#eaeef2")
    fig.update_layout(title=_("Answers: {n}").format(n=sum(counts)))
    return _style(fig, 60 + 36 * max(len(options), 1))


def curves_figure(curves: Sequence[Sequence[float | None]], at: Sequence[float], bands: Sequence[dict] | None,
                  shown: Sequence[float | None] | None, x_label: str, y_label: str,
                  fmt=lambda v: f"{v:.3g}") -> go.Figure:
    """The room's drawn curves, one faint line each (a point left blank is a gap), over the seed band
    at each point (`bands`: `{min, max, median}` per point, after the reveal) and the run shown.
    A log axis when the points (and band) are all positive and span more than ×20, as the histogram."""
    xs = [float(v) for v in at]
    drawn = [[None if v is None or not math.isfinite(v) else float(v) for v in c] for c in curves]
    drawn = [c for c in drawn if len(c) == len(xs) and any(v is not None for v in c)]
    fig = go.Figure()
    if bands:
        fig.add_trace(go.Scatter(x=xs, y=[b["max"] for b in bands], mode="lines", line=dict(width=0),
                                 hoverinfo="skip", showlegend=False))
        fig.add_trace(go.Scatter(x=xs, y=[b["min"] for b in bands], mode="lines", line=dict(width=0), fill="tonexty",
                                 fillcolor=BAND, name=_("seed band (min–max)"), hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=xs, y=[b["median"] for b in bands], mode="lines", name=_("median over the seeds"),
                                 line=dict(color="#0969da", dash="dot")))
    for k, c in enumerate(drawn):
        fig.add_trace(go.Scatter(
            x=xs, y=c, mode="lines+markers", connectgaps=False, opacity=0.35, line=dict(color=BAR, width=1.5),
            marker=dict(size=5), name=_("a participant's curve"), legendgroup="drawn", showlegend=k == 0,
            customdata=[fmt(v) if v is not None else "" for v in c],
            hovertemplate="%{x:,g}: %{customdata}<extra></extra>"))
    if shown is not None and any(v is not None for v in shown):
        fig.add_trace(go.Scatter(x=xs, y=list(shown), mode="lines+markers", name=_("this run"),
                                 line=dict(color=ACTUAL, width=2.5)))
    values = [v for c in drawn for v in c if v is not None]
    ref = [b[k] for b in bands or () for k in ("min", "max")]
    if _log_wanted(values + ref, None, None):
        fig.update_yaxes(type="log")
    else:
        fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(title=x_label, tickvals=xs, gridcolor="#eaeef2")
    fig.update_yaxes(title=y_label, gridcolor="#eaeef2")
    fig.update_layout(title=_("Curves: {n}").format(n=len(drawn)), hovermode="closest")
    _style(fig, 320)
    fig.update_layout(showlegend=True, legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    return fig
