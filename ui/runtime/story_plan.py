"""The *Does this hold?* page's runs: which ones it asks the sweeps' pool for, and their verdicts.

A shipped scenario's story (`engine.sweeps.story`) is judged the way `python -m engine story` judges it —
every run on the scenario's seed and the next N − 1 (never picked), at load ×0.9, ×1, ×1.1, each
claim seed by seed (`engine.sweeps.story.judge`) — only with fewer seeds by default, so a page has its
answer in seconds. A claim marked `edge: true` is also run at ×0.8 and ×1.2, for the band that
shows where it stops holding. The runs go to the sweeps' worker processes as `measure:` jobs
(`ui.runtime.worker.MEASURE`: only the metrics the claims read come back), ×1 first, so the shipped load's
column fills in first. Pure: no streamlit import.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from engine.sweeps import story as story_mod
from engine.sweeps.story import Audit, Story

from .worker import MEASURE

SCALES = (0.9, 1.0, 1.1)  # the audit's: the shipped load and ±10 %
EDGE_SCALES = (0.8, 0.9, 1.0, 1.1, 1.2)  # an edge claim's band reaches further out
DEFAULT_SEEDS = 5
MAX_SEEDS = 20  # the full audit's; more is the CLI's job
FEW = 100  # a percentile over fewer requests than this says so


@dataclass(frozen=True)
class Plan:
    """One story's runs: pool keys by (run, seed, scale), in the order the page asks for them."""

    story: Story
    seeds: tuple[int, ...]
    keys: dict[tuple[int, int, float], str]
    order: tuple[str, ...]


def plan(story: Story, n_seeds: int) -> Plan:
    """Every run the story's claims read at the audit's scales, and the edge claims' runs at the
    band's further scales; the wish list puts ×1 first, then ×0.9, ×1.1, then the band's ends."""
    seeds = story_mod.seeds_of(story, n_seeds)
    keys, per_run = story_mod.run_keys(story, seeds, SCALES)
    edge_runs = {r for c in story.claims if c.get("edge") for r in (c["run"], c.get("other")) if r is not None}
    extra = [s for s in EDGE_SCALES if s not in SCALES]
    if edge_runs and extra:
        more, _per = story_mod.run_keys(story, seeds, extra)
        keys.update({k: v for k, v in more.items() if k[0] in edge_runs})
    jobs = {k: MEASURE + story_mod.job(key, per_run[k[0]]) for k, key in keys.items()}
    rank = {s: j for j, s in enumerate((1.0, *[s for s in SCALES if s != 1.0], *extra))}
    ordered = sorted(jobs, key=lambda k: (rank[k[2]], k[1], k[0]))
    return Plan(story, tuple(seeds), jobs, tuple(dict.fromkeys(jobs[k] for k in ordered)))


def judge(p: Plan, done: dict[str, dict], scales=SCALES) -> Audit:
    """The claims judged seed by seed over what has come back (a seed with a run missing at a
    scale is left out there: the tallies grow while runs come in)."""
    return story_mod.judge(p.story, p.seeds, scales, p.keys, done)


def edge_frame(p: Plan, done: dict[str, dict], claim: int) -> pd.DataFrame:
    """One row per (scale, seed) judged so far for one claim over the band's scales: the claim's
    value, what it was compared with, whether it held, and the requests behind the value."""
    a = story_mod.judge(p.story, p.seeds, EDGE_SCALES, p.keys, done)
    rows = []
    for s in EDGE_SCALES:
        t = a.tallies[s][claim]
        for seed, v, (n, _n_ref) in zip(_judged_seeds(p, done, s), t.verdicts, t.support):
            rows.append({"scale": s, "seed": seed, "value": _number(v.value), "ref": _number(v.ref), "ok": v.ok,
                         "n": n})
    return pd.DataFrame(rows, columns=["scale", "seed", "value", "ref", "ok", "n"])


def _judged_seeds(p: Plan, done: dict[str, dict], s: float) -> list[int]:
    """The seeds `engine.sweeps.story.judge` judged at scale `s` (those with every run there measured)."""
    return [seed for seed in p.seeds
            if all(p.keys[r, seed, s] in done for r in range(len(p.story.runs)) if (r, seed, s) in p.keys)]


def _number(v):
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def spread(values) -> tuple[float, float, float] | None:
    """(median, min, max) of the numbers among `values`, or None if there are none."""
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return (statistics.median(nums), min(nums), max(nums)) if nums else None


def support_range(support: list[tuple[int | None, int | None]]) -> tuple[int, int] | None:
    """The fewest and most requests behind the claim's percentile over the seeds (either side of
    a comparison), or None when the metric is not a percentile."""
    got = [n for pair in support for n in pair if n is not None]
    return (min(got), max(got)) if got else None
