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
Segments are NaN-separated lines (one SVG path per trace, however many segments); hover lives on
invisible markers (WebGL when there are many). Each layer is one builder returning its traces, over
a `_Scene` worked out once (lane positions, the window, the rows in it); `timeline` lists them in
drawing order (later on top) and validates the figure once. Pure: frames in, a figure out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine import Result

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


@dataclass(frozen=True)
class _Scene:
    """What every layer of the figure reads, worked out once: where each lane sits, the window, and
    the rows of the request lanes that fall in it."""

    requests: pd.DataFrame  # every request (hover names any of them)
    lanes: list[Lane]
    got_ahead: pd.DataFrame
    held: pd.DataFrame
    classes: list[str]
    lo: float
    hi: float
    y_of: dict  # lane key → y
    ids: list  # the request lanes' ids (not the "admitted ahead" lanes)
    waits: pd.DataFrame  # their wait segments that touch the window
    episodes: pd.DataFrame  # their inversion episodes that touch the window

    @classmethod
    def of(cls, run, lanes, got_ahead, held, classes, window) -> _Scene:
        y_of = lane_positions(lanes)
        ids = [ln.key for ln in lanes if ln.kind != "ahead"]
        lo, hi = window
        w, ep = run.waits, run.episodes
        return cls(run.requests, lanes, got_ahead, held, classes, lo, hi, y_of, ids,
                   w[w["request"].isin(ids) & (w["end_s"] >= lo) & (w["start_s"] <= hi)],
                   ep[ep["request"].isin(ids) & (ep["end_s"] >= lo) & (ep["start_s"] <= hi)])


def timeline(run: Result, lanes: list[Lane], got_ahead: pd.DataFrame, held: pd.DataFrame, strip: pd.DataFrame,
             classes: list[str], *, capacity: int, kv_reserve: int, window: tuple[float, float],
             pick: int | None = None, replica: int = 0) -> go.Figure:
    """The three panels for these lanes (`ui.panels.inversions.story_lanes` / `all_lanes`, with the
    admissions ahead and the holders they return) over `window`.

    `run`: a run's frames (`requests`, `waits`, `episodes`, `steps`: a `Result` or the like);
    `strip`: `ui.panels.inversions.strip`; `capacity`, `kv_reserve`: the KV lines, in blocks; `pick`:
    a request whose lane is highlighted; `replica`: whose KV is drawn."""
    s = _Scene.of(run, lanes, got_ahead, held, classes, window)
    data = [*_request_lines(s, t_end=float(window[1])), *_wait_bars(s), *_inversion_stripes(s),
            *_ahead_connectors(s), *_holder_connectors(s), *_wait_hover(s), *_inversion_marks(s),
            *_strip_areas(strip, classes), *_kv_areas(run.steps, s, replica), *_kv_lines(s, capacity, kv_reserve)]
    return go.Figure(dict(data=data, layout=_layout(s, pick)))


# --- panel 1: the lanes --------------------------------------------------------------------------

def _request_lines(s: _Scene, t_end: float) -> list[dict]:
    """Per class: each lane's life (thin) and its running part (a bar in the class colour)."""
    req = s.requests[s.requests["id"].isin(s.ids)]
    y_req = req["id"].map(s.y_of).to_numpy(dtype=float)
    out = []
    for name in s.classes:
        m = (req["class"].astype(str) == name).to_numpy()
        if not m.any():
            continue
        r, yy = req[m], y_req[m]
        color = class_color(s.classes, name)
        xs, ys = _segments(r["arrival_s"], r["finish_s"].fillna(t_end), yy)
        out.append(_line(xs, ys, f"{name} life", alpha(color, 0.45), 1.5, legend=False, group=name))
        ran = r["first_scheduled_s"].notna().to_numpy()
        xs, ys = _segments(r["first_scheduled_s"][ran], r["finish_s"][ran].fillna(t_end), yy[ran])
        out.append(_line(xs, ys, _("{cls} running").format(cls=name), color, 5, group=name))
    return out


def _wait_bars(s: _Scene) -> list[dict]:
    """The wait segments, one trace per reason (in the legend's order), coloured by reason."""
    out = []
    for r in shown():
        seg = s.waits[s.waits["reason"] == r.label]
        if len(seg):
            xs, ys = _segments(seg["start_s"], seg["end_s"], seg["request"].map(s.y_of))
            out.append(_line(xs, ys, _("waiting: {reason}").format(reason=look(r.label).name), look(r.label).color,
                             10, group="waits"))
    return out


