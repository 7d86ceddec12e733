"""Why the top class waited, over seeds: its blocked time by wait reason, and the sizes a remedy
is cut to.

The workshop ends with a decision (`engine.sweeps.remedy_rule`, `ui.teach.decision`): from what the top class
(P0) waited on to the remedy. That starts here. Each run's `RunTally` (`engine.sim.wait_tally`,
carried by its `RunSamples`) holds the top class's wait seconds by reason and the sizes a remedy
needs; `diagnose(tallies)` pools the seeds: each reason's **share of the top
class's wait** as Σ seconds on that reason / Σ wait seconds over every seed, with the seeds' own
shares' min–max (DESIGN §6: a conclusion says its spread), and the sizes pooled over the seeds.

Pure: numpy and pandas only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.reasons import LABELS
from ..sim.wait_tally import RunTally
from .evidence import Estimate

SIZE_Q = 90  # sizes are cut to the 90th percentile of what was needed: most waits covered, not the one worst


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
