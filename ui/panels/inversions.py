"""The inversion story in tables: who got in ahead, whom a request waited on, which lanes to draw.

Pure functions over a run's flat frames (`engine.sim.result`): nothing is parsed from strings.
- `ahead`: every lower-priority admission during a request's inversion episodes, with what the
  overtaker needed and what the waiting request needed then (`engine.sim.result.overtakers` + needs);
- `waited_on`: the KV holders each wait segment saw, biggest first;
- `strip`: inversion seconds per second of time, by class (how many of its requests were
  inverted at once);
- `story_lanes` / `all_lanes`: the rows of the timeline, top priority first, within a lane limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine import Result
from engine.sim.result import overtakers_in

from ..frame.i18n import _

AHEAD_COLUMNS = ["request", "overtaker", "overtaker_class", "overtaker_priority", "t_s", "overtaker_need_blocks",
                 "need_blocks", "replica"]


def _own_need(res: Result, rows: pd.DataFrame) -> np.ndarray:
    """What each waiting request needed (KV blocks) at time t_s: its wait segment's need if it was
    short of KV then, else the need of its own (later) admission; -1 when unknown."""
    if not len(rows):
        return np.empty(0, dtype=np.int64)
    w = res.waits[(res.waits["need_blocks"] >= 0) & res.waits["request"].isin(rows["request"].unique())]
    left = rows[["request", "t_s"]].reset_index().sort_values("t_s")
    right = w[["request", "start_s", "end_s", "need_blocks"]].sort_values("start_s")
    m = pd.merge_asof(left, right, left_on="t_s", right_on="start_s", by="request", direction="backward")
    m = m.set_index("index").reindex(rows.index)
    need = np.where(m["end_s"].to_numpy() >= m["t_s"].to_numpy(), m["need_blocks"].fillna(-1), -1)
    need = need.astype(np.int64)
    missing = need < 0
    if missing.any():
        first = res.admissions.drop_duplicates("request").set_index("request")["need_blocks"]
        need[missing] = rows.loc[missing, "request"].map(first).fillna(-1).to_numpy(dtype=np.int64)
    return need


def ahead(res: Result, ids) -> pd.DataFrame:
    """Lower-priority admissions during these requests' inversion episodes, with both needs."""
    ep = res.episodes
    out = overtakers_in(ep[ep["request"].isin(list(ids))], res.admissions)
    if not len(out):
        return pd.DataFrame({c: [] for c in AHEAD_COLUMNS})
    out["need_blocks"] = _own_need(res, out)
    return out[AHEAD_COLUMNS]


def waited_on(res: Result, ids) -> pd.DataFrame:
    """(request, wait, start_s, reason, rank, holder, holder_class, blocks) for these requests' waits."""
    w = res.waits[res.waits["request"].isin(list(ids))][["id", "request", "start_s", "end_s", "reason"]]
    h = res.holders[~res.holders["alert"]][["wait", "rank", "request", "class", "blocks"]]
    m = w.merge(h.rename(columns={"request": "holder", "class": "holder_class"}), left_on="id", right_on="wait")
    m["holder_class"] = m["holder_class"].astype(str)
    return m[["request", "wait", "start_s", "end_s", "reason", "rank", "holder", "holder_class", "blocks"]]


