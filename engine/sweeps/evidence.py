"""Figures over seeds: a number that is a conclusion, with its spread and the requests behind it.

One run's P99 is one draw: in classic-inversion P0's P99 TTFT comes from 28–45 requests, so it is
their maximum, and nudging a rate moves it by a factor of three. This module turns N runs of the
same scenario (seeds s, s+1, …, s+N−1: the scenario's own seed and the next N−1) into estimates:

- `RunSamples.of(result)`: the compact, picklable record of one run that the estimates need — per
  class the measured requests' values percentiles are taken over (TTFT, TPOT, end to end, queue
  wait, blocked), the counts (n, completed, rejected, shed, unfinished, within SLO) and the run's
  summary, and the top class's waits by reason (`engine.sim.wait_tally`). It is what a worker
  process sends back for a page's N seeds (a few hundred kB at most where the `Result` is tens
  of MB).
- `Estimate`: `value` pooled over the seeds (the P99 of all N runs' requests together; attainment
  = Σ within SLO / Σ n; else the mean), `lo`–`hi` the range of the seeds' own values, `per_seed`,
  and `n`: the requests behind the pooled value and behind the thinnest seed.
- `holds_on(a, b, better)`: a comparison seed by seed — seed i of one configuration against seed i
  of the other (same arrivals and lengths: common random numbers) — as "k of N seeds".

Measured requests, split pieces folded into one request, and what "finished" and "within SLO"
mean come from `engine.sim.metrics` (`logical_requests`, `ClassColumns`, `within_slo`), so a one-seed
estimate equals the run's summary exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..sim.metrics import ClassColumns, logical_requests, within_slo
from ..sim.wait_tally import tally

FEW = 100  # a percentile from fewer requests says so (a P99 of 40 requests is their maximum)
METRICS = ("ttft_s", "tpot_s", "e2e_s", "queue_wait_s", "blocked_s")  # what percentiles are taken over
COUNTS = ("n", "completed", "rejected", "shed", "unfinished", "within_slo")
# the summary's percentile fields and where they come from: name → (metric, q)
PERCENTILES = {"ttft_p50": ("ttft_s", 50), "ttft_p90": ("ttft_s", 90), "ttft_p99": ("ttft_s", 99),
               "tpot_p50": ("tpot_s", 50), "tpot_p99": ("tpot_s", 99), "e2e_p50": ("e2e_s", 50),
               "e2e_p99": ("e2e_s", 99), "queue_wait_p99": ("queue_wait_s", 99),
               "blocked_p99": ("blocked_s", 99)}
# run-level figures (summary keys) reported as a mean over seeds with their range. `served_tok_s`
# is output tokens over the run's length: the offered load whenever everything finishes, never a
# capacity (DESIGN §6)
RUN_FIGURES = {"batch_fill": "batch_fill", "kv_util_mean": "kv_util_mean",
               "reserve_idle_token_frac": "reserve_idle_token_frac", "served_tok_s": "served_tok_s",
               "preemptions": "preemptions"}


def default_seeds(seed: int, n: int) -> list[int]:
    """The scenario's seed and the next n − 1: the same seeds on every page and in the CLI, so a
    figure quoted with N seeds can be reproduced."""
    return [int(seed) + k for k in range(max(int(n), 1))]


@dataclass(frozen=True)
class ClassSamples:
    """One class in one run: the measured requests' finite values per metric (float64, the order
    of the requests frame) and the counts."""

    priority: int
    values: dict[str, np.ndarray]
    counts: dict[str, int]
    has_slo: bool


@dataclass(frozen=True)
class RunSamples:
    """What the estimates need of one run (see the module docstring). Picklable and small."""

    scenario: str
    seed: int
    summary: dict
    classes: dict[str, ClassSamples]
    waits: object | None = None  # the top class's waits by reason (`engine.sim.wait_tally.RunTally`)

    @classmethod
    def of(cls, result) -> RunSamples:
        sc = result.scenario
        cols = ClassColumns(logical_requests(result.requests))
        out = {}
        for name in sc.class_names:
            m = cols.rows(name)
            done = cols.is_status(m, "finished")
            values = {k: cols.cols[k][m] for k in METRICS}
            ok = within_slo(sc.request_class(name).slo, done, values["ttft_s"], values["tpot_s"])
            counts = {"n": int(m.sum()), "completed": int(done.sum()),
                      "rejected": int(cols.is_status(m, "rejected").sum()), "shed": cols.shed(m),
                      "unfinished": int(cols.is_status(m, "unfinished").sum()),
                      "within_slo": int(ok.sum()) if ok is not None else 0}
            finite = {k: np.ascontiguousarray(v[np.isfinite(v)], dtype=np.float64) for k, v in values.items()}
            out[name] = ClassSamples(int(sc.request_class(name).priority), finite, counts, ok is not None)
        return cls(sc.name, int(sc.seed), result.summary, out, tally(result))

    @property
    def class_names(self) -> list[str]:
        return list(self.classes)


@dataclass(frozen=True)
class Estimate:
    """A figure over seeds.

    `value`: the statistic over every seed's requests pooled (percentiles: numpy's linear
    percentile of the concatenated values, as the summary takes it of one run), or a pooled ratio
    (attainment), or the mean of the seeds' values (run-level figures) — `method` says which.
    `lo`, `hi`: the smallest and largest of the seeds' own values. `per_seed`: those values, in
    seed order (None where a seed had no value). `n`: requests behind the pooled value; `n_min`:
    behind the thinnest seed's value (0 for run-level figures, which rest on no requests).

    Why the seeds' range and not a bootstrap over requests: the requests of one run are not
    independent draws — the requests that queue behind one long document all wait together, and a
    run's P99 rises and falls with its few bursts — so resampling requests within a run treats
    one burst as many and gives intervals far too narrow. Seeds are independent runs; their range
    is what another seed may give. (N seeds' range is no confidence interval: with 5 seeds it
    covers the middle 2/3 of the seed-to-seed distribution on average.)

    A pooled linear percentile need not lie inside the seeds' range (two seeds of [0, 100]: each
    P99 is 99, the pooled one 100); it always lies between the smallest seed's lower neighbouring
    order statistic and the largest seed's upper one (tests/engine/test_evidence.py proves and
    checks it).
    """

    value: float | None
    lo: float | None
    hi: float | None
    per_seed: tuple[float | None, ...]
    n: int = 0
    n_min: int = 0
    method: str = "pooled"

    @property
    def few(self) -> bool:
        """A percentile some seed took over fewer than `FEW` requests (its P99 is about its max)."""
        return self.method == "pooled" and self.n_min < FEW

    @property
    def seeds(self) -> int:
        return len(self.per_seed)

    def to_dict(self) -> dict:
        out = {"value": self.value, "lo": self.lo, "hi": self.hi, "per_seed": list(self.per_seed)}
        if self.method == "pooled":
            out |= {"n": self.n, "n_min": self.n_min, "few": self.few}
        return out


def _range(per: Sequence[float | None]) -> tuple[float | None, float | None]:
    vals = [v for v in per if v is not None]
    return (min(vals), max(vals)) if vals else (None, None)


def _pct(x: np.ndarray, q: float) -> float | None:
    return float(np.percentile(x, q)) if len(x) else None


def percentile(runs: Sequence[RunSamples], cls: str, metric: str, q: float) -> Estimate:
    """The q-th percentile of `metric` (METRICS) of class `cls`, pooled over the runs' requests,
    with the seeds' range."""
    arrays = [r.classes[cls].values[metric] if cls in r.classes else np.empty(0) for r in runs]
    per = tuple(_pct(a, q) for a in arrays)
    lo, hi = _range(per)
    pooled = np.concatenate(arrays) if arrays else np.empty(0)
    sizes = [len(a) for a in arrays]
    return Estimate(_pct(pooled, q), lo, hi, per, int(sum(sizes)), int(min(sizes, default=0)), "pooled")


