"""A small reference model of vLLM 0.33's scheduling rules, written from reading them, checked
against the recorded corpus.

It exists to make the rules explicit: every rule below is one the corpus shows (the model
agrees with vLLM on every workload of every mode, `tests/fidelity/test_reference.py`), so a
difference between the engine and vLLM can be traced to a named rule by running the engine and
this model side by side (`python -m fidelity.reference WORKLOAD_ID` prints its step log).
It models exactly the corpus's setting: one full-attention KV group, no speculative decoding,
no connectors, no LoRA, no pipeline parallelism, chunked prefill on, full-sequence admission
check on (`scheduler_reserve_full_isl`), one sampled token per step. Standard library only.

The rules, per `schedule()` call (vLLM's names in brackets):

1. *Chunk cap.* cap = `long_prefill_token_threshold` only if running + waiting > 1 at the start of
   the call, counting a running request whose last token is in flight; with
   `long_prefill_token_threshold_adaptive` the cap is max(cap, budget // (running + waiting)).
2. *Running pass*, in running-list order while budget > 0: want = tokens not yet computed
   (+ in-flight output placeholders under async); skip (not stop) a request with nothing to do
   (async: its last token is in flight). n = min(want, cap, budget). Blocks needed =
   ceil((computed + n) / block_size) − held. If more than free: preempt a victim — fcfs: the last
   of the running list; priority: max over the running list of (priority, arrival), first in
   list order on ties — whose earlier grant in this call, if any, is returned to the budget;
   repeat until the blocks fit or the victim is the request itself: then fcfs stops the pass,
   priority goes on with the next request.
3. *Preemption* frees the victim's blocks (last block first), sets computed to 0, drops its
   in-flight placeholders (their output still arrives and is appended: stale output), and puts
   it back in the waiting queue: fcfs at the front, priority by (priority, arrival, id).
4. *Waiting pass*, only if nothing was preempted in this call, while budget > 0 and the queue is
   not empty, stopping when running reaches `max_num_seqs`. Head of the queue: a request with
   stale output still in flight is skipped (stays waiting, later ones are tried). Prefix-cache
   hit = longest run of cached full blocks of its tokens, at most (tokens − 1) // block_size
   blocks. n = min(tokens − hit, cap, budget). It is admitted only if (a) blocks for all its
   current tokens, less the hit blocks, plus the hit blocks that sit free in the cache
   (ref count 0), plus the watermark, fit in the free blocks, and (b) the same holds for the
   blocks of hit + n tokens. The watermark, int(watermark × num_gpu_blocks), applies only while
   the running list is not empty. A head that does not fit stops the pass.
5. *Blocks.* `num_gpu_blocks` N has N − 1 usable (block 0 is the null block). Free blocks form
   one queue: allocation takes from the front, evicting the cached hash of a reused block; a
   hit takes cached free blocks out of the queue; a freed block goes to the front when it has
   no hash, to the back (kept cached, least recently used evicted first) when it has one. A
   scheduled chunk hashes the full blocks of its tokens up to the request's known tokens at
   scheduling time; under async, output tokens' blocks are hashed when their output arrives.
6. *After the call*: computed += n; a request whose computed tokens reach its known tokens
   (+ placeholders) samples a token in this step (async: a placeholder is added at once, so it
   can be scheduled again in the next step before that token is known).
7. *Output*: each sampled token is appended; at `max_tokens` the request finishes and frees its
   blocks. Sync: right after the step. Async: after the next step has been scheduled.
8. *Time*: a call that schedules nothing while requests run or wait (under async: every running
   request's last token in flight; under priority: every running request preempted) runs no
   forward pass and takes no time; the next call builds the same step.
"""

from __future__ import annotations

import hashlib
import heapq
import sys
from collections import OrderedDict, deque

from .tokens import output_token, prompt_tokens

WAITING, RUNNING, PREEMPTED, FINISHED = "waiting", "running", "preempted", "finished"

