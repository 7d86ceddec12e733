"""Summary metrics from the result frames (what `--json` prints and the KPI cards show).

Percentiles use numpy's default (linear interpolation) over the measured requests of a class
(arrival ≥ warmup_s) that have the value; none → null. A request split into pieces by a prompt
cap counts once: arrival of its first piece, first token of its first piece, finish of its last.
SLO attainment counts every measured request: rejected or unfinished ones miss. `cache_hit_rate`:
the share of admitted requests' prompt tokens found in the prefix cache at their first admission;
`cached_tokens`: tokens found in the cache over every admission (prefill work and KV writes saved). `batch_fill` is
the share of the step token budget used in steps that left requests waiting (all steps if none
did): how full the batch was when there was work it could not take — the seed article's measure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..config.memory import MemoryBreakdown
from ..config.scenario import Scenario
from ..core.reasons import SHED, SHED_GATEWAY
from .steplog import StepTotals

SHED_PREFIXES = (SHED, SHED_GATEWAY)  # vLLM's API server (503) and the gateway (429)


def pct(x, q: float) -> float | None:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else None


def _mean(x) -> float | None:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


def logical_requests(req: pd.DataFrame) -> pd.DataFrame:
    """One row per client request: split pieces folded into their first piece's row."""
    if not (req["parent"] >= 0).any():
        return req
    key = np.where(req["parent"] >= 0, req["parent"], req["id"])
    g = req.assign(_key=key).groupby("_key", sort=True)
    agg = g.agg(
        arrival_s=("arrival_s", "min"),
        finish_s=("finish_s", "max"),
        blocked_s=("blocked_s", "sum"),
        inversion_s=("inversion_s", "sum"),
        pieces=("id", "size"),
        unfinished=("status", lambda s: int((s != "finished").sum())),
        rejected=("status", lambda s: int((s == "rejected").sum())),
    )
    first = req.set_index("id").loc[agg.index]
    out = first.reset_index()
    out["finish_s"] = np.where(agg["unfinished"].to_numpy() > 0, np.nan, agg["finish_s"].to_numpy())
    out["blocked_s"] = agg["blocked_s"].to_numpy()
    out["inversion_s"] = agg["inversion_s"].to_numpy()
    out["e2e_s"] = out["finish_s"] - out["arrival_s"]
    # the client's request: rejected if any piece was, unfinished if any piece did not finish
    status = np.where(agg["rejected"].to_numpy() > 0, "rejected",
                      np.where(agg["unfinished"].to_numpy() > 0, "unfinished", "finished"))
    out["status"] = pd.Categorical(status, categories=req["status"].cat.categories)
    out["tpot_s"] = np.where(agg["pieces"].to_numpy() > 1, np.nan, out["tpot_s"])
    return out


class ClassColumns:
    """The columns `class_summary` reads, as numpy arrays taken once per summary: one boolean
    mask per class then indexes them (pandas' row selection per class and column was most of a
    sweep run's summary)."""

    FLOAT = ("first_scheduled_s", "ttft_s", "tpot_s", "e2e_s", "queue_wait_s", "blocked_s", "inversion_s")
    INT = ("prompt_tokens", "cached_tokens", "cached_tokens_all")

    def __init__(self, req: pd.DataFrame):
        self.cols = {c: req[c].to_numpy(dtype=float) for c in self.FLOAT}
        self.cols |= {c: req[c].to_numpy(dtype=np.int64) for c in self.INT}
        self.cls = req["class"].cat.codes.to_numpy()
        self.class_names = list(req["class"].cat.categories)
        status = req["status"].cat
        self.status = status.codes.to_numpy()
        self.status_code = {name: i for i, name in enumerate(status.categories)}
        self.measured = req["measured"].to_numpy(dtype=bool)
        self.reason = req["reason"]

    def rows(self, name: str) -> np.ndarray:
        """The measured rows of class `name` (a boolean mask)."""
        code = self.class_names.index(name) if name in self.class_names else -1
        return (self.cls == code) & self.measured

    def is_status(self, mask: np.ndarray, status: str) -> np.ndarray:
        return self.status[mask] == self.status_code.get(status, -1)

    def shed(self, mask: np.ndarray) -> int:
        """Rejected by a shedder (vLLM's API server or the gateway), among `mask`'s rows."""
        rejected = np.flatnonzero(mask)[self.is_status(mask, "rejected")]
        return sum(1 for why in self.reason.iloc[rejected].tolist() if str(why).startswith(SHED_PREFIXES))


def within_slo(slo, finished: np.ndarray, ttft: np.ndarray, tpot: np.ndarray) -> np.ndarray | None:
    """Per request: did it meet its class's SLO? Finished, TTFT ≤ slo.ttft_s and TPOT ≤ slo.tpot_s
    (those set; a request without a TPOT cannot miss it). None when the class has no SLO. The one
    definition behind `slo_attainment` and the evidence module's pooled attainment."""
    if slo.ttft_s is None and slo.tpot_s is None:
        return None
    ok = finished.copy()
    if slo.ttft_s is not None:
        ok &= ttft <= slo.ttft_s
    if slo.tpot_s is not None:
        ok &= ~(tpot > slo.tpot_s)
    return ok