def _inversion_stripes(s: _Scene) -> list[dict]:
    """A dark stripe over the waits during inversion episodes (close ones merged at ~1/1500 of the window)."""
    if not len(s.episodes):
        return []
    merged = merge_close(s.episodes, (s.hi - s.lo) / 1500.0)
    xs, ys = _segments(merged["start_s"], merged["end_s"], merged["request"].map(s.y_of))
    return [_line(xs, ys, "inversion stripe", INVERSION_COLOR, 3.5, legend=False, group="inversion")]


def _ahead_connectors(s: _Scene) -> list[dict]:
    """A thin line from a waiting lane to each lower-priority request admitted ahead of it (its own lane,
    or its class's "admitted ahead" lane), and a tick there whose hover says who needed what."""
    got = s.got_ahead
    if not len(got):
        return []
    target = [s.y_of.get(f"ahead:{c}", s.y_of.get(o)) for c, o in zip(got["overtaker_class"], got["overtaker"])]
    a = got[np.array([t is not None for t in target])]
    ty = np.array([t for t in target if t is not None], dtype=float)
    xs, ys = _verticals(a["t_s"], a["request"].map(s.y_of), ty)
    ticks = a.assign(y=ty).groupby(["overtaker", "t_s", "y"], as_index=False).agg(
        cls=("overtaker_class", "first"), need=("overtaker_need_blocks", "first"),
        who=("request", lambda r: ", ".join(f"#{i}" for i in sorted(set(r)))),
        their=("need_blocks", "max"))
    text = [_("<b>#{o} {cls}</b> admitted at {t:.2f} s needing {need}<br>ahead of {who} (which needed "
              "{their})").format(o=o, cls=c, t=t, need=_blocks(n), who=who, their=_blocks(th))
            for o, c, t, n, who, th in
            zip(ticks["overtaker"], ticks["cls"], ticks["t_s"], ticks["need"], ticks["who"], ticks["their"])]
    return [_line(xs, ys, _("admitted ahead (connector)"), CONNECTOR, 1),
            dict(type=_markers(len(ticks)), x=ticks["t_s"], y=ticks["y"], mode="markers", name=_("admitted ahead"),
                 marker=dict(symbol="line-ns-open", size=13, line=dict(width=2),
                             color=[class_color(s.classes, c) for c in ticks["cls"]]),
                 text=text, hovertemplate="%{text}<extra></extra>", showlegend=False)]


def _holder_connectors(s: _Scene) -> list[dict]:
    """A dotted line from a wait's start to each KV holder it saw that has a lane."""
    if not len(s.held):
        return []
    h = s.held[s.held["holder"].map(s.y_of).notna()]
    if not len(h):
        return []
    xs, ys = _verticals(h["start_s"], h["request"].map(s.y_of), h["holder"].map(s.y_of))
    return [_line(xs, ys, _("waited on (KV holder)"), "rgba(207,34,46,0.55)", 1.4, dash="dot")]


def _wait_hover(s: _Scene) -> list[dict]:
    """Invisible markers at wait midpoints: reason, KV need, holders, and who was admitted ahead."""
    w = s.waits
    if not len(w):
        return []
    names = dict(zip(s.requests["id"], s.requests["class"].astype(str)))
    held, ahead = _holders_by_wait(s.held), _ahead_by_wait(s.got_ahead, w)
    text = ["<br>".join(_wait_lines(row, names, held, ahead)) for row in zip(
        w["id"], w["request"], w["duration_s"], w["reason"], w["need_blocks"], w["free_blocks"], w["short_by"],
        w["eta_s"])]
    return [dict(type=_markers(len(w)), x=(w["start_s"] + w["end_s"]) / 2, y=w["request"].map(s.y_of),
                 mode="markers", marker=dict(size=12, opacity=0), text=text, customdata=w["request"],
                 hovertemplate="%{text}<extra></extra>", showlegend=False, name="hover")]


def _holders_by_wait(held: pd.DataFrame) -> dict:
    """Wait id → "#holder class (blocks)" for each holder that wait saw."""
    if not len(held):
        return {}
    return {k: _(", ").join(_("#{r} {cls} ({b:,} blocks)").format(r=r, cls=c, b=b)
                            for r, c, b in zip(g["holder"], g["holder_class"], g["blocks"]))
            for k, g in held.groupby("wait")}


