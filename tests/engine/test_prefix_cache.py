"""Prefix caching (engine.core.prefix): the shipped `prefix-cache` scenario's claims, on its fixed seed,
with margins, and the cache's bookkeeping on random workloads with shared prefixes."""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import from_dict, load, simulate
from engine.core.prefix import Seg
from tests.support.rules import Around

SYSTEM = {"P0": 3000, "P1": 600}


@cache
def run(**overrides):
    return simulate(load("prefix-cache", {k.replace("__", "."): v for k, v in overrides.items()}))


def misses(res, cls: str) -> int:
    """Requests of the class that did not find their whole system prompt (all full blocks of it)."""
    q = res.requests[res.requests["class"] == cls]
    return int((q["cached_tokens"] < SYSTEM[cls] // 16 * 16).sum())


def test_a_shared_system_prompt_cuts_p0_ttft_and_kv():
    on, off = run(), run(kv__prefix_caching=False)
    p0_on, p0_off = on.summary["classes"]["P0"], off.summary["classes"]["P0"]
    assert p0_on["ttft_p50"] < 0.4 * p0_off["ttft_p50"]
    assert p0_on["cache_hit_rate"] > 0.7 and p0_off["cache_hit_rate"] == 0
    assert on.summary["kv_util_mean"] < off.summary["kv_util_mean"]
    assert on.summary["cached_tokens"] > 100_000


def test_priority_does_not_protect_p0s_cached_prefix():
    """Without P2's documents only the first P0 request misses its system prompt (a cold cache);
    with them, P2's blocks push P0's out of the cache between P0 requests (LRU knows no priority)
    and more P0 requests pay the full prefill — while P1's prompt, used every third of a second,
    is never evicted."""
    quiet, busy = run(classes__P2__arrival__rate=0), run()
    assert misses(quiet, "P0") == 1
    assert misses(busy, "P0") >= 3
    assert misses(busy, "P1") == misses(quiet, "P1") == 1
    assert busy.summary["classes"]["P0"]["cache_hit_rate"] < quiet.summary["classes"]["P0"]["cache_hit_rate"]


@st.composite
def prefixed(draw):
    n = draw(st.integers(2, 25))
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens,class,prefix_group,prefix_tokens"]
    for _ in range(n):
        prompt = draw(st.integers(1, 80))
        group = draw(st.sampled_from([-1, 0, 0, 1]))
        ptok = draw(st.sampled_from([prompt, max(prompt // 2, 1), 8]))
        rows.append(f"{draw(st.integers(0, 30)) / 10},{prompt},{draw(st.integers(1, 20))},"
                    f"C{draw(st.integers(0, 2))},{group},{min(ptok, prompt)}")
    return "\n".join(rows) + "\n", draw(st.integers(12, 60)), draw(st.sampled_from([2, 4, 8])), draw(st.booleans()), \
        draw(st.sampled_from(["fcfs", "priority", "backfill", "preempt"]))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=prefixed())
def test_the_cache_keeps_its_books(case, tmp_path_factory):
    """After every call: the cached free blocks listed in the queue are as many as counted, every
    shared block in use has as many users as references, and the pool's per-class charges add up
    to the blocks in use (the plain, unhashed free blocks are what is left)."""
    text, blocks, bs, asyn, policy = case
    path = tmp_path_factory.mktemp("t") / "t.csv"
    path.write_text(text)

    def checked(rules, now, unchanged):
        step = rules.schedule(now, unchanged)
        c, pool = rules.state.cache, rules.state.pool
        listed = sum(1 if not isinstance(e, Seg) else sum(hi - lo for lo, hi in e.runs) for e in c.q.values())
        assert listed == c.n_cached or (not c.q and c.n_cached >= 0)
        assert 0 <= c.n_cached <= pool.capacity - pool.used
        assert sum(pool.used_cls) == pool.used
        for i, held in c.held.items():
            assert all(i in b.users for b in held)
        return step

    data = {"duration_s": 10, "kv": {"num_blocks": blocks, "block_size": bs},
            "cost": {"model": "fixed", "step_time_s": 0.1},
            "scheduler": {"policy": policy, "max_num_batched_tokens": 64, "max_num_seqs": 4, "async_scheduling": asyn},
            "classes": {f"C{k}": {"priority": k, "arrival": {"rate": 0}} for k in range(3)},
            "trace": {"path": str(path), "assign": {"by": "column"}}}
    res = simulate(from_dict(data), around=lambda rules: Around(rules, checked))
    assert set(res.requests["status"]) <= {"finished", "rejected"}
    fin = res.requests[res.requests["status"] == "finished"]
    computed = int((res.steps["prefill_tokens"] + res.steps["decode_tokens"]).sum())
    assert computed == int((fin.prompt_tokens + fin.output_tokens - 1 + fin.recomputed_tokens
                            - fin.cached_tokens_all).sum())
    assert np.all(fin["cached_tokens"] < fin["prompt_tokens"])
