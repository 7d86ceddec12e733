"""The workshop's recap: every remedy on the same traffic, side by side.

Each remedy is a set of overrides on classic-inversion (the traffic of most lessons), labelled as
the workshop named it; the table says what it did for P0 and what it cost P1, P2 and the machine,
over N seeds (the scenario's and the next N − 1, as every page takes them): each percentile pools
every seed's requests, with the seeds' min–max and "n < 100" where a seed had fewer (a recap is a
conclusion: one run's P0 P99 rests on about 40 requests). Pure: `RunSamples` in, a table out.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from engine.config.scenario import Scenario, load
from engine.sweeps.evidence import RunSamples, attainment, percentile, run_figure

from ..frame.i18n import N_, _
from ..frame.seeds import seed_keys
from ..panels import spread
from ..panels.text import percent, seconds

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


def keys(n: int) -> list[tuple[str, ...]]:
    """Per remedy, the scenario keys of its N seeds."""
    return [seed_keys(sc, n) for sc in scenarios()]


def table(over: Sequence[Sequence[RunSamples]]) -> pd.DataFrame:
    """One row per remedy (`over[i]`: its runs in seed order): label, the pooled numbers (for
    sorting and charts), their estimates over the seeds (for the shown cells) and requests lost."""
    rows = []
    for (label, _o), rs in zip(REMEDIES, over):
        p0, p1, p2 = (percentile(rs, "P0", "ttft_s", 99), percentile(rs, "P1", "ttft_s", 99),
                      percentile(rs, "P2", "e2e_s", 99))
        served = run_figure(rs, "served_tok_s")
        rows.append({
            "label": _(label), "p0_p99": p0.value, "p0": p0, "p0_slo": attainment(rs, "P0"), "p1": p1, "p2": p2,
            "throughput": served.value, "gpus": rs[0].summary.get("gpus", 1) if rs else 1,
            "lost": sum(int(c.counts["rejected"]) + int(c.counts["unfinished"])
                        for r in rs for c in r.classes.values()),
        })
    return pd.DataFrame(rows)


def shown(t: pd.DataFrame) -> pd.DataFrame:
    """The table as the page and the handout show it (translated headers, each figure pooled over
    the seeds with their min–max in brackets; "Not served" summed over the seeds)."""
    return pd.DataFrame({
        _("Remedy"): t["label"],
        _("P0 P99 TTFT"): [spread.cell(e, seconds) for e in t["p0"]],
        _("P0 SLO met"): [spread.cell(e, percent) for e in t["p0_slo"]],
        _("P1 P99 TTFT"): [spread.cell(e, seconds) for e in t["p1"]],
        _("P2 P99 end to end"): [spread.cell(e, seconds) for e in t["p2"]],
        _("Served rate (tok/s)"): [f"{v:,.0f}" for v in t["throughput"]],
        _("GPUs"): t["gpus"].astype(str),
        _("Not served"): t["lost"].astype(str),
    })