def _ahead_by_wait(got_ahead: pd.DataFrame, w: pd.DataFrame) -> dict[int, list[str]]:
    """Wait id → one line per lower-priority admission during that wait (the wait of the same request
    that began last before the admission and had not ended)."""
    out: dict[int, list[str]] = {}
    if not len(got_ahead):
        return out
    left = got_ahead.reset_index(drop=True).sort_values("t_s")
    right = w[["id", "request", "start_s", "end_s"]].sort_values("start_s")
    m = pd.merge_asof(left, right, left_on="t_s", right_on="start_s", by="request", direction="backward")
    m = m[m["end_s"] >= m["t_s"]]
    for wid, o, c, t, n in zip(m["id"], m["overtaker"], m["overtaker_class"], m["t_s"], m["overtaker_need_blocks"]):
        out.setdefault(int(wid), []).append(_("#{o} {cls} at {t:.2f} s ({need})").format(o=o, cls=c, t=t,
                                                                                          need=_blocks(n)))
    return out


def _wait_lines(row: tuple, names: dict, held: dict, ahead: dict[int, list[str]]) -> list[str]:
    """The hover lines of one wait segment (the first five admissions ahead, then how many more)."""
    wid, rid, dur, reason, need, free, short, eta = row
    lines = [_("<b>#{rid} {cls}</b> waits {d:.2f} s: {why}").format(rid=rid, cls=names.get(rid, ""), d=dur,
                                                                      why=look(reason).short)]
    if need >= 0 and short >= 0:
        lines.append(_("needs {need:,} KV blocks, {free:,} free (short by {short:,})").format(
            need=need, free=free, short=short))
    if wid in held:
        lines.append(_("waited on: {who}").format(who=held[wid]))
    if eta == eta:  # not NaN
        lines.append(_("enough blocks expected in ~{eta:.1f} s").format(eta=eta))
    got = ahead.get(int(wid), [])
    if got:
        more = "<br>" + _("… and {k} more").format(k=len(got) - 5) if len(got) > 5 else ""
        lines.append(_("{k} lower-priority admitted ahead meanwhile:").format(k=len(got)) + "<br>"
                     + "<br>".join(got[:5]) + more)
    return lines


def _inversion_marks(s: _Scene) -> list[dict]:
    """A diamond where inversion starts on a lane, thinned to one per lane per ~1/400 of the window."""
    ep = s.episodes
    if not len(ep):
        return []
    quantum = max((s.hi - s.lo) / 400.0, 1e-9)
    d = ep.assign(slot=np.floor(ep["start_s"] / quantum)).drop_duplicates(["request", "slot"])
    return [dict(type=_markers(len(d)), x=d["start_s"], y=d["request"].map(s.y_of), mode="markers",
                 marker=dict(symbol="diamond", size=7, color=INVERSION_COLOR), hoverinfo="skip",
                 legendgroup="inversion", name=_("inversion: a lower-priority request admitted"))]


# --- panels 2 and 3: inversion over time, KV held ------------------------------------------------

def _strip_areas(strip: pd.DataFrame, classes: list[str]) -> list[dict]:
    """Per class that was ever inverted: how many of its requests were inverted at once (panel 2)."""
    out = []
    for name in classes:
        s = strip[strip["class"] == name]
        if len(s) and (s["value"] > 0).any():
            color = class_color(classes, name)
            out.append(dict(type="scatter", x=s["t_s"], y=s["value"], xaxis="x2", yaxis="y2", mode="lines",
                            name=_("{cls} inverted").format(cls=name), line=dict(color=color, width=1.5, shape="hv"),
                            fill="tozeroy", fillcolor=alpha(color, 0.15),
                            hovertemplate=_("{cls}: %{{y:.2f}} requests inverted at once").format(cls=name)
                            + "<extra></extra>"))
    return out


def _kv_areas(steps: pd.DataFrame, s: _Scene, replica: int) -> list[dict]:
    """One replica's KV blocks held, stacked by class (panel 3), at most MAX_KV_POINTS steps of the window."""
    st_ = steps[steps["replica"] == replica] if "replica" in steps else steps
    st_ = st_[(st_["t_s"] >= s.lo) & (st_["t_s"] <= s.hi)]
    if len(st_) > MAX_KV_POINTS:
        st_ = st_.iloc[:: int(np.ceil(len(st_) / MAX_KV_POINTS))]
    t = st_["t_s"].to_numpy(dtype=float)
    return [dict(type="scatter", x=t, y=st_[f"kv_{name}"].to_numpy(), xaxis="x3", yaxis="y3", mode="lines",
                 stackgroup="kv", name=_("{cls} KV").format(cls=name),
                 line=dict(width=0.5, color=class_color(s.classes, name), shape="hv"),
                 hovertemplate=_("{cls}: %{{y}} blocks").format(cls=name) + "<extra></extra>")
            for name in s.classes if f"kv_{name}" in st_]


