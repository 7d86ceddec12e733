"""Figure builders of the Sweeps page: a sweep's tidy table (or its points) in, plotly out.

Pure functions (no streamlit), unit-tested. Each point of `explore` is one run × class; the
frontier chart shows every setting of a plan or sweep as GPUs against the top class's worst-seed
P99 TTFT, coloured by throughput, with the Pareto frontier and the cheapest plan marked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ..frame.i18n import _, ngettext
from .figures import FONT  # one font list, CJK fallbacks included

CLASS_COLORS = ["#cf222e", "#0969da", "#8250df", "#bf8700", "#1a7f37", "#57606a"]
PALETTE = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#57606a", "#e16f24", "#1b7c83", "#bf3989",
           "#4d2d00", "#6e7781", "#0550ae"]
MAX_CATEGORIES = len(PALETTE)
CHEAPEST_COLOR = "#1a7f37"
FRONTIER_COLOR = "#0969da"


def _style(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(height=height, font=FONT, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.18, xanchor="left", x=0))
    return fig


def settings_label(row: pd.Series | dict, knobs: list[str]) -> str:
    """`scheduler.policy=fcfs · replicas.count=2` (the knobs the row has)."""
    return " · ".join(f"{k}={row[k]}" for k in knobs if k in row and not _missing(row[k])) or _("base settings")


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def fold_seeds(table: pd.DataFrame, y: str, by: list[str]) -> pd.DataFrame:
    """Mean, min and max of `y` over seeds for each combination of `by` (knobs, class, x, colour)."""
    keys = list(dict.fromkeys(k for k in by if k in table.columns))
    g = table.groupby(keys, dropna=False, sort=True)[y]
    out = pd.DataFrame({"mean": g.mean(), "min": g.min(), "max": g.max(), "seeds": g.size()}).reset_index()
    out[y] = out["mean"]
    out["err_plus"] = out["max"] - out["mean"]
    out["err_minus"] = out["mean"] - out["min"]
    return out


def explore(table: pd.DataFrame, x: str, y: str, color: str | None = None, *, facet: bool = True,
            classes: list[str] | None = None, knobs: list[str] | None = None, folded: bool = False) -> go.Figure:
    """y against x, one panel per class (`facet`), coloured by a column (a number column with a
    dozen values or fewer counts as categories, one colour each). `folded`: one marker per setting,
    the mean over seeds with bars from min to max, joined along x per colour."""
    classes = classes or list(table["class"].drop_duplicates())
    knobs = [k for k in (knobs or []) if k in table.columns]
    data = table[table["class"].isin(classes)]
    if color == x or (color == "class" and facet):
        color = None
    if color is not None and pd.api.types.is_numeric_dtype(data[color]) and data[color].nunique() <= MAX_CATEGORIES:
        values = sorted(data[color].dropna().unique())
        data = data.assign(**{color: data[color].map(_fmt)})
        order = {color: [_fmt(v) for v in values]}
    else:
        order = {}
    if not pd.api.types.is_numeric_dtype(data[x]):  # text along x: in the spec's order
        order[x] = [str(v) for v in dict.fromkeys(data[x].dropna())]
    discrete = color is not None and not pd.api.types.is_numeric_dtype(data[color])
    hover = [c for c in dict.fromkeys(["run", "seed", *knobs]) if c in data.columns and c not in (x, y, color)]
    if folded:
        data = fold_seeds(data, y, [*knobs, "class", x, *([color] if color else [])])
        rank = {v: i for i, v in enumerate(order[x])} if x in order else None
        data = data.sort_values(x, kind="stable", key=(lambda c: c.astype(str).map(rank)) if rank else None)
        hover = [c for c in dict.fromkeys([*knobs, "seeds"]) if c in data.columns and c not in (x, y, color)]
    kw = dict(x=x, y=y, color=color, facet_col="class" if facet else None, facet_col_wrap=3 if facet else 0,
              category_orders={"class": classes, **order}, hover_data=hover)
    if color is None or discrete:
        kw["color_discrete_sequence"] = CLASS_COLORS if color == "class" else PALETTE
    else:
        kw["color_continuous_scale"] = "Viridis"
    # lines join a colour's markers along x only where that makes one marker per x
    joined = folded and not data.duplicated([c for c in (x, color, "class") if c]).any()
    if joined:
        fig = px.line(data, markers=True, error_y="err_plus", error_y_minus="err_minus",
                      symbol=None if facet else "class", **kw)
    else:
        errors = dict(error_y="err_plus", error_y_minus="err_minus") if folded else {}
        fig = px.scatter(data, symbol=None if facet else "class",
                         render_mode="webgl" if len(data) > 2000 else "auto", **errors, **kw)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_traces(marker=dict(size=8, opacity=0.85))
    rows = max(1, -(-len(classes) // 3)) if facet else 1
    return _style(fig, 260 + 220 * rows)


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float | np.floating) else str(v)


def frontier(points: pd.DataFrame, knobs: list[str], *, top: str | None = None, cheapest_runs: list[str] | None = None,
             slo_s: float | None = None) -> go.Figure:
    """Every setting: GPUs (x) against the top class's worst-seed P99 TTFT (y), colour = mean
    throughput, open markers for settings that miss an SLO; the Pareto frontier (fewer GPUs, lower
    P99, more throughput) ringed; a step line of the lowest P99 reached with at most so many GPUs;
    the cheapest plan (the setting whose runs are `cheapest_runs`) as a star."""
    fig = go.Figure()
    top = top or _("top class")
    pts = points.copy()
    finite = pts["top_ttft_p99"].astype(float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    log = len(finite) > 0 and finite.max() / finite.min() > 30
    at = (lambda v: float(np.log10(v))) if log else float  # annotations on a log axis take log10
    pts["label"] = [settings_label(r, knobs) for _i, r in pts.iterrows()]
    lat = pts["top_ttft_p99"].astype(float)
    thr = pts["served_tok_s"].astype(float)
    for ok, name, symbol in ((True, _("meets every SLO"), "circle"), (False, _("misses an SLO"), "circle-open")):
        sel = pts["feasible"].astype(bool) == ok
        if not sel.any():
            continue
        fig.add_trace(go.Scatter(
            x=pts.loc[sel, "gpus"], y=lat[sel], mode="markers", name=name,
            marker=dict(symbol=symbol, size=11, color=thr[sel], colorscale="Viridis", cmin=float(thr.min()),
                        cmax=float(thr.max()) if thr.max() > thr.min() else float(thr.min()) + 1,
                        showscale=ok or not pts["feasible"].any(), line=dict(width=1.5),
                        colorbar=dict(title=_("served tok/s"), thickness=12)),
            customdata=np.column_stack([pts.loc[sel, "label"], thr[sel]]),
            hovertemplate=_("%{{x}} GPUs · {top} P99 TTFT %{{y:.3f}} s · %{{customdata[1]:.0f}} tok/s served").format(
                top=top)
            + "<br>%{customdata[0]}<extra></extra>"))
    by_gpus = pts.groupby("gpus", sort=True)["top_ttft_p99"].min().cummin()
    fig.add_trace(go.Scatter(x=by_gpus.index, y=by_gpus.to_numpy(), mode="lines",
                             name=_("lowest P99 up to these GPUs"),
                             line=dict(color="#8c959f", width=1.5, shape="hv"), hoverinfo="skip"))
    if "frontier" in pts:
        f = pts[pts["frontier"].astype(bool)]
        fig.add_trace(go.Scatter(x=f["gpus"], y=f["top_ttft_p99"], mode="markers", name=_("frontier"),
                                 marker=dict(symbol="circle-open", size=18, color=FRONTIER_COLOR, line=dict(width=2)),
                                 hoverinfo="skip"))
    if cheapest_runs:
        want = set(cheapest_runs)
        sel = pts["runs"].apply(lambda r: bool(want & set(r)))
        if sel.any():
            c = pts[sel].iloc[0]
            fig.add_trace(go.Scatter(
                x=[c["gpus"]], y=[c["top_ttft_p99"]], mode="markers", name=_("cheapest plan"),
                marker=dict(symbol="star", size=22, color=CHEAPEST_COLOR, line=dict(width=1, color="white")),
                hovertemplate=_("cheapest plan: {n} GPUs").format(n=int(c["gpus"]))
                + f"<br>{c['label']}<extra></extra>"))
            fig.add_annotation(x=c["gpus"], y=at(c["top_ttft_p99"]),
                               text=ngettext("cheapest: {n} GPU", "cheapest: {n} GPUs", int(c["gpus"])).format(
                                   n=int(c["gpus"])),
                               showarrow=True, arrowhead=2, ax=40, ay=-40, font=dict(color=CHEAPEST_COLOR))
    if slo_s is not None:
        fig.add_hline(y=slo_s, line=dict(color="#cf222e", dash="dot", width=1))
        fig.add_annotation(x=1, xref="paper", xanchor="right", y=at(slo_s), yanchor="top", showarrow=False,
                           text=_("{top} TTFT SLO {s} s").format(top=top, s=f"{slo_s:g}"), font=dict(color="#cf222e"))
    fig.update_yaxes(title_text=_("{top} P99 TTFT, worst seed (s)").format(top=top), type="log" if log else "linear",
                     rangemode="tozero" if not log else None)
    fig.update_xaxes(title_text=_("GPUs (replicas × tensor-parallel size)"),
                     dtick=1 if pts["gpus"].max() <= 16 else None)
    fig.update_layout(hovermode="closest")
    return _style(fig, 480)
