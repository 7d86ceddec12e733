"""Why the top class waited, over seeds: its blocked time by wait reason, and the sizes a remedy
is cut to.

The workshop ends with a decision (`engine.remedy_rule`, `ui.decision`): from what the top class
(P0) waited on to the remedy. That starts here. `tally(result)` keeps, of one run, what the rule
needs and nothing else — the top class's wait seconds by reason (each wait segment counts under
its reason: a segment opens when a request's reason changes, `engine.observe`), the KV blocks its
KV waits needed, its prompt sizes, and which lower class held the most KV while it waited and how
many blocks one of its requests held. It is small and picklable, so a page worker sends it back
with a seed's `RunSamples`. `diagnose(tallies)` pools the seeds: each reason's **share of the top
class's wait** as Σ seconds on that reason / Σ wait seconds over every seed, with the seeds' own
shares' min–max (DESIGN §6: a conclusion says its spread), and the sizes pooled over the seeds.

Pure: numpy and pandas only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .evidence import Estimate
from .reasons import LABELS

SIZE_Q = 90  # sizes are cut to the 90th percentile of what was needed: most waits covered, not the one worst


@dataclass(frozen=True)
class RunTally:
    """One run's top class: what it waited on and the sizes a remedy would need.

    `seconds`: wait seconds by reason (reasons with none left out). `kv_need`: blocks the whole
    prompt needed at each KV wait (`kv_short` segments). `prompts`: prompt tokens of its measured
    requests. `holder_seconds`: lower class → seconds of KV waits during which one of its requests
    was the biggest holder; `holder_blocks`: lower class → blocks that holder held, one per wait.
    `budget`, `kv_blocks`, `block_size`: the run's token budget per step, usable KV blocks per
    replica and tokens per block. `policy`: the scheduling policy it ran."""

    top: str
    priority: int
    seconds: dict[str, float]
    kv_need: tuple[int, ...]
    prompts: tuple[int, ...]
    holder_seconds: dict[str, float]
    holder_blocks: dict[str, tuple[int, ...]]
    budget: int
    kv_blocks: int
    policy: str
    block_size: int = 16


def tally(result) -> RunTally:
    """The top class's waits of one run (an `engine.result.Result`)."""
    from .scenario import device_batch_defaults

    sc = result.scenario
    req, waits, holders = result.requests, result.waits, result.holders
    top = sc.class_names[0]
    prio = int(sc.request_class(top).priority)
    w = waits[waits["priority"] == prio] if len(waits) else waits
    by = w.groupby(w["reason"].astype(str))["duration_s"].sum() if len(w) else {}
    seconds = {str(k): float(v) for k, v in dict(by).items() if v > 0}
    kv = w[w["reason"].astype(str) == "kv_short"] if len(w) else w
    need = tuple(int(x) for x in kv["need_blocks"].to_numpy() if x > 0) if len(kv) else ()
    mine = req[(req["class"].astype(str) == top) & req["measured"]] if len(req) else req
    prompts = tuple(int(x) for x in mine["prompt_tokens"].to_numpy()) if len(mine) else ()
    holder_seconds: dict[str, float] = {}
    holder_blocks: dict[str, list[int]] = {}
    if len(kv) and len(holders):
        first = holders[(holders["rank"] == 0) & ~holders["alert"] & (holders["priority"] > prio)]
        got = kv[["id", "duration_s"]].merge(first[["wait", "class", "blocks"]], left_on="id", right_on="wait")
        for cls, d, b in zip(got["class"].astype(str), got["duration_s"], got["blocks"]):
            holder_seconds[cls] = holder_seconds.get(cls, 0.0) + float(d)
            holder_blocks.setdefault(cls, []).append(int(b))
    budget = device_batch_defaults(sc.scheduler, sc.hardware)[0].max_num_batched_tokens
    return RunTally(top, prio, seconds, need, prompts, holder_seconds,
                    {k: tuple(v) for k, v in holder_blocks.items()}, int(budget),
                    int(result.memory.usable_blocks), str(sc.scheduler.policy), int(result.memory.block_size))


@dataclass(frozen=True)
class Diagnosis:
    """The top class's waits over N seeds (module docstring).

    `shares`: reason → `Estimate` of its share of the wait (pooled value, seeds' min–max,
    per seed; a seed that did not wait has no share), most time first. `wait_s`: the top class's
    wait seconds per run (mean and range). `kv_need`, `prompt`: the `SIZE_Q`th percentile of the
    blocks its KV waits needed and of its prompt tokens, pooled over the seeds (None without any).
    `holder`: the lower class that held the most KV during its KV waits (None if none did) and
    `holder_blocks` the `SIZE_Q`th percentile of what one of its requests held then."""

    top: str
    priority: int
    seeds: int
    shares: dict[str, Estimate]
    wait_s: Estimate
    kv_need: int | None
    prompt: int | None
    holder: str | None
    holder_blocks: int | None
    budget: int
    kv_blocks: int
    policy: str
    block_size: int = 16

    def share(self, reason: str) -> float:
        e = self.shares.get(reason)
        return float(e.value) if e is not None and e.value is not None else 0.0

    @property
    def waited(self) -> bool:
        return bool(self.wait_s.value)


def _q(values: Sequence[int]) -> int | None:
    return int(np.ceil(np.round(np.percentile(np.asarray(values, float), SIZE_Q), 6))) if len(values) else None


def diagnose(tallies: Sequence[RunTally]) -> Diagnosis:
    """Pool the seeds' tallies (all of one scenario, in seed order)."""
    if not tallies:
        raise ValueError("diagnose: no runs")
    first = tallies[0]
    totals = [sum(t.seconds.values()) for t in tallies]
    pooled = sum(totals)
    order = [r for r in LABELS if any(r in t.seconds for t in tallies)]
    shares = {}
    for r in order:
        per = tuple((t.seconds.get(r, 0.0) / tot) if tot > 0 else None for t, tot in zip(tallies, totals))
        vals = [v for v in per if v is not None]
        value = sum(t.seconds.get(r, 0.0) for t in tallies) / pooled if pooled > 0 else None
        shares[r] = Estimate(value, min(vals, default=None), max(vals, default=None), per, method="ratio")
    shares = dict(sorted(shares.items(), key=lambda kv: -(kv[1].value or 0.0)))
    wait = Estimate(float(np.mean(totals)), min(totals), max(totals), tuple(totals), method="mean")
    held: dict[str, float] = {}
    for t in tallies:
        for cls, s in t.holder_seconds.items():
            held[cls] = held.get(cls, 0.0) + s
    holder = max(sorted(held), key=lambda c: held[c]) if held else None
    blocks = [b for t in tallies for b in t.holder_blocks.get(holder, ())] if holder else []
    return Diagnosis(first.top, first.priority, len(tallies), shares, wait,
                     _q([n for t in tallies for n in t.kv_need]), _q([p for t in tallies for p in t.prompts]),
                     holder, _q(blocks), first.budget, first.kv_blocks, first.policy, first.block_size)
