"""The result of a run: flat pandas frames (Ciw-style records) plus a summary dict.

Frames: `requests` (one row per request), `steps` (one row per engine step), `waits` (one row per
wait segment: request, start, end, reason, KV detail, ETA), `holders` (the top KV holders a
segment or an alert saw, one row each), `admissions` (one row per admission, first or after a
preemption), `episodes` (inversion episodes) and `alerts`. Everything a page or a test needs is
derived from these; nothing is packed into strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..config.memory import MemoryBreakdown
from ..config.scenario import Scenario
from ..core.reasons import LABELS
from ..core.requests import STATUS, Requests
from .metrics import gateway_summary, summarize
from .observe import WaitLog, episodes_from
from .steplog import StepLog


@dataclass
class Result:
    scenario: Scenario
    memory: MemoryBreakdown
    requests: pd.DataFrame
    waits: pd.DataFrame
    alerts: pd.DataFrame
    summary: dict
    holders: pd.DataFrame
    admissions: pd.DataFrame
    step_log: StepLog
    loop_turns: int = 0  # the replicas' loop turns (events): `python -m engine bench` reports time per turn
    _steps: pd.DataFrame | None = field(default=None, repr=False)
    _episodes: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def class_names(self) -> list[str]:
        return list(self.summary["classes"])

    @property
    def steps(self) -> pd.DataFrame:
        """One row per engine step (expanded from the run-length log on first use)."""
        if self._steps is None:
            self._steps = self.step_log.expand()
        return self._steps

    @property
    def episodes(self) -> pd.DataFrame:
        """Every inversion episode (derived from the admissions and the wait segments on first use)."""
        if self._episodes is None:
            self._episodes = self.episodes_of(None)
        return self._episodes

    def episodes_of(self, request_ids) -> pd.DataFrame:
        """The inversion episodes of some requests (all when None), by request, then time."""
        req = self.requests
        prio = req["priority"].to_numpy()
        waits = {c: self.waits[c].to_numpy() for c in ("request", "replica", "start_s", "end_s")}
        adm = {c: self.admissions[c].to_numpy() for c in ("request", "t_s", "dt_s", "step", "replica")}
        ids = None if request_ids is None else np.asarray(list(request_ids), dtype=np.int64)
        ep = pd.DataFrame(episodes_from(waits, adm, prio, ids))
        ids = ep["request"].to_numpy(dtype=np.int64)
        ep.insert(1, "class", pd.Categorical.from_codes(req["class"].cat.codes.to_numpy()[ids],
                                                        categories=req["class"].cat.categories))
        ep.insert(2, "priority", prio[ids])
        ep["duration_s"] = ep["end_s"] - ep["start_s"]
        return ep

    @property
    def step_runs(self) -> pd.DataFrame:
        """The step log as stored: one row per step or run of identical decode steps (`steps`)."""
        return self.step_log.runs()


def build_result(sc: Scenario, mem: MemoryBreakdown, rs: Requests, log: WaitLog, steps: StepLog,
                 t_end: float, wall_s: float, gateway=None, loop_turns: int = 0) -> Result:
    seg = log.segments()
    waits = _waits(rs, seg)
    requests = _requests(sc, rs, log, waits)
    if gateway is not None:
        _gateway_columns(requests, gateway)
    alerts = pd.DataFrame(log.alerts, columns=["time_s", "request", "class", "waited_s", "reason",
                                                "short_by_blocks", "eta_s", "replica", "wait"])
    holders = _holders(rs, log, seg)
    admissions = _admissions(rs, log)
    summary = summarize(sc, mem, requests, steps.totals(), alerts, t_end, wall_s)
    if gateway is not None:
        gateway_summary(summary, requests, gateway.inversions)
    return Result(sc, mem, requests, waits, alerts, summary, holders, admissions, steps, loop_turns)


def _requests(sc: Scenario, rs: Requests, log: WaitLog, waits: pd.DataFrame) -> pd.DataFrame:
    n = rs.n
    blocked = np.zeros(n)
    if len(waits):
        np.add.at(blocked, waits["request"].to_numpy(), waits["duration_s"].to_numpy())
    ttft = rs.first_token - rs.arrival
    out1 = np.maximum(rs.output - 1, 1)
    tpot = np.where(rs.output > 1, (rs.finish - rs.first_token) / out1, np.nan)
    reason = np.full(n, "", dtype=object)
    for i, why in rs.reason.items():
        reason[i] = why
    # copy=False: the columns are the run's own arrays (the run is over), one block each, rather
    # than copies consolidated into a few 2-D blocks
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "class": pd.Categorical.from_codes(rs.cls, categories=rs.class_names),
            "priority": rs.prio,
            "arrival_s": rs.arrival,
            "prompt_tokens": rs.prompt,
            "output_tokens": rs.output,
            "first_scheduled_s": rs.first_sched,
            "first_token_s": rs.first_token,
            "finish_s": rs.finish,
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": rs.finish - rs.arrival,
            "queue_wait_s": rs.first_sched - rs.arrival,
            "blocked_s": blocked,
            "inversion_s": log.inversion_s,
            "inversion_episodes": log.inv_episodes,
            "preemptions": rs.preemptions,
            "computed_tokens": rs.computed,
            "recomputed_tokens": rs.recomputed,
            "cached_tokens": rs.cached,
            "cached_tokens_all": rs.cached_all,
            "status": pd.Categorical.from_codes(rs.status, categories=STATUS),
            "reason": reason,
            "replica": rs.replica,
            "parent": rs.parent,
            "measured": rs.arrival >= sc.warmup_s,
        },
        copy=False,
    )


def _gateway_columns(req: pd.DataFrame, gateway) -> None:
    """Behind a gateway: when each request was dispatched, how long it queued there, its gateway
    priority and how many less important requests were dispatched while it waited there."""
    req["dispatched_s"] = gateway.dispatched
    req["gateway_queue_s"] = gateway.dispatched - req["arrival_s"].to_numpy()
    req["gateway_priority"] = np.asarray(gateway.class_gw_priority, dtype=np.int64)[req["class"].cat.codes.to_numpy()]
    req["gateway_overtaken"] = gateway.overtaken


def _waits(rs: Requests, seg: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per closed wait segment, in time order (ties by request). Built from numpy columns
    in one go: pandas' inserts, casts and sort cost more than the run itself on small scenarios."""
    order = np.lexsort((seg["request"], seg["start_s"]))  # stable: equal keys keep segment order
    col = {k: (v[order] if k in ("start_s", "end_s", "eta_s") else v[order].astype(np.int64))
           for k, v in seg.items() if k != "holders"}
    ids = col["request"]
    need, free = col["need_blocks"], col["free_blocks"]
    return pd.DataFrame({
        "id": col["id"], "class": pd.Categorical.from_codes(rs.cls[ids], categories=rs.class_names),
        "priority": rs.prio[ids], "request": ids, "start_s": col["start_s"], "end_s": col["end_s"],
        "need_blocks": need, "free_blocks": free, "blocker": col["blocker"], "eta_s": col["eta_s"],
        "replica": col["replica"], "duration_s": col["end_s"] - col["start_s"],
        "reason": pd.Categorical.from_codes(col["code"], categories=LABELS),
        "short_by": np.where(need >= 0, np.maximum(need - free, 0), -1),
    })