def _kv_lines(s: _Scene, capacity: int, kv_reserve: int) -> list[dict]:
    """The KV capacity, and where the top class's KV reserve begins when there is one."""
    out = [dict(type="scatter", x=[s.lo, s.hi], y=[capacity, capacity], xaxis="x3", yaxis="y3", mode="lines",
                name=_("KV capacity"), line=dict(color="#24292f", dash="dash", width=1.5), hoverinfo="skip")]
    if kv_reserve > 0:
        top = s.classes[0]
        out.append(dict(type="scatter", x=[s.lo, s.hi], y=[capacity - kv_reserve] * 2, xaxis="x3", yaxis="y3",
                        mode="lines", name=_("{cls} KV reserve").format(cls=top), hoverinfo="skip",
                        line=dict(color=class_color(s.classes, top), dash="dot", width=1.5)))
    return out


# --- layout: three panels on one x axis ----------------------------------------------------------

def _layout(s: _Scene, pick: int | None) -> dict:
    n = max(len(s.lanes), 1)
    lane_h = max(200, min(LANE_PX * n, MAX_LANES_PX))
    height_px = lane_h + STRIP_PX + KV_PX + 2 * GAP_PX
    doms = _panel_domains((lane_h, STRIP_PX, KV_PX), height_px)
    return dict(
        height=height_px + 110, font=FONT, hovermode="closest",
        margin=dict(l=10, r=10, t=30, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.02 - 90 / (height_px + 110), xanchor="left", x=0),
        xaxis=dict(anchor="y", domain=[0, 1], range=[s.lo, s.hi], showticklabels=False),
        yaxis=_lane_axis(s, doms[0], labelled=lane_h / n >= 11),
        xaxis2=dict(anchor="y2", domain=[0, 1], matches="x", showticklabels=False),
        yaxis2=dict(anchor="x2", domain=list(doms[1]), rangemode="tozero", title=dict(text=_("inverted"))),
        xaxis3=dict(anchor="y3", domain=[0, 1], matches="x", title=dict(text=_("time (s)"))),
        yaxis3=dict(anchor="x3", domain=list(doms[2]), rangemode="tozero", title=dict(text=_("KV blocks"))),
        annotations=[_panel_title(_("Inversion over time: requests of each class inverted at once"), doms[1]),
                     _panel_title(_("KV cache held, by class"), doms[2])],
        shapes=_lane_shapes(s, pick),
    )


def _panel_domains(heights: tuple[int, ...], height_px: int) -> list[tuple[float, float]]:
    """Each panel's (bottom, top) in paper coordinates, top to bottom, GAP_PX apart."""
    doms = []
    top = 1.0
    for h in heights:
        doms.append((top - h / height_px, top))
        top = top - (h + GAP_PX) / height_px
    return [(max(a, 0.0), b) for a, b in doms]


def _lane_axis(s: _Scene, dom: tuple[float, float], labelled: bool) -> dict:
    """The lanes' y axis: a label per lane in its class colour, or (too thin to read) just a count."""
    n = max(len(s.lanes), 1)
    if labelled:
        ticktext = [f"<span style='color:{class_color(s.classes, ln.cls)}'>{ln.label}</span>" for ln in s.lanes]
        ticks = dict(tickvals=[-k for k in range(len(s.lanes))], ticktext=ticktext, tickfont=dict(size=11))
    else:
        ticks = dict(showticklabels=False, title=dict(text=_("{n} requests").format(n=len(s.lanes))))
    return dict(anchor="x", domain=list(dom), range=[-(n - 0.5), 0.5], showgrid=False, zeroline=False,
                fixedrange=True, **ticks)


def _panel_title(text: str, dom: tuple[float, float]) -> dict:
    return dict(text=text, x=0, xref="paper", xanchor="left", y=dom[1], yref="paper", yanchor="bottom",
                showarrow=False, font=dict(size=13))


def _lane_shapes(s: _Scene, pick: int | None) -> list[dict]:
    """A tint behind the picked request's lane, and a faint rule between the top lanes, the holders and
    the "admitted ahead" lanes."""
    shapes = []
    if pick is not None and pick in s.y_of:
        k = s.y_of[pick]
        shapes.append(dict(type="rect", xref="x domain", x0=0, x1=1, yref="y", y0=k - 0.5, y1=k + 0.5,
                           fillcolor="rgba(9,105,218,0.10)", line=dict(width=0), layer="below"))
    lanes = s.lanes
    for k in [k for k, ln in enumerate(lanes) if k and ln.kind != lanes[k - 1].kind]:
        shapes.append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=-k + 0.5, y1=-k + 0.5,
                           line=dict(color="#d0d7de", width=1)))
    return shapes
