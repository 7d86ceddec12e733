"""Taking in a step's outputs: the `update_from_output` side of vLLM's scheduler.

`Scheduler.schedule()` decides a step; these functions apply it once its time has passed:
progress and first tokens, then the requests that finished, out of the running set with their
blocks freed. Under async scheduling (vLLM's `AsyncScheduler`) the outputs arrive one call late:
`take` takes them in at the end of the next `schedule()` call, `take_early` before it when that
changes nothing. They live apart from `engine.scheduler` because they decide nothing: who runs,
who waits and who is preempted is decided there, and this is the bookkeeping that follows.

The scheduler binds `complete`, `repeat`, `take_early` (as `outputs_first`) and `retire` (as
`_retire`, which `SGLangScheduler` extends) as its own methods, so each takes it as `sched`.
"""

from __future__ import annotations

from .step import Step


def complete(sched, step: Step, t_end: float) -> list[int]:
    """Apply a finished step: progress, sampled tokens, finished requests (blocks freed)."""
    if not step.batch:
        return []
    rs = sched.rs
    for i in sched.running.advance(step.plan):
        if rs.first_token[i] != rs.first_token[i]:
            rs.first_token[i] = t_end
    return _finish(sched, t_end)


def repeat(sched, k: int, growth: list[int], t_end: float) -> list[int]:
    """k more pure decode steps like the last one (the replica proved nothing else happens
    before the last of them ends at t_end): blocks grow, then who is done finishes."""
    sched.pool.add(growth)
    sched.running.skip(k)
    return _finish(sched, t_end)


def _finish(sched, t_end: float) -> list[int]:
    run = sched.running
    if sched.lim.async_scheduling:  # the outputs are taken in at the end of the next call
        sched._outputs = (t_end, [run.ids[p] for p in run.finished()])
        return []
    done = run.finished()
    return sched._retire(done, t_end) if done else done


def retire(sched, done: list[int], t_end: float) -> list[int]:
    """The running requests at positions `done` (ascending) finished at t_end: out of the
    running set, their blocks freed in running order (as vLLM takes in a step's outputs)."""
    rows = [sched.running.remove_at(p) for p in reversed(done)][::-1]
    for i, c, comp, seq in rows:
        free(sched, i, c, comp, comp, keep=False)
        sched.n_running_cls[c] -= 1
        sched.rs.complete(i, t_end, comp, seq - sched.rs.prompt_l[i])
    return [r[0] for r in rows]


def take_early(sched) -> list[int]:
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
    if not (sched._outputs and sched._outputs[1]) or sched.queue.order:
        return []
    run, pool, cache = sched.running, sched.pool, sched.cache
    if run.n_dec != len(run.ids) or not pool.fits(run.crossings()):
        return []
    if cache is not None:
        if cache.hashing:
            return []
        cache.take(sum(run.call_growth()), pool.capacity - pool.used)  # the call's eviction, in its order
    (t_end, done), sched._outputs = sched._outputs, None  # (nobody was preempted since)
    sched._retire(sorted(run.ids.index(i) for i in done), t_end)
    return done


def free(sched, i: int, c: int, tokens: int, hashed: int, keep: bool) -> int:
    """Request i lets go of the blocks of its `tokens` tokens (`hashed` of them hashed; `keep`:
    preempted, it may find them again); returns how many it held."""
    blocks, cache = sched.pool.blocks(tokens), sched.cache
    if cache is None:
        sched.pool.release(c, blocks)
    else:
        cache.release(i, c, blocks, hashed, keep)
        if not keep and cache.segs:
            cache.forget(i)
    return blocks


def hash_running(sched, granted: bool) -> None:
    """Shareable blocks the running pass's grants (or, async, the outputs taken in) hashed
    become findable (`engine.prefix`)."""
    run, cache = sched.running, sched.cache
    for p in [p for p, i in enumerate(run.ids) if i in cache.hashing]:  # in running order, as vLLM
        i = run.ids[p]
        if granted and run.tokens_of(p)[0]:
            cache.register(i, run.cls[p], run.hashed(p, sched._lag))
        elif not granted:
            cache.register(i, run.cls[p], run.taken_in(p, True))


def take(sched, step: Step) -> None:
    """Async: the end of the call takes in the last step's outputs (vLLM's update_from_output
    after the next schedule()); then the blocks they hashed become findable."""
    (t_end, done), sched._outputs = sched._outputs, None
    step.flushed = True
    if done:
        _finished_late(sched, step, done, t_end)
    if sched._lag and sched.cache.hashing:
        hash_running(sched, granted=False)


def _finished_late(sched, step: Step, done: list[int], t_end: float) -> None:
    """Who sampled its last token in the last step finishes at that step's end: from the running
    list, or from the queue if this call preempted it (its last token was in flight)."""
    run, rs = sched.running, sched.rs
    ids = run.ids
    queued = [i for i in done if i not in ids]
    sched._retire(sorted(ids.index(i) for i in done if i in ids), t_end)
    for i in queued:  # preempted in this call with its last token in flight
        if sched.cache is not None:
            sched.cache.forget(i)
        sched.queue.remove(i)
        sched.evicted[i], rs.swapped[i] = False, False
        sched.n_evicted -= 1
        rs.complete(i, t_end, int(rs.computed[i]), int(rs.generated[i]))
    if step.plan is not None and step.plan.uniform:  # they had no token in it: the plan
        step.plan.n -= step.plan.done  # covers the others
        step.plan.done = 0
    else:
        step.plan = None
    step.finished = list(done)
    if queued and len(step.waiting):
        step.drop_waiting(queued)
