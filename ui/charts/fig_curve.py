""""Draw your curve": a sweep lesson's predicted points beside the seed band at each point.

Pure: numbers in, a plotly figure out. The band (min–max over the seeds at each knob value) is a
shaded ribbon with its median as a dotted line; the curve the user typed is a line of markers, and
the run shown (the lesson's seed) a solid line, so "where did I think it goes" and "where it goes on
any seed" sit on one picture.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..frame.i18n import _
from .figures import FONT

BAND = "rgba(9, 105, 218, 0.18)"
MEDIAN = "#0969da"
YOURS = "#bf8700"
RUN = "#24292f"


def curve_figure(points: Sequence[Mapping], shown: Sequence[float | None], x_label: str, y_label: str) -> go.Figure:
    """`points`: `ui.teach.estimate.curve_points` (at, guess, lo, hi, median); `shown`: the run's value
    at each point (None where its sweep point has not come back)."""
    xs = [p["at"] for p in points]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[p["hi"] for p in points], mode="lines", line=dict(width=0),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=xs, y=[p["lo"] for p in points], mode="lines", line=dict(width=0), fill="tonexty",
                             fillcolor=BAND, name=_("seed band (min–max)"), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=xs, y=[p["median"] for p in points], mode="lines", name=_("median over the seeds"),
                             line=dict(color=MEDIAN, dash="dot")))
    if any(v is not None for v in shown):
        fig.add_trace(go.Scatter(x=xs, y=list(shown), mode="lines+markers", name=_("the run shown"),
                                 line=dict(color=RUN)))
    drawn = [(p["at"], p["guess"]) for p in points if p["guess"] is not None]
    if drawn:
        fig.add_trace(go.Scatter(x=[a for a, _g in drawn], y=[g for _a, g in drawn], mode="lines+markers",
                                 name=_("your curve"), line=dict(color=YOURS, width=3), marker=dict(size=10)))
    fig.update_xaxes(title=x_label, tickvals=xs, gridcolor="#eaeef2")
    fig.update_yaxes(title=y_label, rangemode="tozero", gridcolor="#eaeef2")
    fig.update_layout(height=320, font=FONT, margin=dict(l=10, r=10, t=30, b=10), plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    return fig
