"""Seeded random workloads for the differential corpus, one generator per mode.

Each mode exercises one group of vLLM rules (see `MODES`); within a mode the knobs, the KV
tightness, the arrival pattern and the lengths are drawn at random. A workload is determined by
its seed string `"<mode>:<index>:<attempt>"` (Python's `random.Random(str)` is stable across
processes and versions). Standard library only: this module runs in both virtual environments.

A workload is a dict: `config` (the keys of `corpus.CONFIG_KEYS`) and `requests`, each
`{arrival_step, prompt_len, output_len, priority, prefix_group, prefix_tokens, parent, think}`.
A later turn of a conversation (`parent` >= 0) has `arrival_step` None: the recorder sets it to
`think` steps after the step in which the parent's last token is sampled (+1), because a user
sends the next turn only after reading the answer.
"""

from __future__ import annotations

import random

MODES: dict[str, str] = {
    "fcfs": "fcfs policy, no chunk cap, KV from roomy to tight",
    "priority": "priority policy, no chunk cap, KV from roomy to tight",
    "threshold": "long_prefill_token_threshold on (both policies), incl. single-request 'alone' workloads",
    "adaptive": "long_prefill_token_threshold with long_prefill_token_threshold_adaptive (both policies)",
    "preemption": "tight KV with recompute preemption (both policies)",
    "watermark": "watermark > 0 (both policies), moderate to tight KV",
    "async": "async scheduling (AsyncScheduler), both policies, thresholds, tight KV, watermark",
    "prefix": "prefix caching with shared system prompts and multi-turn conversations",
    "prefix-async": "prefix caching and async scheduling together (vLLM 0.33's defaults)",
}

MAX_REQUESTS = 40


def _seats(rng: random.Random, budget: int) -> int:
    return min(rng.choice([1, 2, 3, 4, 4, 6, 8, 8, 12, 16]), budget)


def _length(rng: random.Random, short: tuple[int, int], long: tuple[int, int], p_long: float) -> int:
    lo, hi = long if rng.random() < p_long else short
    return rng.randint(lo, hi)


def _arrivals(rng: random.Random, n: int) -> list[int]:
    """Arrival steps (sorted) in one of a few patterns: burst, steady, sparse or mixed."""
    pattern = rng.choice(["burst", "steady", "steady", "sparse", "mixed"])
    if pattern == "burst":
        return sorted(rng.randint(0, 3) for _ in range(n))
    mean = {"steady": rng.uniform(0.5, 6), "sparse": rng.uniform(8, 40), "mixed": rng.uniform(1, 15)}[pattern]
    t, out = rng.randint(0, 3), []
    for _ in range(n):
        out.append(t)
        gap = rng.expovariate(1 / mean)
        if pattern == "mixed" and rng.random() < 0.3:
            gap = 0
        t += int(gap)
    return out


