"""The step-time table of the GPU & memory page: what a decode or prefill step costs.

Pure: the scenario's cost model in, a small table out (milliseconds per part).
"""

from __future__ import annotations

import pandas as pd

from engine.cost import make_step_cost
from engine.memory import MemoryBreakdown
from engine.scenario import Scenario

from .i18n import _

CONTEXT = 1000  # tokens of context per decoding request in the examples


def step_table(sc: Scenario, mem: MemoryBreakdown) -> pd.DataFrame:
    """Decode steps of 1–128 requests (one token each on a ~1k-token context) and one full-budget
    prefill chunk, with compute, memory, overhead and total time in ms."""
    cost = make_step_cost(sc.cost, mem)
    rows = []
    for b in (1, 8, 32, 128):
        rows.append({"case": _("decode ×{b}").format(b=b), **cost.parts(b, b * CONTEXT, b * CONTEXT)})
    budget = sc.scheduler.max_num_batched_tokens
    rows.append({"case": _("prefill {n:,} tok").format(n=budget), **cost.parts(budget, budget * budget / 2, budget)})
    df = pd.DataFrame(rows)
    for k in ("compute_s", "memory_s", "overhead_s", "step_s"):
        df[k.replace("_s", "_ms")] = (df.pop(k) * 1000).round(2)
    return df
