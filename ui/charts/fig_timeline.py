"""The inversion timeline: lanes, who got in ahead, whom they waited on; inversion and KV over time.

Three panels on one time axis:
1. Lanes. Top-priority requests first, labelled "#id class" in the class colour. On each lane a
   thin line spans the request's life and a bar in its class colour shows it running; waits are
   thicker bars coloured by reason (`ui.panels.vocab`), and inversion steps are a dark stripe drawn on
   top of them. A thin connector drops from a waiting lane to every lower-priority request
   admitted in that step (in the story view they share one lane per class, a tick each); a dotted
   one to the KV holders the wait saw.
2. Inversion seconds per second, by class (how many of its requests were inverted at once).
3. KV blocks held by class, with capacity and reserve.
Segments are NaN-separated `Scattergl` lines (fast for thousands); hover lives on invisible
markers. Assembled as one mapping and validated once. Pure: frames in, a figure out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..frame.i18n import _
from ..panels.inversions import Lane
from ..panels.vocab import look, shown
from .figures import FONT, alpha, class_color

INVERSION_COLOR = "#1f2328"
CONNECTOR = "rgba(31,35,40,0.22)"
LANE_PX, STRIP_PX, KV_PX, GAP_PX = 20, 120, 200, 46
MAX_KV_POINTS = 3000
MAX_SVG_MARKERS = 1500
MAX_LANES_PX = 1400  # beyond this the lanes get thinner (and unlabelled below 11 px)


def _polyline(x0, x1, y0, y1) -> tuple[np.ndarray, np.ndarray]:
    """NaN-separated segments (x0, y0) → (x1, y1): one plotly trace draws them all."""
    x0, x1, y0, y1 = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (x0, x1, y0, y1)))
    xs, ys = np.empty(3 * len(x0)), np.empty(3 * len(x0))
    xs[0::3], xs[1::3], xs[2::3] = x0, x1, np.nan
    ys[0::3], ys[1::3], ys[2::3] = y0, y1, np.nan
    return xs, ys


def _segments(x0, x1, y) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal segments at heights y."""
    return _polyline(x0, x1, y, y)


def _verticals(x, y0, y1) -> tuple[np.ndarray, np.ndarray]:
    return _polyline(x, x, y0, y1)


def _line(xs, ys, name, color, width, *, legend=True, group=None, dash=None) -> dict:
    """A NaN-separated polyline: one SVG path whatever the number of segments (measured faster to
    draw than WebGL here, where Chromium often has no GPU)."""
    return dict(type="scatter", x=xs, y=ys, mode="lines", name=name, showlegend=legend, legendgroup=group,
                hoverinfo="skip", line=dict(color=color, width=width, **({"dash": dash} if dash else {})))


def _markers(n: int) -> str:
    """SVG draws one element per marker: many markers go to WebGL instead."""
    return "scattergl" if n > MAX_SVG_MARKERS else "scatter"


def _blocks(n) -> str:
    return _("{n:,} blocks").format(n=int(n)) if n is not None and n >= 0 else _("? blocks")


def merge_close(ep: pd.DataFrame, gap: float) -> pd.DataFrame:
    """A lane's episodes closer than `gap` drawn as one stripe (at a pixel's width nobody sees the
    gap, and an overloaded run has hundreds of thousands of one-step episodes)."""
    e = ep[["request", "start_s", "end_s"]].sort_values(["request", "start_s"], kind="stable")
    prev_end = e.groupby("request")["end_s"].cummax().groupby(e["request"]).shift()
    new = (e["start_s"] > prev_end + gap) | prev_end.isna()
    g = new.cumsum()
    return e.groupby(g).agg(request=("request", "first"), start_s=("start_s", "min"), end_s=("end_s", "max"))


def lane_positions(lanes: list[Lane]) -> dict:
    """Lane key → y (lane k at y = -k: Streamlit's plotly.js draws Scattergl badly on a reversed axis)."""
    return {ln.key: -k for k, ln in enumerate(lanes)}


