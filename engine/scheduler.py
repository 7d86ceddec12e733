"""One engine's iteration-level scheduler, with vLLM v1 semantics (DESIGN §2).

Each call to `schedule()` decides one step:
1. running requests first, in running-list (admission) order, each getting
   min(remaining, budget, long_prefill_token_threshold); a request that cannot get blocks
   preempts a victim (policy's rule, possibly itself) and then Phase A stops;
2. waiting requests in queue order, only if nothing was preempted: admitted if blocks for the
   whole sequence (+ watermark) are free, then only the first chunk is allocated; the first
   misfit stops admission (fcfs, priority) or is skipped (backfill).
`complete()` applies the step's results once its time has passed.

The common step (every growth fits) is computed with a few vectorised numpy operations; the
exact sequential loop runs only in steps where KV runs out, so both give the same decisions.
Mitigations (token/KV reserves, class caps, inheritance, aging, preemption for waiting requests,
swap) are parameters of the same two phases, not separate code paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kv import KVPool
from .policies import Policy
from .queue import WaitingQueue
from .reasons import Reason
from .state import FINISHED, RUNNING, WAITING, Requests


@dataclass(frozen=True)
class Limits:
    """The knobs the scheduler obeys (engine settings plus mitigations)."""

    budget: int
    max_seqs: int
    threshold: int = 0
    chunked: bool = True
    token_reserve: int = 0
    reserve_lendable: bool = False
    class_max_running: tuple = ()
    inheritance: bool = False
    aging_s: float = 0.0
    top_priority: int = 0
    swap_bytes_per_s: float = 0.0  # > 0: preemption swaps KV to host instead of recomputing
    block_bytes: float = 0.0


@dataclass
class Step:
    """What one step scheduled, and how the requests left waiting stand."""

    ids: np.ndarray
    tokens: np.ndarray
    remaining: np.ndarray
    context: np.ndarray
    admitted: list[int]
    preempted: list[int]
    waiting: np.ndarray
    reasons: np.ndarray
    need: np.ndarray  # per waiting request: KV blocks its whole sequence needs (−1: not checked)
    free: np.ndarray  # per waiting request: blocks it could take when checked (−1: not checked)
    blocker: int = -1
    swap_s: float = 0.0
    reserve_idle: int = 0


_EMPTY = np.empty(0, np.int64)
_NO_REASONS = np.empty(0, np.int8)
_NONE = int(Reason.NONE)
SKIP_SCAN_MIN_QUEUE = 32  # queues longer than this get the vectorised pre-filter (skipping policies)


def _give(pool: int, want: np.ndarray) -> np.ndarray:
    """Sequential `min(want_i, what is left)` over the list, as one vectorised expression."""
    before = np.cumsum(want) - want
    return np.minimum(want, np.maximum(pool - before, 0))


class Batch:
    """Tokens given out this step: one vectorised block (Phase A) plus single additions."""

    def __init__(self):
        self.ids = self.tokens = self.from_reserve = self.remaining = _EMPTY
        self.extra: dict[int, tuple[int, int, int]] = {}

    def set_block(self, ids, tokens, from_reserve, remaining) -> None:
        self.ids, self.tokens, self.from_reserve, self.remaining = ids, tokens, from_reserve, remaining

    def add(self, i: int, n: int, r: int, remaining: int) -> None:
        self.extra[i] = (n, r, remaining)

    def pop(self, i: int) -> tuple[int, int] | None:
        """Take back what request i was given (it is being evicted): (tokens, from reserve)."""
        if i in self.extra:
            return self.extra.pop(i)[:2]
        hit = np.flatnonzero(self.ids == i)
        if not hit.size:
            return None
        j = int(hit[0])
        given = (int(self.tokens[j]), int(self.from_reserve[j]))
        keep = self.ids != i
        self.ids, self.tokens = self.ids[keep], self.tokens[keep]
        self.from_reserve, self.remaining = self.from_reserve[keep], self.remaining[keep]
        return given

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, tokens, tokens remaining before the step) of everything scheduled."""
        if not self.extra:
            return self.ids, self.tokens, self.remaining
        n = len(self.extra)
        ids = np.fromiter(self.extra, np.int64, n)
        tok = np.fromiter((v[0] for v in self.extra.values()), np.int64, n)
        rem = np.fromiter((v[2] for v in self.extra.values()), np.int64, n)
        return (np.concatenate([self.ids, ids]), np.concatenate([self.tokens, tok]),
                np.concatenate([self.remaining, rem]))