# Each named rule of vLLM 0.33 the model follows, with what `Model(drop={rule})` does instead.
RULES = {
    "null_block": "all num_gpu_blocks usable (no null block)",
    "watermark_on_num_gpu_blocks": "watermark = int(w × usable blocks) instead of int(w × num_gpu_blocks)",
    "watermark_only_while_running": "watermark also kept when nothing is running",
    "full_sequence_gate": "admission checks only the first chunk's blocks",
    "no_cap_when_alone": "long_prefill_token_threshold applied even when running + waiting <= 1",
    "alone_counts_in_flight_last_token": "a running request whose last token is in flight not counted",
    "adaptive_floor": "long_prefill_token_threshold_adaptive ignored",
    "priority_self_preemption_continues": "the running pass stops after a self-preemption under priority too",
    "victim_grant_returned": "a victim's earlier grant in the same step is not returned to the budget",
    "no_admission_after_preemption": "waiting requests admitted even in a step that preempted",
    "fcfs_preempted_to_front": "fcfs puts a preempted request at the back of the queue",
    "async_output_one_step_late": "async workloads run with the sync loop (output seen at once)",
    "async_skip_last_token_in_flight": "async schedules a request again although its last token is in flight",
    "empty_step_takes_no_time": "a schedule() call that schedules nothing while requests wait or run takes a step",
    "hit_stops_one_token_short": "a prefix hit may cover the whole prompt",
    "free_cached_hits_count": "cached free blocks touched by a hit do not count against free room",
    "unhashed_freed_first": "freed blocks all go to the back of the free queue",
    "freed_last_block_first": "a request's blocks are freed first block first",
}


class Req:
    __slots__ = ("i", "spec", "prio", "arrival", "max_tokens", "tokens", "prompt_len", "computed", "status",
                 "blocks", "cached_blocks", "hashes", "placeholders", "in_flight", "stale", "preemptions",
                 "prefill_chunk")

    def __init__(self, i: int, spec: dict, arrival: float):
        self.i, self.spec, self.arrival = i, spec, arrival
        self.prio, self.max_tokens = spec["priority"], spec["output_len"]
        self.tokens = prompt_tokens(spec, i)
        self.prompt_len = len(self.tokens)
        self.computed, self.status = 0, WAITING
        self.blocks: list[int] = []
        self.cached_blocks = 0  # blocks of `blocks` already hashed into the cache
        self.hashes: list[bytes] = []
        self.placeholders = self.in_flight = self.stale = self.preemptions = 0
        self.prefill_chunk = False

    @property
    def outputs(self) -> int:
        return len(self.tokens) - self.prompt_len

    def key(self):
        return (self.prio, self.arrival, f"r{self.i:03d}")

    def __lt__(self, other: Req) -> bool:
        return self.key() < other.key()


