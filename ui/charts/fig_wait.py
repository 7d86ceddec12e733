"""One P0 request's wait under several schedulers, on the same arrivals: who got in while it waited.

The first lesson's picture. The timeline shows every request of one run; this follows one top-class
request through each run of a lesson (same seed, so the same arrivals and the same request) and
draws, per run, its wait as a band over the KV cache held by class and over the step's token
budget (prefill and decode tokens), with a mark for every lower-priority request admitted during the
wait — filled when that request arrived *after* the waiting one (it overtook), hollow when it was
there first. Under FCFS the marks are hollow (earlier arrivals go first), under "fill what fits"
they are filled, under vLLM's priority policy there are none, and the band still lasts while the
request admitted before it holds the cache and takes the budget.

Which request: the one that the most later arrivals overtook in the run the lesson names (`pick`),
the earliest on a tie; the longest wait if nobody overtook. The caption says so. Pure: results in,
a plotly figure out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine import Result

from ..frame.i18n import _
from .figures import FONT, class_color, thin

WAIT = "rgba(207, 34, 46, 0.10)"
PREFILL, DECODE = "#495057", "#adb5bd"


@dataclass(frozen=True)
class OneWait:
    """One request's wait in one run: when it arrived and started, the lower-priority admissions
    meanwhile (`t_s`, `class`, `request`, `arrival_s`, `after`: it arrived after the waiting one),
    and the steps from a little before its arrival to a little after the latest start shown."""

    label: str
    request: int
    cls: str
    arrival: float
    start: float | None
    ahead: pd.DataFrame
    steps: pd.DataFrame

    @property
    def waited(self) -> float | None:
        return None if self.start is None else self.start - self.arrival

    @property
    def overtook(self) -> int:
        return int(self.ahead["after"].sum())


def _ahead(res: Result, row: pd.Series, start: float) -> pd.DataFrame:
    """Admissions of lower-priority requests while `row` waited, with their arrival times."""
    adm = res.admissions
    arrival = res.requests.set_index("id")["arrival_s"]
    got = adm[(adm["t_s"] >= row.arrival_s) & (adm["t_s"] < start) & (adm["priority"] > row.priority)]
    got = got[["t_s", "class", "request"]].copy()
    got["class"] = got["class"].astype(str)
    got["arrival_s"] = arrival.reindex(got["request"].to_numpy()).to_numpy(dtype=float)
    got["after"] = got["arrival_s"] > row.arrival_s
    return got.reset_index(drop=True)


def _start(row: pd.Series, end: float) -> float:
    s = row.first_scheduled_s
    return float(end if s is None or not np.isfinite(s) else s)


def most_overtaken(res: Result) -> int | None:
    """The top-class request that the most later-arriving lower-priority requests were admitted
    ahead of (the earliest on a tie); when nobody overtook, the one that waited longest; None when
    the run has no top-class request."""
    req = res.requests
    if not len(req):
        return None
    top = req[(req["priority"] == req["priority"].min()) & req["measured"]]
    if not len(top):
        return None
    end = float(max(res.summary["sim_time_s"], 1.0))
    adm = res.admissions
    later = adm.merge(req[["id", "arrival_s"]], left_on="request", right_on="id")
    best, best_key = None, None
    for row in top.itertuples(index=False):
        start = _start(row, end)
        m = ((later["t_s"] >= row.arrival_s) & (later["t_s"] < start) & (later["priority"] > row.priority)
             & (later["arrival_s"] > row.arrival_s))
        key = (int(m.sum()), start - row.arrival_s, -int(row.id))
        if best_key is None or key > best_key:
            best, best_key = int(row.id), key
    if best_key is not None and best_key[0] == 0:  # nobody overtook: the longest wait, earliest on a tie
        waits = [(_start(r, end) - r.arrival_s, -int(r.id)) for r in top.itertuples(index=False)]
        best = -max(waits)[1]
    return best


def one_wait(res: Result, request: int, label: str, window: tuple[float, float] | None = None) -> OneWait:
    """Request `request`'s wait in `res` (steps cut to `window`, or to its own wait ± 2 s)."""
    req = res.requests
    row = req[req["id"] == request].iloc[0]
    end = float(max(res.summary["sim_time_s"], 1.0))
    s = row.first_scheduled_s
    start = float(s) if s is not None and np.isfinite(s) else None
    lo, hi = window or (row.arrival_s - 2.0, (start if start is not None else end) + 2.0)
    steps = res.steps
    if "replica" in steps and "replica" in req and np.isfinite(row["replica"]):
        steps = steps[steps["replica"] == int(row["replica"])]
    steps = steps[(steps["t_s"] >= lo) & (steps["t_s"] <= hi)]
    return OneWait(label, int(request), str(row["class"]), float(row.arrival_s), start,
                   _ahead(res, row, start if start is not None else end), steps)


def window_of(results: Sequence[Result], request: int, pad: float = 2.0) -> tuple[float, float]:
    """From `pad` s before the request arrives to `pad` s after its latest start over the runs."""
    ends, arrival = [], None
    for res in results:
        row = res.requests[res.requests["id"] == request].iloc[0]
        arrival = float(row["arrival_s"])
        s = row["first_scheduled_s"]
        ends.append(float(s) if s is not None and np.isfinite(s) else float(res.summary["sim_time_s"]))
    return max(0.0, arrival - pad), max(ends) + pad