def _holders(rs: Requests, log: WaitLog, seg: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per (wait segment or alert, holder): who held the most KV when it was checked."""
    owners = [(int(w), False, int(h)) for w, h in zip(seg["id"].tolist(), seg["holders"].tolist()) if h >= 0]
    owners += [(int(a["wait"]), True, h) for a, h in zip(log.alerts, log.alert_holders) if h >= 0]
    parts = {k: [] for k in ("wait", "alert", "rank", "request", "cls", "blocks", "eta_s")}
    for wait, alert, h in owners:
        ids, cls, blocks, eta = log.snapshots[h]
        n = len(ids)
        parts["wait"].append(np.full(n, wait, np.int64))
        parts["alert"].append(np.full(n, alert))
        parts["rank"].append(np.arange(n, dtype=np.int64))
        for k, v in (("request", ids), ("cls", cls), ("blocks", blocks), ("eta_s", eta)):
            parts[k].append(v)
    col = {k: (np.concatenate(v) if v else np.empty(0, np.float64 if k == "eta_s" else np.int64))
           for k, v in parts.items()}
    cls = col.pop("cls").astype(np.int64)
    out = pd.DataFrame({"wait": col["wait"], "alert": col["alert"].astype(bool), "rank": col["rank"],
                        "request": col["request"].astype(np.int64),
                        "class": pd.Categorical.from_codes(cls, categories=rs.class_names),
                        "priority": rs.class_priority[cls] if len(cls) else np.empty(0, np.int64),
                        "blocks": col["blocks"].astype(np.int64), "eta_s": col["eta_s"].astype(np.float64)})
    return out.sort_values(["wait", "alert", "rank"], kind="stable").reset_index(drop=True)


def _admissions(rs: Requests, log: WaitLog) -> pd.DataFrame:
    a = log.admissions()
    ids = a["request"]
    again = np.ones(len(ids), bool)  # in time order: the second and later admissions follow a preemption
    again[np.unique(ids, return_index=True)[1]] = False  # (each request's first admission)
    return pd.DataFrame({"request": ids,
                         "class": pd.Categorical.from_codes(rs.cls[ids], categories=rs.class_names),
                         "priority": rs.prio[ids], "t_s": a["t_s"], "dt_s": a["dt_s"], "step": a["step"],
                         "replica": a["replica"],
                         "need_blocks": a["need_blocks"], "readmission": again}, copy=False)


def overtakers(res: Result, request_ids) -> pd.DataFrame:
    """The lower-priority admissions during these requests' inversion episodes: who got in ahead.

    An episode is a run of consecutive steps of one replica in which the request waited and some
    less important request was admitted; every admission in those steps by a request of larger
    priority number is an overtaker (DESIGN §1). Rows by request, time, overtaker.
    """
    return overtakers_in(res.episodes_of(request_ids), res.admissions)


OVERTAKER_COLUMNS = ["request", "overtaker", "overtaker_class", "overtaker_priority", "t_s", "overtaker_need_blocks",
                     "replica"]


def overtakers_in(episodes: pd.DataFrame, admissions: pd.DataFrame) -> pd.DataFrame:
    """`overtakers` of these episodes: every admission of a less important request in the same
    replica during [start, end) of an episode. Each episode's admissions are found by binary search
    in one pass per replica; filtering the admissions once per episode takes seconds on an
    overloaded 10k-request run (hundreds of thousands of one-step episodes)."""
    parts = []
    for rep, e in episodes.groupby("replica", sort=True):
        a = admissions[admissions["replica"] == rep].sort_values("t_s", kind="stable")
        t = a["t_s"].to_numpy()
        lo = np.searchsorted(t, e["start_s"].to_numpy(), "left")
        hi = np.searchsorted(t, e["end_s"].to_numpy(), "left")
        n = hi - lo
        if not n.sum():
            continue
        which = np.repeat(np.arange(len(e)), n)
        idx = np.repeat(lo, n) + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
        keep = a["priority"].to_numpy()[idx] > e["priority"].to_numpy()[which]
        which, idx = which[keep], idx[keep]
        parts.append(pd.DataFrame({
            "request": e["request"].to_numpy()[which], "overtaker": a["request"].to_numpy()[idx],
            "overtaker_class": a["class"].astype(str).to_numpy()[idx],
            "overtaker_priority": a["priority"].to_numpy()[idx], "t_s": t[idx],
            "overtaker_need_blocks": a["need_blocks"].to_numpy()[idx], "replica": rep}))
    if not parts:
        return pd.DataFrame({c: [] for c in OVERTAKER_COLUMNS})
    return pd.concat(parts, ignore_index=True).sort_values(["request", "t_s", "overtaker"], kind="stable")[
        OVERTAKER_COLUMNS].reset_index(drop=True)


