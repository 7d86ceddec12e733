"""Observation: wait segments, inversion, holders, ETA and alerts — exactly as DESIGN §1 defines.

Called once per step with the requests still blocked after scheduling and the step's duration:
- wait reasons are stored run-length encoded (a segment opens when a request's reason changes),
  so memory grows with reason changes, not with steps × queue length;
- a step is an *inversion step* for a blocked request R when some request of strictly lower
  importance (larger priority number) was newly admitted in it; R's inversion time is the sum of
  those steps' durations, an episode a maximal run of consecutive such steps;
- for `kv_short`/`reserve` waits, the segment names the top KV holders and an ETA.

ETA estimator (what a real scheduler could know): each running holder is assumed to finish after
its remaining prefill (at the full step budget) plus its remaining max_tokens decode steps — taken
to be its output length — at the current step time; the ETA is when the holders finishing first
have released enough blocks. It ignores new admissions, so it is a lower bound under load.
"""

from __future__ import annotations

import numpy as np

from .reasons import Reason
from .state import Requests

TOP_HOLDERS = 3


class WaitLog:
    def __init__(self, rs: Requests, alert_after_s: float | None):
        n = rs.n
        self.rs = rs
        self.alert_after_s = alert_after_s
        self.cur = np.zeros(n, np.int8)
        self.wait_since = np.full(n, np.nan)
        self.inversion_s = np.zeros(n)
        self.inv_last = np.full(n, -2, np.int64)
        self.inv_episode = np.full(n, -1, np.int64)
        self.alerted = np.zeros(n, bool)
        self.segments: list[tuple] = []
        self._open: dict[int, list] = {}
        self.episodes: list[list] = []
        self.alerts: list[dict] = []

    def enter(self, i: int, t: float) -> None:
        """Request i (re)joined a waiting queue at time t (arrival or eviction)."""
        self.wait_since[i] = t

    def observe(self, replica, k: int, t: float, dt: float, step) -> None:
        rs = self.rs
        for a in step.admitted:
            self._close(a, t)
        w, codes = step.waiting, step.reasons
        if len(w):
            changed = np.flatnonzero(self.cur[w] != codes)
            for j in changed.tolist():
                self._reopen(replica, int(w[j]), int(codes[j]), t, step)
            self.cur[w[changed]] = codes[changed]
            if step.admitted:
                self._inversions(k, t, dt, w, step.admitted)
        if self.alert_after_s is not None and len(w):
            late = w[rs.is_top[w] & ~self.alerted[w] & (t - rs.arrival[w] >= self.alert_after_s)]
            for i in late.tolist():
                self._alert(replica, i, t, step)

    def _reopen(self, replica, i: int, code: int, t: float, step) -> None:
        first = self.cur[i] == 0
        if not first:
            self._close(i, t)
        start = self.wait_since[i] if first else t
        need, free = step.detail.get(i, (-1, -1))
        holders, eta = "", np.nan
        if code in (Reason.KV_SHORT, Reason.RESERVE) and need >= 0:
            holders, eta = replica.holders_and_eta(max(need - free, 0))
        blocker = step.blocker if code == Reason.HEAD_OF_LINE else -1
        self._open[i] = [i, start, np.nan, code, need, free, blocker, holders, eta, replica.index]

    def _close(self, i: int, t: float) -> None:
        seg = self._open.pop(i, None)
        if seg is not None:
            seg[2] = t
            self.segments.append(tuple(seg))
        self.cur[i] = 0

    def _inversions(self, k: int, t: float, dt: float, w: np.ndarray, admitted: list[int]) -> None:
        rs = self.rs
        adm_prio = np.sort(rs.prio[admitted])
        inv = w[rs.prio[w] < adm_prio[-1]]
        if not len(inv):
            return
        self.inversion_s[inv] += dt
        overtakers = len(adm_prio) - np.searchsorted(adm_prio, rs.prio[inv], side="right")
        cont = self.inv_last[inv] == k - 1
        for i, n_over in zip(inv[cont].tolist(), overtakers[cont].tolist()):
            ep = self.episodes[self.inv_episode[i]]
            ep[2] = t + dt
            ep[3] += 1
            ep[4] += n_over
        for i, n_over in zip(inv[~cont].tolist(), overtakers[~cont].tolist()):
            by = [a for a in admitted if rs.prio[a] > rs.prio[i]][:3]
            self.inv_episode[i] = len(self.episodes)
            self.episodes.append([i, t, t + dt, 1, n_over, " ".join(map(str, by))])
        self.inv_last[inv] = k

    def _alert(self, replica, i: int, t: float, step) -> None:
        self.alerted[i] = True
        code = int(self.cur[i])
        need, free = step.detail.get(i, (-1, -1))
        holders, eta = replica.holders_and_eta(max(need - free, 0)) if need >= 0 else ("", np.nan)
        self.alerts.append(
            {
                "time_s": t,
                "request": i,
                "class": self.rs.class_names[self.rs.cls[i]],
                "waited_s": t - self.rs.arrival[i],
                "reason": Reason(code).label,
                "short_by_blocks": max(need - free, 0) if need >= 0 else None,
                "holders": holders,
                "eta_s": eta,
                "replica": replica.index,
            }
        )

    def finish(self, t_end: float) -> None:
        for i in list(self._open):
            self._close(i, t_end)
