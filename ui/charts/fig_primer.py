"""The primer's picture of one engine step: the token budget, the KV cache and the queue.

A newcomer meets three words at once — token budget, KV blocks, who gets in — and the timeline
draws all of them over minutes. This draws them at one instant, as three bars of one step: the
budget (prefill and decode tokens in it, the rest unused), the KV cache (blocks each class holds,
the free ones), and the requests (running and waiting per class). Pure: a step row in, a figure out.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..frame.i18n import _
from .figures import class_color

FREE = "#dee2e6"
PREFILL, DECODE = "#495057", "#adb5bd"


def teaching_step(steps: pd.DataFrame, waits: pd.DataFrame, top: str) -> pd.Series:
    """The step the primer pictures: the first one inside a wait of a top-class request for KV
    blocks (the moment the lessons are about); the busiest step if there is none."""
    kv = waits[(waits["class"] == top) & (waits["reason"] == "kv_short")]
    if len(kv):
        first = kv.sort_values("start_s").iloc[0]
        inside = steps[(steps["t_s"] >= first["start_s"]) & (steps["t_s"] < first["end_s"])]
        if len(inside):
            return inside.iloc[0]
    return steps.loc[(steps["prefill_tokens"] + steps["decode_tokens"]).idxmax()]


def step_picture(step: pd.Series, budget: int, usable_blocks: int, classes: list[str]) -> go.Figure:
    """Three stacked bars of one step, each as shares of its own whole (the counts on hover).
    Budget: prefill + decode tokens + unused = `budget`. KV: each class's blocks + free =
    `usable_blocks`. Requests: running and waiting per class."""
    people = sum(float(step.get(f"{k}_{c}", 0.0)) for c in classes for k in ("running", "waiting"))
    totals = [float(budget), float(usable_blocks), max(people, 1.0)]  # each bar is the share of its own whole
    rows = [_("Token budget ({n:,} tokens)").format(n=budget), _("KV cache ({n:,} blocks)").format(n=usable_blocks),
            _("Requests ({n:,.0f})").format(n=people)]
    fig = go.Figure()

    def bar(row: int, value: float, name: str, color: str, pattern: str = "", legend: bool = True) -> None:
        fig.add_bar(y=[rows[row]], x=[value / totals[row]], orientation="h", name=name, marker_color=color,
                    marker_pattern_shape=pattern, showlegend=legend, legendgroup=name, customdata=[value],
                    hovertemplate=f"{name}: %{{customdata:,.0f}}<extra></extra>")

    prefill, decode = float(step["prefill_tokens"]), float(step["decode_tokens"])
    bar(0, prefill, _("prefill tokens"), PREFILL)
    bar(0, decode, _("decode tokens"), DECODE)
    bar(0, max(0.0, budget - prefill - decode), _("unused"), FREE)
    held = 0.0
    for c in classes:
        v = float(step.get(f"kv_{c}", 0.0))
        held += v
        bar(1, v, _("{cls} holds").format(cls=c), class_color(classes, c))
    bar(1, max(0.0, usable_blocks - held), _("free"), FREE, legend=False)
    for c in classes:
        bar(2, float(step.get(f"running_{c}", 0.0)), _("{cls} running").format(cls=c), class_color(classes, c),
            legend=False)
    for c in classes:
        bar(2, float(step.get(f"waiting_{c}", 0.0)), _("{cls} waiting").format(cls=c), class_color(classes, c), "/")
    fig.update_layout(barmode="stack", height=300, margin=dict(l=10, r=10, t=50, b=10), template="plotly_white",
                      title=dict(text=_("One engine step at {t:.1f} s (requests: solid running, hatched waiting)")
                                 .format(t=float(step["t_s"])), x=0,
                                 font=dict(size=15)),
                      legend=dict(orientation="h", y=-0.15), yaxis=dict(autorange="reversed"),
                      xaxis=dict(tickformat=".0%", range=[0, 1]))
    return fig
