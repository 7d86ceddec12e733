"""The P99-curves figure: one panel per class, then the cost, all on one shared x axis.

Per-class panels (each with its own y scale) keep a batch class's 40–100 s from flattening the
top class's sub-second curve. A band is the min–max over seeds (a fill, no markers); the line
is the median. Points where some of the class's requests were rejected carry a ✕: their P99 is
over fewer requests, not a real improvement. The SLO line is labelled in the right margin, clear
of the curves; the knee is a vertical line through every panel, labelled above them.

The figure is redrawn several times a second while a sweep fills in, so it is assembled as one
plain mapping (axes laid out here) and validated once, instead of through `make_subplots` and
`add_hline`, which revalidate the layout on every call (≈10× slower).
Pure: a table from `ui.runtime.sweeps.frame` in, a plotly figure out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..frame.i18n import N_, _
from .figures import FONT, alpha, class_color

COST = [("served_tok_s", N_("served rate (tok/s)"), "#24292f", "solid", False),
        ("batch_fill", N_("batch fill"), "#57606a", "dash", True),
        ("reserve_idle_token_frac", N_("idle reserve (share of budget)"), "#bf8700", "dot", True)]
GAP = 0.05


def _per_value(t: pd.DataFrame) -> pd.DataFrame:
    g = t.groupby("value")
    return pd.DataFrame({
        "lo": g["ttft_p99"].min(), "hi": g["ttft_p99"].max(), "mid": g["ttft_p99"].median(),
        "seeds": g["seed"].nunique(), "n": g["n"].sum(), "rejected": g["rejected"].sum(),
    }).reset_index()


def _domains(heights: list[float]) -> list[tuple[float, float]]:
    """Vertical [bottom, top] of each row, first row on top."""
    usable = 1.0 - GAP * (len(heights) - 1)
    total = sum(heights)
    out, top = [], 1.0
    for h in heights:
        bottom = top - h / total * usable
        out.append((max(bottom, 0.0), top))
        top = bottom - GAP
    return out


def _ax(i: int) -> str:
    return "" if i == 1 else str(i)


def p99_panels(table: pd.DataFrame, classes: list[str], x_label: str, slos: dict[str, float | None],
               x_range: tuple[float, float], knee: float | None = None, knee_text: str = "") -> go.Figure:
    """P99 TTFT per class against the knob, one panel each, and the run's cost below."""
    n = len(classes)
    rows = n + 1
    dom = _domains([1.0] * n + [1.1])
    pad = (x_range[1] - x_range[0]) * 0.03 or 1.0
    xr = [x_range[0] - pad, x_range[1] + pad]
    layout: dict = dict(
        height=175 * n + 260, font=FONT, hovermode="closest",
        margin=dict(l=10, r=80, t=64, b=10), showlegend=True,
        legend=dict(orientation="h", yanchor="top", y=-0.07, xanchor="left", x=0),
        annotations=[], shapes=[],
    )
    data: list[dict] = []
    for i in range(1, rows + 1):
        last = i == rows
        layout[f"xaxis{_ax(i)}"] = dict(anchor=f"y{_ax(i)}", range=xr, showticklabels=last, domain=[0, 1],
                                        **({"matches": "x"} if i > 1 else {}),
                                        **({"title": dict(text=x_label)} if last else {}))
        layout[f"yaxis{_ax(i)}"] = dict(anchor=f"x{_ax(i)}", domain=list(dom[i - 1]), rangemode="tozero")
        title = (_("{cls} · P99 time to first token (s)").format(cls=classes[i - 1]) if not last
                 else _("On the same axis: served rate (the offered load while everything finishes), batch fill, "
                        "idle reserve"))
        layout["annotations"].append(dict(text=title, x=0, xref="paper", xanchor="left", y=dom[i - 1][1],
                                          yref="paper", yanchor="bottom", showarrow=False,
                                          font=dict(size=13, color="#24292f")))
    for i, name in enumerate(classes, start=1):
        color = class_color(classes, name)
        xa, ya = f"x{_ax(i)}", f"y{_ax(i)}"
        agg = _per_value(table[table["class"] == name])
        ok = agg.dropna(subset=["mid"])
        if len(ok):
            data.append(dict(
                type="scatter", xaxis=xa, yaxis=ya, mode="lines", fill="toself", fillcolor=alpha(color, 0.18),
                x=np.concatenate([ok["value"], ok["value"][::-1]]), y=np.concatenate([ok["hi"], ok["lo"][::-1]]),
                line=dict(width=0), hoverinfo="skip", showlegend=False,
                name=_("{cls} min–max over seeds").format(cls=name)))
            data.append(dict(
                type="scatter", xaxis=xa, yaxis=ya, mode="lines+markers",
                name=_("{cls} P99 TTFT").format(cls=name),
                showlegend=False, x=ok["value"].to_numpy(), y=ok["mid"].to_numpy(),
                line=dict(color=color, width=2.2), marker=dict(size=6, color=color),
                customdata=np.column_stack([ok["lo"], ok["hi"], ok["seeds"]]),
                hovertemplate=f"{x_label}: %{{x:,.4g}}<br>" + _(
                    "{cls} P99 TTFT %{{y:.3g}} s (median of %{{customdata[2]}} seeds; "
                    "%{{customdata[0]:.3g}}–%{{customdata[1]:.3g}})").format(cls=name) + "<extra></extra>"))
        rej = agg[agg["rejected"] > 0]
        if len(rej):
            data.append(dict(
                type="scatter", xaxis=xa, yaxis=ya, mode="markers", name=_("some requests rejected"),
                showlegend=False, x=rej["value"].to_numpy(), y=rej["mid"].fillna(0.0).to_numpy(),
                marker=dict(symbol="x-thin", size=12, line=dict(width=2.5, color="#cf222e")),
                text=[_("{cls}: {r:,} of {t:,} rejected at this setting — the P99 is over the rest only").format(
                      cls=name, r=r, t=t) for r, t in zip(rej["rejected"], rej["n"])],
                hovertemplate="%{text}<extra></extra>"))
        slo = slos.get(name)
        if slo is not None:
            layout["shapes"].append(dict(type="line", xref=f"{xa} domain", x0=0, x1=1, yref=ya, y0=slo, y1=slo,
                                         line=dict(color=color, dash="dot", width=1.2)))
            layout["annotations"].append(dict(text=_("SLO {s} s").format(s=f"{slo:g}"), x=1.0, xref="paper",
                                              xanchor="left", xshift=6,
                                              y=slo, yref=ya, showarrow=False, font=dict(size=11, color=color)))
    xa, ya, y2 = f"x{_ax(rows)}", f"y{_ax(rows)}", f"y{rows + 1}"
    # the share axis: its own round ticks (auto, not the left axis's positions) labelled without
    # rounding to whole percent (a 2 % batch fill read "2%, 1%, 1%, 0%, 0%")
    layout[f"yaxis{rows + 1}"] = dict(anchor=xa, overlaying=ya, side="right", rangemode="tozero", tickmode="auto",
                                      tickformat=".2~%", showgrid=False, title=dict(text=_("share")))
    layout[f"yaxis{_ax(rows)}"]["title"] = dict(text="tok/s")
    cost = table.drop_duplicates(["value", "seed"]).groupby("value")
    for col, label, color, dash, share in COST:
        if col == "reserve_idle_token_frac" and not (table[col] > 0).any():
            continue
        m = cost[col].mean()
        data.append(dict(type="scatter", xaxis=xa, yaxis=y2 if share else ya, mode="lines+markers",
                         name=_(label),
                         x=m.index.to_numpy(), y=m.to_numpy(), line=dict(color=color, dash=dash, width=1.8),
                         marker=dict(size=5, color=color),
                         hovertemplate=f"{_(label)}: %{{y:{'.1%' if share else ',.0f'}}}<extra></extra>"))
    if not any(d["yaxis"] in (ya, y2) for d in data):  # keep the legend's place while nothing is drawn
        data.append(dict(type="scatter", xaxis=xa, yaxis=ya, x=[], y=[], name=_(COST[0][1]),
                         line=dict(color=COST[0][2])))
    if knee is not None:
        layout["shapes"].append(dict(type="line", xref="x", x0=knee, x1=knee, yref="paper", y0=0, y1=1,
                                     line=dict(color="#1a7f37", width=2)))
        layout["annotations"].append(dict(text=_("<b>knee</b>: {v}").format(v=knee_text), x=knee, xref="x", y=1.0,
                                          yref="paper",
                                          yanchor="bottom", yshift=24, showarrow=False, bgcolor="rgba(255,255,255,0.9)",
                                          font=dict(size=12, color="#1a7f37")))
    return go.Figure(dict(data=data, layout=layout))