def timeline(requests: pd.DataFrame, waits: pd.DataFrame, episodes: pd.DataFrame, steps: pd.DataFrame,
             lanes: list[Lane], got_ahead: pd.DataFrame, held: pd.DataFrame, strip: pd.DataFrame,
             classes: list[str], capacity: int, kv_reserve: int, window: tuple[float, float],
             pick: int | None = None, replica: int = 0) -> go.Figure:
    y_of = lane_positions(lanes)
    req_lanes = [ln for ln in lanes if ln.kind != "ahead"]
    ids = [ln.key for ln in req_lanes]
    t_end = float(window[1])
    lo, hi = window
    data: list[dict] = []

    # 1. lanes: life, running, waits, inversion stripes
    req = requests[requests["id"].isin(ids)]
    y_req = req["id"].map(y_of).to_numpy(dtype=float)
    for name in classes:
        m = (req["class"].astype(str) == name).to_numpy()
        if not m.any():
            continue
        r, yy = req[m], y_req[m]
        color = class_color(classes, name)
        xs, ys = _segments(r["arrival_s"], r["finish_s"].fillna(t_end), yy)
        data.append(_line(xs, ys, f"{name} life", alpha(color, 0.45), 1.5, legend=False, group=name))
        ran = r["first_scheduled_s"].notna().to_numpy()
        xs, ys = _segments(r["first_scheduled_s"][ran], r["finish_s"][ran].fillna(t_end), yy[ran])
        data.append(_line(xs, ys, _("{cls} running").format(cls=name), color, 5, group=name))
    w = waits[waits["request"].isin(ids) & (waits["end_s"] >= lo) & (waits["start_s"] <= hi)]
    for r in shown():
        seg = w[w["reason"] == r.label]
        if len(seg):
            xs, ys = _segments(seg["start_s"], seg["end_s"], seg["request"].map(y_of))
            data.append(_line(xs, ys, _("waiting: {reason}").format(reason=look(r.label).name), look(r.label).color, 10,
                              group="waits"))
    ep = episodes[episodes["request"].isin(ids) & (episodes["end_s"] >= lo) & (episodes["start_s"] <= hi)]
    if len(ep):
        merged = merge_close(ep, (hi - lo) / 1500.0)
        xs, ys = _segments(merged["start_s"], merged["end_s"], merged["request"].map(y_of))
        data.append(_line(xs, ys, "inversion stripe", INVERSION_COLOR, 3.5, legend=False, group="inversion"))

    # 2. connectors: admitted ahead (dashed), KV holders waited on (dotted)
    if len(got_ahead):
        target = [y_of.get(f"ahead:{c}", y_of.get(o)) for c, o in zip(got_ahead["overtaker_class"],
                                                                     got_ahead["overtaker"])]
        ok = np.array([t is not None for t in target])
        a = got_ahead[ok]
        ty = np.array([t for t in target if t is not None], dtype=float)
        xs, ys = _verticals(a["t_s"], a["request"].map(y_of), ty)
        data.append(_line(xs, ys, _("admitted ahead (connector)"), CONNECTOR, 1))
        ticks = a.assign(y=ty).groupby(["overtaker", "t_s", "y"], as_index=False).agg(
            cls=("overtaker_class", "first"), need=("overtaker_need_blocks", "first"),
            who=("request", lambda s: ", ".join(f"#{i}" for i in sorted(set(s)))),
            their=("need_blocks", "max"))
        data.append(dict(
            type=_markers(len(ticks)), x=ticks["t_s"], y=ticks["y"], mode="markers", name=_("admitted ahead"),
            marker=dict(symbol="line-ns-open", size=13, line=dict(width=2),
                        color=[class_color(classes, c) for c in ticks["cls"]]),
            text=[_("<b>#{o} {cls}</b> admitted at {t:.2f} s needing {need}<br>ahead of {who} (which needed "
                    "{their})").format(o=o, cls=c, t=t, need=_blocks(n), who=who, their=_blocks(th))
                  for o, c, t, n, who, th in
                  zip(ticks["overtaker"], ticks["cls"], ticks["t_s"], ticks["need"], ticks["who"], ticks["their"])],
            hovertemplate="%{text}<extra></extra>", showlegend=False))
    if len(held):
        hy = held["holder"].map(y_of)
        h = held[hy.notna()]
        if len(h):
            xs, ys = _verticals(h["start_s"], h["request"].map(y_of), h["holder"].map(y_of))
            data.append(_line(xs, ys, _("waited on (KV holder)"), "rgba(207,34,46,0.55)", 1.4, dash="dot"))

    # 3. hover: one invisible marker per wait segment (who held KV, who got in ahead meanwhile);
    #    a diamond where inversion starts on a lane (thinned to one per ~1/400 of the window)
    if len(w):
        data.append(_wait_hover(w, requests, held, got_ahead, y_of))
    if len(ep):
        quantum = max((hi - lo) / 400.0, 1e-9)
        d = ep.assign(slot=np.floor(ep["start_s"] / quantum)).drop_duplicates(["request", "slot"])
        data.append(dict(type=_markers(len(d)), x=d["start_s"], y=d["request"].map(y_of), mode="markers",
                         marker=dict(symbol="diamond", size=7, color=INVERSION_COLOR), hoverinfo="skip",
                         legendgroup="inversion", name=_("inversion: a lower-priority request admitted")))

    # layout: three panels on one x axis
    n = max(len(lanes), 1)
    lane_h = max(200, min(LANE_PX * n, MAX_LANES_PX))
    labelled = lane_h / n >= 11
    height_px = lane_h + STRIP_PX + KV_PX + 2 * GAP_PX
    doms = []
    top = 1.0
    for h in (lane_h, STRIP_PX, KV_PX):
        doms.append((top - h / height_px, top))
        top = top - (h + GAP_PX) / height_px
    doms = [(max(a, 0.0), b) for a, b in doms]
    ticktext = [f"<span style='color:{class_color(classes, ln.cls)}'>{ln.label}</span>" for ln in lanes]
    layout: dict = dict(
        height=height_px + 110, font=FONT, hovermode="closest",
        margin=dict(l=10, r=10, t=30, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.02 - 90 / (height_px + 110), xanchor="left", x=0),
        xaxis=dict(anchor="y", domain=[0, 1], range=[lo, hi], showticklabels=False),
        yaxis=dict(anchor="x", domain=list(doms[0]), range=[-(n - 0.5), 0.5], showgrid=False, zeroline=False,
                   fixedrange=True, **(dict(tickvals=[-k for k in range(len(lanes))], ticktext=ticktext,
                                            tickfont=dict(size=11)) if labelled else
                                       dict(showticklabels=False,
                                            title=dict(text=_("{n} requests").format(n=len(lanes)))))),
        xaxis2=dict(anchor="y2", domain=[0, 1], matches="x", showticklabels=False),
        yaxis2=dict(anchor="x2", domain=list(doms[1]), rangemode="tozero", title=dict(text=_("inverted"))),
        xaxis3=dict(anchor="y3", domain=[0, 1], matches="x", title=dict(text=_("time (s)"))),
        yaxis3=dict(anchor="x3", domain=list(doms[2]), rangemode="tozero", title=dict(text=_("KV blocks"))),
        annotations=[
            dict(text=_("Inversion over time: requests of each class inverted at once"), x=0, xref="paper",
                 xanchor="left", y=doms[1][1], yref="paper", yanchor="bottom", showarrow=False, font=dict(size=13)),
            dict(text=_("KV cache held, by class"), x=0, xref="paper", xanchor="left", y=doms[2][1], yref="paper",
                 yanchor="bottom", showarrow=False, font=dict(size=13)),
        ],
        shapes=[],
    )
    if pick is not None and pick in y_of:
        k = y_of[pick]
        layout["shapes"].append(dict(type="rect", xref="x domain", x0=0, x1=1, yref="y", y0=k - 0.5, y1=k + 0.5,
                                     fillcolor="rgba(9,105,218,0.10)", line=dict(width=0), layer="below"))
    firsts = [k for k, ln in enumerate(lanes) if k and ln.kind != lanes[k - 1].kind]
    for k in firsts:  # a faint rule between the top lanes, the holders and the "admitted ahead" lanes
        layout["shapes"].append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=-k + 0.5, y1=-k + 0.5,
                                     line=dict(color="#d0d7de", width=1)))

    # strip
    for name in classes:
        s = strip[strip["class"] == name]
        if len(s) and (s["value"] > 0).any():
            color = class_color(classes, name)
            data.append(dict(type="scatter", x=s["t_s"], y=s["value"], xaxis="x2", yaxis="y2", mode="lines",
                             name=_("{cls} inverted").format(cls=name), line=dict(color=color, width=1.5, shape="hv"),
                             fill="tozeroy",
                             fillcolor=alpha(color, 0.15),
                             hovertemplate=_("{cls}: %{{y:.2f}} requests inverted at once").format(cls=name)
                             + "<extra></extra>"))
    # KV, downsampled to at most MAX_KV_POINTS steps in the window
    st_ = steps[steps["replica"] == replica] if "replica" in steps else steps
    st_ = st_[(st_["t_s"] >= lo) & (st_["t_s"] <= hi)]
    if len(st_) > MAX_KV_POINTS:
        st_ = st_.iloc[:: int(np.ceil(len(st_) / MAX_KV_POINTS))]
    t = st_["t_s"].to_numpy(dtype=float)
    for name in classes:
        col = f"kv_{name}"
        if col in st_:
            color = class_color(classes, name)
            data.append(dict(type="scatter", x=t, y=st_[col].to_numpy(), xaxis="x3", yaxis="y3", mode="lines",
                             stackgroup="kv", name=_("{cls} KV").format(cls=name),
                             line=dict(width=0.5, color=color, shape="hv"),
                             hovertemplate=_("{cls}: %{{y}} blocks").format(cls=name) + "<extra></extra>"))
    data.append(dict(type="scatter", x=[lo, hi], y=[capacity, capacity], xaxis="x3", yaxis="y3", mode="lines",
                     name=_("KV capacity"), line=dict(color="#24292f", dash="dash", width=1.5), hoverinfo="skip"))
    if kv_reserve > 0:
        data.append(dict(type="scatter", x=[lo, hi], y=[capacity - kv_reserve] * 2, xaxis="x3", yaxis="y3",
                         mode="lines", name=_("{cls} KV reserve").format(cls=classes[0]), hoverinfo="skip",
                         line=dict(color=class_color(classes, classes[0]), dash="dot", width=1.5)))
    return go.Figure(dict(data=data, layout=layout))


