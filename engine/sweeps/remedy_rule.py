"""The rule from a diagnosis to remedies: what the top class waited on → what to try, and how big.

Read it top to bottom; every remedy is a set of scenario overrides (the dotted keys the lessons
and `--set` use), its size taken from the run (`engine.sweeps.diagnosis`), never typed in:

1. **The queue's order** (`scheduler.policy` is `fcfs` or `backfill`, and P0 waited at all) →
   `scheduler.policy: priority`. Under FCFS a P0 queues behind every earlier arrival of any class
   (`head_of_line` behind a document that does not fit, `preempted` as the newest admission);
   under backfill later, smaller requests overtake it into whatever frees up. Both are the order,
   so priority comes first, the same traffic is diagnosed again under priority (the order hides
   what P0 would wait on next), and every other remedy below is tried on top of it.
2. **`token_budget`** (≥ `SIGNIFICANT` of P0's wait) → a *lendable* token reserve
   (`mitigations.p0_token_reserve`, `reserve_mode: lendable`) the size of P0's 90th-percentile
   prompt, rounded up to `TOKEN_STEP`: one arriving P0 prompt of that size then prefills in its
   first step even when the others could use the whole budget; lendable, because a strict
   reserve idles whenever no P0 waits — that idle budget is capacity lost. At most half the
   budget (as the sizing aid searches), so the others keep a step.
3. **`kv_short`** (with `head_of_line` and `preempted` when the order is already by priority:
   then the request ahead of a waiting P0 is a P0 waiting for blocks, and a P0 is evicted only
   for blocks) ≥ `SIGNIFICANT` →
   - a KV reserve (`mitigations.p0_kv_reserve`) of the blocks P0's KV waits needed (their 90th
     percentile, rounded up to `BLOCK_STEP`): lower classes can then never take the blocks a
     P0 prompt of that size needs; at most half the cache;
   - when one lower class held the most KV while P0 waited (the "long low-priority holders"):
     if one of its requests held more than half a step's budget of tokens (90th percentile of
     the blocks it held × block size), its prompts are split into pieces of half the budget
     (`classes.<holder>.caps.max_prompt_tokens`, `over_cap: split`, submitted in sequence): a
     piece never fills a step, and holds a fraction of the blocks the whole document did, so P0
     finds room between pieces; otherwise — many shorter holders — a cap on how many of them
     run at once (`classes.<holder>.caps.max_running`), as many as fit beside one P0 prompt:
     (KV blocks − P0's need) ÷ the blocks one of them held, at least 1.
4. **Several reasons** → every remedy above combined (overrides merged), as a candidate of its own.

`max_seqs`, `class_cap`, `reserve` and `gateway` have no rule here: they are settings of the
server or of the top class itself; the page says so when they matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .diagnosis import Diagnosis

SIGNIFICANT = 0.10  # a reason behind less than a tenth of P0's wait is not worth a remedy of its own
ORDERING = ("fcfs", "backfill")  # policies whose queue order lets lower classes ahead of P0
TOKEN_STEP = 256  # sizes are rounded up to these steps: a reserve reads as a setting, not a measurement
BLOCK_STEP = 16
NO_RULE = ("max_seqs", "class_cap", "reserve", "gateway")


@dataclass(frozen=True)
class Remedy:
    """A candidate: `parts` in the rule's order ("priority", "token_reserve", "kv_reserve",
    "holder_split" or "holder_cap"), `overrides` (dotted keys → values), `sizes` (part → tokens /
    blocks / running requests; `holder`: the capped class) and `answers` (the reasons it answers)."""

    parts: tuple[str, ...]
    overrides: dict[str, object]
    sizes: dict[str, object] = field(default_factory=dict)
    answers: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return "+".join(self.parts)


def _up(x: int, step: int) -> int:
    return -(-int(x) // step) * step


def kv_reasons(d: Diagnosis) -> tuple[str, ...]:
    """The reasons that are a wait for KV blocks under this policy (rule 3)."""
    return ("kv_short",) if d.policy in ORDERING else ("kv_short", "head_of_line", "preempted")


def reorder(d: Diagnosis) -> Remedy | None:
    """Rule 1: the order's fix, when the policy lets lower classes ahead of a P0 that waited."""
    if not d.waited or d.policy not in ORDERING:
        return None
    why = tuple(r for r in ("head_of_line", "preempted") if d.share(r) >= SIGNIFICANT)
    return Remedy(("priority",), {"scheduler.policy": "priority"}, {}, why)


def singles(d: Diagnosis) -> list[Remedy]:
    """Rules 2 and 3 on a diagnosis: each remedy alone, in the rule's order (empty if P0 never
    waited or waited on nothing they answer)."""
    if not d.waited:
        return []
    out = []
    if d.share("token_budget") >= SIGNIFICANT and d.prompt and d.budget >= 2 * TOKEN_STEP:
        tokens = min(_up(d.prompt, TOKEN_STEP), d.budget // 2 // TOKEN_STEP * TOKEN_STEP)
        out.append(Remedy(("token_reserve",), {"mitigations.p0_token_reserve": tokens,
                                               "mitigations.reserve_mode": "lendable"},
                          {"token_reserve": tokens}, ("token_budget",)))
    kv = tuple(r for r in kv_reasons(d) if d.share(r) > 0)
    if sum(d.share(r) for r in kv) >= SIGNIFICANT and d.kv_need:
        blocks = min(_up(d.kv_need, BLOCK_STEP), d.kv_blocks // 2 // BLOCK_STEP * BLOCK_STEP)
        if blocks > 0:
            out.append(Remedy(("kv_reserve",), {"mitigations.p0_kv_reserve": blocks}, {"kv_reserve": blocks}, kv))
        if d.holder and d.holder_blocks:
            piece = d.budget // 2 // TOKEN_STEP * TOKEN_STEP
            if d.holder_blocks * d.block_size > piece > 0:
                out.append(Remedy(("holder_split",), {f"classes.{d.holder}.caps.max_prompt_tokens": piece,
                                                      f"classes.{d.holder}.caps.over_cap": "split"},
                                  {"holder_split": piece, "holder": d.holder}, kv))
            else:
                running = max(1, (d.kv_blocks - d.kv_need) // d.holder_blocks)
                out.append(Remedy(("holder_cap",), {f"classes.{d.holder}.caps.max_running": running},
                                  {"holder_cap": running, "holder": d.holder}, kv))
    return out


def _join(items: list[Remedy]) -> Remedy:
    over, sizes, answers = {}, {}, []
    for r in items:
        over |= r.overrides
        sizes |= r.sizes
        answers += [a for a in r.answers if a not in answers]
    return Remedy(tuple(p for r in items for p in r.parts), over, sizes, tuple(answers))


def suggest(d: Diagnosis, after: Diagnosis | None = None) -> list[Remedy]:
    """The candidates to evaluate, without repeats. When the order needs fixing (rule 1), the rest
    of the rule reads `after` — the diagnosis of the same traffic under priority — because under
    FCFS the queue's order hides what P0 would wait on next (on classic-inversion P0's wait is
    three quarters `head_of_line`; under priority half of it is `kv_short`): the fix alone, then
    each remedy on top of it, then all of them; without `after`, only the fix. Otherwise each
    remedy alone and all of them combined (rule 4)."""
    first = reorder(d)
    if first is not None:
        rest = singles(after) if after is not None else []
        out = [first] + [_join([first, r]) for r in rest]
        return out + ([_join([first, *rest])] if len(rest) >= 2 else [])
    one = singles(d)
    return one + ([_join(one)] if len(one) >= 2 else [])
