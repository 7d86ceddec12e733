"""The recap quotes figures over seeds (`ui.teach.recap`): each remedy's percentiles pooled over its
seeds' requests, with the seeds' min–max, and what was lost summed over every seed."""

import numpy as np

from engine.sweeps.evidence import over_seeds
from ui.teach import recap


def test_the_recap_pools_every_remedys_seeds_and_shows_their_range():
    over = [over_seeds(sc, [7, 8]) for sc in recap.scenarios()]
    t = recap.table(over)
    assert len(t) == len(recap.REMEDIES) and set(t["gpus"]) == {1, 2}
    for (_label, _o), rs, (_i, row) in zip(recap.REMEDIES, over, t.iterrows()):
        pooled = np.concatenate([r.classes["P0"].values["ttft_s"] for r in rs])
        assert row["p0_p99"] == np.percentile(pooled, 99)  # every seed's P0 requests together
        assert row["p0"].per_seed == tuple(np.percentile(r.classes["P0"].values["ttft_s"], 99) for r in rs)
        assert row["throughput"] == np.mean([r.summary["served_tok_s"] for r in rs])
        assert row["lost"] == sum(r.summary["rejected"] + r.summary["unfinished"] for r in rs)
    shown = recap.shown(t)
    fcfs = shown.iloc[0]
    lo, hi = t.iloc[0]["p0"].lo, t.iloc[0]["p0"].hi
    assert fcfs["P0 P99 TTFT"].startswith(f"{t.iloc[0]['p0_p99']:.3g} s (") and f"{hi:.3g} s)" in fcfs["P0 P99 TTFT"]
    assert lo < hi and fcfs["P0 P99 TTFT"].endswith("· n < 100")  # about 40 P0 requests a seed
    assert "(" in fcfs["P0 SLO met"] and "(" in fcfs["P2 P99 end to end"]
