"""Sizing a P0 reserve for the traffic at hand: the smallest token or KV reserve that keeps the
top class inside its TTFT SLO, and what it costs.

Two rounds of runs, each run in parallel through the sweep machinery (`engine.sweep.run_summaries`,
the caller passes it in): a coarse grid from no reserve up to half the budget (or half the KV
cache), then a fine grid between the last setting that missed and the first that met. "Meets" is
stable: the setting and every larger one on the grid keep the top class's P99 TTFT within its SLO,
and the setting turns no more requests away than no reserve did (rejecting is not meeting an
SLO). Pure: no streamlit import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.scenario import Scenario, ScenarioError, apply_overrides, from_dict, to_dict

from .sweeps import KNOBS

COARSE, FINE = 7, 3
NO_RESERVES = {"mitigations.p0_token_reserve": 0, "mitigations.p0_kv_reserve": 0}
Summarize = Callable[[list[str]], list[dict]]  # scenario keys → summaries, in order


@dataclass
class Sizing:
    """The answer for one knob: the smallest setting that meets the SLO (None: none on the grid),
    the summaries at no reserve and at that setting, and every setting tried (value → summary)."""

    knob: str
    slo: float
    value: float | None
    base: dict
    at: dict | None
    tried: dict[float, dict] = field(default_factory=dict)
    refused: dict[float, str] = field(default_factory=dict)

    def costs(self) -> dict[str, float | None]:
        """What the reserve costs against no reserve: throughput and batch fill change (shares),
        the idle reserve, and each other class's P99 TTFT ratio."""
        if self.at is None:
            return {}
        b, a = self.base, self.at
        out = {"throughput": a["throughput_tok_s"] / b["throughput_tok_s"] - 1 if b["throughput_tok_s"] else None,
               "batch_fill": a["batch_fill"] - b["batch_fill"],
               "reserve_idle": a["reserve_idle_token_frac"]}
        for name, c in list(a["classes"].items())[1:]:
            before = b["classes"].get(name, {}).get("ttft_p99")
            out[f"{name}.ttft_p99"] = (c["ttft_p99"] / before) if before and c["ttft_p99"] is not None else None
        return out


def top_of(sc: Scenario) -> tuple[str, float | None]:
    name = sc.class_names[0]
    return name, sc.classes[name].slo.ttft_s


def upper(sc: Scenario, knob: str, kv_blocks: int) -> int:
    if knob == "reserve":
        return max(sc.scheduler.max_num_batched_tokens // 2, 64)
    return max(kv_blocks // 2, 16)


def grid(lo: float, hi: float, n: int, step: int) -> list[float]:
    vals = np.unique(np.round(np.linspace(lo, hi, n) / step) * step)
    return [float(v) for v in vals if lo <= v <= hi]


def _meets(s: dict, top: str, slo: float, rejected: int) -> bool:
    c = s["classes"].get(top, {})
    p99 = c.get("ttft_p99")
    return p99 is not None and p99 <= slo and s["rejected"] + s["unfinished"] <= rejected


def size(sc: Scenario, knob: str, kv_blocks: int, summarize: Summarize,
         why_not: Callable[[Scenario], str | None] | None = None) -> Sizing | None:
    """The smallest `knob` ("reserve": tokens, "kvres": KV blocks) that keeps the top class in its
    TTFT SLO on `sc`'s traffic and settings with no other reserve; None if the top class has no
    TTFT SLO."""
    top, slo = top_of(sc)
    if slo is None:
        return None
    k = KNOBS[knob]
    step = 64 if knob == "reserve" else 16
    base_data = apply_overrides(to_dict(sc), NO_RESERVES)  # each reserve sized alone, from none at all

    def point(v: float) -> Scenario:
        return from_dict(apply_overrides(base_data, k.overrides(sc, v, None)))

    out = Sizing(knob, slo, None, {}, None)

    def run(values: list[float]) -> None:
        keys, vals = [], []
        for v in values:
            if v in out.tried or v in out.refused:
                continue
            try:
                p = point(v)
                reason = why_not(p) if why_not else None
            except ScenarioError as err:
                reason = str(err)
            if reason:
                out.refused[v] = reason
                continue
            keys.append(p.key())
            vals.append(v)
        for v, s in zip(vals, summarize(keys)):
            out.tried[v] = s

    run(grid(0, upper(sc, knob, kv_blocks), COARSE, step))
    if 0.0 not in out.tried:
        return out
    out.base = out.tried[0.0]
    lost = out.base["rejected"] + out.base["unfinished"]

    def first_stable() -> float | None:
        """The smallest setting of the stable suffix (every larger setting keeps the P99 within
        the SLO) that turns no more requests away than no reserve."""
        vals = sorted(out.tried)
        suffix: list[float] = []
        for v in reversed(vals):
            p99 = out.tried[v]["classes"].get(top, {}).get("ttft_p99")
            if p99 is None or p99 > slo:
                break
            suffix.append(v)
        fair = [v for v in reversed(suffix) if _meets(out.tried[v], top, slo, lost)]
        return fair[0] if fair else None

    first = first_stable()
    if first is not None and first > 0:
        below = max(v for v in out.tried if v < first)
        run(grid(below, first, FINE + 2, step)[1:-1])
        first = first_stable()
    out.value = first
    out.at = out.tried.get(first) if first is not None else None
    return out
