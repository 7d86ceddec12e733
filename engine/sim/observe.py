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

import math
from array import array

import numpy as np

from ..core.reasons import Reason
from ..core.requests import Requests
from ..core.running import RunningSet
from ..core.step import Step

TOP_HOLDERS = 3
_HOL, _KV_SHORT, _RESERVE = int(Reason.HEAD_OF_LINE), int(Reason.KV_SHORT), int(Reason.RESERVE)

Snapshot = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # ids, classes, blocks, steps left / ETA
View = tuple[RunningSet, int, float]  # the running set during a step, the step budget, the step time


def holders_and_eta(snapshot: Snapshot, short_by: int | np.ndarray,
                    step_s: float) -> tuple[Snapshot, float | np.ndarray]:
    """The top KV holders of a running-set snapshot — (ids, classes, blocks, each one's ETA in s)
    — and the estimated seconds until `short_by` blocks free (a number or an array of them; inf
    if the running requests cannot free that many)."""
    ids, cls, blocks, steps_left = snapshot
    short = np.asarray(short_by)
    if not len(ids):
        empty = np.empty(0, np.int64)
        return (empty, empty, empty, np.empty(0)), (np.zeros(short.shape) if short.ndim else 0.0)
    top = np.argsort(-blocks, kind="stable")[:TOP_HOLDERS]
    top = top[blocks[top] > 0]
    step_s = max(step_s, 1e-9)
    snap = (ids[top], cls[top], blocks[top].astype(np.int64), steps_left[top] * step_s)
    order = np.argsort(steps_left, kind="stable")
    freed = np.cumsum(blocks[order])
    j = np.searchsorted(freed, short)
    when = np.append(steps_left[order], np.inf)[np.minimum(j, len(order))] * step_s
    eta = np.where(short <= 0, 0.0, when)
    return snap, (eta if short.ndim else float(eta))


