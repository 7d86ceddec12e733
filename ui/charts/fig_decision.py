"""The decision's figure: what each remedy buys (the top class's P99 TTFT over the seeds, with the
seeds' min–max) against what it costs (the capacity it leaves, × the offered load).

One marker per configuration, the configuration as is among them; down and right is better. The
SLO is a dotted line, the chosen remedy a larger star; a configuration whose capacity search has
not settled is left out (the caption says so), one that fails at the smallest load sits at 0.
Readable at 1280 px: configurations with the same capacity (often several at 0) are set side by
side a little apart instead of on top of each other (the hover gives the exact value), the axis
starts a little left of 0 so those markers clear the tick labels, the log axis is labelled at 1, 2
and 5 of each decade only (plotly's own minor labels ran into each other), and the SLO's label is
placed on the line itself (plotly puts a line's annotation at 10^y on a log axis).
Pure: judged options in (`ui.teach.decision.Judged`), a plotly figure out.
"""

from __future__ import annotations

import math
from collections import defaultdict
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
    shown = []  # (index, judged, its capacity)
    for i, j in enumerate(judged):
        e = j.p99.get(top)
        if e is None or e.value is None or not j.capacity_known:
            continue
        cap = j.capacity.get("capacity")
        shown.append((i, j, 0.0 if j.capacity.get("below_min") or cap is None else float(cap)))
    xs = [x for _i, _j, x in shown]
    span = max(xs + [1.0]) * 1.1
    step = span * DODGE
    same = defaultdict(list)
    for i, _j, x in shown:
        same[round(x, 3)].append(i)
    widest = max((len(v) for v in same.values()), default=1)
    ys = []
    for i, j, x in shown:
        e = j.p99[top]
        ys += [e.lo, e.hi, e.value]
        group = same[round(x, 3)]
        at = x + (group.index(i) - (len(group) - 1) / 2) * step  # side by side, centred on the true value
        pick = j.option.key == chosen
        hover = _("{name}<br>{cls} P99 TTFT {v:.3g} s (seeds {lo:.3g}–{hi:.3g} s, {n:,} requests)<br>"
                  "within its SLO on {k} of {seeds} seeds<br>capacity {cap}").format(
            name=names.get(j.option.key, j.option.key), cls=top, v=e.value, lo=e.lo, hi=e.hi, n=e.n, k=j.meets.k,
            seeds=j.meets.n, cap=f"{x:.3g}×" if x else _("< {s:g}×").format(s=0.125))
        fig.add_trace(go.Scatter(
            x=[at], y=[e.value], mode="markers", name=names.get(j.option.key, j.option.key),
            marker=dict(color=COLORS[i % len(COLORS)], size=20 if pick else 11,
                        symbol="star" if pick else ("square" if j.option.remedy is None else "circle"),
                        line=dict(width=1.5 if pick else 0, color="#24292f")),
            error_y=dict(type="data", symmetric=False, array=[max(e.hi - e.value, 0.0)],
                         arrayminus=[max(e.value - e.lo, 0.0)], thickness=1.5, width=5),
            hovertext=[hover], hoverinfo="text"))
    if slo is not None:
        fig.add_hline(y=slo, line=dict(dash="dot", color="#cf222e", width=1.5))
        fig.add_annotation(x=1, xref="paper", y=math.log10(slo), yref="y", text=_("{cls} SLO {s:g} s").format(
            cls=top, s=slo), showarrow=False, xanchor="right", yanchor="bottom", font=dict(color="#cf222e"))
        ys.append(slo)
    ticks = log_ticks([y for y in ys if y is not None and y > 0])
    fig.update_layout(
        height=420, font=FONT, margin=dict(l=10, r=10, t=50, b=10), hovermode="closest",
        title=dict(text=_("What each remedy buys and what it costs"), x=0, font=dict(size=15)),
        legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0),
        xaxis=dict(title=_("capacity (× the offered load), more is cheaper"),
                   range=[-(widest / 2 + 1) * step, span], zeroline=False),
        yaxis=dict(title=_("{cls} P99 TTFT (s), seeds' min–max").format(cls=top), type="log",
                   tickvals=ticks, ticktext=[f"{t:g}" for t in ticks]))
    return fig


DODGE = 0.015  # the gap between markers that share a capacity, as a share of the axis


def log_ticks(values: Sequence[float]) -> list[float]:
    """1, 2 and 5 of each decade from just below the smallest value to just above the largest."""
    if not values:
        return [1.0]
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    ticks = [m * 10.0 ** d for d in range(lo, hi + 1) for m in (1, 2, 5)]
    inside = [t for t in ticks if min(values) / 2.5 <= t <= max(values) * 2.5]
    return inside or [1.0]
