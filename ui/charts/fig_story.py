"""The edge of a scenario's story as a band: a claim's metric against the load scale.

The line is the median over the seeds at each scale, the band their min–max (a fill, the same as
the P99 curves'), and the claim's threshold a dashed line: the constant it is compared with, or —
for a claim against another run — the median of `factor` × that run's value at each scale.
Pure: a frame from `ui.runtime.story_plan.edge_frame` in, a plotly figure out.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .figures import FONT, alpha

LINE = "#0969da"
THRESHOLD = "#cf222e"


def per_scale(frame: pd.DataFrame, column: str = "value") -> pd.DataFrame:
    """Median, min and max of `column` over the seeds at each scale (scales with no number left out)."""
    t = frame.dropna(subset=[column])
    g = t.groupby("scale")[column]
    return pd.DataFrame({"mid": g.median(), "lo": g.min(), "hi": g.max(), "seeds": g.count()}).reset_index()


def edge_band(frame: pd.DataFrame, *, y_title: str, x_title: str, value_name: str, band_name: str,
              threshold_name: str, threshold: float | None = None, height: int = 340) -> go.Figure:
    """The claim's value over seeds against the load scale, with its threshold.

    `threshold` is the constant the claim compares with; None means the claim compares with
    another run, whose per-seed reference values (`frame["ref"]`) give the line instead."""
    v = per_scale(frame)
    traces = []
    if len(v):
        xs = v["scale"].tolist()
        traces.append(go.Scatter(  # the band: min along, max back, closed
            x=xs + xs[::-1], y=v["hi"].tolist() + v["lo"].tolist()[::-1], mode="lines", fill="toself",
            fillcolor=alpha(LINE, 0.18), line=dict(width=0), hoverinfo="skip", name=band_name,
            showlegend=True))
        traces.append(go.Scatter(
            x=xs, y=v["mid"].tolist(), mode="lines+markers", line=dict(color=LINE, width=2), name=value_name,
            customdata=v[["lo", "hi", "seeds"]].to_numpy(),
            hovertemplate="×%{x:g}: %{y:.3g} [%{customdata[0]:.3g}–%{customdata[1]:.3g}], "
                          "%{customdata[2]} seeds<extra></extra>"))
    scales = sorted(frame["scale"].unique().tolist()) if len(frame) else []
    if threshold is not None and scales:
        traces.append(go.Scatter(x=[scales[0], scales[-1]], y=[threshold, threshold], mode="lines",
                                 line=dict(color=THRESHOLD, width=1.5, dash="dash"), name=threshold_name,
                                 hovertemplate=f"{threshold_name}: %{{y:.3g}}<extra></extra>"))
    elif threshold is None:
        r = per_scale(frame, "ref")
        if len(r):
            traces.append(go.Scatter(x=r["scale"].tolist(), y=r["mid"].tolist(), mode="lines",
                                     line=dict(color=THRESHOLD, width=1.5, dash="dash"), name=threshold_name,
                                     hovertemplate=f"{threshold_name}: %{{y:.3g}}<extra></extra>"))
    fig = go.Figure(traces)
    fig.update_layout(dict(
        height=height, font=FONT, margin=dict(l=10, r=10, t=20, b=10), hovermode="closest",
        legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0),
        xaxis=dict(title=dict(text=x_title), tickvals=scales, ticktext=[f"×{s:g}" for s in scales]),
        yaxis=dict(title=dict(text=y_title), rangemode="tozero"),
        plot_bgcolor="white",
    ))
    return fig
