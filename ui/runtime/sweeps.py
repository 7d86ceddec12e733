"""Sweeps: one knob over a range and several seeds — the plan, the run order, the table, the knee.

A `Plan` is every (value, seed) point of a sweep as a scenario key, in the order worth running:
a coarse curve first (up to 5 values, first seed), then the other values, then the other seeds —
so a chart can be drawn from whatever has finished and only ever gets finer. Points that cannot
run (a reserve above the budget, too many requests…) are left out with the reason. Pure: no
streamlit import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.config.scale import load_overrides
from engine.config.scenario import Scenario, ScenarioError, apply_overrides, from_dict, to_dict

from ..frame.i18n import N_

COARSE_POINTS = 5


@dataclass(frozen=True)
class Knob:
    """A sweepable setting: what it writes, its range, and which end is "cheaper".

    `prefer` names the end that costs least or restricts least ("low" for a reserve, "high" for a
    cap); the knee is the setting closest to that end that still meets the top class's SLO. For a
    load knob ("high" too) the knee is the most load that still meets it.
    """

    name: str
    short: str  # for the picker
    label: str  # for the axis
    unit: str
    per_class: bool
    integer: bool
    prefer: str  # "low" | "high"
    help: str

    def overrides(self, sc: Scenario, value: float, cls: str | None) -> dict:
        v = int(round(value)) if self.integer else float(value)
        if self.name == "reserve":
            return {"mitigations.p0_token_reserve": v}
        if self.name == "kvres":
            return {"mitigations.p0_kv_reserve": v}
        if self.name == "cap":
            return {f"classes.{cls}.caps.max_prompt_tokens": v if v > 0 else None}
        if self.name == "running":
            return {f"classes.{cls}.caps.max_running": v if v > 0 else None}
        if self.name == "rate":
            return {f"classes.{cls}.arrival.rate": v}
        if self.name == "load":  # the same scaling as `engine capacity`
            return load_overrides(sc, v)
        if self.name == "budget":
            return {"scheduler.max_num_batched_tokens": v}
        if self.name == "blocks":
            return {"kv.num_blocks": v}
        raise ValueError(self.name)

    def default_range(self, sc: Scenario, cls: str | None, kv_blocks: int) -> tuple[float, float]:
        """(start, stop) that usually shows the knee."""
        budget = sc.scheduler.max_num_batched_tokens
        if self.name == "reserve":
            return 0.0, float(min(4096, budget // 2))
        if self.name == "kvres":
            return 0.0, float(max(16, kv_blocks // 2))
        if self.name == "cap":
            big = sc.classes[cls].prompt.max if cls in sc.classes and sc.classes[cls].prompt.max else 32768
            return 1024.0, float(max(2048, min(big, 32768)))
        if self.name == "running":
            return 1.0, float(min(32, sc.scheduler.max_num_seqs))
        if self.name == "rate":
            r = sc.classes[cls].arrival.rate if cls in sc.classes else 1.0
            return round(r * 0.25, 4), round(r * 2.0, 4)
        if self.name == "load":
            return 0.5, 1.5
        if self.name == "budget":
            return float(max(1024, sc.mitigations.p0_token_reserve + 512)), float(max(budget * 2, 4096))
        if self.name == "blocks":
            return float(max(64, kv_blocks // 4)), float(max(128, kv_blocks * 2))
        raise ValueError(self.name)


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("reserve", N_("Token reserve"), N_("Token reserve (top priority)"), N_("tokens"), False, True, "low",
         N_("Tokens of every step's budget only the top class may use.")),
    Knob("kvres", N_("KV reserve"), N_("KV reserve (top priority)"), N_("blocks"), False, True, "low",
         N_("KV blocks only the top class may allocate.")),
    Knob("cap", N_("Prompt cap (a class)"), N_("Prompt cap of a class"), N_("tokens"), True, True, "high",
         N_("Longer prompts of the class are rejected or split (its 'Over the cap' setting).")),
    Knob("running", N_("Running cap (a class)"), N_("Running cap of a class"), N_("requests"), True, True, "high",
         N_("At most this many requests of the class run at once.")),
    Knob("rate", N_("Arrival rate (a class)"), N_("Arrival rate of a class"), "req/s", True, False, "high",
         N_("The class's mean arrival rate; the knee is the most it can send with the top class inside its SLO.")),
    Knob("load", N_("Total load"), N_("Total load"), "×", False, False, "high",
         N_("Every class's rate times this factor (a trace: its arrivals packed this many times closer).")),
    Knob("budget", N_("Token budget"), N_("Token budget per step"), N_("tokens"), False, True, "low",
         "max_num_batched_tokens."),
    Knob("blocks", N_("KV cache size"), N_("KV cache size"), N_("blocks"), False, True, "low",
         N_("kv.num_blocks: the knee is the smallest cache that keeps the top class inside its SLO.")),
)}


def values_for(knob: Knob, lo: float, hi: float, n: int) -> list[float]:
    """`n` evenly spaced values from lo to hi (whole numbers for integer knobs, no repeats)."""
    vals = np.linspace(lo, hi, max(int(n), 1)) if n > 1 else np.array([lo])
    if knob.integer:
        vals = np.unique(np.round(vals))
    return [float(v) for v in vals]


def coarse_indices(n: int, k: int = COARSE_POINTS) -> list[int]:
    """Up to `k` evenly spread indices of `n` values, always both ends."""
    if n <= k:
        return list(range(n))
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, k)})


@dataclass
class Plan:
    """Every point of a sweep (value, seed, scenario key) and the order to run them in."""

    knob: Knob
    cls: str | None
    values: list[float]
    seeds: list[int]
    points: list[tuple[float, int, str]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # keys: coarse curve, then the rest, then other seeds
    coarse: int = 0  # the first `coarse` keys of `order` make the coarse curve
    refused: dict[float, str] = field(default_factory=dict)  # value → why it cannot run

    @property
    def keys(self) -> list[str]:
        return [k for _, _, k in self.points]


def plan(sc: Scenario, knob_name: str, values: list[float], seeds: list[int], cls: str | None = None,
         why_not: Callable[[Scenario], str | None] | None = None) -> Plan:
    """The sweep's points; a value whose scenario cannot run is refused (with the reason) for every seed."""
    knob = KNOBS[knob_name]
    base = to_dict(sc)
    out = Plan(knob, cls if knob.per_class else None, list(values), list(seeds))
    by_value: dict[float, list[str]] = {}
    for v in values:
        keys = []
        for s in seeds:
            try:
                point = from_dict(apply_overrides(base, {**knob.overrides(sc, v, cls), "seed": int(s)}))
                reason = why_not(point) if why_not else None
            except ScenarioError as err:
                reason = str(err)
            if reason:
                out.refused[v] = reason
                keys = []
                break
            keys.append(point.key())
        if keys:
            by_value[v] = keys
            out.points += [(v, s, k) for s, k in zip(seeds, keys)]
    good = [v for v in values if v in by_value]
    first = [good[i] for i in coarse_indices(len(good))]
    out.coarse = len(first)
    out.order = [by_value[v][0] for v in first] + [by_value[v][0] for v in good if v not in first]
    out.order += [k for j in range(1, len(seeds)) for v in good for k in by_value[v][j:j + 1]]
    return out