def attainment(runs: Sequence[RunSamples], cls: str) -> Estimate | None:
    """SLO attainment of `cls`: Σ within SLO / Σ measured requests over the runs (each seed's own
    share for the range); None if the class has no SLO."""
    parts = [r.classes.get(cls) for r in runs]
    if not parts or any(p is None for p in parts) or not parts[0].has_slo:
        return None
    per = tuple(p.counts["within_slo"] / p.counts["n"] if p.counts["n"] else None for p in parts)
    lo, hi = _range(per)
    within, n = sum(p.counts["within_slo"] for p in parts), sum(p.counts["n"] for p in parts)
    return Estimate(within / n if n else None, lo, hi, per, n, min(p.counts["n"] for p in parts), "ratio")


def mean_of(per: Sequence[float | None]) -> Estimate:
    """A run-level figure: the mean of the seeds' values (None values left out), with their range."""
    per = tuple(None if v is None else float(v) for v in per)
    vals = [v for v in per if v is not None]
    lo, hi = _range(per)
    return Estimate(float(np.mean(vals)) if vals else None, lo, hi, per, method="mean")


def run_figure(runs: Sequence[RunSamples], key: str) -> Estimate:
    """A summary field of the run (`RUN_FIGURES` names, or any summary key) over the seeds."""
    return mean_of([r.summary.get(RUN_FIGURES.get(key, key)) for r in runs])


