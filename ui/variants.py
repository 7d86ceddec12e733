"""Scenario variants derived from the user's scenario: the unmitigated baseline and sweep points.

Pure functions on plain scenario data, so the same variant always has the same cache key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.scenario import Scenario, apply_overrides, from_dict, to_dict

if TYPE_CHECKING:
    import pandas as pd

_KEEP = ("alert_after_s",)  # observability, not a mitigation


def baseline(sc: Scenario) -> Scenario:
    """Same traffic, hardware and policy, with every mitigation off and no class caps."""
    data = to_dict(sc)
    fresh = to_dict(from_dict({}))["mitigations"]
    data["mitigations"] = {**fresh, **{k: data["mitigations"][k] for k in _KEEP}}
    for cls in data.get("classes", {}).values():
        cls["caps"] = _no_caps()
    return from_dict(data)


def _no_caps() -> dict:
    return {"max_prompt_tokens": None, "over_cap": "reject", "max_running": None, "max_kv_blocks": None}


def has_mitigations(sc: Scenario) -> bool:
    return baseline(sc).key() != sc.key()


@dataclass(frozen=True)
class Knob:
    """A sweepable setting: label, unit, how a value becomes overrides, a default range."""

    name: str
    label: str
    unit: str

    def overrides(self, sc: Scenario, value: float, cls: str | None) -> dict:
        if self.name == "reserve":
            return {"mitigations.p0_token_reserve": int(value)}
        if self.name == "cap":
            return {f"classes.{cls}.caps.max_prompt_tokens": int(value) if value > 0 else None}
        if self.name == "rate":
            return {f"classes.{cls}.arrival.rate": float(value)}
        if self.name == "load":
            return {f"classes.{c}.arrival.rate": sc.classes[c].arrival.rate * float(value) for c in sc.classes}
        raise ValueError(self.name)

    def default_range(self, sc: Scenario, cls: str | None) -> tuple[float, float, int]:
        """(start, stop, points) that usually shows the knee."""
        if self.name == "reserve":
            return 0.0, float(min(4096, sc.scheduler.max_num_batched_tokens // 2)), 9
        if self.name == "cap":
            big = sc.classes[cls].prompt.max if cls in sc.classes else 32768
            return 1024.0, float(min(big, 32768)), 8
        if self.name == "rate":
            r = sc.classes[cls].arrival.rate if cls in sc.classes else 1.0
            return r * 0.25, r * 2.0, 8
        return 0.5, 1.5, 6


KNOBS = {
    "reserve": Knob("reserve", "Top-priority token reserve", "tokens"),
    "cap": Knob("cap", "Prompt cap of a class", "tokens"),
    "rate": Knob("rate", "Arrival rate of a class", "req/s"),
    "load": Knob("load", "Total load multiplier", "×"),
}


def sweep_points(sc: Scenario, knob: str, values: list[float], seeds: list[int], cls: str | None = None) -> list[tuple[float, int, str]]:
    """(value, seed, scenario JSON) for every point of a sweep."""
    k = KNOBS[knob]
    base = to_dict(sc)
    out = []
    for v in values:
        for s in seeds:
            data = apply_overrides(base, {**k.overrides(sc, v, cls), "seed": int(s)})
            out.append((float(v), int(s), from_dict(data).key()))
    return out


def sweep_frame(points: list[tuple[float, int, str]], summaries: list[dict]) -> "pd.DataFrame":
    """Long table: one row per (value, seed, class) with ttft_p99 and the run's throughput."""
    import pandas as pd

    rows = []
    for (value, seed, _), s in zip(points, summaries):
        for name, c in s["classes"].items():
            rows.append({"value": value, "seed": seed, "class": name, "ttft_p99": c["ttft_p99"],
                         "slo_attainment": c["slo_attainment"], "throughput_tok_s": s["throughput_tok_s"]})
    return pd.DataFrame(rows)


def knee(frame: "pd.DataFrame", top: str, slo_s: float, harder_when_larger: bool) -> float | None:
    """The setting closest to "no mitigation" at which the top class's worst P99 over seeds meets
    its SLO: the smallest one for a mitigation knob, the largest one for a load knob."""
    t = frame[frame["class"] == top].groupby("value")["ttft_p99"].max()
    ok = t[t <= slo_s].index
    if not len(ok):
        return None
    return float(ok.max() if harder_when_larger else ok.min())