def frame(p: Plan, done: dict[str, dict]) -> pd.DataFrame:
    """Long table of the finished points: one row per (value, seed, class).

    Columns: value, seed, class, priority, n, rejected, unfinished, ttft_p99, slo_attainment, and the
    run's served_tok_s, batch_fill, reserve_idle_token_frac (the cost side).
    """
    rows = []
    for value, seed, key in p.points:
        s = done.get(key)
        if s is None:
            continue
        for name, c in s["classes"].items():
            rows.append({"value": value, "seed": seed, "class": name, "priority": c["priority"], "n": c["n"],
                         "rejected": c["rejected"], "unfinished": c["unfinished"], "ttft_p99": c["ttft_p99"],
                         "slo_attainment": c["slo_attainment"], "served_tok_s": s["served_tok_s"],
                         "batch_fill": s["batch_fill"], "reserve_idle_token_frac": s["reserve_idle_token_frac"]})
    cols = ["value", "seed", "class", "priority", "n", "rejected", "unfinished", "ttft_p99", "slo_attainment",
            "served_tok_s", "batch_fill", "reserve_idle_token_frac"]
    return pd.DataFrame(rows, columns=cols)


def knee(table: pd.DataFrame, top: str, slo_s: float, prefer: str) -> float | None:
    """The setting nearest the `prefer` end at which the top class's worst P99 over seeds meets its
    SLO. Settings that reject more requests (of any class) than the sweep's least-rejecting one do
    not count: turning traffic away is not meeting an SLO."""
    t = table[table["class"] == top]
    if not len(t):
        return None
    g = t.groupby("value")
    worst = g["ttft_p99"].max()
    every_seed = g["ttft_p99"].apply(lambda s: s.notna().all())
    rejected = table.groupby("value")["rejected"].sum()
    honest = rejected <= rejected.min()
    ok = worst[(worst <= slo_s) & every_seed & honest.reindex(worst.index, fill_value=False)].index
    if not len(ok):
        return None
    return float(ok.min() if prefer == "low" else ok.max())
