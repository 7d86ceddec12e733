"""What one engine holds between steps, and the bookkeeping of a rulebook's decisions.

`EngineState` is the waiting queue, the running set, the KV pool (with the prefix cache), the
requests and the preemption counts. A rulebook (`engine.core.vllm_rules.VLLMRules`,
`engine.core.sglang_rules.SGLangRules`) decides who runs, who waits and who is preempted; the state carries
the decisions out — `admit` a waiting request, `evict` a running one, `retire` the finished — and
takes in a step's outputs once its time has passed (`complete`, vLLM's `update_from_output`).
Under async scheduling (vLLM's `AsyncScheduler`) the outputs arrive one call late: `take` takes
them in at the end of the next `schedule()` call, `take_early` before it when that changes
nothing. None of this decides anything, so both rulebooks share it.
"""

from __future__ import annotations

import numpy as np

from .arrival import ArrivalGate
from .kv import KVPool
from .policies import Policy
from .prefix import Hit, PrefixCache
from .queue import Key, WaitingQueue
from .requests import Requests
from .running import RunningSet
from .step import Budget, Limits, Step

NO_HIT: Hit = ((), (), 0, 0)  # a prefix-cache lookup that found nothing (`PrefixCache.lookup`)


class EngineState:
    """One engine's queue, running set, KV pool, prefix cache and requests (see the module text)."""

    def __init__(self, requests: Requests, pool: KVPool, policy: Policy, limits: Limits):
        self.rs, self.pool, self.policy, self.lim = requests, pool, policy, limits
        n_cls = len(pool.used_cls)
        self.queue = WaitingQueue()
        self.running = RunningSet(n_cls, pool.block_size)
        self.evicted = np.zeros(requests.n, bool)  # waiting again after a preemption
        self.n_evicted = 0
        self.n_running_cls = [0] * n_cls
        self.entries = 0  # queue entries so far (arrivals and requeues): the policies' entry order
        self.entry = np.zeros(requests.n, np.int64)  # each request's last entry number
        self.step = Step(None)  # the step the rulebook is building
        self.outputs: tuple[float, list[int]] | None = None  # async: the last step's end and who finished in it
        self.cache = pool.cache = PrefixCache(pool, requests) if limits.prefix_caching else None
        self.lag = limits.async_scheduling and self.cache is not None  # async: hashing lags (`RunningSet.hashed`)
        self.running.track = self.lag
        self.gate = ArrivalGate(requests, pool, limits)
        self.retired = 0  # requests retired so far (a rulebook may watch the batch shrink)
        self.emptied_at: float | None = None  # when retiring last left nothing running or queued

    def begin(self) -> Step:
        """A new step to build."""
        self.step = Step(None)
        return self.step

    # -- the queue ----------------------------------------------------------------------------
    def enqueue(self, i: int) -> bool:
        """Accept an arrival into the waiting queue, or reject one that can never run or that
        vLLM's API server would shed."""
        rs = self.rs
        if (why := self.gate.refuse(i, self.queue)) is not None:
            rs.reject(i, why)
            return False
        rs.wait(i)
        self._push(i, self.policy.order_key(int(rs.prio[i]), float(rs.arrival[i]), rs.tie[i], self.entries + 1))
        return True

    def _push(self, i: int, key: Key) -> None:
        self.entries += 1
        self.entry[i] = self.entries
        self.queue.push(i, key)

    # -- a rulebook's decisions ------------------------------------------------------------------
    def admit(self, w: int, c: int, n: int, now: float, computed: int, seq: int, budget: Budget | None,
              hit: Hit = NO_HIT) -> int:
        """Move w from the queue to the running set; allocate blocks for its first chunk of n
        tokens only (`hit`: its prefix-cache hit; `budget`: where the tokens come from, None
        for a rulebook without a per-request budget). Returns the blocks it took."""
        rs, pool, step = self.rs, self.pool, self.step
        self.queue.remove(w)
        prompt, top = rs.prompt_l[w], rs.top_l[w]
        p = self.running.add(w, c, computed, seq, prompt, prompt + rs.output_l[w], top)
        self.n_running_cls[c] += 1
        first = bool(rs.first_sched[w] != rs.first_sched[w])  # NaN: never admitted before
        rs.run(w, now)
        if rs.swapped[w]:
            rs.swapped[w] = False
            step.swap_s += pool.blocks(computed) * self.lim.block_bytes / self.lim.swap_bytes_per_s
        cache = self.cache
        _, _, hits, fresh = hit
        if hits:
            rs.hit(w, computed, first)
        if cache is not None and (hits or cache.any_prefix and cache.prefix_l[w]):  # (hits: from the cache)
            cache.admit(w, c, hit)  # hits on free cached blocks take them out of the free queue
        blocks = pool.blocks(computed + n) - hits
        pool.grow(c, blocks)
        if cache is not None and w in cache.held:
            cache.register(w, c, computed + n)
        self.running.set_tokens(p, n, budget.take(n, top) if budget is not None else 0)
        step.admitted.append(w)
        if self.evicted[w]:
            self.evicted[w] = False
            self.n_evicted -= 1
        return blocks + fresh

    def evict(self, v: int, now: float, budget: Budget | None) -> None:
        """Preempt a running request: its tokens go back to the budget, its blocks are freed;
        recompute (progress lost) or swap; back to the queue under the policy's requeue key.
        The step's plan no longer describes the rows."""
        rs, run, step, lim = self.rs, self.running, self.step, self.lim
        p = run.ids.index(v)
        tok, from_r = run.tokens_of(p)
        if budget is not None:
            budget.reserve += from_r
            budget.shared += tok - from_r
        hashed = run.hashed(p, self.lag)
        _, c, comp, seq = run.remove_at(p)
        freed = self.free(v, c, comp + tok, hashed, keep=lim.swap_bytes_per_s == 0)
        self.n_running_cls[c] -= 1
        rs.generated[v] = seq - int(rs.prompt[v])
        rs.preemptions[v] += 1
        if lim.swap_bytes_per_s > 0:
            rs.swapped[v] = True
            step.swap_s += freed * lim.block_bytes / lim.swap_bytes_per_s
            rs.computed[v] = comp
        elif seq < rs.prompt_l[v] + rs.output_l[v]:  # recompute: progress lost
            rs.recomputed[v] += comp
            rs.computed[v] = 0
        else:  # its last token is in flight: it finishes from the queue, nothing is lost
            rs.computed[v] = comp
        rs.wait(v)
        self._push(v, self.policy.requeue_key(int(rs.prio[v]), float(rs.arrival[v]), rs.tie[v], self.entries + 1))
        if not self.evicted[v]:
            self.evicted[v] = True
            self.n_evicted += 1
        step.preempted.append(v)
        step.plan = None

    def free(self, i: int, c: int, tokens: int, hashed: int, keep: bool) -> int:
        """Request i lets go of the blocks of its `tokens` tokens (`hashed` of them hashed; `keep`:
        preempted, it may find them again); returns how many it held."""
        blocks, cache = self.pool.blocks(tokens), self.cache
        if cache is None:
            self.pool.release(c, blocks)
        else:
            cache.release(i, c, blocks, hashed, keep)
            if not keep and cache.segs:
                cache.forget(i)
        return blocks

    def retire(self, done: list[int], t_end: float) -> list[int]:
        """The running requests at positions `done` (ascending) finished at t_end: out of the
        running set, their blocks freed in running order (as vLLM takes in a step's outputs)."""
        rows = [self.running.remove_at(p) for p in reversed(done)][::-1]
        for i, c, comp, seq in rows:
            self.free(i, c, comp, comp, keep=False)
            self.n_running_cls[c] -= 1
            self.rs.complete(i, t_end, comp, seq - self.rs.prompt_l[i])
        self.retired += len(rows)
        if not self.running.ids and not self.queue.order:
            self.emptied_at = t_end
        return [r[0] for r in rows]

    # -- after the step: vLLM's update_from_output side ------------------------------------------
    def complete(self, step: Step, t_end: float) -> list[int]:
        """Apply a finished step: progress, sampled tokens, finished requests (blocks freed)."""
        if not step.batch:
            return []
        rs = self.rs
        for i in self.running.advance(step.plan):
            if rs.first_token[i] != rs.first_token[i]:
                rs.first_token[i] = t_end
        return self._finish(t_end)

    def repeat(self, k: int, growth: list[int], t_end: float) -> list[int]:
        """k more pure decode steps like the last one (the replica proved nothing else happens
        before the last of them ends at t_end): blocks grow, then who is done finishes."""
        self.pool.add(growth)
        self.running.skip(k)
        return self._finish(t_end)

    def _finish(self, t_end: float) -> list[int]:
        run = self.running
        if self.lim.async_scheduling:  # the outputs are taken in at the end of the next call
            self.outputs = (t_end, [run.ids[p] for p in run.finished()])
            return []
        done = run.finished()
        return self.retire(done, t_end) if done else done

    def take_early(self) -> list[int]:
        """Async shortcut: take in the last step's outputs *before* the next call when that
        changes nothing — the call would admit nobody (empty queue), evict nobody (the others'
        growth fits beside the finished requests' blocks) and give every other running request
        one decode token (so the finished ones' zero tokens and their place in the "alone"
        count decide nothing). Then the replica can run the steps that follow as one. Returns
        who finished.

        With a prefix cache it must also leave the free queue as the call would. The call's decode
        growth takes its blocks before the outputs free anything, evicting cached blocks from the
        front of the free queue if the blocks without a hash do not suffice; freeing first would put
        the finished requests' unhashed blocks there and spare a cached block the call evicts. So
        that eviction is done here, first (the call's growth then finds its blocks without evicting
        again). And no shareable block may wait to be registered by the outputs (`take` registers
        them at the end of the call)."""
        if not (self.outputs and self.outputs[1]) or self.queue.order:
            return []
        run, pool, cache = self.running, self.pool, self.cache
        if run.n_dec != len(run.ids) or not pool.fits(run.crossings()):
            return []
        if cache is not None:
            if cache.hashing:
                return []
            cache.take(sum(run.call_growth()), pool.capacity - pool.used)  # the call's eviction, in its order
        (t_end, done), self.outputs = self.outputs, None  # (nobody was preempted since)
        self.retire(sorted(run.ids.index(i) for i in done), t_end)
        return done

    def hash_running(self, granted: bool) -> None:
        """Shareable blocks the running pass's grants (or, async, the outputs taken in) hashed
        become findable (`engine.core.prefix`)."""
        run, cache = self.running, self.cache
        assert cache is not None  # (called only with a prefix cache)
        for p in [p for p, i in enumerate(run.ids) if i in cache.hashing]:  # in running order, as vLLM
            i = run.ids[p]
            if granted and run.tokens_of(p)[0]:
                cache.register(i, run.cls[p], run.hashed(p, self.lag))
            elif not granted:
                cache.register(i, run.cls[p], run.taken_in(p, True))

    def take(self, step: Step) -> None:
        """Async: the end of the call takes in the last step's outputs (vLLM's update_from_output
        after the next schedule()); then the blocks they hashed become findable."""
        assert self.outputs is not None  # (called only when there are outputs to take in)
        (t_end, done), self.outputs = self.outputs, None
        step.flushed = True
        if done:
            self._finished_late(step, done, t_end)
        if self.lag and self.cache is not None and self.cache.hashing:  # (lag: a cache)
            self.hash_running(granted=False)

    def _finished_late(self, step: Step, done: list[int], t_end: float) -> None:
        """Who sampled its last token in the last step finishes at that step's end: from the running
        list, or from the queue if this call preempted it (its last token was in flight)."""
        run, rs = self.running, self.rs
        ids = run.ids
        queued = [i for i in done if i not in ids]
        self.retire(sorted(ids.index(i) for i in done if i in ids), t_end)
        for i in queued:  # preempted in this call with its last token in flight
            if self.cache is not None:
                self.cache.forget(i)
            self.queue.remove(i)
            self.evicted[i], rs.swapped[i] = False, False
            self.n_evicted -= 1
            rs.complete(i, t_end, int(rs.computed[i]), int(rs.generated[i]))
        if step.plan is not None and step.plan.uniform:  # they had no token in it: the plan
            step.plan.n -= step.plan.done  # covers the others
            step.plan.done = 0
        else:
            step.plan = None
        step.finished = list(done)
        if queued and len(step.waiting):
            step.drop_waiting(queued)

    def write_back(self) -> None:
        """The run is over: the running requests' progress back into `Requests` (how far an
        unfinished request got)."""
        run = self.running
        if run.ids:
            self.rs.computed[run.ids] = run.computed()