def _wait_hover(w: pd.DataFrame, requests: pd.DataFrame, held: pd.DataFrame, got_ahead: pd.DataFrame,
                y_of: dict) -> dict:
    """Invisible markers at wait midpoints: reason, KV need, holders, and who was admitted ahead."""
    names = dict(zip(requests["id"], requests["class"].astype(str)))
    held_text = {k: _(", ").join(_("#{r} {cls} ({b:,} blocks)").format(r=r, cls=c, b=b)
                              for r, c, b in zip(g["holder"], g["holder_class"], g["blocks"]))
                 for k, g in held.groupby("wait")} if len(held) else {}
    ahead_by_wait: dict[int, list[str]] = {}
    if len(got_ahead):
        left = got_ahead.reset_index(drop=True).sort_values("t_s")
        right = w[["id", "request", "start_s", "end_s"]].sort_values("start_s")
        m = pd.merge_asof(left, right, left_on="t_s", right_on="start_s", by="request", direction="backward")
        m = m[m["end_s"] >= m["t_s"]]
        for wid, o, c, t, n in zip(m["id"], m["overtaker"], m["overtaker_class"], m["t_s"],
                                   m["overtaker_need_blocks"]):
            ahead_by_wait.setdefault(int(wid), []).append(
                _("#{o} {cls} at {t:.2f} s ({need})").format(o=o, cls=c, t=t, need=_blocks(n)))
    text = []
    for wid, rid, dur, reason, need, free, short, eta in zip(
            w["id"], w["request"], w["duration_s"], w["reason"], w["need_blocks"], w["free_blocks"],
            w["short_by"], w["eta_s"]):
        lines = [_("<b>#{rid} {cls}</b> waits {d:.2f} s: {why}").format(rid=rid, cls=names.get(rid, ""), d=dur,
                                                                          why=look(reason).short)]
        if need >= 0 and short >= 0:
            lines.append(_("needs {need:,} KV blocks, {free:,} free (short by {short:,})").format(
                need=need, free=free, short=short))
        if wid in held_text:
            lines.append(_("waited on: {who}").format(who=held_text[wid]))
        if eta == eta:
            lines.append(_("enough blocks expected in ~{eta:.1f} s").format(eta=eta))
        got = ahead_by_wait.get(int(wid), [])
        if got:
            more = "<br>" + _("… and {k} more").format(k=len(got) - 5) if len(got) > 5 else ""
            lines.append(_("{k} lower-priority admitted ahead meanwhile:").format(k=len(got)) + "<br>"
                         + "<br>".join(got[:5]) + more)
        text.append("<br>".join(lines))
    return dict(type=_markers(len(w)), x=(w["start_s"] + w["end_s"]) / 2, y=w["request"].map(y_of), mode="markers",
                marker=dict(size=12, opacity=0), text=text, customdata=w["request"],
                hovertemplate="%{text}<extra></extra>", showlegend=False, name="hover")