class Pool:
    """The block pool: free queue in eviction order, ref counts, hash → blocks."""

    def __init__(self, n: int, bs: int, caching: bool, unhashed_first: bool = True):
        self.bs, self.caching, self.unhashed_first = bs, caching, unhashed_first
        self.free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(1, n))  # 0: null block
        self.ref = [0] * n
        self.hash_of: list[bytes | None] = [None] * n
        self.by_hash: dict[bytes, OrderedDict[int, None]] = {}

    def num_free(self) -> int:
        return len(self.free)

    def take(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            b, _ = self.free.popitem(last=False)
            h = self.hash_of[b]
            if h is not None:
                del self.by_hash[h][b]
                if not self.by_hash[h]:
                    del self.by_hash[h]
                self.hash_of[b] = None
            self.ref[b] = 1
            out.append(b)
        return out

    def touch(self, blocks: list[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                del self.free[b]
            self.ref[b] += 1

    def release(self, blocks: list[int]) -> None:
        """Free in eviction order (first = evicted first): unhashed to the front, hashed to the back."""
        first, last = [], []
        for b in blocks:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                unhashed = self.hash_of[b] is None or not self.caching
                (first if unhashed and self.unhashed_first else last).append(b)
        for b in reversed(first):
            self.free[b] = None
            self.free.move_to_end(b, last=False)
        for b in last:
            self.free[b] = None

    def lookup(self, hashes: list[bytes], max_blocks: int) -> list[int]:
        hit = []
        for h in hashes[:max_blocks]:
            blocks = self.by_hash.get(h)
            if not blocks:
                break
            hit.append(next(iter(blocks)))
        return hit

    def evictable(self, blocks: list[int]) -> int:
        return sum(self.ref[b] == 0 for b in blocks)

    def cache(self, r: Req, num_tokens: int) -> None:
        if not self.caching:
            return
        _extend_hashes(r, self.bs)
        full = min(num_tokens, len(r.hashes) * self.bs) // self.bs
        for j in range(r.cached_blocks, full):
            b, h = r.blocks[j], r.hashes[j]
            self.hash_of[b] = h
            self.by_hash.setdefault(h, OrderedDict())[b] = None
        r.cached_blocks = max(r.cached_blocks, full)


def _extend_hashes(r: Req, bs: int) -> None:
    while (len(r.hashes) + 1) * bs <= len(r.tokens):
        j = len(r.hashes)
        parent = r.hashes[-1] if r.hashes else b""
        r.hashes.append(hashlib.sha256(parent + repr(r.tokens[j * bs:(j + 1) * bs]).encode()).digest())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Model:
    """vLLM 0.33's rules on one corpus workload. `drop` switches named rules (`RULES`) off, each
    replaced by the simpler alternative an implementation might have, to see what it changes."""

    def __init__(self, wl: dict, drop: frozenset[str] | set[str] = frozenset()):
        unknown = set(drop) - set(RULES)
        if unknown:
            raise ValueError(f"unknown rule(s) {sorted(unknown)}: use {', '.join(RULES)}")
        self.on = lambda rule: rule not in drop
        self.cfg = c = wl["config"]
        self.wl = wl
        self.bs, self.budget_max = c["block_size"], c["max_num_batched_tokens"]
        usable = c["num_gpu_blocks"] - (1 if self.on("null_block") else 0)
        self.pool = Pool(usable + 1, self.bs, c["enable_prefix_caching"], self.on("unhashed_freed_first"))
        self.wm = int(c["watermark"] * (c["num_gpu_blocks"] if self.on("watermark_on_num_gpu_blocks") else usable))
        self.priority = c["policy"] == "priority"
        self.running: list[Req] = []
        self.waiting: deque[Req] | list[Req] = [] if self.priority else deque()
        self.reqs: list[Req] = []
        self.due: dict[int, list[int]] = {}
        for i, r in enumerate(wl["requests"]):
            self.due.setdefault(r[0], []).append(i)
        self.first_sched: dict[int, int] = {}
        self.first_token: dict[int, int] = {}
        self.finish: dict[int, int] = {}
        self.cached: dict[int, int] = {}
        self.cached_all: dict[int, int] = {}
        self.step_tokens: list[int] = []
        self.log: list[tuple] = []
        self.k = 0
        self.flush = False  # a finished request not yet reported: vLLM makes one more (empty) call

    # waiting queue
    def _push_front(self, r: Req) -> None:
        if self.priority:
            heapq.heappush(self.waiting, r)
        elif self.on("fcfs_preempted_to_front"):
            self.waiting.appendleft(r)
        else:
            self.waiting.append(r)

    def _add(self, r: Req) -> None:
        if self.priority:
            heapq.heappush(self.waiting, r)
        else:
            self.waiting.append(r)

    def _pop(self) -> Req:
        return heapq.heappop(self.waiting) if self.priority else self.waiting.popleft()

    def _arrive(self, k: int) -> None:
        for i in self.due.pop(k, []):
            s = self.wl["requests"][i]
            spec = {"priority": s[3], "output_len": s[2], "prompt_len": s[1], "prefix_group": s[4],
                    "prefix_tokens": s[5]}
            r = Req(i, spec, k + len(self.reqs) * 1e-6)
            self.reqs.append(r)
            self._add(r)

    def has_requests(self) -> bool:
        return bool(self.running or self.waiting or self.flush)

    # one schedule() call
    def schedule(self):
        self.flush = False
        budget = self.budget_max
        eligible = len(self.running) + len(self.waiting)
        if not self.on("alone_counts_in_flight_last_token"):
            eligible -= sum(self._last_token_in_flight(q) for q in self.running)
        cap = self.cfg["long_prefill_token_threshold"]
        if eligible <= 1 and self.on("no_cap_when_alone"):
            cap = 0
        if cap and self.cfg["long_prefill_token_threshold_adaptive"] and self.on("adaptive_floor"):
            cap = max(cap, self.budget_max // max(eligible, 1))
        grants: dict[int, int] = {}  # request index -> tokens, in scheduling order
        preempted: list[Req] = []
        idx = 0
        while idx < len(self.running) and budget > 0:
            r = self.running[idx]
            if self._last_token_in_flight(r) and self.on("async_skip_last_token_in_flight"):
                idx += 1
                continue
            n = len(r.tokens) + r.placeholders - r.computed
            if 0 < cap < n:
                n = cap
            n = min(n, budget)
            ok = False
            while True:
                need = max(_cdiv(r.computed + n, self.bs) - len(r.blocks), 0)
                if need <= self.pool.num_free():
                    ok = True
                    break
                if self.priority:
                    victim = max(self.running, key=lambda q: (q.prio, q.arrival))
                    v = self.running.index(victim)
                    del self.running[v]
                    if v < idx:
                        idx -= 1
                    if victim.i in grants:
                        returned = grants.pop(victim.i)
                        if self.on("victim_grant_returned"):
                            budget += returned
                else:
                    victim = self.running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is r:
                    break
            if not ok:
                if self.priority and self.on("priority_self_preemption_continues"):
                    continue
                break
            r.blocks += self.pool.take(need)
            self.pool.cache(r, min(r.computed + n, len(r.tokens)))
            grants[r.i] = n
            budget -= n
            idx += 1
        if not preempted or not self.on("no_admission_after_preemption"):
            skipped: list[Req] = []
            while budget > 0 and self.waiting:
                if len(self.running) >= self.cfg["max_num_seqs"]:
                    break
                r = self.waiting[0]
                if r.stale:
                    skipped.append(self._pop())
                    continue
                hit: list[int] = []
                if self.pool.caching:
                    _extend_hashes(r, self.bs)
                    limit = len(r.tokens) - 1 if self.on("hit_stops_one_token_short") else len(r.tokens)
                    hit = self.pool.lookup(r.hashes, limit // self.bs)
                hit_tokens = len(hit) * self.bs
                n = len(r.tokens) - hit_tokens
                if 0 < cap < n:
                    n = cap
                n = min(n, budget)
                wm = self.wm if self.running or not self.on("watermark_only_while_running") else 0
                evictable = self.pool.evictable(hit) if self.on("free_cached_hits_count") else 0
                full = _cdiv(len(r.tokens), self.bs) - len(hit) + evictable
                chunk = _cdiv(hit_tokens + n, self.bs) - len(hit) + evictable
                too_big = full + wm > self.pool.num_free() and self.on("full_sequence_gate")
                if too_big or chunk + wm > self.pool.num_free():
                    break
                self._pop()
                self.pool.touch(hit)
                r.blocks = list(hit) + self.pool.take(_cdiv(hit_tokens + n, self.bs) - len(hit))
                r.cached_blocks = len(hit)
                r.computed = hit_tokens
                self.pool.cache(r, min(hit_tokens + n, len(r.tokens)))
                self.cached.setdefault(r.i, hit_tokens)
                self.cached_all[r.i] = self.cached_all.get(r.i, 0) + hit_tokens
                r.status = RUNNING
                self.running.append(r)
                grants[r.i] = n
                budget -= n
            for r in reversed(skipped):
                self._push_front(r)
        sampled = []
        for i, n in grants.items():
            r = self.reqs[i]
            r.computed += n
            r.in_flight += n
            r.prefill_chunk = r.computed < len(r.tokens) + r.placeholders
            sampled.append((i, n, not r.prefill_chunk))
            if self.cfg["async_scheduling"] and not r.prefill_chunk:
                r.placeholders += 1
        return sampled, [v.i for v in preempted]

    def _last_token_in_flight(self, r: Req) -> bool:
        """Async: the step that samples its last token is already scheduled."""
        return r.placeholders > 0 and r.computed + 2 - r.placeholders >= r.prompt_len + r.max_tokens

    def _preempt(self, r: Req) -> None:
        self.pool.release(r.blocks[::-1] if self.on("freed_last_block_first") else list(r.blocks))
        r.blocks, r.cached_blocks = [], 0
        r.status, r.computed = PREEMPTED, 0
        r.stale, r.placeholders = r.in_flight, 0
        r.preemptions += 1
        self._push_front(r)

    def update(self, sampled, slot) -> None:
        for i, n, token in sampled:
            r = self.reqs[i]
            r.in_flight -= n
            stale = r.stale > 0
            if stale:
                r.stale -= n
            if r.status == FINISHED or not token:
                continue
            had_placeholders = r.placeholders > 0
            r.tokens.append(output_token(r.spec, i, r.outputs))
            self.first_token.setdefault(i, slot)
            if not stale and r.placeholders > 0:
                r.placeholders -= 1
            if not stale and r.status == RUNNING and had_placeholders:
                self.pool.cache(r, r.computed - r.in_flight)
            if r.outputs >= r.max_tokens:
                self.finish[i] = slot
                if r.status == RUNNING:
                    self.running.remove(r)
                else:
                    self._remove_waiting(r)
                r.status = FINISHED
                self.pool.release(r.blocks[::-1] if self.on("freed_last_block_first") else list(r.blocks))
                r.blocks = []
                self.flush = True

    def _remove_waiting(self, r: Req) -> None:
        if self.priority:
            self.waiting.remove(r)
            heapq.heapify(self.waiting)
        else:
            self.waiting.remove(r)

    # the engine-core loop (same shape as fidelity.record)
    def _call(self):
        busy = bool(self.running or self.waiting)
        sampled, pre = self.schedule()
        total = sum(n for _, n, _ in sampled)
        slot = self.k if total else None
        if not total and busy and not self.on("empty_step_takes_no_time"):
            self.k += 1  # an idle step: nothing ran, yet the step's time passed
        self.log.append((slot, {i: n for i, n, _ in sampled}, sorted(pre)))
        for i, _, _ in sampled:
            self.first_sched.setdefault(i, slot)
        if total:
            self.step_tokens.extend([0] * (slot - len(self.step_tokens)))
            self.step_tokens.append(total)
            self.k += 1
        return sampled, slot

    def run(self) -> dict:
        n = len(self.wl["requests"])
        queue: deque = deque()
        asyn = self.cfg["async_scheduling"] and self.on("async_output_one_step_late")
        guard = 0
        while len(self.finish) < n or self.has_requests() or queue:
            guard += 1
            if guard > 100_000:
                raise RuntimeError(f"{self.wl['id']}: reference model stuck")
            self._arrive(self.k)
            if not asyn:
                if not self.has_requests():
                    self.k = min(self.due)
                    continue
                self.update(*self._call())
                continue
            if self.has_requests():
                sampled, slot = self._call()
                queue.appendleft((sampled, slot))
                if len(queue) < 2 and (slot is not None or self.has_requests()):
                    continue
            elif not queue:
                self.k = min(self.due)
                continue
            self.update(*queue.pop())
        results = [[self.first_sched[i], self.first_token[i], self.finish[i], self.reqs[i].preemptions,
                    self.cached.get(i, 0), self.cached_all.get(i, 0)] for i in range(n)]
        return {"requests": results, "step_tokens": self.step_tokens}


def agrees(wl: dict, drop: frozenset[str] | set[str] = frozenset()) -> tuple[bool, str]:
    """(True, "") when the model reproduces vLLM's recorded result, else (False, the first difference)."""
    try:
        got = Model(wl, drop).run()
    except (RuntimeError, KeyError, ValueError) as err:  # a dropped rule can over-commit or deadlock
        return False, f"{wl['id']}: the model fails: {err!r}"
    want = wl["result"]
    if got["step_tokens"] != want["step_tokens"]:
        k = next((k for k, (a, b) in enumerate(zip(got["step_tokens"], want["step_tokens"])) if a != b),
                 min(len(got["step_tokens"]), len(want["step_tokens"])))
        a = want["step_tokens"][k] if k < len(want["step_tokens"]) else None
        b = got["step_tokens"][k] if k < len(got["step_tokens"]) else None
        return False, f"{wl['id']}: step {k}: vLLM {a} tokens, model {b}"
    for i, (a, b) in enumerate(zip(want["requests"], got["requests"])):
        if a != b:
            return False, f"{wl['id']}: request {i}: vLLM {a}, model {b}"
    return True, ""


def main(argv: list[str]) -> int:
    from . import corpus

    if not argv:
        for mode, _, workloads in corpus.iter_corpus():
            bad = [msg for ok, msg in map(agrees, workloads) if not ok]
            print(f"{mode:>13}: {len(workloads) - len(bad)}/{len(workloads)} workloads reproduced"
                  + (f"; first: {bad[0]}" if bad else ""))
        return 0
    wid = argv[0]
    mode = wid.rsplit("-", 1)[0]
    _, workloads = corpus.read(corpus.corpus_path(mode))
    wl = next(w for w in workloads if w["id"] == wid)
    m = Model(wl)
    m.run()
    print(agrees(wl)[1] or "reproduced")
    for slot, grants, pre in m.log:
        print(slot, grants, "preempted" if pre else "", pre or "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
