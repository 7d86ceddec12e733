"""The workshop's recap: every remedy on the same traffic, side by side.

Each remedy is a set of overrides on classic-inversion (the traffic of most lessons), labelled as
the workshop named it; the table says what it did for P0 and what it cost P1, P2 and the machine.
Pure: summaries in, a table out.
"""

from __future__ import annotations

import pandas as pd

from engine.config.scenario import Scenario, load

from .i18n import N_, _
from .text import percent, seconds

TRAFFIC = "classic-inversion"
REMEDIES: list[tuple[str, dict]] = [
    (N_("vLLM FCFS (no remedy)"), {}),
    (N_("vLLM priority policy"), {"scheduler.policy": "priority"}),
    (N_("fill what fits (backfill)"), {"scheduler.policy": "backfill"}),
    (N_("priority + inheritance"), {"scheduler.policy": "priority", "mitigations.inheritance": True}),
    (N_("priority + 1024-token reserve"), {"scheduler.policy": "priority", "mitigations.p0_token_reserve": 1024}),
    (N_("priority + 400-block KV reserve"), {"scheduler.policy": "priority", "mitigations.p0_kv_reserve": 400}),
    (N_("preempt lower priority for P0"), {"scheduler.policy": "preempt"}),
    (N_("priority + aging (10 s)"), {"scheduler.policy": "priority", "mitigations.aging_s": 10.0}),
    (N_("FCFS + P2 prompts split at 8192"), {"classes.P2.caps.max_prompt_tokens": 8192,
                                             "classes.P2.caps.over_cap": "split"}),
    (N_("FCFS + at most 1 P2 running"), {"classes.P2.caps.max_running": 1}),
    (N_("2 GPUs: P0 + P1 on one, P2 on the other"), {"replicas.count": 2, "replicas.routing": "pinned",
                                                      "replicas.pin": {"P0": [0], "P1": [0], "P2": [1]}}),
]


def scenarios() -> list[Scenario]:
    return [load(TRAFFIC, o) for _label, o in REMEDIES]


def table(summaries: list[dict]) -> pd.DataFrame:
    """One row per remedy: label, the numbers (for sorting and charts) and their shown text."""
    rows = []
    for (label, _o), s in zip(REMEDIES, summaries):
        c = s["classes"]
        p0, p1, p2 = c["P0"], c["P1"], c["P2"]
        rows.append({
            "label": _(label), "p0_p99": p0["ttft_p99"], "p0_slo": p0["slo_attainment"],
            "p1_p99": p1["ttft_p99"], "p2_e2e": p2["e2e_p99"], "throughput": s["served_tok_s"],
            "gpus": s.get("gpus", 1), "lost": sum(int(k["rejected"]) + int(k["unfinished"]) for k in c.values()),
        })
    return pd.DataFrame(rows)


def shown(t: pd.DataFrame) -> pd.DataFrame:
    """The table as the page and the handout show it (translated headers, formatted numbers)."""
    return pd.DataFrame({
        _("Remedy"): t["label"],
        _("P0 P99 TTFT"): [seconds(v) for v in t["p0_p99"]],
        _("P0 SLO met"): [percent(v) for v in t["p0_slo"]],
        _("P1 P99 TTFT"): [seconds(v) for v in t["p1_p99"]],
        _("P2 P99 end to end"): [seconds(v) for v in t["p2_e2e"]],
        _("Served rate (tok/s)"): [f"{v:,.0f}" for v in t["throughput"]],
        _("GPUs"): t["gpus"].astype(str),
        _("Not served"): t["lost"].astype(str),
    })
