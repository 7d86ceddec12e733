"""The decision's figure: what each remedy buys (the top class's P99 TTFT over the seeds, with the
seeds' min–max) against what it costs (the capacity it leaves, × the offered load).

One marker per configuration, the configuration as is among them; up and left is better. The
SLO is a dotted line, the chosen remedy a larger star; a configuration whose capacity search has
not settled is left out (the caption says so), one that fails at the smallest load sits at 0.
Pure: judged options in (`ui.teach.decision.Judged`), a plotly figure out.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..frame.i18n import _
from .figures import FONT

COLORS = ["#24292f", "#0969da", "#bf8700", "#1a7f37", "#8250df", "#cf222e", "#d63384", "#20c997"]


def benefit_cost(judged: Sequence, names: dict[str, str], slo: float | None, chosen: str | None) -> go.Figure:
    """`judged`: `ui.teach.decision.Judged` in order (as is first); `names`: option key → its words;
    `slo`: the top class's TTFT SLO (s); `chosen`: the key of the decision's remedy."""
    fig = go.Figure()
    top = judged[0].top if judged else ""
    xs = []
    for i, j in enumerate(judged):
        e = j.p99.get(top)
        if e is None or e.value is None or not j.capacity_known:
            continue
        cap = j.capacity.get("capacity")
        x = 0.0 if j.capacity.get("below_min") or cap is None else float(cap)
        xs.append(x)
        pick = j.option.key == chosen
        hover = _("{name}<br>{cls} P99 TTFT {v:.3g} s (seeds {lo:.3g}–{hi:.3g} s, {n:,} requests)<br>"
                  "within its SLO on {k} of {seeds} seeds<br>capacity {cap}").format(
            name=names.get(j.option.key, j.option.key), cls=top, v=e.value, lo=e.lo, hi=e.hi, n=e.n, k=j.meets.k,
            seeds=j.meets.n, cap=f"{x:.3g}×" if x else _("< {s:g}×").format(s=0.125))
        fig.add_trace(go.Scatter(
            x=[x], y=[e.value], mode="markers", name=names.get(j.option.key, j.option.key),
            marker=dict(color=COLORS[i % len(COLORS)], size=20 if pick else 11,
                        symbol="star" if pick else ("square" if j.option.remedy is None else "circle"),
                        line=dict(width=1.5 if pick else 0, color="#24292f")),
            error_y=dict(type="data", symmetric=False, array=[max(e.hi - e.value, 0.0)],
                         arrayminus=[max(e.value - e.lo, 0.0)], thickness=1.5, width=5),
            hovertext=[hover], hoverinfo="text"))
    if slo is not None:
        fig.add_hline(y=slo, line=dict(dash="dot", color="#cf222e", width=1.5),
                      annotation_text=_("{cls} SLO {s:g} s").format(cls=top, s=slo), annotation_position="top right")
    fig.update_layout(
        height=420, font=FONT, margin=dict(l=10, r=10, t=50, b=10), hovermode="closest",
        title=dict(text=_("What each remedy buys and what it costs"), x=0, font=dict(size=15)),
        legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0),
        xaxis=dict(title=_("capacity (× the offered load), more is cheaper"), rangemode="tozero",
                   range=[0, max(xs + [1.0]) * 1.1]),
        yaxis=dict(title=_("{cls} P99 TTFT (s), seeds' min–max").format(cls=top), type="log"))
    return fig