def _blocks(p: int, o: int, bs: int) -> int:
    return -(-(p + o) // bs)


def _kv(rng: random.Random, requests: list[dict], bs: int, tightness: str) -> int:
    """vLLM's `num_gpu_blocks` (usable + the null block) for a tightness level; every request fits
    alone (else vLLM would deadlock and the engine would reject it at arrival)."""
    need = max(_blocks(r["prompt_len"], r["output_len"], bs) for r in requests)
    total = sum(_blocks(r["prompt_len"], r["output_len"], bs) for r in requests)
    if tightness == "roomy":
        usable = max(need, total) + rng.randint(0, 4)
    elif tightness == "moderate":
        usable = need + rng.randint(0, max(total - need, 0) // 2 + 1)
    else:  # tight
        usable = need + rng.randint(0, max(need // 2, 1))
    return usable + 1


def _base_requests(rng: random.Random, n: int, *, p_long: float = 0.3, long_out: float = 0.2,
                   prompt_short=(1, 64), prompt_long=(65, 600), out_short=(1, 40), out_long=(41, 150)) -> list[dict]:
    steps = _arrivals(rng, n)
    return [
        {
            "arrival_step": t,
            "prompt_len": _length(rng, prompt_short, prompt_long, p_long),
            "output_len": _length(rng, out_short, out_long, long_out),
            "priority": rng.randint(0, 3),
            "prefix_group": -1,
            "prefix_tokens": 0,
            "parent": -1,
            "think": 0,
        }
        for t in steps
    ]


def _config(rng: random.Random, **over) -> dict:
    bs = rng.choice([4, 8, 16])
    budget = rng.choice([16, 32, 48, 64, 96, 128, 256, 512])
    cfg = {
        "num_gpu_blocks": 0,
        "block_size": bs,
        "max_num_batched_tokens": budget,
        "max_num_seqs": _seats(rng, budget),
        "long_prefill_token_threshold": 0,
        "long_prefill_token_threshold_adaptive": False,
        "watermark": 0.0,
        "policy": rng.choice(["fcfs", "priority"]),
        "async_scheduling": False,
        "enable_prefix_caching": False,
    }
    cfg.update(over)
    return cfg


def _threshold(rng: random.Random, budget: int) -> int:
    return rng.choice([t for t in (4, 8, 12, 16, 24, 32, 48, 64, 100, 128, 200) if t < budget] or [max(budget // 2, 1)])


def _alone(rng: random.Random) -> list[dict]:
    """One to three requests, far apart, with prompts longer than the cap: each runs alone."""
    n = rng.randint(1, 3)
    reqs, t = [], 0
    for _ in range(n):
        p, o = rng.randint(40, 700), rng.randint(1, 20)
        reqs.append({"arrival_step": t, "prompt_len": p, "output_len": o, "priority": rng.randint(0, 3),
                     "prefix_group": -1, "prefix_tokens": 0, "parent": -1, "think": 0})
        t += rng.randint(60, 120)
    return reqs


def _prefix_requests(rng: random.Random, n: int, bs: int) -> list[dict]:
    """Shared system prompts (per-request group and length), repeated identical prompts, and a few
    multi-turn conversations (at most 3 of at most 4 turns, within MAX_REQUESTS)."""
    reqs = _base_requests(rng, min(n, MAX_REQUESTS - 12), p_long=0.15, prompt_long=(65, 300))
    groups = [rng.choice([rng.randint(1, 3 * bs), rng.randint(bs, 200), bs * rng.randint(1, 12)])
              for _ in range(rng.randint(1, 3))]
    for r in reqs:
        u = rng.random()
        if u < 0.75:
            g = rng.randrange(len(groups))
            r["prefix_group"], r["prefix_tokens"] = g, groups[g]
            # mostly a system prompt plus a unique question; sometimes the very same prompt again
            # (a repeated request: its whole prompt is cached, and the hit stops one token short)
            r["prompt_len"] = groups[g] + (0 if u < 0.08 else rng.randint(1, 80))
    if rng.random() < 0.4:
        next_group = len(groups)
        for _ in range(rng.randint(1, 3)):
            first = {"arrival_step": rng.randint(0, 30), "prompt_len": rng.randint(5, 150),
                     "output_len": rng.randint(1, 40), "priority": rng.randint(0, 3), "prefix_group": next_group,
                     "parent": -1, "think": 0}
            first["prefix_tokens"] = first["prompt_len"]
            reqs.append(first)
            parent = len(reqs) - 1
            for _ in range(rng.randint(1, 3)):
                prev = reqs[parent]
                p = prev["prompt_len"] + prev["output_len"] + rng.randint(1, 60)
                reqs.append({"arrival_step": None, "prompt_len": p, "output_len": rng.randint(1, 40),
                             "priority": prev["priority"], "prefix_group": next_group, "prefix_tokens": p,
                             "parent": parent, "think": rng.randint(1, 15)})
                parent = len(reqs) - 1
            next_group += 1
    return reqs


def generate(mode: str, index: int, attempt: int = 0) -> dict:
    """The workload `index` of `mode` (a later `attempt` when an earlier one was too long)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    seed = f"{mode}:{index}:{attempt}"
    rng = random.Random(seed)
    n = rng.randint(5, MAX_REQUESTS)
    tight = rng.choice(["roomy", "moderate", "moderate", "tight"])
    if mode == "fcfs":
        cfg = _config(rng, policy="fcfs")
        reqs = _base_requests(rng, n)
    elif mode == "priority":
        cfg = _config(rng, policy="priority")
        reqs = _base_requests(rng, n)
    elif mode in ("threshold", "adaptive"):
        cfg = _config(rng)
        cfg["long_prefill_token_threshold"] = _threshold(rng, cfg["max_num_batched_tokens"])
        cfg["long_prefill_token_threshold_adaptive"] = mode == "adaptive"
        reqs = _alone(rng) if rng.random() < 0.25 else _base_requests(rng, n, p_long=0.5)
    elif mode == "preemption":
        cfg = _config(rng)
        tight = "tight"
        reqs = _base_requests(rng, n, long_out=0.5, out_long=(41, 200))
    elif mode == "watermark":
        cfg = _config(rng, watermark=rng.choice([0.01, 0.02, 0.05, 0.05, 0.1, 0.1, 0.15, 0.2, 0.3]))
        tight = rng.choice(["moderate", "tight"])
        reqs = _base_requests(rng, n)
    elif mode == "async":
        cfg = _config(rng, async_scheduling=True)
        if rng.random() < 0.4:
            cfg["long_prefill_token_threshold"] = _threshold(rng, cfg["max_num_batched_tokens"])
        if rng.random() < 0.25:
            cfg["watermark"] = rng.choice([0.02, 0.05, 0.1, 0.2])
        reqs = _base_requests(rng, n, long_out=0.3)
    else:  # prefix, prefix-async
        cfg = _config(rng, enable_prefix_caching=True, async_scheduling=mode == "prefix-async")
        if rng.random() < 0.3:
            cfg["long_prefill_token_threshold"] = _threshold(rng, cfg["max_num_batched_tokens"])
        reqs = _prefix_requests(rng, n, cfg["block_size"])
    cfg["num_gpu_blocks"] = _kv(rng, reqs, cfg["block_size"], tight)
    return {"id": f"{mode}-{index:04d}", "seed": seed, "config": cfg, "requests": reqs}
