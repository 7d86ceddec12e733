"""Sizing a P0 reserve for the traffic at hand: the smallest token or KV reserve that keeps the
top class inside its SLO on several seeds, and what it costs — or, when none does, why not.

A setting *meets* on a seed when the top class meets its SLO there by the predicate every search
shares (`engine.sweeps.slo`: P99 TTFT and TPOT within the SLO, none of its requests rejected or
unfinished) and the run turns away no more requests of any class (rejected + unfinished) than no
reserve does on that seed: a KV reserve that leaves a document no room to fit "meets" P0's SLO
by rejecting the document, which is not meeting it. The answer is the smallest setting that meets
on every seed (not the setting with the lowest P99).

Runs go through the caller's `summarize` (the app: the shared worker pool), in rounds: a coarse
grid from no reserve up to half the budget (or half the KV cache) on the first seed, then a finer
grid below the first setting that meets there and every setting above it on the grid does too
(a dip below the SLO that does not last is noise, not an answer); then that setting and no
reserve on the other seeds (`SEEDS`: the scenario's seed and the next ones); if it misses on one,
the next larger setting that met is tried on them. About 14 runs a knob with 3 seeds (10 before
seeds). Pure: no streamlit import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.config.scenario import Scenario, ScenarioError, apply_overrides, from_dict, to_dict
from engine.sweeps.evidence import default_seeds, mean_of
from engine.sweeps.slo import classes_ok

from .sweeps import KNOBS

COARSE, FINE = 7, 3
SEEDS = 3  # the scenario's seed and the next two
CONFIRM_ROUNDS = 3  # candidates tried on the other seeds before giving up
NO_RESERVES = {"mitigations.p0_token_reserve": 0, "mitigations.p0_kv_reserve": 0}
Summarize = Callable[[list[str]], list[dict]]  # scenario keys → summaries, in order


def lost(s: dict) -> dict[str, int]:
    """Requests a run turned away or left unfinished, per class (classes with none left out)."""
    return {n: int(c["rejected"]) + int(c["unfinished"]) for n, c in s["classes"].items()
            if int(c["rejected"]) + int(c["unfinished"])}


@dataclass
class Sizing:
    """The answer for one knob. `tried`: value → the first seed's summary (the grid); `seeded`:
    value → every seed's summary (the answer and no reserve, in seed order)."""

    knob: str
    top: str
    slo: float
    seeds: list[int]
    value: float | None = None
    tried: dict[float, dict] = field(default_factory=dict)
    seeded: dict[float, list[dict]] = field(default_factory=dict)
    refused: dict[float, str] = field(default_factory=dict)
    sc: Scenario | None = field(default=None, repr=False)

    @property
    def base(self) -> dict:
        return self.tried.get(0.0, {})

    @property
    def at(self) -> dict | None:
        return self.tried.get(self.value) if self.value is not None else None

    def top_ok(self, s: dict) -> bool:
        """The top class meets its SLO in this run (engine.sweeps.slo)."""
        return classes_ok(s, self.sc).get(self.top, False)

    def meets(self, s: dict, base: dict) -> bool:
        """The top class meets its SLO and no class lost more requests than without a reserve."""
        return self.top_ok(s) and sum(lost(s).values()) <= sum(lost(base).values())

    def p99(self, value: float) -> dict:
        """The top class's P99 TTFT at `value` over the seeds run there: mean, min–max, per seed."""
        runs = self.seeded.get(value) or [self.tried[value]]
        return mean_of([s["classes"][self.top]["ttft_p99"] for s in runs]).to_dict()

    def why_not(self) -> dict | None:
        """When nothing meets: the smallest setting at which the top class's P99 was within its SLO
        on the first seed, and what kept it from counting — classes that lost requests there, a
        larger setting that missed again, or a seed that missed. None if the P99 never got there."""
        if self.value is not None or not self.base:
            return None
        vals = sorted(self.tried)
        within = [v for v in vals if self.top_ok(self.tried[v])]
        if not within:
            return None
        v = within[0]
        base_lost = lost(self.base)
        more = [n for n, k in lost(self.tried[v]).items() if k > base_lost.get(n, 0)]
        later = [w for w in vals if w > v and not self.top_ok(self.tried[w])]
        seeds = [self.seeds[i] for i, s in enumerate(self.seeded.get(v, [])) if not self.top_ok(s)]
        return {"value": v, "p99": self.tried[v]["classes"][self.top]["ttft_p99"], "lost": more,
                "misses_again_at": later[0] if later else None, "seeds_missed": seeds}

    def costs(self) -> dict[str, float | None]:
        """What the reserve costs against no reserve, over the seeds run at both: batch fill change
        (points of the budget), the idle reserve, and each other class's P99 TTFT ratio. (Not the
        served rate: with everything finished it is the offered load, whatever the reserve does;
        `python -m engine capacity` measures the load a configuration can carry.)"""
        if self.value is None:
            return {}
        at, base = self.seeded.get(self.value) or [self.at], self.seeded.get(0.0) or [self.base]
        pairs = list(zip(at, base))
        out = {"batch_fill": float(np.mean([a["batch_fill"] - b["batch_fill"] for a, b in pairs])),
               "reserve_idle": float(np.mean([a["reserve_idle_token_frac"] for a, _ in pairs]))}
        for name in list(self.base["classes"])[1:]:
            ratios = [a["classes"][name]["ttft_p99"] / b["classes"][name]["ttft_p99"] for a, b in pairs
                      if a["classes"][name]["ttft_p99"] is not None and b["classes"][name]["ttft_p99"]]
            out[f"{name}.ttft_p99"] = float(np.mean(ratios)) if ratios else None
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


