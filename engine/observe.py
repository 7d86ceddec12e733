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

from array import array

from .reasons import Reason
from .state import Requests

TOP_HOLDERS = 3


class WaitLog:
    def __init__(self, rs: Requests, alert_after_s: float | None):
        n = rs.n
        self.rs = rs
        self.alert_after_s = alert_after_s
        self.cur = np.zeros(n, np.int8)  # reason of the open segment (0: none open)
        self.wait_since = np.full(n, np.nan)
        self.inversion_s = np.zeros(n)
        self.inv_last = np.full(n, -2, np.int64)
        self.inv_episode = np.full(n, -1, np.int64)
        self.alerted = np.zeros(n, bool)
        # the open segment of each request, column by column
        self.o_start = np.zeros(n)
        self.o_need = np.full(n, -1, np.int64)
        self.o_free = np.full(n, -1, np.int64)
        self.o_blocker = np.full(n, -1, np.int64)
        self.o_holders = np.full(n, -1, np.int64)  # index into `snapshots`
        self.o_eta = np.full(n, np.nan)
        self.o_replica = np.zeros(n, np.int64)
        self.o_id = np.full(n, -1, np.int64)  # segment id (opening order)
        self.n_segments = 0
        self.closed: list[tuple[np.ndarray, ...]] = []  # closed segments, in chunks of columns
        self.snapshots: list[tuple[np.ndarray, ...]] = []  # top holders: (ids, classes, blocks, eta_s)
        self.episodes: list[list] = []
        self.alerts: list[dict] = []
        self.alert_holders: list[int] = []  # per alert: index into `snapshots` (-1: none)
        # admissions, one entry each: request, step start, replica-local step, replica, blocks needed
        self.adm = (array("q"), array("d"), array("q"), array("q"), array("q"))

    def enter(self, i: int, t: float) -> None:
        """Request i (re)joined a waiting queue at time t (arrival or eviction)."""
        self.wait_since[i] = t

    def observe(self, replica, k: int, t: float, dt: float, step) -> None:
        rs = self.rs
        if step.admitted:
            self._admissions(replica, k, t, step.admitted)
            cur = self.cur
            opened = [a for a in step.admitted if cur[a]]  # most were admitted before ever waiting
            if opened:
                self._close(np.array(opened, dtype=np.int64), t)
        w, codes = step.waiting, step.reasons
        if len(w):
            changed = np.flatnonzero(self.cur[w] != codes)
            if changed.size:
                self._reopen(replica, w[changed], codes[changed], t, step, changed)
            if step.admitted:
                self._inversions(k, t, dt, w, step.admitted, replica.index)
        if self.alert_after_s is not None and len(w):
            late = np.flatnonzero(rs.is_top[w] & ~self.alerted[w] & (t - rs.arrival[w] >= self.alert_after_s))
            for j in late.tolist():
                self._alert(replica, int(w[j]), t, step, j)

    def _reopen(self, replica, ids: np.ndarray, codes: np.ndarray, t: float, step, at: np.ndarray) -> None:
        """Requests `ids` got new reasons at t: close their segments, open new ones."""
        was_open = self.cur[ids] != 0
        self._close(ids[was_open], t)
        need, free = step.need[at], step.free[at]
        self.o_start[ids] = np.where(was_open, t, self.wait_since[ids])
        self.o_need[ids], self.o_free[ids] = need, free
        self.o_blocker[ids] = np.where(codes == Reason.HEAD_OF_LINE, step.blocker, -1)
        self.o_replica[ids] = replica.index
        self.o_holders[ids], self.o_eta[ids] = -1, np.nan
        self.o_id[ids] = np.arange(self.n_segments, self.n_segments + len(ids))
        self.n_segments += len(ids)
        kv = ((codes == Reason.KV_SHORT) | (codes == Reason.RESERVE)) & (need >= 0)
        if kv.any():
            snap, eta = replica.holders_and_eta(np.maximum(need[kv] - free[kv], 0))
            self.snapshots.append(snap)
            self.o_holders[ids[kv]] = len(self.snapshots) - 1
            self.o_eta[ids[kv]] = eta
        self.cur[ids] = codes

    def _close(self, ids: np.ndarray, t: float) -> None:
        ids = ids[self.cur[ids] != 0]
        if ids.size:
            self.closed.append((self.o_id[ids], ids, self.o_start[ids], np.full(ids.size, t), self.cur[ids].copy(),
                                self.o_need[ids], self.o_free[ids], self.o_blocker[ids], self.o_holders[ids],
                                self.o_eta[ids], self.o_replica[ids]))
            self.cur[ids] = 0

    SEGMENT_COLUMNS = ("id", "request", "start_s", "end_s", "code", "need_blocks", "free_blocks", "blocker",
                       "holders", "eta_s", "replica")

    def segments(self) -> dict[str, np.ndarray]:
        """All closed segments as columns (`holders`: index into `snapshots`, −1 for none)."""
        if not self.closed:
            return {n: np.empty(0) for n in self.SEGMENT_COLUMNS}
        return {n: np.concatenate([c[j] for c in self.closed]) for j, n in enumerate(self.SEGMENT_COLUMNS)}

    def admissions(self) -> dict[str, np.ndarray]:
        """Every admission (first or after a preemption) as columns."""
        names = ("request", "t_s", "step", "replica", "need_blocks")
        return {n: np.frombuffer(a, dtype=np.float64 if n == "t_s" else np.int64).copy()
                for n, a in zip(names, self.adm)}

    def _admissions(self, replica, k: int, t: float, admitted: list[int]) -> None:
        rs = self.rs
        req, ts, ks, reps, need = self.adm
        bs = replica.pool.block_size
        for a in admitted:
            req.append(a)
            ts.append(t)
            ks.append(k)
            reps.append(replica.index)
            need.append(-(-int(rs.prompt[a] + rs.generated[a]) // bs))

    def _inversions(self, k: int, t: float, dt: float, w: np.ndarray, admitted: list[int], replica: int) -> None:
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
            self.inv_episode[i] = len(self.episodes)
            self.episodes.append([i, t, t + dt, 1, n_over, replica])
        self.inv_last[inv] = k

    def _alert(self, replica, i: int, t: float, step, j: int) -> None:
        self.alerted[i] = True
        code = int(self.cur[i])
        need, free = int(step.need[j]), int(step.free[j])
        snap = -1
        eta = np.nan
        if need >= 0:
            holders, eta = replica.holders_and_eta(max(need - free, 0))
            self.snapshots.append(holders)
            snap = len(self.snapshots) - 1
        self.alert_holders.append(snap)
        self.alerts.append(
            {
                "time_s": t,
                "request": i,
                "class": self.rs.class_names[self.rs.cls[i]],
                "waited_s": t - self.rs.arrival[i],
                "reason": Reason(code).label,
                "short_by_blocks": max(need - free, 0) if need >= 0 else None,
                "eta_s": eta,
                "replica": replica.index,
                "wait": int(self.o_id[i]),
            }
        )

    def finish(self, t_end: float) -> None:
        self._close(np.flatnonzero(self.cur != 0), t_end)
