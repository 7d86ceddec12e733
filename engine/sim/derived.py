"""Numbers a run implies but its summary does not hold: the usual dashboard, who got in ahead,
whether the biggest KV holder was the one to boost, how busy each replica was.

All are computed from the result frames (`engine.sim.result`) after a run, so the simulation stays as
it is, and a claim about them (a lesson's, a scenario's story: `engine.sweeps.claims`) is checked against
the same run the page shows, here or in a worker process. Pure: numpy and pandas only.

The dashboard is what an operator of a vLLM server usually watches: GPU busy (share of time a
forward pass runs), KV cache use (`vllm:kv_cache_usage_perc`), requests waiting
(`vllm:num_requests_waiting`), generated tokens per second. Dashboards show them as averages over
a scrape window (`SCRAPE_S`), so a short spike is smoothed away — as it is on a real one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .result import Result, overtakers

SCRAPE_S = 15.0  # a typical Prometheus scrape / dashboard resolution


def _cols(res: Result, prefix: str) -> pd.Series:
    """The per-class columns `<prefix><class>` summed (exact names: the steps frame has other
    columns that share a prefix, such as counts by wait reason)."""
    st = res.steps
    cols = [f"{prefix}{c}" for c in res.class_names if f"{prefix}{c}" in st.columns]
    return st[cols].sum(axis=1) if cols else pd.Series(0, index=st.index)


def _capacity(res: Result) -> int:
    return max(int(res.memory.usable_blocks), 1)


def dashboard_series(res: Result, window_s: float = SCRAPE_S) -> pd.DataFrame:
    """One row per dashboard window (all replicas together): t (window start, s), gpu_busy (share
    of the window's GPU time with a forward pass), kv_use (share of KV blocks held), waiting and
    running (time-weighted mean requests), served_tok_s (generated tokens per second), and the
    top class's TTFT P99 and request count over the requests that arrived in the window."""
    st = res.steps
    reps = max(int(st["replica"].max()) + 1, 1) if len(st) and "replica" in st else 1
    t_end = float(max(res.summary["sim_time_s"], window_s))
    edges = np.arange(0.0, np.floor(t_end / window_s) * window_s + window_s / 2, window_s)  # whole windows only
    w = st["dt_s"].to_numpy(float)
    busy = w * ((st["prefill_tokens"] + st["decode_tokens"]).to_numpy() > 0)
    slot = np.searchsorted(edges, st["t_s"].to_numpy(float), side="right") - 1
    keep = (slot >= 0) & (slot <= len(edges) - 2)  # the drain's last partial window is left out
    waiting, running = _cols(res, "waiting_").to_numpy(float)[keep], _cols(res, "running_").to_numpy(float)[keep]
    st, w, busy, slot = st[keep], w[keep], busy[keep], slot[keep]
    frame = pd.DataFrame({
        "slot": slot, "w": w, "busy": busy,
        "kv": w * st["kv_used"].to_numpy(float),
        "waiting": w * waiting,
        "running": w * running,
        "decode": st["decode_tokens"].to_numpy(float),
    })
    g = frame.groupby("slot").sum()
    g = g.reindex(range(len(edges) - 1), fill_value=0.0)
    span = window_s * reps
    weight = g["w"].where(g["w"] > 0, np.nan)
    out = pd.DataFrame({
        "t": edges[:-1],
        "gpu_busy": (g["busy"] / span).clip(upper=1.0).to_numpy(),
        "kv_use": (g["kv"] / weight / (_capacity(res) * reps)).fillna(0.0).to_numpy(),
        "waiting": (g["waiting"] / weight).fillna(0.0).to_numpy(),
        "running": (g["running"] / weight).fillna(0.0).to_numpy(),
        "served_tok_s": (g["decode"] / window_s).to_numpy(),
    })
    req = res.requests
    top = req[(req["priority"] == req["priority"].min()) & req["measured"]] if len(req) else req
    if len(top):
        k = np.searchsorted(edges, top["arrival_s"].to_numpy(float), side="right") - 1
        inside = (k >= 0) & (k <= len(edges) - 2)
        by = top[inside].assign(slot=k[inside]).groupby("slot")["ttft_s"]
        out["top_ttft_p99"] = by.quantile(0.99).reindex(range(len(out))).to_numpy()
        out["top_n"] = by.count().reindex(range(len(out)), fill_value=0).to_numpy()
    else:
        out["top_ttft_p99"], out["top_n"] = np.nan, 0
    return out


def dashboard(res: Result) -> dict[str, float]:
    """The dashboard over the whole run: gpu_busy, kv_use (time-weighted means), waiting_mean,
    waiting_peak (the highest window mean: what the dashboard's graph peaks at), throughput (the
    run's generated tokens per second)."""
    st = res.steps
    w = st["dt_s"].to_numpy(float)
    total = float(w.sum()) or 1.0
    reps = max(int(st["replica"].max()) + 1, 1) if len(st) and "replica" in st else 1
    tokens = (st["prefill_tokens"] + st["decode_tokens"]).to_numpy()
    series = dashboard_series(res)
    return {
        "gpu_busy": float((w * (tokens > 0)).sum() / (max(res.summary["sim_time_s"], 1e-9) * reps)),
        "kv_use": float((w * st["kv_used"].to_numpy(float)).sum() / total / _capacity(res)),
        "waiting_mean": float((w * _cols(res, "waiting_").to_numpy(float)).sum() / total * reps),
        "waiting_peak": float(series["waiting"].max()) if len(series) else 0.0,
        "throughput": float(res.summary["served_tok_s"]),
    }


def overtaken_later(res: Result) -> int:
    """How many lower-priority admissions got in ahead of a waiting top-class request *although
    they arrived after it* — the "fill what fits" signature (FCFS cannot do this)."""
    req = res.requests
    if not len(req):
        return 0
    top = req.loc[req["priority"] == req["priority"].min(), "id"].tolist()
    got = overtakers(res, top)
    if not len(got):
        return 0
    arrival = req.set_index("id")["arrival_s"]
    later = arrival.reindex(got["overtaker"]).to_numpy() > arrival.reindex(got["request"]).to_numpy()
    return int(later.sum())


def wrong_holder_share(res: Result) -> float | None:
    """Of the top class's KV-short wait time, the share whose wait ended while the biggest holder
    named when it began was still running: the blocks came from someone else, so boosting "the
    holder" (inheritance) would have boosted the wrong request. None when it never waited on KV."""
    waits, holders, req = res.waits, res.holders, res.requests
    if not len(waits):
        return None
    w = waits[(waits["priority"] == waits["priority"].min()) & (waits["short_by"] > 0)]
    if not len(w):
        return None
    first = holders[(holders["rank"] == 0) & ~holders["alert"]].set_index("wait")["request"]
    w = w.assign(holder=w["id"].map(first)).dropna(subset=["holder"])
    if not len(w) or w["duration_s"].sum() <= 0:
        return None
    finish = req.set_index("id")["finish_s"].reindex(w["holder"].astype(int)).to_numpy(float)
    still = ~(finish <= w["end_s"].to_numpy(float))  # NaN (never finished) counts as still running
    return float(w.loc[still, "duration_s"].sum() / w["duration_s"].sum())


def top_reasons(waits: pd.DataFrame, priority: int, n: int = 3) -> list[tuple[str, float]]:
    """(reason, seconds) for the top-priority class, most time first."""
    w = waits[waits["priority"] == priority]
    if not len(w):
        return []
    s = w.groupby("reason", observed=True)["duration_s"].sum().sort_values(ascending=False)
    return [(str(k), float(v)) for k, v in s.head(n).items() if v > 0]


def top_holder_classes(waits: pd.DataFrame, holders: pd.DataFrame, priority: int) -> list[tuple[str, float]]:
    """Classes of the biggest KV holder the top-priority class waited on, weighted by wait seconds."""
    first = holders[(holders["rank"] == 0) & ~holders["alert"]]
    w = waits[waits["priority"] == priority].merge(first[["wait", "class"]], left_on="id", right_on="wait",
                                                   suffixes=("", "_holder"))
    if not len(w):
        return []
    s = w.groupby(w["class_holder"].astype(str))["duration_s"].sum().sort_values(ascending=False, kind="stable")
    return [(str(k), float(v)) for k, v in s.items()]


def replica_use(res: Result) -> pd.DataFrame:
    """Per replica: kv_use (time-weighted share of its KV blocks held), tokens_per_step, requests
    served. The idle capacity of a dedicated replica shows here."""
    st, req = res.steps, res.requests
    rows = []
    for rep, g in st.groupby("replica") if "replica" in st else [(0, st)]:
        w = g["dt_s"].to_numpy(float)
        rows.append({"replica": int(rep),
                     "kv_use": float((w * g["kv_used"].to_numpy(float)).sum() / (w.sum() or 1.0) / _capacity(res)),
                     "tokens_per_step": float((g["prefill_tokens"] + g["decode_tokens"]).mean()),
                     "requests": int((req["replica"] == rep).sum())})
    return pd.DataFrame(rows, columns=["replica", "kv_use", "tokens_per_step", "requests"])


def _waits_by_reason(res: Result, name: str):
    """`top_reason`, `wait_s.<reason>`, `wait_share.<reason>` of the top class (each wait segment
    counts under the reason it opened with, as the timeline and `top_reasons` show it)."""
    top = int(res.requests["priority"].min()) if len(res.requests) else 0
    w = res.waits[res.waits["priority"] == top]
    by = w.groupby(w["reason"].astype(str))["duration_s"].sum()
    if name == "top_reason":
        by = by[by > 0]
        return str(by.sort_values(ascending=False, kind="stable").index[0]) if len(by) else None
    kind, reason = name.split(".", 1)
    seconds = float(by.get(reason, 0.0))
    if kind == "wait_s":
        return seconds
    total = float(by.sum())
    return seconds / total if total > 0 else None


def metric(res: Result, name: str):
    """A derived number by name: `dash.<key>` (see `dashboard`), `overtaken_later`,
    `wrong_holder_share`, `top_reason` (the wait reason with most of the top class's wait time),
    `wait_s.<reason>` / `wait_share.<reason>` (the top class's wait time for a reason, in seconds /
    as a share of all its wait time), `replica<k>.kv_use` / `.tokens_per_step`. KeyError if unknown."""
    if name.startswith("dash."):
        return dashboard(res)[name.split(".", 1)[1]]
    if name == "overtaken_later":
        return overtaken_later(res)
    if name == "wrong_holder_share":
        return wrong_holder_share(res)
    if name == "top_reason" or name.startswith(("wait_s.", "wait_share.")):
        return _waits_by_reason(res, name)
    if name.startswith("replica") and "." in name:
        head, key = name.split(".", 1)
        k = int(head[len("replica"):])
        table = replica_use(res).set_index("replica")
        return float(table.at[k, key])
    raise KeyError(name)