class WaitLog:
    def __init__(self, rs: Requests, alert_after_s: float | None, block_size: int):
        n = rs.n
        self.rs = rs
        self.block_size = block_size
        self.alert_after_s = alert_after_s
        self.cur = np.zeros(n, np.int8)  # reason of the open segment (0: none open)
        self.wait_since = np.full(n, np.nan)
        self.inversion_s = np.zeros(n)
        # counts, steps, blocks, request and segment ids: int32 (a run of 2^31 of any is far past
        # the work limits), 4 bytes a request each
        self.inv_last = np.full(n, -2, np.int32)  # the last step in which it was inverted
        self.inv_episodes = np.zeros(n, np.int32)
        self.alerted = np.zeros(n, bool)
        self.since = rs.arrival  # what a wait is counted from for alerts (a gateway's own arrival times)
        # the open segment of each request, column by column
        self.o_start = np.zeros(n)
        self.o_need = np.full(n, -1, np.int32)
        self.o_free = np.full(n, -1, np.int32)
        self.o_blocker = np.full(n, -1, np.int32)
        self.o_holders = np.full(n, -1, np.int32)  # index into `snapshots`
        self.o_eta = np.full(n, np.nan)
        self.o_replica = np.zeros(n, np.int32)
        self.o_id = np.full(n, -1, np.int32)  # segment id (opening order)
        self.n_segments = 0
        self.closed: list[tuple[np.ndarray, ...]] = []  # closed segments, in chunks of columns
        self.snapshots: list[tuple[np.ndarray, ...]] = []  # top holders: (ids, classes, blocks, eta_s)
        self.alerts: list[dict[str, object]] = []
        self.alert_holders: list[int] = []  # per alert: index into `snapshots` (-1: none)
        # admissions, one entry each: request, step start, step time, replica-local step, replica,
        # blocks needed. Inversion episodes are derived from these and the wait segments
        # (`episodes_from`), so nothing here grows with blocked requests × admissions.
        self.adm = (array("q"), array("d"), array("d"), array("q"), array("q"), array("q"))

    def enter(self, i: int, t: float) -> None:
        """Request i (re)joined a waiting queue at time t (arrival or eviction)."""
        self.wait_since[i] = t

    def next_alert(self, step: Step | None) -> float:
        """When a top-priority request left waiting by `step` could first raise its alert (inf:
        none can) — the least float t with t − since ≥ alert_after_s, so that "a step starting
        before t" is exactly "no alert yet" (the replica's multi-step runs end before it)."""
        after = self.alert_after_s
        if after is None or step is None or not len(step.waiting):
            return math.inf
        w = step.waiting[self.rs.is_top[step.waiting] & ~self.alerted[step.waiting]]
        if not len(w):
            return math.inf
        a = float(self.since[w].min())
        t = a + after
        while t - a >= after:
            t = math.nextafter(t, -math.inf)
        while t - a < after:
            t = math.nextafter(t, math.inf)
        return t

    def observe(self, replica: int, k: int, t: float, dt: float, step: Step, running: RunningSet,
                budget: int) -> None:
        """Step k of `replica` starts at t and lasts dt; `running` is its running set, read only
        through `snapshot(budget)` when a KV wait needs its holders."""
        rs = self.rs
        view = (running, budget, dt)
        if step.admitted:
            self._admissions(replica, k, t, dt, step.admitted)
            cur = self.cur
            opened = [a for a in step.admitted if cur[a]]  # most were admitted before ever waiting
            if opened:
                self._close(np.array(opened, dtype=np.int64), t)
        w, codes = step.waiting, step.reasons
        if len(w):
            changed = np.flatnonzero(self.cur[w] != codes)
            if changed.size:
                self._reopen(replica, view, w[changed], codes[changed], t, step, changed)
            if step.admitted:
                self._inversions(k, dt, w, step.admitted)
        if self.alert_after_s is not None and len(w):
            late = np.flatnonzero(rs.is_top[w] & ~self.alerted[w] & (t - self.since[w] >= self.alert_after_s))
            for j in late.tolist():
                self._alert(replica, view, int(w[j]), t, int(step.need[j]), int(step.room[j]))

    @staticmethod
    def _holders(view: View, short_by: int | np.ndarray) -> tuple[Snapshot, float | np.ndarray]:
        running, budget, dt = view
        if not running:
            return holders_and_eta((np.empty(0, np.int64),) * 4, short_by, dt)
        return holders_and_eta(running.snapshot(budget), short_by, dt)

    def _reopen(self, replica: int, view: View, ids: np.ndarray, codes: np.ndarray, t: float, step: Step,
                at: np.ndarray) -> None:
        """Requests `ids` got new reasons at t: close their segments, open new ones."""
        was_open = self.cur[ids] != 0
        self._close(ids[was_open], t)
        need, free = step.need[at], step.room[at]
        self.o_start[ids] = np.where(was_open, t, self.wait_since[ids])
        self.o_need[ids], self.o_free[ids] = need, free
        self.o_blocker[ids] = np.where(codes == _HOL, step.blocker, -1)
        self.o_replica[ids] = replica
        self.o_holders[ids], self.o_eta[ids] = -1, np.nan
        self.o_id[ids] = np.arange(self.n_segments, self.n_segments + len(ids))
        self.n_segments += len(ids)
        kv = ((codes == _KV_SHORT) | (codes == _RESERVE)) & (need >= 0)
        if kv.any():
            snap, eta = self._holders(view, np.maximum(need[kv] - free[kv], 0))
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
        """Every admission (first or after a preemption) as columns: views of the log's buffers,
        not copies (read when the run is over; the log then takes no more admissions)."""
        names = ("request", "t_s", "dt_s", "step", "replica", "need_blocks")
        buffers: tuple[array[int] | array[float], ...] = self.adm
        return {n: np.frombuffer(a, dtype=np.float64 if n in ("t_s", "dt_s") else np.int64)
                for n, a in zip(names, buffers)}

    def _admissions(self, replica: int, k: int, t: float, dt: float, admitted: list[int]) -> None:
        rs = self.rs
        req, ts, dts, ks, reps, need = self.adm
        bs = self.block_size
        for a in admitted:
            req.append(a)
            ts.append(t)
            dts.append(dt)
            ks.append(k)
            reps.append(replica)
            need.append(-(-int(rs.prompt[a] + rs.generated[a]) // bs))

    def _inversions(self, k: int, dt: float, w: np.ndarray, admitted: list[int]) -> None:
        """Step k admitted `admitted` while `w` waited: those of w more important than the least
        important admission were inverted for dt (an episode starts unless step k−1 was one too)."""
        prio = self.rs.prio
        inv = w[prio[w] < prio[admitted].max()]
        if not len(inv):
            return
        self.inversion_s[inv] += dt
        self.inv_episodes[inv[self.inv_last[inv] != k - 1]] += 1
        self.inv_last[inv] = k

    def _alert(self, replica: int, view: View | None, i: int, t: float, need: int, free: int) -> None:
        self.alerted[i] = True
        code = int(self.cur[i])
        snap = -1
        eta: float | np.ndarray = np.nan
        if need >= 0:
            assert view is not None  # (a request held outside the engines was never checked for KV)
            holders, eta = self._holders(view, max(need - free, 0))
            self.snapshots.append(holders)
            snap = len(self.snapshots) - 1
        self.alert_holders.append(snap)
        self.alerts.append(
            {
                "time_s": t,
                "request": i,
                "class": self.rs.class_names[self.rs.cls[i]],
                "waited_s": t - self.since[i],
                "reason": Reason(code).label,
                "short_by_blocks": max(need - free, 0) if need >= 0 else None,
                "eta_s": eta,
                "replica": replica,
                "wait": int(self.o_id[i]),
            }
        )

    def finish(self, t_end: float) -> None:
        self._close(np.flatnonzero(self.cur != 0), t_end)

    # -- waits before any engine (a gateway's queue): one segment on no replica (−1), no KV check
    def hold(self, i: int, t: float, code: Reason) -> None:
        """Request i waits outside the engines from t."""
        self.o_start[i], self.o_need[i], self.o_free[i], self.o_blocker[i] = t, -1, -1, -1
        self.o_holders[i], self.o_eta[i], self.o_replica[i] = -1, np.nan, -1
        self.o_id[i] = self.n_segments
        self.n_segments += 1
        self.cur[i] = code

    def release(self, i: int, t: float, keep: bool | np.bool_) -> None:  # (the gateway compares numpy times)
        """Its wait outside the engines ends at t: a segment if `keep`, else none at all."""
        if keep:
            self._close(np.array([i]), t)
        else:
            self.cur[i] = 0

    def alert_held(self, i: int, t: float) -> None:
        """A top-priority request held outside the engines has waited long enough to alert."""
        self._alert(-1, None, i, t, -1, -1)


def episodes_from(waits: dict[str, np.ndarray], adm: dict[str, np.ndarray], prio: np.ndarray,
                  ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Inversion episodes of requests `ids` (all when None), derived after the run.

    A request waits from each wait segment's start to its end, on the segment's replica; a step of
    that replica starting in that time is an inversion step for it when the step admitted a
    request of larger priority number. Episodes are maximal runs of consecutive such steps;
    `overtakers` counts those admissions. Columns: request, start_s, end_s, steps, overtakers,
    replica (by request, then time)."""
    cols = ("request", "start_s", "end_s", "steps", "overtakers", "replica")
    out: dict[str, list[int | float]] = {c: [] for c in cols}
    w_req, w_rep = waits["request"].astype(np.int64), waits["replica"].astype(np.int64)
    w_s, w_e = waits["start_s"].astype(np.float64), waits["end_s"].astype(np.float64)
    if ids is not None:
        keep = np.isin(w_req, np.asarray(ids, dtype=np.int64))
        w_req, w_rep, w_s, w_e = w_req[keep], w_rep[keep], w_s[keep], w_e[keep]
    if not len(w_req) or not len(adm["request"]):
        return {c: np.empty(0, np.float64 if c.endswith("_s") else np.int64) for c in cols}
    a_prio = prio[adm["request"]]
    for rep in np.unique(w_rep).tolist():
        on = adm["replica"] == rep
        # the replica's admission steps: start, time, index, and how many were admitted per priority
        k_all, first = np.unique(adm["step"][on], return_index=True)
        t, dt = adm["t_s"][on][first], adm["dt_s"][on][first]
        where = np.searchsorted(k_all, adm["step"][on])
        mine = w_rep == rep
        for q in np.unique(prio[w_req[mine]]).tolist():
            above = np.bincount(where, weights=a_prio[on] > q, minlength=len(k_all)).astype(np.int64)
            hit = above > 0
            kq, tq, dq, nq = k_all[hit], t[hit], dt[hit], above[hit]
            sel = mine & (prio[w_req] == q)
            lo, hi = np.searchsorted(tq, w_s[sel], side="left"), np.searchsorted(tq, w_e[sel], side="left")
            for r, a, b in zip(w_req[sel].tolist(), lo.tolist(), hi.tolist()):
                if a < b:
                    _runs(out, r, rep, kq[a:b], tq[a:b], dq[a:b], nq[a:b])
    order: np.ndarray | list[int] = np.lexsort((np.asarray(out["start_s"]), np.asarray(out["request"]))) \
        if out["request"] else []
    res = {c: np.asarray(out[c], dtype=np.float64 if c.endswith("_s") else np.int64)[order] for c in cols}
    return _merge_touching(res)


def _runs(out: dict[str, list[int | float]], r: int, rep: int, k: np.ndarray, t: np.ndarray, dt: np.ndarray,
          n: np.ndarray) -> None:
    """Append the runs of consecutive step indices in k (one request's inversion steps in one wait)."""
    starts = np.flatnonzero(np.diff(k, prepend=k[0] - 2) != 1)
    ends = np.append(starts[1:], len(k)) - 1
    over = np.add.reduceat(n, starts)
    for a, b, o in zip(starts.tolist(), ends.tolist(), over.tolist()):
        out["request"].append(r)
        out["start_s"].append(float(t[a]))
        out["end_s"].append(float(t[b] + dt[b]))
        out["steps"].append(b - a + 1)
        out["overtakers"].append(o)
        out["replica"].append(rep)


def _merge_touching(ep: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """An episode split only because the request's wait reason changed between two consecutive
    inversion steps is one episode: merge rows of the same request and replica that touch."""
    if len(ep["request"]) < 2:
        return ep
    same = (ep["request"][1:] == ep["request"][:-1]) & (ep["replica"][1:] == ep["replica"][:-1]) & (
        ep["start_s"][1:] == ep["end_s"][:-1])
    if not same.any():
        return ep
    group = np.concatenate([[0], np.cumsum(~same)])
    first = np.flatnonzero(np.concatenate([[True], ~same]))
    last = np.append(first[1:], len(group)) - 1
    return {"request": ep["request"][first], "start_s": ep["start_s"][first], "end_s": ep["end_s"][last],
            "steps": np.bincount(group, weights=ep["steps"]).astype(np.int64),
            "overtakers": np.bincount(group, weights=ep["overtakers"]).astype(np.int64),
            "replica": ep["replica"][first]}
