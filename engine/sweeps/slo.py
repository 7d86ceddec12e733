"""Does a run meet its SLOs? One predicate for every search that asks: `engine plan` (the fewest
GPUs), `engine capacity` (the most load) and the reserve-sizing aid.

A class *meets its SLO* in a run when its P99 TTFT ≤ `slo.ttft_s` and its P99 TPOT ≤ `slo.tpot_s`
(those set; a class without TPOTs, e.g. one-token outputs, cannot miss the TPOT) and none of its
measured requests was rejected (shedding included) or left unfinished (`criterion: p99`, the
default) — turning traffic away is not meeting an SLO — or when its SLO attainment (misses include
rejected and unfinished requests) ≥ `target` (`attainment`). A class without an SLO is not
checked. Over several seeds a setting meets the SLOs when every class does in every seed.
"""

from __future__ import annotations

import pandas as pd


def rows_ok(table: pd.DataFrame, criterion: str = "p99", target: float = 0.99) -> pd.Series:
    """Per row of a tidy table (run × class, `engine.sweeps.sweep_exec.summary_rows`): does this class
    meet its SLO in this run? (True without an SLO.)"""
    t = table
    slo_ttft = pd.to_numeric(t["slo_ttft_s"], errors="coerce")
    slo_tpot = pd.to_numeric(t["slo_tpot_s"], errors="coerce")
    has = slo_ttft.notna() | slo_tpot.notna()
    if criterion == "attainment":
        att = pd.to_numeric(t["slo_attainment"], errors="coerce")
        ok = ~(att < target)  # NaN: no measured request of the class
    else:
        ok = ~(t["ttft_p99"] > slo_ttft) & ~(t["tpot_p99"] > slo_tpot)
        ok &= (t["rejected"].fillna(0) == 0) & (t["unfinished"].fillna(0) == 0)
    return (~has | ok).astype(bool)


def classes_ok(summary: dict, sc, criterion: str = "p99", target: float = 0.99) -> dict[str, bool]:
    """Per class of one run's summary (of scenario `sc`): does it meet its SLO? (`rows_ok` on the
    run's tidy rows, so the rule is written once.)"""
    from .sweep_exec import summary_rows

    rows = pd.DataFrame(summary_rows(summary, sc))
    return dict(zip(rows["class"], rows_ok(rows, criterion, target).tolist()))