class Scheduler:
    def __init__(self, rs: Requests, pool: KVPool, policy: Policy, limits: Limits):
        self.rs, self.pool, self.policy, self.lim = rs, pool, policy, limits
        self.queue = WaitingQueue()
        self.running: list[int] = []
        self._run_cache: tuple | None = None  # (ids, cls, top) of `running`; None after a change
        self.evicted: set[int] = set()
        self.n_running_cls = np.zeros(len(pool.used_cls), np.int64)
        self._counter = 0
        self._running_caps = any(cap is not None for cap in limits.class_max_running)
        # Arrival check, done once for all requests: can prompt + max_tokens ever fit this engine?
        view = np.array([pool.view_capacity(c) for c in range(len(pool.used_cls))], dtype=np.int64)
        budget = np.where(rs.is_top, limits.budget, limits.budget - limits.token_reserve)
        self._never = (pool.blocks(rs.prompt + rs.output - 1) > view[rs.cls]) | (
            (rs.prompt > budget) if not limits.chunked else False)

    # -- arrivals ---------------------------------------------------------------------------
    def enqueue(self, i: int) -> bool:
        """Accept an arrival into the waiting queue, or reject one that can never run."""
        rs = self.rs
        if self._never[i]:
            rs.reject(i, self._never_fits(i, int(rs.cls[i])))
            return False
        rs.status[i] = WAITING
        self.queue.push(i, self.policy.order_key(int(rs.prio[i]), float(rs.arrival[i]), i))
        return True

    def _never_fits(self, i: int, c: int) -> str:
        rs, pool, lim = self.rs, self.pool, self.lim
        tokens = int(rs.prompt[i] + rs.output[i] - 1)
        cap = pool.view_capacity(c)
        if pool.blocks(tokens) > cap:
            return (f"prompt + max_tokens = {tokens} tokens needs {pool.blocks(tokens)} KV blocks; "
                    f"at most {cap} can ever be free for class {rs.class_names[c]}")
        budget = lim.budget - (0 if rs.is_top[i] else lim.token_reserve)
        if not lim.chunked and rs.prompt[i] > budget:
            return f"prompt {rs.prompt[i]} tokens exceeds the step budget {budget} with chunked prefill off"
        return ""

    # -- one step ---------------------------------------------------------------------------
    def schedule(self, now: float) -> Step:
        rs, lim = self.rs, self.lim
        if lim.aging_s > 0 and self.policy.by_priority and self.queue:
            self.queue.rekey(lambda i: self._aged_key(i, now))
        if lim.inheritance and self._top_blocked_on_kv():
            self._boost_holders()
        self.batch = Batch()
        self.swap_s = 0.0
        self.evicted_now: list[int] = []
        self.rem_r = self._reserve_now()
        self.rem_s = lim.budget - self.rem_r
        preempted, cause = self._schedule_running(now)
        admitted: list[int] = []
        if not self.queue:
            order, reasons, need, free, blocker = _EMPTY, _NO_REASONS, _EMPTY, _EMPTY, -1
        elif preempted:  # no admission this step: the head waits for KV, the rest behind it
            order = np.array(self.queue.ids(), dtype=np.int64)
            behind = Reason.HEAD_OF_LINE if self.policy.stops_at_misfit else cause
            reasons = np.full(len(order), behind, np.int8)
            reasons[0] = cause
            need = free = np.full(len(order), -1, np.int64)
            blocker = int(order[0])
        else:
            order, reasons, need, free, blocker, admitted = self._schedule_waiting(now)
        late = [v for v in self.evicted_now if v not in set(order.tolist())]
        if late:  # evicted in Phase B (preempt policy), after the queue was read: waiting too
            more = np.full(len(late), -1, np.int64)
            order = np.concatenate([order, np.array(late, dtype=np.int64)])
            reasons = np.concatenate([reasons, np.full(len(late), Reason.PREEMPTED, np.int8)])
            need, free = np.concatenate([need, more]), np.concatenate([free, more])
        if self.evicted and len(order):
            reasons[np.isin(order, list(self.evicted))] = Reason.PREEMPTED
        ids, tokens, remaining = self.batch.arrays()
        idle = self.rem_r if (self.rem_r and self.rem_s == 0 and not lim.reserve_lendable) else 0
        return Step(ids, tokens, remaining, rs.computed[ids], admitted, self.evicted_now, order, reasons,
                    need, free, blocker, self.swap_s, int(idle))

    def _aged_key(self, i: int, now: float) -> tuple:
        rs = self.rs
        levels = int((now - rs.arrival[i]) // self.lim.aging_s)
        return (max(self.lim.top_priority, int(rs.prio[i]) - levels), float(rs.arrival[i]))

    def _reserve_now(self) -> int:
        """Tokens held back for the top class this step (lendable: only while one needs them)."""
        lim, rs = self.lim, self.rs
        if not lim.token_reserve:
            return 0
        if not lim.reserve_lendable:
            return lim.token_reserve
        waiting_top = any(rs.is_top[i] for i in self.queue.ids())
        prefilling_top = any(rs.is_top[i] and rs.computed[i] < rs.prompt[i] for i in self.running)
        return lim.token_reserve if (waiting_top or prefilling_top) else 0

    def _top_blocked_on_kv(self) -> bool:
        """Is a waiting top-priority request unable to fit its whole sequence in free KV now?"""
        rs, pool = self.rs, self.pool
        return any(rs.is_top[i] and pool.shortfall(int(rs.cls[i]), int(pool.blocks(rs.seq_len(i))))
                   for i in self.queue.ids())

    def _boost_holders(self) -> None:
        """Priority inheritance: lower-priority KV holders move to the front of the running order."""
        rs, held = self.rs, self.pool.held
        holders = [i for i in self.running if not rs.is_top[i] and held[i] > 0]
        holders.sort(key=lambda i: -held[i])
        rest = [i for i in self.running if rs.is_top[i] or held[i] == 0]
        self.running = holders + rest
        self._run_cache = None

    # -- Phase A: running requests ------------------------------------------------------------
    def _schedule_running(self, now: float) -> tuple[list[int], Reason]:
        if not self.running:
            return [], Reason.NONE
        rs, pool = self.rs, self.pool
        if self._run_cache is None:
            ids = np.array(self.running, dtype=np.int64)
            self._run_cache = (ids, rs.cls[ids], rs.is_top[ids])
        ids, cls, top = self._run_cache
        computed = rs.computed[ids]
        remaining = rs.prompt[ids] + rs.generated[ids] - computed
        need = np.minimum(remaining, self.lim.threshold) if self.lim.threshold else remaining
        demand = int(need.sum())
        fits_all = self.rem_r == 0 and demand <= self.rem_s  # common: everyone gets all it needs
        if fits_all:
            from_r, from_s, alloc = None, need, need
        else:
            from_r, from_s = self._split(need, top)
            alloc = from_r + from_s
        grow = pool.blocks(computed + alloc) - pool.held[ids]
        total = int(grow.sum())
        if not pool.fits_batch(cls, grow, total):
            return self._schedule_running_exact(now)
        pool.grow_batch(ids, cls, grow, total)
        if fits_all:
            self.rem_s -= demand
            self.batch.set_block(ids, alloc, np.zeros(len(ids), np.int64), remaining)
            return [], Reason.NONE
        self.rem_r -= int(from_r.sum())
        self.rem_s -= int(from_s.sum())
        got = alloc > 0
        self.batch.set_block(ids[got], alloc[got], from_r[got], remaining[got])
        return [], Reason.NONE

    def _split(self, need: np.ndarray, top: np.ndarray):
        """Budget per request in list order: the top class draws from the reserve first."""
        from_r = _give(self.rem_r, np.where(top, need, 0)) if self.rem_r else np.zeros(len(need), np.int64)
        return from_r, _give(self.rem_s, need - from_r)

    def _schedule_running_exact(self, now: float) -> tuple[list[int], Reason]:
        """The sequential vLLM loop, used when some growth does not fit (preemption)."""
        rs, pool, running = self.rs, self.pool, self.running
        preempted: list[int] = []
        cause = Reason.NONE
        i = 0
        while i < len(running) and self.rem_s + self.rem_r > 0:
            r = running[i]
            c = int(rs.cls[r])
            left = int(rs.remaining(r))
            n = min(left, self.lim.threshold) if self.lim.threshold else left
            n = min(n, self.rem_s + (self.rem_r if rs.is_top[r] else 0))
            if n <= 0:
                i += 1
                continue
            grow = int(pool.blocks(rs.computed[r] + n) - pool.held[r])
            while (why := pool.shortfall(c, grow)) != Reason.NONE:
                cause = why
                victim = self._victim(r, c, why)
                vi = running.index(victim)
                running.pop(vi)
                self._run_cache = None
                self._evict(victim, now)
                preempted.append(victim)
                if vi < i:
                    i -= 1
                if victim == r:
                    break
            if r in preempted:
                break
            pool.grow(r, c, grow)
            self._take(r, n, left)
            i += 1
        return preempted, cause

    def _victim(self, r: int, c: int, why: Reason) -> int:
        """The policy's victim among the running requests whose eviction relieves `why`."""
        rs = self.rs
        if why == Reason.CLASS_CAP:
            cands = [i for i in self.running if rs.cls[i] == c]
        elif why == Reason.RESERVE:
            cands = [i for i in self.running if not rs.is_top[i]]
        else:
            cands = self.running
        return self.policy.victim(cands, rs.prio, rs.arrival)

    def _take(self, i: int, n: int, remaining: int) -> None:
        """Charge n of i's `remaining` tokens to the step budget (the top class uses its reserve first)."""
        r = min(n, self.rem_r) if self.rem_r and self.rs.is_top[i] else 0
        self.rem_r -= r
        self.rem_s -= n - r
        self.batch.add(i, n, r, remaining)

    def _evict(self, v: int, now: float) -> None:
        """Preempt a running request: free its blocks; recompute (progress lost) or swap."""
        rs, pool = self.rs, self.pool
        given = self.batch.pop(v)
        if given is not None:
            self.rem_r += given[1]
            self.rem_s += given[0] - given[1]
        c = int(rs.cls[v])
        freed = pool.release(v, c)
        self.n_running_cls[c] -= 1
        rs.preemptions[v] += 1
        if self.lim.swap_bytes_per_s > 0:
            rs.swapped[v] = True
            self.swap_s += freed * self.lim.block_bytes / self.lim.swap_bytes_per_s
        else:
            rs.recomputed[v] += rs.computed[v]
            rs.computed[v] = 0
        rs.status[v] = WAITING
        self._counter += 1
        self.queue.push(v, self.policy.requeue_key(int(rs.prio[v]), float(rs.arrival[v]), v, self._counter))
        self.evicted.add(v)
        self.evicted_now.append(v)

    # -- Phase B: waiting requests ------------------------------------------------------------
    def _schedule_waiting(self, now: float):
        """Walk the queue in order; returns (ids, reasons, need, free, blocker, admitted) of the
        requests left waiting (need/free: KV blocks at their check, −1 where not checked).

        A skipping policy (backfill) with a long queue first marks, in one vectorised pass, who
        cannot fit in KV at all this step (room only shrinks during the pass, so they stay out)
        and walks only the others; when seats or budget run out (or already have) it walks every
        position, so decisions and reasons are those of the plain sequential walk."""
        rs, pool, pol, lim = self.rs, self.pool, self.policy, self.lim
        order = self.queue.ids()
        n_w = len(order)
        ids = np.array(order, dtype=np.int64)
        codes = np.zeros(n_w, np.int8)
        need_at = np.full(n_w, -1, np.int64)
        free_at = np.full(n_w, -1, np.int64)
        pre = None
        limits_bind = len(self.running) >= lim.max_seqs or self.rem_s <= 0
        if not pol.stops_at_misfit and lim.chunked and n_w > SKIP_SCAN_MIN_QUEUE and not limits_bind:
            pre, pre_need = self._kv_reasons(ids)
            walk = np.flatnonzero(pre == _NONE).tolist()
            walked = np.zeros(n_w, bool)
        else:
            walk = list(range(n_w))
        admitted: list[int] = []
        start = (pool.used, pool.used_other, pool.used_cls.copy(), bool(self.running)) if pre is not None else None
        adm_pos: list[int] = []
        adm_blocks: list[int] = []
        block_other, block_from, blocker = Reason.NONE, n_w, -1
        closed_at: dict[int, int] = {}
        if self._running_caps:
            closed_at = {c: -1 for c in range(len(pool.used_cls)) if self._at_running_cap(c)}
        top_left = int(np.count_nonzero(rs.is_top[ids]))
        stop_at, tail, dense_from = n_w, Reason.NONE, n_w
        k = 0
        while k < len(walk):
            p = walk[k]
            k += 1
            w = order[p]
            if pre is not None:
                walked[p] = True
            top = bool(rs.is_top[w])
            top_left -= top
            if len(self.running) >= lim.max_seqs and not self._evict_for_seat(w, now):
                stop_at, tail = p, Reason.MAX_SEQS
                break
            if not top and block_other:
                codes[p] = block_other
                if top_left == 0:
                    stop_at, tail = p + 1, block_other
                    break
                continue
            c = int(rs.cls[w])
            if c in closed_at or self._at_running_cap(c):
                closed_at.setdefault(c, p)
                codes[p] = Reason.CLASS_CAP
                continue
            avail = self.rem_s + (self.rem_r if top else 0)
            if avail <= 0:
                if top or self.rem_r == 0:
                    stop_at, tail = p, Reason.TOKEN_BUDGET
                    break
                block_other, block_from = Reason.RESERVE, p
                codes[p] = Reason.RESERVE
                continue
            seq, done = int(rs.prompt[w]) + int(rs.generated[w]), int(rs.computed[w])
            n = seq - done if not lim.threshold else min(seq - done, lim.threshold)
            why = Reason.TOKEN_BUDGET if (not lim.chunked and n > avail) else Reason.NONE
            n = min(n, avail)
            need = pool.blocks(seq)
            if not why:
                why = pool.shortfall(c, need, watermark=bool(self.running))
                if why in (Reason.KV_SHORT, Reason.RESERVE) and pol.preempts_for_waiting:
                    why = self._evict_for_blocks(w, c, need, now)
            if why:
                codes[p] = why
                need_at[p], free_at[p] = need, pool.free_for(c, watermark=bool(self.running))
                if pre is not None and dense_from == n_w and k < len(walk):
                    # room shrank since the pre-filter: drop the candidates that no longer fit either
                    rest = np.array(walk[k:], dtype=np.int64)
                    walk = walk[:k] + rest[self._kv_reasons(ids[rest])[0] == _NONE].tolist()
                # Over its class's KV cap: skipped (a smaller one of its class may still fit).
                if why != Reason.CLASS_CAP and pol.stops_at_misfit:
                    blocker = w
                    if top or why != Reason.RESERVE:
                        stop_at, tail = p + 1, Reason.HEAD_OF_LINE
                        break
                    block_other, block_from = Reason.HEAD_OF_LINE, p
                continue
            adm_blocks.append(self._admit(w, c, n, now, done, seq - done))
            adm_pos.append(p)
            admitted.append(w)
            if self._at_running_cap(c):
                closed_at.setdefault(c, p)
            if pre is not None and dense_from == n_w and (len(self.running) >= lim.max_seqs or self.rem_s <= 0):
                dense_from = p + 1  # a global limit now binds: walk every later position
                walk = walk[:k] + list(range(p + 1, n_w))
        codes[stop_at:] = tail
        if pre is not None:
            admissions = (np.array(adm_pos, dtype=np.int64), np.array(adm_blocks, dtype=np.int64),
                          rs.cls[np.array(admitted, dtype=np.int64)])
            self._label_unwalked(ids, codes, need_at, free_at, walked, pre_need, min(stop_at, dense_from),
                                 start, admissions, closed_at, block_other, block_from)
        keep = codes != _NONE
        if admitted or not keep.all():
            ids, codes, need_at, free_at = ids[keep], codes[keep], need_at[keep], free_at[keep]
        return ids, codes, need_at, free_at, blocker, admitted

    def _kv_reasons(self, ids: np.ndarray):
        """Vectorised `KVPool.shortfall` for whole sequences: (reason per request, blocks needed)."""
        rs, pool = self.rs, self.pool
        cls = rs.cls[ids]
        need = pool.blocks(rs.prompt[ids] + rs.generated[ids])
        wm = pool.watermark if self.running else 0
        out = np.zeros(len(ids), np.int8)
        out[~rs.is_top[ids] & (need > pool.capacity - pool.reserve - pool.used_other)] = Reason.RESERVE
        out[need + wm > pool.capacity - pool.used] = Reason.KV_SHORT
        out[need > (pool.class_caps - pool.used_cls)[cls]] = Reason.CLASS_CAP
        return out, need

    def _label_unwalked(self, ids, codes, need_at, free_at, walked, pre_need, upto, start, admissions,
                        closed_at, block_other, block_from):
        """Reasons (and KV detail) for the requests the walk skipped, exactly as the sequential walk
        would have found them at their turn: the pool as it stood after the admissions before them."""
        rs, pool = self.rs, self.pool
        pos = np.arange(len(ids))
        q = np.flatnonzero(~walked & (pos < upto))
        if q.size:
            used0, other0, cls0, running0 = start
            a_pos, a_blocks, a_cls = admissions
            c = rs.cls[ids[q]]
            top = rs.is_top[ids[q]]
            k = np.searchsorted(a_pos, q)  # admissions before each position
            before = lambda x: np.concatenate([[0], np.cumsum(x)])[k]  # noqa: E731
            used = used0 + before(a_blocks)
            other = other0 + before(a_blocks * ~pool.class_is_top[a_cls])
            onehot = np.zeros((len(a_pos) + 1, len(cls0)), np.int64)
            onehot[np.arange(1, len(a_pos) + 1), a_cls] = a_blocks
            in_cls = cls0[c] + np.cumsum(onehot, axis=0)[k, c]
            wm = np.where(running0 | (k > 0), pool.watermark, 0)
            need = pre_need[q]
            room_total = pool.capacity - used - wm
            room_other = np.where(top, room_total, pool.capacity - pool.reserve - other)
            room_cls = pool.class_caps[c] - in_cls
            why = np.where(need > room_cls, Reason.CLASS_CAP,
                           np.where(need > room_total, Reason.KV_SHORT, Reason.RESERVE)).astype(np.int8)
            codes[q], need_at[q] = why, need
            free_at[q] = np.maximum(0, np.minimum(np.minimum(room_total, room_other), room_cls))
        rest = np.zeros(len(ids), bool)
        rest[q] = True
        cls = rs.cls[ids]
        for cl, p in closed_at.items():
            m = rest & (cls == cl) & (pos > p)
            codes[m], need_at[m], free_at[m] = Reason.CLASS_CAP, -1, -1
        if block_other:
            m = rest & ~rs.is_top[ids] & (pos > block_from)
            codes[m], need_at[m], free_at[m] = block_other, -1, -1

    def _at_running_cap(self, c: int) -> bool:
        if not self._running_caps:
            return False
        cap = self.lim.class_max_running[c]
        return cap is not None and self.n_running_cls[c] >= cap

    def _admit(self, w: int, c: int, n: int, now: float, computed: int, remaining: int) -> int:
        """Move w from the queue to the running list; allocate blocks for its first chunk only
        (returns how many)."""
        rs, pool = self.rs, self.pool
        self.queue.remove(w)
        self.running.append(w)
        self._run_cache = None
        self.n_running_cls[c] += 1
        rs.status[w] = RUNNING
        if rs.swapped[w]:
            rs.swapped[w] = False
            self.swap_s += pool.blocks(computed) * self.lim.block_bytes / self.lim.swap_bytes_per_s
        blocks = pool.blocks(computed + n) - int(pool.held[w])
        pool.grow(w, c, blocks)
        self._take(w, n, remaining)
        if rs.first_sched[w] != rs.first_sched[w]:  # NaN: first admission
            rs.first_sched[w] = now
        self.evicted.discard(w)
        return blocks

    def _lower(self, w: int) -> list[int]:
        return [i for i in self.running if self.rs.prio[i] > self.rs.prio[w]]

    def _evict_for_seat(self, w: int, now: float) -> bool:
        """`preempt` policy: a full running set gives up its worst lower-priority request."""
        if not self.policy.preempts_for_waiting:
            return False
        cands = self._lower(w)
        if not cands:
            return False
        v = self.policy.victim(cands, self.rs.prio, self.rs.arrival)
        self.running.remove(v)
        self._run_cache = None
        self._evict(v, now)
        return True

    def _evict_for_blocks(self, w: int, c: int, need: int, now: float) -> Reason:
        """`preempt` policy: evict lower-priority running requests until w's prompt fits."""
        rs, pool = self.rs, self.pool
        cands = self._lower(w)
        freed = int(pool.held[cands].sum()) if cands else 0
        wm = pool.watermark
        if need + wm > pool.free + freed or (
            not rs.is_top[w] and need > pool.capacity - pool.reserve - pool.used_other + freed
        ):
            return pool.shortfall(c, need, watermark=bool(self.running))
        why = pool.shortfall(c, need, watermark=bool(self.running))
        while why in (Reason.KV_SHORT, Reason.RESERVE) and cands:
            v = self.policy.victim(cands, rs.prio, rs.arrival)
            cands.remove(v)
            self.running.remove(v)
            self._run_cache = None
            self._evict(v, now)
            why = pool.shortfall(c, need, watermark=bool(self.running))
        return why

    # -- after the step ---------------------------------------------------------------------
    def complete(self, step: Step, t_end: float) -> list[int]:
        """Apply a finished step: progress, sampled tokens, finished requests (blocks freed)."""
        rs = self.rs
        ids = step.ids
        if len(ids) == 0:
            return []
        rs.computed[ids] = step.context + step.tokens
        sampled = step.tokens == step.remaining  # the step completed the sequence: one new token
        done = ids if sampled.all() else ids[sampled]
        gen = rs.generated[done] + 1
        rs.generated[done] = gen
        first = gen == 1
        if first.any():
            new = done[first]
            rs.first_token[new[np.isnan(rs.first_token[new])]] = t_end
        fin = done[gen >= rs.output[done]].tolist()
        for i in fin:
            c = int(rs.cls[i])
            self.pool.release(i, c)
            self.n_running_cls[c] -= 1
            rs.status[i] = FINISHED
            rs.finish[i] = t_end
        if fin:
            for i in fin:
                self.running.remove(i)
            self._run_cache = None
        return fin
