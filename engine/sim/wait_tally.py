"""One run's record of what its top class waited on, kept small for the trip back from a worker.

`tally(result)` keeps, of one run, what the decision's rule needs (`engine.sweeps.diagnosis`,
`engine.sweeps.remedy_rule`) and nothing else: the top class's wait seconds by reason (each wait segment
counts under its reason: a segment opens when a request's reason changes, `engine.sim.observe`), the
KV blocks its KV waits needed, its prompt sizes, and which lower class held the most KV while it
waited and how many blocks one of its requests held. Small and picklable, so `RunSamples` carries
it back from a page worker. Pure: pandas only.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    """The top class's waits of one run (an `engine.sim.result.Result`)."""
    from ..config.scenario import device_batch_defaults

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