def title_of(w: OneWait) -> str:
    if w.waited is None:
        head = _("{run}: {cls} #{id} never started").format(run=w.label, cls=w.cls, id=w.request)
    else:
        head = _("{run}: {cls} #{id} waited {s:.1f} s").format(run=w.label, cls=w.cls, id=w.request, s=w.waited)
    return head + " · " + _("{n} lower-priority admitted meanwhile, {k} of them arrived after it").format(
        n=len(w.ahead), k=w.overtook)


def wait_figure(waits: Sequence[OneWait], classes: list[str], capacity: int, budget: int) -> go.Figure:
    """Per run two rows on one time axis: the KV cache held by class (stacked, the capacity dashed)
    with the admissions during the wait marked above it, and the step's tokens (prefill, decode)
    against the budget. The wait is a band across both rows."""
    n = len(waits)
    titles = []
    for w in waits:
        titles += [title_of(w), ""]
    fig = make_subplots(rows=2 * n, cols=1, shared_xaxes=True, vertical_spacing=0.035,
                        row_heights=[0.7, 0.3] * n, subplot_titles=titles)
    top_y = capacity * 1.08
    legend_shown: set[bool] = set()  # each kind of admission mark in the legend once, where it first occurs
    for i, w in enumerate(waits):
        kv_row, tok_row = 2 * i + 1, 2 * i + 2
        first = i == 0
        s = thin(w.steps, [f"kv_{c}" for c in classes], whole_rows=True)
        t = s["t_s"].to_numpy(dtype=float)
        for c in reversed(classes):  # the lowest priority at the bottom: the document's block under the rest
            fig.add_trace(go.Scatter(
                x=t, y=s[f"kv_{c}"].to_numpy(), name=_("{cls} KV").format(cls=c), stackgroup=f"kv{i}", mode="lines",
                line=dict(width=0.5, color=class_color(classes, c), shape="hv"), legendgroup=f"kv_{c}",
                showlegend=first, hovertemplate=_("{cls}: %{{y}} blocks").format(cls=c) + "<extra></extra>"),
                row=kv_row, col=1)
        if len(t):
            fig.add_trace(go.Scatter(x=[t.min(), t.max()], y=[capacity, capacity], mode="lines", name=_("KV capacity"),
                                     line=dict(color="#24292f", dash="dash", width=1), legendgroup="cap",
                                     showlegend=first, hoverinfo="skip"), row=kv_row, col=1)
        tok = thin(w.steps, ["prefill_tokens", "decode_tokens"], whole_rows=True)
        tt = tok["t_s"].to_numpy(dtype=float)
        for col, name, color in (("prefill_tokens", _("prefill tokens"), PREFILL),
                                 ("decode_tokens", _("decode tokens"), DECODE)):
            fig.add_trace(go.Scatter(x=tt, y=tok[col].to_numpy(), name=name, stackgroup=f"tok{i}", mode="lines",
                                     line=dict(width=0.5, color=color, shape="hv"), legendgroup=col, showlegend=first,
                                     hovertemplate=name + ": %{y:,}<extra></extra>"), row=tok_row, col=1)
        for after, name, symbol in ((True, _("admitted while it waits, arrived after it (overtook)"), "triangle-down"),
                                    (False, _("admitted while it waits, arrived before it"), "triangle-down-open")):
            a = w.ahead[w.ahead["after"] == after]
            show = len(a) > 0 and after not in legend_shown
            legend_shown |= {after} if show else set()
            colors = [class_color(classes, c) for c in a["class"]]
            fig.add_trace(go.Scatter(
                x=a["t_s"].to_numpy(dtype=float), y=np.full(len(a), top_y), mode="markers", name=name,
                marker=dict(symbol=symbol, size=9, color=colors or "#57606a", line=dict(width=1.2, color=colors
                                                                                        or "#57606a")),
                legendgroup=f"ahead_{after}", showlegend=show,
                customdata=np.stack([a["request"].to_numpy(), a["arrival_s"].to_numpy(dtype=float)], axis=-1)
                if len(a) else None,
                hovertemplate=_("#%{customdata[0]} admitted at %{x:.2f} s, arrived at %{customdata[1]:.2f} s")
                + "<extra></extra>"), row=kv_row, col=1)
        end = w.start if w.start is not None else (float(w.steps["t_s"].max()) if len(w.steps) else w.arrival)
        for r in (kv_row, tok_row):
            fig.add_vrect(x0=w.arrival, x1=max(end, w.arrival + 1e-3), fillcolor=WAIT, line_width=0, layer="below",
                          row=r, col=1)
        fig.update_yaxes(range=[0, capacity * 1.16], title_text=_("KV blocks"), row=kv_row, col=1,
                         gridcolor="#eaeef2")
        fig.update_yaxes(range=[0, budget * 1.05], tickvals=[0, budget], ticktext=["0", f"{budget:,}"],
                         title_text=_("tokens"), row=tok_row, col=1, gridcolor="#eaeef2")
    fig.update_xaxes(title_text=_("time (s); the band: the request's wait"), row=2 * n, col=1)
    fig.update_layout(dict(
        height=150 + 210 * n, font=FONT, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white",
        hovermode="closest", title=dict(text=_("One {cls} request's wait in each run (the same arrivals)").format(
            cls=classes[0]), x=0, font=dict(size=15)),
        legend=dict(orientation="h", yanchor="top", y=-0.08, xanchor="left", x=0)))
    fig.update_annotations(font=dict(size=13), x=0, xanchor="left")  # the run titles, left-aligned
    return fig