def class_summary(sc: Scenario, cols: ClassColumns, name: str) -> dict:
    spec = sc.request_class(name)
    m = cols.rows(name)
    c = {k: v[m] for k, v in cols.cols.items()}
    done = cols.is_status(m, "finished")
    n = int(m.sum())
    ok = within_slo(spec.slo, done, c["ttft_s"], c["tpot_s"])
    attain = None if ok is None or n == 0 else float(ok.mean())
    inv = c["inversion_s"]
    admitted = ~np.isnan(c["first_scheduled_s"])
    prompt = int(c["prompt_tokens"][admitted].sum())
    return {
        "priority": int(spec.priority),
        "n": n,
        "completed": int(done.sum()),
        "rejected": int(cols.is_status(m, "rejected").sum()),
        "shed": cols.shed(m),
        "unfinished": int(cols.is_status(m, "unfinished").sum()),
        "ttft_p50": pct(c["ttft_s"], 50),
        "ttft_p90": pct(c["ttft_s"], 90),
        "ttft_p99": pct(c["ttft_s"], 99),
        "tpot_p50": pct(c["tpot_s"], 50),
        "tpot_p99": pct(c["tpot_s"], 99),
        "e2e_p50": pct(c["e2e_s"], 50),
        "e2e_p99": pct(c["e2e_s"], 99),
        "queue_wait_mean": _mean(c["queue_wait_s"]),
        "queue_wait_p99": pct(c["queue_wait_s"], 99),
        "blocked_s": float(np.nansum(c["blocked_s"])),
        "blocked_p99": pct(c["blocked_s"], 99),
        "max_wait_s": float(np.nanmax(c["blocked_s"])) if n else 0.0,
        "inversion_s": float(inv.sum()),
        "inverted_requests": int(np.count_nonzero(inv > 0)),
        "slo_attainment": attain,
        "cache_hit_rate": float(c["cached_tokens"][admitted].sum()) / prompt if prompt else None,
        "cached_tokens": int(c["cached_tokens_all"].sum()),
    }


def summarize(sc: Scenario, mem: MemoryBreakdown, req: pd.DataFrame, steps: StepTotals,
              alerts: pd.DataFrame, t_end: float, wall_s: float) -> dict:
    cols = ClassColumns(logical_requests(req))
    names = sc.class_names
    busy = steps.busy_s
    kv_util = steps.kv_block_s / busy / mem.usable_blocks if busy else 0.0
    budget = sc.scheduler.max_num_batched_tokens
    n = steps.steps
    # steps that left requests waiting (all steps if none did)
    loaded, loaded_n = (steps.loaded_tokens, steps.loaded_steps) if steps.loaded_steps else (steps.tokens, n)
    out_tokens = int(req.loc[req["status"] == "finished", "output_tokens"].sum())
    return {
        "scenario": sc.name,
        "seed": sc.seed,
        "kv_blocks": int(mem.blocks),
        "steps": n,
        "sim_time_s": float(t_end),
        "wall_time_s": float(wall_s),
        "served_tok_s": out_tokens / t_end if t_end > 0 else 0.0,
        "processed_tok_s": float(steps.tokens) / t_end if t_end > 0 else 0.0,
        "kv_util_mean": kv_util,
        "mean_batch_tokens": float(steps.tokens) / n if n else 0.0,
        "batch_fill": float(loaded) / loaded_n / budget if loaded_n else 0.0,
        "preemptions": int(req["preemptions"].sum()),
        "recomputed_tokens": int(req["recomputed_tokens"].sum()),
        "cached_tokens": int(req["cached_tokens_all"].sum()),
        "rejected": int((req["status"] == "rejected").sum()),
        "shed": int(req["reason"].astype(str).str.startswith(SHED_PREFIXES).sum()),
        "unfinished": int((req["status"] == "unfinished").sum()),
        "alerts": int(len(alerts)),
        "reserve_idle_token_frac": float(steps.reserve_idle) / (budget * n) if n else 0.0,
        "gpus": int(sc.replicas.count * sc.hardware.num_gpus),
        "classes": {name: class_summary(sc, cols, name) for name in names},
    }


def gateway_summary(summary: dict, req: pd.DataFrame, inversions: int) -> None:
    """Behind a gateway: its queue time (mean, P99 over the dispatched measured requests) and
    gateway inversions (dispatches past a more important waiting request) per class and in all."""
    logical = logical_requests(req)
    summary["gateway_inversions"] = int(inversions)
    for name, c in summary["classes"].items():
        r = logical[(logical["class"] == name) & logical["measured"]]
        c["gateway_queue_mean"] = _mean(r["gateway_queue_s"])
        c["gateway_queue_p99"] = pct(r["gateway_queue_s"], 99)
        c["gateway_overtaken"] = int(r["gateway_overtaken"].sum())


def clean(obj):
    """JSON-safe copy: NaN/inf → None."""
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
