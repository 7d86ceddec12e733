"""The result of a run: flat pandas frames (Ciw-style records) plus a summary dict.

Frames: `requests` (one row per request), `steps` (one row per engine step), `waits` (one row per
wait segment: request, start, end, reason, KV detail, holders, ETA), `episodes` (inversion
episodes) and `alerts`. Everything a page or a test needs is derived from these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .memory import MemoryBreakdown
from .metrics import summarize
from .observe import WaitLog
from .reasons import LABELS
from .replica import StepLog
from .scenario import Scenario
from .state import STATUS, Requests


@dataclass
class Result:
    scenario: Scenario
    memory: MemoryBreakdown
    requests: pd.DataFrame
    steps: pd.DataFrame
    waits: pd.DataFrame
    episodes: pd.DataFrame
    alerts: pd.DataFrame
    summary: dict

    @property
    def class_names(self) -> list[str]:
        return list(self.summary["classes"])


def build_result(sc: Scenario, mem: MemoryBreakdown, rs: Requests, log: WaitLog, steps: StepLog,
                 t_end: float, wall_s: float) -> Result:
    names = rs.class_names
    waits = _waits(rs, log)
    requests = _requests(sc, rs, log, waits)
    step_df = _steps(steps, names)
    episodes = _episodes(rs, log)
    alerts = pd.DataFrame(log.alerts, columns=["time_s", "request", "class", "waited_s", "reason",
                                                "short_by_blocks", "holders", "eta_s", "replica"])
    summary = summarize(sc, mem, requests, step_df, alerts, t_end, wall_s)
    return Result(sc, mem, requests, step_df, waits, episodes, alerts, summary)


def _requests(sc: Scenario, rs: Requests, log: WaitLog, waits: pd.DataFrame) -> pd.DataFrame:
    n = rs.n
    blocked = np.zeros(n)
    if len(waits):
        np.add.at(blocked, waits["request"].to_numpy(), waits["duration_s"].to_numpy())
    ttft = rs.first_token - rs.arrival
    out1 = np.maximum(rs.output - 1, 1)
    tpot = np.where(rs.output > 1, (rs.finish - rs.first_token) / out1, np.nan)
    episodes = np.bincount([e[0] for e in log.episodes], minlength=n) if log.episodes else np.zeros(n, int)
    reason = np.array([rs.reason.get(i, "") for i in range(n)], dtype=object)
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
            "inversion_episodes": episodes,
            "preemptions": rs.preemptions,
            "recomputed_tokens": rs.recomputed,
            "status": pd.Categorical.from_codes(rs.status, categories=STATUS),
            "reason": reason,
            "replica": rs.replica,
            "parent": rs.parent,
            "measured": rs.arrival >= sc.warmup_s,
        }
    )


def _steps(steps: StepLog, names: list[str]) -> pd.DataFrame:
    table = steps.table()
    floats = {"t_s", "dt_s"}
    cols = list(StepLog.COLUMNS) + [f"{kind}_{name}" for kind in ("running", "waiting", "kv") for name in names]
    return pd.DataFrame({c: table[:, j].astype(np.float64 if c in floats else np.int64) for j, c in enumerate(cols)})


def _waits(rs: Requests, log: WaitLog) -> pd.DataFrame:
    df = pd.DataFrame(log.segments())
    df = df.astype({"request": np.int64, "need_blocks": np.int64, "free_blocks": np.int64, "blocker": np.int64,
                    "replica": np.int64, "code": np.int64})
    ids = df["request"].to_numpy(dtype=np.int64)
    df.insert(1, "class", pd.Categorical.from_codes(rs.cls[ids], categories=rs.class_names))
    df.insert(2, "priority", rs.prio[ids])
    df["duration_s"] = df["end_s"] - df["start_s"]
    df["reason"] = pd.Categorical.from_codes(df.pop("code").to_numpy(dtype=np.int64), categories=LABELS)
    df["short_by"] = np.where(df["need_blocks"] >= 0, np.maximum(df["need_blocks"] - df["free_blocks"], 0), -1)
    return df.sort_values(["start_s", "request"], kind="stable").reset_index(drop=True)


def _episodes(rs: Requests, log: WaitLog) -> pd.DataFrame:
    cols = ["request", "start_s", "end_s", "steps", "overtakers", "first_overtakers"]
    df = pd.DataFrame(log.episodes, columns=cols)
    ids = df["request"].to_numpy(dtype=np.int64)
    df.insert(1, "class", pd.Categorical.from_codes(rs.cls[ids], categories=rs.class_names))
    df.insert(2, "priority", rs.prio[ids])
    df["duration_s"] = df["end_s"] - df["start_s"]
    return df