def _overlap_upto(x: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """F(x) = Σ_i |[s_i, e_i] ∩ [0, x]| at every x, in O((n + len(x)) log n)."""
    by_e = np.argsort(e, kind="stable")
    e_sorted, s_by_e = e[by_e], s[by_e]
    done_len = np.concatenate([[0.0], np.cumsum(e_sorted - s_by_e)])  # episodes over by x: their full length
    done_s = np.concatenate([[0.0], np.cumsum(s_by_e)])
    s_sorted = np.sort(s)
    started_s = np.concatenate([[0.0], np.cumsum(s_sorted)])
    ne = np.searchsorted(e_sorted, x, "right")
    ns = np.searchsorted(s_sorted, x, "right")
    # episodes going on at x contribute x - s_i
    return done_len[ne] + x * (ns - ne) - (started_s[ns] - done_s[ne])


def strip(episodes: pd.DataFrame, classes: list[str], t_end: float, bins: int = 240) -> pd.DataFrame:
    """Inversion seconds per second of time, by class: (t_s bin start, class, value).

    An episode's overlap with each bin is added to its class; divided by the bin width this is the
    mean number of the class's requests that were inverted at that moment."""
    edges = np.linspace(0.0, max(t_end, 1e-9), bins + 1)
    width = edges[1] - edges[0]
    rows = []
    names = episodes["class"].astype(str).to_numpy() if len(episodes) else np.array([], dtype=str)
    for name in classes:
        m = names == name
        s = episodes["start_s"].to_numpy(dtype=float)[m]
        e = np.maximum(episodes["end_s"].to_numpy(dtype=float)[m], s)
        acc = np.diff(_overlap_upto(edges, s, e)) if len(s) else np.zeros(bins)
        rows.append(pd.DataFrame({"t_s": edges[:-1], "class": name, "value": acc / width}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["t_s", "class", "value"])


def story_span(res: Result, pad: float = 0.03) -> tuple[float, float]:
    """Where the top class's waits happen: from the first waiting top-priority arrival to the last
    such request's finish, padded by 3 % of the run (the whole run if none waited)."""
    t_end = float(max(res.summary["sim_time_s"], 1.0))
    req = res.requests
    if not len(req) or not len(res.waits):
        return 0.0, round(t_end, 2)
    top = int(req["priority"].min())
    waited = req[req["id"].isin(res.waits.loc[res.waits["priority"] == top, "request"])]
    if not len(waited):
        return 0.0, round(t_end, 2)
    lo = float(waited["arrival_s"].min()) - pad * t_end
    hi = float(waited["finish_s"].fillna(t_end).max()) + pad * t_end
    return round(max(lo, 0.0), 2), round(min(hi, t_end), 2)


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a request, or all of a class's admissions ahead of the top class."""

    key: int | str  # request id, or "ahead:<class>"
    label: str
    cls: str
    kind: str  # "top" | "holder" | "ahead" | "request"


def _visible(req: pd.DataFrame, window: tuple[float, float], t_end: float) -> pd.Series:
    return (req["arrival_s"] <= window[1]) & (req["finish_s"].fillna(t_end) >= window[0])


def story_lanes(res: Result, classes: list[str], window: tuple[float, float], limit: int = 60
                ) -> tuple[list[Lane], pd.DataFrame, pd.DataFrame, str | None]:
    """Top-priority requests that waited (first, by arrival), the KV holders they waited on, and one
    lane per lower class for the requests admitted ahead of them. Returns (lanes, ahead, holders, note)."""
    req = res.requests
    t_end = float(res.summary["sim_time_s"])
    if not len(req):
        return [], ahead(res, []), waited_on(res, []), None
    top_prio = int(req["priority"].min())
    waited = set(res.waits.loc[res.waits["priority"] == top_prio, "request"])
    top = req[(req["priority"] == top_prio) & req["id"].isin(waited) & _visible(req, window, t_end)]
    top = top[top["class"].astype(str).isin(classes)].sort_values("arrival_s")
    note = None
    if len(top) > limit:
        note = _("Showing the first {limit} of {n:,} top-priority requests that waited in this window; narrow the "
                 "time window to see the others.").format(limit=limit, n=len(top))
        top = top.head(limit)
    ids = top["id"].tolist()
    got_ahead = ahead(res, ids)
    got_ahead = got_ahead[(got_ahead["t_s"] >= window[0]) & (got_ahead["t_s"] <= window[1])]
    held = waited_on(res, ids)
    lanes = [Lane(int(i), f"#{i} {c}", str(c), "top") for i, c in zip(top["id"], top["class"])]
    hold = req[req["id"].isin(held["holder"].unique()) & ~req["id"].isin(ids)].sort_values("arrival_s")
    hold = hold[hold["class"].astype(str).isin(classes)]
    for i, c in zip(hold["id"], hold["class"]):
        blocks = int(held.loc[held["holder"] == i, "blocks"].max())
        lanes.append(Lane(int(i), _("#{i} {cls} · held up to {b:,} blocks").format(i=i, cls=c, b=blocks), str(c),
                          "holder"))  # (the most any wait shown saw it hold; a request's story gives each wait's)
    for c in [c for c in classes if c in set(got_ahead["overtaker_class"])]:
        n = got_ahead.loc[got_ahead["overtaker_class"] == c, "overtaker"].nunique()
        lanes.append(Lane(f"ahead:{c}", _("{cls} admitted ahead ({n:,})").format(cls=c, n=n), c, "ahead"))
    return lanes, got_ahead, held, note


def all_lanes(res: Result, classes: list[str], window: tuple[float, float], limit: int = 300
              ) -> tuple[list[Lane], pd.DataFrame, pd.DataFrame, str | None]:
    """Every request in the window (top priority first, then by arrival), up to `limit` lanes."""
    req = res.requests
    t_end = float(res.summary["sim_time_s"])
    r = req[_visible(req, window, t_end) & req["class"].astype(str).isin(classes)]
    r = r.sort_values(["priority", "arrival_s"])
    note = None
    if len(r) > limit:
        note = _("Showing {limit} of {n:,} requests in this window (top priority first, then by arrival); narrow the "
                 "time window or the classes to see the others.").format(limit=limit, n=len(r))
        r = r.head(limit)
    lanes = [Lane(int(i), f"#{i} {c}", str(c), "top" if p == r["priority"].min() else "request")
             for i, c, p in zip(r["id"], r["class"], r["priority"])]
    top_ids = [ln.key for ln in lanes if ln.kind == "top"]
    got_ahead = ahead(res, top_ids)
    got_ahead = got_ahead[got_ahead["overtaker"].isin(r["id"])]
    held = waited_on(res, top_ids)
    held = held[held["holder"].isin(r["id"])]
    return lanes, got_ahead, held, note