def size(sc: Scenario, knob: str, kv_blocks: int, summarize: Summarize,
         why_not: Callable[[Scenario], str | None] | None = None, seeds: int = SEEDS) -> Sizing | None:
    """The smallest `knob` ("reserve": tokens, "kvres": KV blocks) that keeps the top class in its
    SLO on `sc`'s traffic and settings with no other reserve, on every seed; None if the top class
    has no TTFT SLO."""
    top, slo = top_of(sc)
    if slo is None:
        return None
    k = KNOBS[knob]
    step = 64 if knob == "reserve" else 16
    base_data = apply_overrides(to_dict(sc), NO_RESERVES)  # each reserve sized alone, from none at all
    out = Sizing(knob, top, slo, default_seeds(sc.seed, seeds), sc=sc)
    by_seed: dict[float, dict[int, dict]] = {}  # value → the other seeds' summaries

    def point(v: float, seed: int) -> Scenario:
        return from_dict(apply_overrides(base_data, {**k.overrides(sc, v, None), "seed": seed}))

    def run(values: list[float], seed_list: list[int]) -> None:
        """Run each value on each seed (the first seed's go to `tried`, all to `seeded`)."""
        jobs = []
        for v in values:
            if v in out.refused:
                continue
            for seed in seed_list:
                if seed == out.seeds[0] and v in out.tried:
                    continue
                try:
                    p = point(v, seed)
                    reason = why_not(p) if why_not else None
                except ScenarioError as err:
                    reason = str(err)
                if reason:
                    out.refused[v] = reason
                    break
                jobs.append((v, seed, p.key()))
        for (v, seed, _), s in zip(jobs, summarize([key for _, _, key in jobs])):
            if seed == out.seeds[0]:
                out.tried[v] = s
            else:
                by_seed.setdefault(v, {})[seed] = s

    run(grid(0, upper(sc, knob, kv_blocks), COARSE, step), out.seeds[:1])
    if 0.0 not in out.tried:
        return out

    def first_stable() -> float | None:
        """The smallest setting of the stable suffix (every larger setting keeps the top class's
        P99 within the SLO) that meets on the first seed."""
        vals = sorted(out.tried)
        suffix: list[float] = []
        for v in reversed(vals):
            if not out.top_ok(out.tried[v]):
                break
            suffix.append(v)
        fair = [v for v in reversed(suffix) if out.meets(out.tried[v], out.base)]
        return fair[0] if fair else None

    first = first_stable()
    if first is not None and first > 0:
        below = max(v for v in out.tried if v < first)
        run(grid(below, first, FINE + 2, step)[1:-1], out.seeds[:1])
        first = first_stable()
    others = out.seeds[1:]
    candidates = [] if first is None else [v for v in sorted(out.tried) if v >= first
                                           and out.meets(out.tried[v], out.base)]
    for v in candidates[:CONFIRM_ROUNDS]:
        run([0.0, v] if v else [0.0], others)
        at, base = by_seed.get(v, {}), by_seed.get(0.0, {})
        if all(s in at and s in base and out.meets(at[s], base[s]) for s in others):
            out.value = v
            break
    # every seed's summary, in seed order, for the values run on all of them
    out.seeded = {v: [out.tried[v], *(got[s] for s in others)] for v, got in by_seed.items()
                  if v in out.tried and all(s in got for s in others)}
    if not others:
        out.value = first
        out.seeded = {v: [out.tried[v]] for v in {0.0, first} if v is not None}
    return out