def class_figure(runs: Sequence[RunSamples], cls: str, key: str) -> Estimate:
    """A class's summary field (e.g. `inversion_s`, `blocked_s`) over the seeds: mean and range."""
    return mean_of([r.summary["classes"].get(cls, {}).get(key) for r in runs])


@dataclass(frozen=True)
class Holds:
    """A comparison over seeds: it held on `k` of `n` seeds."""

    k: int
    n: int

    def __str__(self) -> str:
        return f"holds on {self.k} of {self.n} seeds"


def holds_on(a_per_seed: Sequence[float | None], b_per_seed: Sequence[float | None],
             better: str | Callable[[float, float], bool] = "lower") -> Holds:
    """On how many seeds is a better than b? Seed i of `a` is compared with seed i of `b` (the same
    traffic: common random numbers), so the two sequences must be in the same seed order.
    `better`: "lower" (a < b), "higher" (a > b) or a function (a, b) → bool. A tie does not hold;
    a seed where either value is missing counts in n and does not hold."""
    if len(a_per_seed) != len(b_per_seed):
        raise ValueError(f"holds_on: {len(a_per_seed)} seeds against {len(b_per_seed)}")
    test = {"lower": lambda x, y: x < y, "higher": lambda x, y: x > y}.get(better, better) \
        if isinstance(better, str) else better
    if not callable(test):
        raise ValueError(f"holds_on: better = {better!r}: use 'lower', 'higher' or a function")
    k = sum(1 for x, y in zip(a_per_seed, b_per_seed) if x is not None and y is not None and test(x, y))
    return Holds(k, len(a_per_seed))


def over_seeds(sc, seeds: Iterable[int], stop=None) -> list[RunSamples]:
    """Run `sc` once per seed, in this process, one after another (the CLI and the tests; the app
    runs each seed in its worker processes and calls `RunSamples.of` there)."""
    from ..config.scenario import apply_overrides, from_dict, to_dict
    from ..sim.simulation import simulate

    data = to_dict(sc)
    return [RunSamples.of(simulate(from_dict(apply_overrides(data, {"seed": int(s)})), stop=stop)) for s in seeds]


def class_figures(runs: Sequence[RunSamples], cls: str) -> dict[str, Estimate | None]:
    """Every per-class figure of the summary over the seeds (percentiles pooled, attainment pooled,
    sums as means)."""
    out: dict[str, Estimate | None] = {k: percentile(runs, cls, m, q) for k, (m, q) in PERCENTILES.items()}
    out["slo_attainment"] = attainment(runs, cls)
    for key in ("inversion_s", "blocked_s", "inverted_requests"):
        out[key] = class_figure(runs, cls, key)
    return out


def report(runs: Sequence[RunSamples]) -> dict:
    """The `--seeds N` JSON (README, *Command line*): seeds, run-level figures and per class its
    counts (per seed and in all) and every figure as {value, lo, hi, per_seed[, n, n_min, few]}."""
    if not runs:
        raise ValueError("report: no runs")
    first = runs[0]
    classes = {}
    for name in first.class_names:
        counts = {k: {"total": sum(r.classes[name].counts[k] for r in runs),
                      "per_seed": [r.classes[name].counts[k] for r in runs]} for k in COUNTS}
        figs = {k: (None if e is None else e.to_dict()) for k, e in class_figures(runs, name).items()}
        classes[name] = {"priority": first.classes[name].priority, **counts, **figs}
    return {
        "scenario": first.scenario,
        "seeds": [r.seed for r in runs],
        "method": {"percentiles": "pooled over the seeds' measured requests (numpy linear); lo/hi: min and max of "
                                  "the seeds' own percentiles; n: requests pooled, n_min: the fewest in one seed; "
                                  f"few: n_min < {FEW}",
                   "slo_attainment": "sum of requests within SLO / sum of measured requests; lo/hi over seeds",
                   "run figures": "mean over seeds; lo/hi: min and max"},
        **{k: run_figure(runs, k).to_dict() for k in RUN_FIGURES},
        **{k: {"total": sum(r.summary[k] for r in runs), "per_seed": [r.summary[k] for r in runs]}
           for k in ("rejected", "unfinished")},
        "classes": classes,
    }
