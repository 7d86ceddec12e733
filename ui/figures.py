"""Figure builders: result frames in, plotly figures out. Pure (no streamlit), unit-tested.

Large timelines use NaN-separated `Scattergl` line segments (one trace per wait reason), a single
`fill="toself"` trace for all inversion rectangles and an invisible marker trace at segment
midpoints for hover: the fastest layout measured for thousands of segments (research notes §11).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .vocab import REASONS, look, shown

CLASS_COLORS = ["#cf222e", "#0969da", "#8250df", "#bf8700", "#1a7f37", "#57606a"]
RUNNING_COLOR = "#2da44e"
INVERSION_COLOR = "rgba(31, 35, 40, 0.40)"  # a dark veil over the waits it marks
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=12, color="#24292f")


def class_color(names: list[str], name: str) -> str:
    return CLASS_COLORS[names.index(name) % len(CLASS_COLORS)] if name in names else CLASS_COLORS[-1]


def _style(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    fig.update_layout(
        height=height, template="plotly_white", font=FONT, margin=dict(l=10, r=10, t=40 if title else 20, b=10),
        title=dict(text=title, x=0, font=dict(size=15)) if title else None,
        legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),  # below: no clash with titles
        hovermode="x unified",
    )
    return fig


def _replica_steps(steps: pd.DataFrame, replica: int) -> pd.DataFrame:
    return steps[steps["replica"] == replica] if "replica" in steps else steps


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
            x=t, y=s[f"kv_{name}"].to_numpy(), name=f"{name} KV", stackgroup="kv", mode="lines",
            line=dict(width=0.5, color=class_color(classes, name), shape="hv"),
            hovertemplate=f"{name}: %{{y}} blocks<extra></extra>",
        ), **where)
    span = [t.min(), t.max()] if len(t) else [0, 1]
    fig.add_trace(go.Scatter(x=span, y=[capacity, capacity], name="KV capacity", mode="lines",
                             line=dict(color="#24292f", dash="dash", width=1.5), hoverinfo="skip"), **where)
    if kv_reserve > 0:
        y = capacity - kv_reserve
        fig.add_trace(go.Scatter(x=span, y=[y, y], name=f"{classes[0]} KV reserve", mode="lines",
                                 line=dict(color=class_color(classes, classes[0]), dash="dot", width=1.5),
                                 hoverinfo="skip"), **where)


def kv_usage(steps: pd.DataFrame, classes: list[str], capacity: int, kv_reserve: int = 0,
             replica: int = 0) -> go.Figure:
    """KV usage over time stacked by class, with capacity and reserve lines."""
    fig = go.Figure()
    add_kv_traces(fig, _replica_steps(steps, replica), classes, capacity, kv_reserve)
    fig.update_yaxes(title_text="KV blocks", rangemode="tozero")
    fig.update_xaxes(title_text="time (s)")
    return _style(fig, 360, "KV cache held, by class")


def waiting_queue(steps: pd.DataFrame, classes: list[str], replica: int = 0) -> go.Figure:
    """Waiting requests per class over time."""
    s = _replica_steps(steps, replica)
    fig = go.Figure()
    for name in classes:
        fig.add_trace(go.Scatter(x=s["t_s"], y=s[f"waiting_{name}"], name=name, mode="lines",
                                 line=dict(color=class_color(classes, name), width=1.5, shape="hv"),
                                 hovertemplate=f"{name}: %{{y}} waiting<extra></extra>"))
    fig.update_yaxes(title_text="waiting requests", rangemode="tozero")
    fig.update_xaxes(title_text="time (s)")
    return _style(fig, 360, "Waiting queue, by class")


# --------------------------------------------------------------------------------------------
# Inversion timeline


def default_lanes(requests: pd.DataFrame, waits: pd.DataFrame, holders: pd.DataFrame, top_priority: int,
                  limit: int = 250) -> list[int]:
    """Top-priority requests, the KV holders they waited on, and lower-priority requests admitted
    during their wait — the cast of every inversion story, ordered by arrival."""
    top = requests[requests["priority"] == top_priority]
    ids = set(top["id"].tolist())
    tw = waits.loc[waits["priority"] == top_priority, "id"]
    ids.update(holders.loc[holders["wait"].isin(tw), "request"].tolist())
    lower = requests[requests["priority"] > top_priority]
    starts, ends = top["arrival_s"].to_numpy(), top["first_scheduled_s"].fillna(np.inf).to_numpy()
    sched = lower["first_scheduled_s"].to_numpy()
    if len(starts) and len(sched):
        inside = ((sched[:, None] > starts[None, :]) & (sched[:, None] < ends[None, :])).any(axis=1)
        ids.update(lower["id"].to_numpy()[inside].tolist())
    chosen = requests[requests["id"].isin(ids)].sort_values("arrival_s")
    return chosen["id"].head(limit).tolist()


def _segments(x0: np.ndarray, x1: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NaN-separated polyline: [x0, x1, NaN] per segment."""
    n = len(x0)
    xs = np.empty(3 * n)
    ys = np.empty(3 * n)
    xs[0::3], xs[1::3], xs[2::3] = x0, x1, np.nan
    ys[0::3], ys[1::3], ys[2::3] = y, y, np.nan
    return xs, ys


