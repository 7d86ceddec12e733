"""Capacity planning: the fewest GPUs (replicas × tensor-parallel size) and the remedy settings
that keep every class within its SLO at the spec's traffic.

A plan spec is a sweep spec (README) whose `grid`/`sample` are the remedy settings to try, plus

    plan:
      tensor_parallel: [1, 2]      # hardware.num_gpus values to try (default: the base's)
      replicas: [1, 16]            # the replica range searched by bisection (default 1..16)
      criterion: p99               # p99 (default) or attainment
      target: 0.99                 # attainment only: the SLO attainment every class must reach

For each tensor-parallel size × remedy setting the smallest replica count that meets the SLOs is
found by bisection (it assumes more replicas never hurt, which holds for the shared
least-loaded router up to seed noise: each tested count runs every seed). All searches advance
together, one round of runs at a time, so a round fills the backend. A class *meets its SLO* at
a point as `engine.sweeps.slo` says (the predicate `engine capacity` and the sizing aid use too): in
every seed, its P99 TTFT ≤ `slo.ttft_s` and P99 TPOT ≤ `slo.tpot_s` (those set) and none of its
requests was rejected or left unfinished (`p99`), or its SLO attainment ≥ `target`
(`attainment`). Classes without an SLO are not checked.

The pure functions over a tidy table (`points`, `pareto`, `cheapest`) serve the command line and
the app's Sweeps page alike: a plain sweep with a GPU count among its knobs has a frontier too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config.scenario import from_dict
from .slo import rows_ok
from .sweep import Spec, SweepError, make_run
from .sweep_runner import Session, stored_rows

TP_KEY, REPLICAS_KEY = "hardware.num_gpus", "replicas.count"
PLAN_KEYS = ("tensor_parallel", "replicas", "criterion", "target")
MAX_REPLICAS = 64  # the schema's limit


@dataclass(frozen=True)
class PlanSpec:
    tensor_parallel: tuple[int, ...]
    lo: int
    hi: int
    criterion: str
    target: float


def parse_plan(spec: Spec, origin: str = "spec") -> PlanSpec:
    """The `plan:` section, validated (SweepError naming the key)."""
    p = spec.plan or {}
    bad = [k for k in p if k not in PLAN_KEYS]
    if bad:
        raise SweepError(f"{origin}: plan.{bad[0]}: unknown key (use {', '.join(PLAN_KEYS)})")
    for key in (TP_KEY, REPLICAS_KEY):
        if key in spec.knobs:
            raise SweepError(f"{origin}: {key}: the plan searches it (plan.tensor_parallel, plan.replicas); "
                             "take it out of grid/sample")
    sc = from_dict(spec.base_data)
    if sc.replicas.routing != "shared":
        raise SweepError(f"{origin}: replicas.routing = {sc.replicas.routing!r}: a plan scales shared replicas; "
                         "pinned replica lists cannot grow")
    if not any(sc.request_class(c).slo.ttft_s or sc.request_class(c).slo.tpot_s for c in sc.class_names):
        raise SweepError(f"{origin}: no class of the base scenario has an SLO (classes.NAME.slo.ttft_s / tpot_s); "
                         "a plan needs one to aim at")
    tp = p.get("tensor_parallel", [sc.hardware.num_gpus])
    if isinstance(tp, int) and not isinstance(tp, bool):
        tp = [tp]
    if not isinstance(tp, list) or not tp or any(not isinstance(t, int) or isinstance(t, bool) for t in tp):
        raise SweepError(f"{origin}: plan.tensor_parallel = {tp!r}: expected a list of GPU counts per replica")
    rep = p.get("replicas", [1, 16])
    if (not isinstance(rep, list) or len(rep) != 2 or any(not isinstance(r, int) or isinstance(r, bool) for r in rep)
            or not 1 <= rep[0] <= rep[1] <= MAX_REPLICAS):
        raise SweepError(f"{origin}: plan.replicas = {rep!r}: expected [low, high] with 1 <= low <= high <= "
                         f"{MAX_REPLICAS}")
    criterion = p.get("criterion", "p99")
    if criterion not in ("p99", "attainment"):
        raise SweepError(f"{origin}: plan.criterion = {criterion!r}: use p99 or attainment")
    target = p.get("target", 0.99)
    if not isinstance(target, int | float) or isinstance(target, bool) or not 0 < target <= 1:
        raise SweepError(f"{origin}: plan.target = {target!r}: expected a fraction in (0, 1]")
    for t in tp:  # every size must be a valid scenario with the base (GPU count limits, memory)
        make_run(spec.base_data, {TP_KEY: t, REPLICAS_KEY: rep[0]}, spec.seeds[0])
    return PlanSpec(tuple(dict.fromkeys(tp)), rep[0], rep[1], criterion, float(target))


def max_runs(spec: Spec, ps: PlanSpec) -> int:
    """The most runs a plan can take: every search tests both ends, then bisects."""
    width = ps.hi - ps.lo
    per_search = 1 if width == 0 else 2 + math.ceil(math.log2(width))
    return len(ps.tensor_parallel) * len(spec.points()) * per_search * len(spec.seeds)


# ---------------------------------------------------------------------------------------------
# Pure functions over the tidy table


def knob_columns_of(table: pd.DataFrame) -> list[str]:
    """The swept settings of a tidy table: its dotted-key columns (summary fields have no dots)."""
    return [c for c in table.columns if "." in c]


def top_class(table: pd.DataFrame) -> str | None:
    if not len(table):
        return None
    return str(table.sort_values(["priority", "class"], kind="stable")["class"].iloc[0])


def points(table: pd.DataFrame, knobs: Sequence[str] | None = None, criterion: str = "p99",
           target: float = 0.99) -> pd.DataFrame:
    """One row per setting (knob values; seeds folded): GPUs, the top class's worst-seed P99 TTFT,
    mean throughput, whether every class meets its SLO in every seed, the seeds and runs behind it."""
    if knobs is None:
        knobs = knob_columns_of(table)
    knobs = list(knobs)
    cols = ["gpus", "top_ttft_p99", "served_tok_s", "feasible", "seeds", "runs"]
    if not len(table):
        return pd.DataFrame(columns=[*knobs, *cols])
    top = top_class(table)
    t = table.assign(_ok=rows_ok(table, criterion, target), _top=table["class"] == top)
    t = t.assign(_ttft=t["ttft_p99"].where(t["_top"]))
    keys = [k for k in knobs if k in t.columns]
    group = t.groupby(keys, dropna=False, sort=False) if keys else t.groupby(np.zeros(len(t)), sort=False)
    out = group.agg(gpus=("gpus", "max"), top_ttft_p99=("_ttft", "max"), feasible=("_ok", "all"),
                    seeds=("seed", "nunique"), runs=("run", lambda r: list(dict.fromkeys(r))))
    thr = t.drop_duplicates("run").groupby(keys, dropna=False, sort=False)["served_tok_s"].mean() if keys else \
        pd.Series([t.drop_duplicates("run")["served_tok_s"].mean()], index=out.index)
    out["served_tok_s"] = thr.reindex(out.index).to_numpy()
    out = out.reset_index() if keys else out.reset_index(drop=True)
    return out[[*keys, *cols]]


def pareto(pts: pd.DataFrame) -> pd.Series:
    """The frontier: points no other point beats on all of fewer GPUs, lower top-class P99 TTFT
    and higher throughput (at least as good on all three and better on one).

    GPU counts are few, so it goes level by level (O(n log n) per level, not O(n²) memory): a
    point is beaten by a point with fewer GPUs that is at least as good on the other two, or by
    a point with as many GPUs that is at least as good on both and better on one."""
    if not len(pts):
        return pd.Series([], dtype=bool)
    g = pts["gpus"].to_numpy(float)
    lat = np.nan_to_num(pts["top_ttft_p99"].to_numpy(float), nan=np.inf)
    thr = np.nan_to_num(pts["served_tok_s"].to_numpy(float), nan=-np.inf)
    keep = np.ones(len(pts), dtype=bool)
    below_lat, below_thr = np.empty(0), np.empty(0)
    for level in np.unique(g):
        idx = np.flatnonzero(g == level)
        a, b = lat[idx], thr[idx]
        if len(below_lat):  # fewer GPUs, latency <= and throughput >=
            order = np.argsort(below_lat, kind="stable")
            best = np.maximum.accumulate(below_thr[order])
            pos = np.searchsorted(below_lat[order], a, side="right")
            keep[idx] &= ~((pos > 0) & (best[np.maximum(pos, 1) - 1] >= b))
        # same GPUs: strictly lower latency with throughput >=, or equal latency with throughput >
        ulat, inv = np.unique(a, return_inverse=True)
        group_max = np.full(len(ulat), -np.inf)
        np.maximum.at(group_max, inv, b)
        before = np.concatenate([[-np.inf], np.maximum.accumulate(group_max)[:-1]])
        keep[idx] &= ~((before[inv] >= b) | (group_max[inv] > b))
        below_lat, below_thr = np.concatenate([below_lat, a]), np.concatenate([below_thr, b])
    return pd.Series(keep, index=pts.index)


def cheapest(pts: pd.DataFrame) -> pd.Series | None:
    """The feasible point with the fewest GPUs (then the lowest top-class P99, then the highest
    throughput, then the first in order); None if no point meets the SLOs."""
    ok = pts[pts["feasible"].astype(bool)]
    if not len(ok):
        return None
    ranked = ok.assign(_lat=ok["top_ttft_p99"].fillna(np.inf), _thr=-ok["served_tok_s"].fillna(0))
    return ok.loc[ranked.sort_values(["gpus", "_lat", "_thr"], kind="stable").index[0]]


# ---------------------------------------------------------------------------------------------
# The search


@dataclass
class Search:
    """Bisection over replicas for one tensor-parallel size × remedy setting."""

    tp: int
    knobs: dict[str, Any]
    lo: int  # largest count known to fail (or low − 1)
    hi: int  # smallest count known to pass (or high + 1)
    high: int
    tested: dict[int, bool] = field(default_factory=dict)

    def next(self) -> list[int]:
        """Replica counts to test in the next round ([] when settled)."""
        if not self.tested:
            return sorted({self.lo + 1, self.high})  # both ends first: often settles it at once
        if self.hi - self.lo <= 1 or self.hi > self.high:
            return []
        return [(self.lo + self.hi) // 2]

    def record(self, replicas: int, ok: bool) -> None:
        self.tested[replicas] = ok
        if ok:
            self.hi = min(self.hi, replicas)
        else:
            self.lo = max(self.lo, replicas)
        if not ok and replicas == self.high:  # not even the most: settled, no plan here
            self.hi = self.high + 1
            self.lo = self.high

    @property
    def answer(self) -> int | None:
        return self.hi if self.hi <= self.high and self.tested.get(self.hi) else None


@dataclass
class PlanOutcome:
    out: Path
    points: pd.DataFrame  # every tested setting, with `frontier`
    cheapest: dict | None
    searches: list[Search]
    runs: int
    reused: int
    status: str
    top: str | None
    criterion: str


def run_plan(spec: Spec, out: str | Path, backend=None, *, spec_path: str | None = None, fresh: bool = False,
             progress: bool = True, checkpoint_s: float = 5.0) -> PlanOutcome:
    """Search, write the tidy table of every run behind it plus `plan.json`, return the outcome.
    Resumable like a sweep: a rerun replays the search from the runs already in `out`."""
    from .sweep_store import Store, write_json

    ps = parse_plan(spec)
    knobs = [TP_KEY, REPLICAS_KEY, *spec.knobs]
    searches = [Search(tp, p, ps.lo - 1, ps.hi + 1, ps.hi) for tp in ps.tensor_parallel for p in spec.points()]
    store = Store.open(out, kind="plan", spec=spec.raw, spec_path=spec_path, fresh=fresh)
    with Session(store, backend, label=spec.name, progress=progress, checkpoint_s=checkpoint_s, knobs=knobs,
                 rows=stored_rows(store)) as s:
        while True:
            wanted = [(search, r) for search in searches for r in search.next()]
            if not wanted:
                break
            batch = {(id(search), r): [make_run(spec.base_data, {TP_KEY: search.tp, REPLICAS_KEY: r, **search.knobs},
                                                seed) for seed in spec.seeds] for search, r in wanted}
            s.run(run for group in batch.values() for run in group)
            for search, r in wanted:
                rows = [dict(row, run=run.run_id) for run in batch[(id(search), r)] for row in s.rows[run.run_id]]
                search.record(r, bool(rows_ok(pd.DataFrame(rows), ps.criterion, ps.target).all()))
    status, table = s.status, s.table
    pts = points(table, knobs, ps.criterion, ps.target)
    pts["frontier"] = pareto(pts).to_numpy() if len(pts) else []
    best = cheapest(pts)
    best_d = None if best is None else _jsonable(best.to_dict())
    top = top_class(table)
    report = {
        "criterion": ps.criterion, "target": ps.target if ps.criterion == "attainment" else None,
        "top_class": top, "tensor_parallel": list(ps.tensor_parallel), "replicas": [ps.lo, ps.hi],
        "seeds": list(spec.seeds), "status": status,
        "searches": [{"tensor_parallel": s.tp, "knobs": s.knobs, "min_replicas": s.answer,
                      "tested": {str(k): v for k, v in sorted(s.tested.items())}} for s in searches],
        "cheapest": best_d,
        "frontier": [_jsonable(r) for r in pts[pts["frontier"]].to_dict("records")] if len(pts) else [],
    }
    write_json(store.out / "plan.json", report)
    return PlanOutcome(store.out, pts, best_d, searches, len(s.every), s.reused, status, top, ps.criterion)


def _jsonable(d: dict) -> dict:
    return json.loads(json.dumps(d, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def read_plan(out: str | Path) -> dict | None:
    """`plan.json` of an output directory, if it has one."""
    path = Path(out) / "plan.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def format_plan(o: PlanOutcome, spec: Spec) -> str:
    """The plan as the command line prints it."""
    knobs = [TP_KEY, REPLICAS_KEY, *spec.knobs]
    crit = "P99 TTFT/TPOT within the class SLOs, nothing rejected or unfinished" if o.criterion == "p99" \
        else "SLO attainment at target"
    lines = [f"plan {spec.name}: every class with an SLO meets it ({crit}) in each of {len(spec.seeds)} seed(s); "
             f"{o.runs} runs ({o.reused} reused from {o.out})"]
    for s in o.searches:
        what = ", ".join(f"{k}={v}" for k, v in s.knobs.items()) or "base settings"
        ans = f"{s.answer} replica(s) = {s.answer * s.tp} GPU(s)" if s.answer else f"none up to {s.high} replicas"
        lines.append(f"  TP {s.tp}, {what}: {ans}  (tested {dict(sorted(s.tested.items()))})")
    front = o.points[o.points["frontier"]].sort_values(["gpus", "top_ttft_p99"]) if len(o.points) else o.points
    lines.append(f"frontier (GPUs, {o.top} P99 TTFT worst seed, served output tok/s mean, meets SLOs, settings):")
    for _, p in front.iterrows():
        setting = ", ".join(f"{k}={p[k]}" for k in knobs if k in p.index)
        lat = "-" if pd.isna(p["top_ttft_p99"]) else f"{p['top_ttft_p99']:.3f} s"
        lines.append(f"  {int(p['gpus']):>3}  {lat:>9}  {p['served_tok_s']:>9.0f} tok/s served  "
                     f"{'yes' if p['feasible'] else 'no ':>3}  {setting}")
    if o.cheapest is None:
        lines.append("no plan: no tested setting meets every SLO; widen plan.replicas or the remedies")
    else:
        c = o.cheapest
        setting = ", ".join(f"{k}={c[k]}" for k in knobs if k in c)
        lines.append(f"cheapest: {c['gpus']} GPU(s): {setting}")
        lines.append(f"  {o.top} P99 TTFT {c['top_ttft_p99']:.3f} s (worst seed), {c['served_tok_s']:.0f} tok/s "
                     "served; "
                     f"runs {' '.join(c['runs'])}")
    if o.status != "complete":
        lines.append("interrupted: the search is incomplete; rerun the same command to resume")
    return "\n".join(lines)