def _hover_text(w: pd.DataFrame, holders: pd.DataFrame) -> list[str]:
    out = []
    first = holders[~holders["alert"] & holders["wait"].isin(w["id"])]
    text = {k: ", ".join(f"#{r} {c} ({b} blocks)" for r, c, b in zip(g["request"], g["class"].astype(str),
                                                                     g["blocks"]))
            for k, g in first.groupby("wait", sort=False)}
    cols = [w[c].tolist() for c in ("id", "request", "class", "duration_s", "reason", "need_blocks", "free_blocks",
                                    "short_by", "eta_s")]
    for wid, rid, cls, dur, reason, need, free, short, eta in zip(*cols):
        lines = [f"<b>#{rid} {cls}</b> waits {dur:.2f} s: {reason}"]
        if need >= 0 and short >= 0:
            lines.append(f"needs {need} KV blocks, {free} free (short by {short})")
        if wid in text:
            lines.append("holders: " + text[wid])
        if eta == eta and eta is not None:
            lines.append(f"enough blocks expected in ~{eta:.1f} s")
        out.append("<br>".join(lines))
    return out


def timeline(requests: pd.DataFrame, waits: pd.DataFrame, holders: pd.DataFrame, episodes: pd.DataFrame,
             steps: pd.DataFrame, lanes: list[int], classes: list[str], capacity: int, kv_reserve: int = 0,
             window: tuple[float, float] | None = None, highlight: int | None = None,
             replica: int = 0) -> go.Figure:
    """Requests on a time axis (waits coloured by reason, running in green, inversion episodes
    shaded) above the KV chart on the same time axis."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3], vertical_spacing=0.04)
    # Lane k is drawn at y = -k (first arrival on top): Streamlit's plotly.js draws Scattergl
    # wrongly on an axis with autorange="reversed".
    lane_of = {rid: -k for k, rid in enumerate(lanes)}
    req = requests[requests["id"].isin(lane_of)]
    w = waits[waits["request"].isin(lane_of)]
    ep = episodes[episodes["request"].isin(lane_of)]
    if window is not None:
        lo, hi = window
        w = w[(w["end_s"] >= lo) & (w["start_s"] <= hi)]
        ep = ep[(ep["end_s"] >= lo) & (ep["start_s"] <= hi)]
    # Running: first scheduled → finish (waits after preemption are drawn on top).
    run = req.dropna(subset=["first_scheduled_s"])
    end = run["finish_s"].fillna(run["first_scheduled_s"].max() if len(run) else 0).to_numpy()
    y = run["id"].map(lane_of).to_numpy(dtype=float)
    xs, ys = _segments(run["first_scheduled_s"].to_numpy(), end, y)
    fig.add_trace(go.Scattergl(x=xs, y=ys, mode="lines", name="running", line=dict(color=RUNNING_COLOR, width=4),
                               hoverinfo="skip", legendgroup="state"), row=1, col=1)
    for reason in [r.label for r in shown()]:
        seg = w[w["reason"] == reason]
        if not len(seg):
            continue
        xs, ys = _segments(seg["start_s"].to_numpy(), seg["end_s"].to_numpy(),
                           seg["request"].map(lane_of).to_numpy(dtype=float))
        fig.add_trace(go.Scattergl(x=xs, y=ys, mode="lines", name=f"waiting: {reason}",
                                   line=dict(color=look(reason).color, width=6), hoverinfo="skip"),
                      row=1, col=1)
    # Episodes: one trace of rectangles.
    if len(ep):
        ey = ep["request"].map(lane_of).to_numpy(dtype=float)
        rx = np.column_stack([ep["start_s"], ep["end_s"], ep["end_s"], ep["start_s"], ep["start_s"],
                              np.full(len(ep), np.nan)]).ravel()
        ry = np.column_stack([ey - 0.45, ey - 0.45, ey + 0.45, ey + 0.45, ey - 0.45, np.full(len(ep), np.nan)]).ravel()
        fig.add_trace(go.Scatter(x=rx, y=ry, fill="toself", mode="none", fillcolor=INVERSION_COLOR,
                                 name="inversion (lower priority admitted)", hoverinfo="skip"), row=1, col=1)
    if len(w):
        mid = (w["start_s"].to_numpy() + w["end_s"].to_numpy()) / 2
        fig.add_trace(go.Scattergl(
            x=mid, y=w["request"].map(lane_of).to_numpy(dtype=float), mode="markers", name="hover",
            marker=dict(size=10, opacity=0), hovertext=_hover_text(w, holders), hoverinfo="text",
            customdata=w["request"].to_numpy(), showlegend=False), row=1, col=1)
    if highlight is not None and highlight in lane_of:
        k = lane_of[highlight]
        fig.add_hrect(y0=k - 0.5, y1=k + 0.5, fillcolor="rgba(9,105,218,0.10)", line_width=0, row=1, col=1)
    add_kv_traces(fig, _replica_steps(steps, replica), classes, capacity, kv_reserve, row=2, window=window)
    labels = req.set_index("id").loc[lanes, "class"].astype(str) if lanes else pd.Series(dtype=str)
    ticks = dict(tickvals=[-k for k in range(len(lanes))], ticktext=[f"#{i} {c}" for i, c in zip(lanes, labels)]) \
        if len(lanes) <= 60 else dict(showticklabels=False)
    fig.update_yaxes(title_text=f"{len(lanes)} requests (by arrival)", row=1, col=1,
                     showgrid=False, zeroline=False, **ticks)
    fig.update_yaxes(title_text="KV blocks", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    if window is not None:
        fig.update_xaxes(range=list(window))
    _style(fig, max(600, min(1150, 280 + 9 * len(lanes))))
    fig.update_layout(hovermode="closest", legend=dict(y=-0.08))
    return fig


# --------------------------------------------------------------------------------------------
# Sweeps, comparisons, memory


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
            fig.update_xaxes(title_text="TTFT (s)", row=1, col=j)
    fig.update_yaxes(title_text="fraction of requests", tickformat=".0%", row=1, col=1)
    _style(fig, 400)
    fig.update_layout(hovermode="closest", legend=dict(y=-0.25))
    return fig


GIB = 1024**3


def memory_bar(total: float, weights: float, activations: float, kv: float, title: str) -> go.Figure:
    """Per-GPU memory: weights, activation reserve, KV cache and what is left unused (GiB)."""
    unused = max(total - weights - activations - kv, 0.0)
    parts = [("weights", weights, "#57606a"), ("activations", activations, "#bf8700"),
             ("KV cache", kv, "#0969da"), ("unused (utilization limit)", unused, "#d0d7de")]
    fig = go.Figure()
    for name, v, color in parts:
        fig.add_trace(go.Bar(y=["GPU"], x=[v / GIB], name=name, orientation="h", marker_color=color,
                             text=f"{name}<br>{v / GIB:.1f} GiB", textposition="inside",
                             hovertemplate=f"{name}: {v / GIB:.2f} GiB<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="GiB per GPU", range=[0, total / GIB])
    fig.update_yaxes(showticklabels=False)
    _style(fig, 220, title)
    fig.update_layout(hovermode="closest", legend=dict(y=-0.45))  # short figure: legend clear of the axis title
    return fig


def step_time_bars(rows: pd.DataFrame) -> go.Figure:
    """Compute vs memory time per step kind (ms); the step takes the larger plus overhead."""
    fig = go.Figure()
    for col, name, color in (("compute_ms", "compute", "#8250df"), ("memory_ms", "memory", "#0969da"),
                             ("step_ms", "step (max + overhead)", "#24292f")):
        fig.add_trace(go.Bar(x=rows["case"], y=rows[col], name=name, marker_color=color,
                             hovertemplate=f"{name}: %{{y:.2f}} ms<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="ms per step")
    _style(fig, 340, "Step time model: compute vs memory")
    fig.update_layout(hovermode="closest")
    return fig


def reason_legend() -> list[tuple[str, str, str]]:
    """(label, colour, explanation) for every wait reason, for the page's legend table."""
    return [(r.label, REASONS[r].color, REASONS[r].explain) for r in shown()]
