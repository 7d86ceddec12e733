"""Capacity: the most offered load a configuration carries within its SLOs — what a remedy costs.

`served_tok_s` (output tokens over the run's length) is the offered load whenever everything
finishes, so it cannot show a cost: a remedy that idles a quarter of the GPU serves the same
tokens as long as the queue drains. What the article's trade-off is about is how much traffic
the GPU can still carry. Three figures answer that (DESIGN §6):

- **Capacity** s: the largest uniform scale of the offered load (`engine.config.scale.load_overrides`:
  every class's rate × s, a trace's arrivals packed s times closer; fixed arrival times stay) at
  which every class with an SLO meets it in every seed (`engine.sweeps.slo`: P99 TTFT ≤ slo.ttft_s, P99
  TPOT ≤ slo.tpot_s, nothing rejected or unfinished — the predicate `engine plan` uses). Found by
  bisection on a log scale: s = 1 first, then doubling or halving until the answer is bracketed
  (1/8 … 64: below 1/8 a class's P99 rests on a handful of requests), then the geometric
  midpoint until the bracket is within 2 %. The answer is the bracket's lower end (the largest
  load seen to pass). Each tested load runs every seed; the seeds give every load the same
  requests, only closer together (common random numbers), so the predicate is close to monotone
  in s — where seed noise makes it not, bisection reports one of the crossings, and `tested`
  shows every load tried.
- **Saturated throughput**: output (and processed) tokens per second while the queue never
  empties — what the GPU carries flat out, for this mix and these rules. Measured on runs at 2×
  the offered load (doubled, up to 16×, until it holds), over the last three quarters of the
  arrival window [warm-up + ¼ (duration − warm-up), duration): the run counts as saturated only
  if every engine step that starts in that window left at least one request waiting (the steps
  frame's `waiting_<class>` columns; then the engine never idles there either). Arrivals stop at
  duration_s and these runs drain for only 1 s: what is left is not needed.
- **GPUs for the offered load**: when the capacity is below 1, the replica count (shared,
  least-loaded routing) that carries the offered load itself within the SLOs: ceil(replicas / s)
  first, checked by runs of every seed with the same predicate, then bisection to the boundary
  (doubling first if the guess failed) — `engine plan`'s question and search, started from the
  capacity's answer.
  Pinned replica lists cannot grow (as in `engine plan`): there it is not searched.

A remedy's **cost** is the capacity per GPU it loses (%) against the configuration without it.

Runs go through the sweep runner (`engine.sweeps.sweep_runner.Session`, batched; the CLI uses local
processes) into a resumable output directory (`engine.sweeps.sweep_store`: parts keyed by run id),
so a rerun reuses every run already made and a search interrupted half-way resumes. `python -m engine capacity`
(`engine.sweeps.capacity_cli`) prints it; `--table` does it for default, classic-inversion and
budget-bound with and without each remedy (`TABLE`).
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

from ..config.scale import load_overrides
from ..config.scenario import Scenario, ScenarioError, apply_overrides, from_dict, to_dict
from ..sim.preflight import validate
from .evidence import mean_of
from .slo import rows_ok
from .sweep_runner import Session, stored_rows
from .sweep_runs import Run, run_id

TOLERANCE = 0.02  # stop when the bracket's ends are within 2 %
S_MIN, S_MAX = 1 / 8, 64.0  # below 1/8 of the load a top class has a handful of requests a run
SAT_START, SAT_MAX = 2.0, 16.0
SAT_RAMP = 0.25  # the first quarter of the arrival window (after warm-up) is left out: the queue builds
SAT_DRAIN_S = 1.0
MAX_REPLICAS = 64  # the schema's limit
KNOBS = ["config", "kind", "load_scale", "replicas.count"]  # the output table's columns of a tested point


# ---------------------------------------------------------------------------------------------
# The task (runs in worker processes)


def run_batch_capacity(keys: list[str]) -> list[list[dict] | dict]:
    """Scenario JSON → its tidy rows (`summary_rows`) with the saturation window's figures on each
    row (`sat_*`), for each run. A run over the work limit (estimated before, or stopped at 30 s
    of CPU) is a run that failed — an overload — not an error: one row with `run_error`."""
    from ..config.traces import TraceError
    from ..sim.limits import BATCH, Stop, WorkLimitError, check_work
    from ..sim.simulation import simulate
    from .sweep_exec import summary_rows

    out: list[list[dict] | dict] = []
    for key in keys:
        try:
            sc = from_dict(json.loads(key))
            try:
                work = check_work(sc, BATCH)
                res = simulate(sc, stop=Stop(seconds=BATCH.seconds, key=work.key_steps))
            except WorkLimitError as err:
                out.append([{"class": "", "run_error": str(err)}])
                continue
            sat = saturation(res)
            out.append([{**row, **sat} for row in summary_rows(res.summary, sc)])
        except (ScenarioError, TraceError) as err:
            out.append({"error": str(err)})
    return out


def saturation(res) -> dict[str, float]:
    """The saturation window's figures of a run (module docstring): its length, output tokens
    (decode tokens + first tokens), processed tokens (prefill + decode), steps, and steps that left
    nobody waiting (0 = the queue never emptied)."""
    sc = res.scenario
    t1 = float(sc.duration_s)
    t0 = sc.warmup_s + SAT_RAMP * (t1 - sc.warmup_s)
    st = res.steps
    t = st["t_s"].to_numpy()
    w = (t >= t0) & (t < t1)
    waiting = np.zeros(len(st), dtype=np.int64)
    for name in sc.class_names:
        waiting += st[f"waiting_{name}"].to_numpy()
    first = res.requests["first_token_s"].to_numpy()
    decode = int(st["decode_tokens"].to_numpy()[w].sum())
    prefill = int(st["prefill_tokens"].to_numpy()[w].sum())
    return {"sat_window_s": t1 - t0, "sat_output_tokens": decode + int(((first >= t0) & (first < t1)).sum()),
            "sat_processed_tokens": prefill + decode, "sat_steps": int(w.sum()),
            "sat_idle_steps": int((waiting[w] == 0).sum())}


# ---------------------------------------------------------------------------------------------
# The searches


def _sig(x: float, digits: int = 4) -> float:
    """x to `digits` significant digits (tested loads are stable numbers, so run ids repeat)."""
    return float(f"{x:.{digits - 1}e}")


@dataclass
class ScaleSearch:
    """Bisection over the load scale s for one configuration (module docstring)."""

    tolerance: float = TOLERANCE
    tested: dict[float, bool] = field(default_factory=dict)
    why: dict[float, str] = field(default_factory=dict)  # a failing load → what failed first

    @property
    def lo(self) -> float | None:
        """The largest passing load below the smallest failing one (the capacity)."""
        hi = self.hi
        ok = [s for s, passed in self.tested.items() if passed and (hi is None or s < hi)]
        return max(ok) if ok else None

    @property
    def hi(self) -> float | None:
        """The smallest failing load."""
        bad = [s for s, passed in self.tested.items() if not passed]
        return min(bad) if bad else None

    def next(self) -> list[float]:
        if not self.tested:
            return [1.0]
        lo, hi = self.lo, self.hi
        if lo is None:  # everything failed so far: halve
            s = _sig(min(self.tested) / 2)
            return [s] if s >= S_MIN else []
        if hi is None:  # everything passed so far: double
            s = _sig(max(self.tested) * 2)
            return [s] if s <= S_MAX else []
        if hi / lo <= 1 + self.tolerance:
            return []
        mid = _sig(math.sqrt(lo * hi))
        return [mid] if lo < mid < hi and mid not in self.tested else []

    def record(self, s: float, ok: bool, why: str = "") -> None:
        self.tested[s] = ok
        if not ok:
            self.why[s] = why

    @property
    def capacity(self) -> float | None:
        """The answer: the largest load seen to pass (None: not even 1/8 of the load passes)."""
        return self.lo


@dataclass
class ReplicaSearch:
    """The fewest replicas that carry the offered load within the SLOs: ceil(base / s) first (the
    capacity's guess), then bisection between the largest count known to fail (at least `base`,
    which did) and the smallest known to pass — doubling first if the guess failed."""

    base: int  # the configuration's replica count (it failed at the offered load)
    start: int
    tested: dict[int, bool] = field(default_factory=dict)

    def next(self) -> list[int]:
        if not self.tested:
            return [max(self.base + 1, min(self.start, MAX_REPLICAS))]
        passing = [r for r, ok in self.tested.items() if ok]
        failing = [self.base, *(r for r, ok in self.tested.items() if not ok)]
        if not passing:
            worst = max(failing)
            return [min(2 * worst, MAX_REPLICAS)] if worst < MAX_REPLICAS else []
        best = min(passing)
        below = max(r for r in failing if r < best)
        return [] if best - below <= 1 else [(below + best) // 2]

    @property
    def answer(self) -> int | None:
        passing = [r for r, ok in self.tested.items() if ok]
        return min(passing) if passing and not self.next() else None


@dataclass
class SaturationSearch:
    """Doubling from 2× the offered load until every seed's window is saturated (up to 16×)."""

    tested: dict[float, bool] = field(default_factory=dict)

    def next(self) -> list[float]:
        if not self.tested:
            return [SAT_START]
        top = max(self.tested)
        if self.tested[top] or top * 2 > SAT_MAX:
            return []
        return [top * 2]

    @property
    def scale(self) -> float | None:
        return max(self.tested) if self.tested else None


@dataclass
class Config:
    """One configuration: a label, its scenario data, what it is compared against, its searches."""

    label: str
    data: dict
    against: str | None = None
    overrides: dict = field(default_factory=dict)
    cap: ScaleSearch = field(default_factory=ScaleSearch)
    sat: SaturationSearch = field(default_factory=SaturationSearch)
    gpus: ReplicaSearch | None = None
    rows: dict[tuple[str, Any], list[dict]] = field(default_factory=dict)  # (kind, value) → rows of every seed
    runs: set[str] = field(default_factory=set)

    @property
    def scenario(self) -> Scenario:
        return from_dict(self.data)


def config(label: str, sc: Scenario, overrides: dict | None = None, against: str | None = None) -> Config:
    """A configuration: `sc` with `overrides` applied (ScenarioError naming them if invalid)."""
    overrides = dict(overrides or {})
    data = apply_overrides(to_dict(sc), overrides) if overrides else to_dict(sc)

    validate(from_dict(data))
    return Config(label, data, against, overrides)


def point_data(c: Config, kind: str, value: float | int) -> dict:
    """The scenario data of a tested point (seed not yet set)."""
    sc = c.scenario
    if kind == "cap":
        return apply_overrides(c.data, load_overrides(sc, value))
    if kind == "sat":
        return apply_overrides(c.data, {**load_overrides(sc, value), "drain_limit_s": SAT_DRAIN_S})
    return apply_overrides(c.data, {"replicas.count": int(value)})


def point_runs(c: Config, kind: str, value, seeds: Sequence[int]) -> list[Run]:
    """The runs of one tested point, one per seed (ScenarioError if the point cannot be a scenario,
    e.g. a rate over the schema's limit)."""

    data = point_data(c, kind, value)
    runs = []
    for seed in seeds:
        sc = from_dict(apply_overrides(data, {"seed": int(seed)}))
        validate(sc)
        key = sc.key()
        knobs = {"config": c.label, "kind": kind, "load_scale": float(value) if kind != "gpus" else 1.0,
                 "replicas.count": int(sc.replicas.count)}
        runs.append(Run(key, run_id(key), knobs, int(seed)))
    return runs


def judge(rows: list[dict]) -> tuple[bool, str]:
    """Does a point (every seed's rows) meet the SLOs? And if not, what failed first."""
    for r in rows:
        if isinstance(r.get("run_error"), str):
            return False, f"seed {r.get('seed', '?')}: {r['run_error']}"
    t = pd.DataFrame(rows)
    ok = rows_ok(t)
    if ok.all():
        return True, ""
    bad = t[~ok.to_numpy()].iloc[0]
    what = []
    if (bad.get("rejected") or 0) > 0:
        what.append(f"{int(bad['rejected'])} rejected")
    if (bad.get("unfinished") or 0) > 0:
        what.append(f"{int(bad['unfinished'])} unfinished")
    for metric, slo in (("ttft_p99", "slo_ttft_s"), ("tpot_p99", "slo_tpot_s")):
        if pd.notna(bad.get(slo)) and pd.notna(bad.get(metric)) and bad[metric] > bad[slo]:
            what.append(f"P99 {metric[:4].upper()} {bad[metric]:.3g} s > {bad[slo]:g} s")
    return False, f"{bad['class']}: {', '.join(what)} (seed {int(bad['seed'])})"


def saturated(rows: list[dict]) -> bool:
    return all(not isinstance(r.get("run_error"), str) and (r.get("sat_steps") or 0) > 0
               and (r.get("sat_idle_steps") or 0) == 0 for r in rows)


# ---------------------------------------------------------------------------------------------
# The driver


@dataclass
class Outcome:
    configs: list[Config]
    seeds: tuple[int, ...]
    runs: int
    reused: int
    status: str
    out: Path | None


def search(configs: list[Config], seeds: Sequence[int], backend=None, *, out: str | Path | None = None,
           fresh: bool = False, progress: bool = False, spec: dict | None = None,
           checkpoint_s: float = 5.0) -> Outcome:
    """Run every configuration's searches together, one round of runs at a time (so a round fills
    the backend), through the sweep runner; with `out`, into a resumable output directory."""
    from .sweep_store import Store

    seeds = tuple(int(s) for s in seeds)
    store = Store.open(out, kind="capacity", spec=spec or {}, fresh=fresh) if out is not None else None
    with Session(store, backend, label="capacity", progress=progress, checkpoint_s=checkpoint_s,
                 task=run_batch_capacity, knobs=KNOBS, rows=stored_rows(store)) as session:
        while True:
            wanted: list[tuple[Config, str, Any, list[Run]]] = []
            for c in configs:
                open_gpu_search(c)
                todo = [("cap", s) for s in c.cap.next()] + [("sat", s) for s in c.sat.next()]
                todo += [("gpus", r) for r in (c.gpus.next() if c.gpus else [])]
                for kind, value in todo:
                    try:
                        wanted.append((c, kind, value, point_runs(c, kind, value, seeds)))
                    except ScenarioError as err:  # the load cannot be a scenario: it fails
                        record(c, kind, value, [{"class": "", "run_error": str(err), "seed": seeds[0]}])
            if not wanted:
                if any(c.cap.next() or c.sat.next() or (c.gpus and c.gpus.next()) for c in configs):
                    continue  # a point recorded without runs opened another
                break
            for c, _kind, _value, runs in wanted:
                c.runs.update(run.run_id for run in runs)
            session.run(run for *_, runs in wanted for run in runs)
            for c, kind, value, runs in wanted:
                record(c, kind, value, [dict(row, seed=run.seed, run=run.run_id) for run in runs
                                         for row in session.rows[run.run_id]])
    return Outcome(configs, seeds, len(session.every), session.reused, session.status,
                   store.out if store is not None else None)


def record(c: Config, kind: str, value, rows: list[dict]) -> None:
    """A tested point's rows (every seed's) into its configuration's search (the CLI's driver here,
    the app's in `ui.runtime.capacity_jobs`)."""
    c.rows[(kind, value)] = rows
    if kind == "sat":
        c.sat.tested[value] = saturated(rows)
        return
    ok, why = judge(rows)
    if kind == "cap":
        c.cap.record(value, ok, why)
    else:
        c.gpus.tested[value] = ok


def open_gpu_search(c: Config) -> None:
    """Once the capacity is settled below 1 (the offered load itself fails), search replicas."""
    if c.gpus is not None or c.cap.next():
        return
    cap = c.cap.capacity
    sc = c.scenario
    if cap is None or cap >= 1 or sc.replicas.routing != "shared" or sc.replicas.count >= MAX_REPLICAS:
        return
    c.gpus = ReplicaSearch(sc.replicas.count, math.ceil(sc.replicas.count / cap))


# ---------------------------------------------------------------------------------------------
# What a configuration's searches found


def findings(c: Config, by_label: dict[str, Config] | None = None) -> dict:
    """A configuration's answer as plain data (the CLI's --json, and the table)."""
    sc = c.scenario
    gpus_each = int(sc.hardware.num_gpus)
    cap = c.cap.capacity
    top = sc.class_names[0]
    at = c.rows.get(("cap", cap), [])
    top_n = [int(r["n"]) for r in at if r.get("class") == top and pd.notna(r.get("n"))]
    sat_scale = c.sat.scale
    sat_rows = [r for r in c.rows.get(("sat", sat_scale), []) if r.get("class") == sc.class_names[0]]
    sat_ok = sat_scale is not None and c.sat.tested.get(sat_scale, False)

    def rate(key: str) -> dict:
        vals = [r[key] / r["sat_window_s"] for r in sat_rows if pd.notna(r.get(key)) and r.get("sat_window_s")]
        return mean_of(vals).to_dict()

    if cap is None:
        replicas = None
    elif cap >= 1:
        replicas = int(sc.replicas.count)
    else:
        replicas = c.gpus.answer if c.gpus is not None else None
    gpus = int(sc.replicas.count) * gpus_each
    out = {
        "label": c.label, "overrides": c.overrides, "against": c.against, "gpus": gpus,
        "capacity": cap, "capacity_per_gpu": None if cap is None else cap / gpus,
        "bracket": [c.cap.lo, c.cap.hi], "below_min": cap is None,
        "at_least_max": c.cap.hi is None and cap is not None,
        "tested": {f"{s:g}": ok for s, ok in sorted(c.cap.tested.items())},
        "fails_at_bracket_top": c.cap.why.get(c.cap.hi) if c.cap.hi is not None else None,
        "top_class": top, "top_class_requests_per_seed": top_n,
        "runs": len(c.runs),
        "gpus_for_offered_load": None if replicas is None else replicas * gpus_each,
        "replicas_tested": {str(r): ok for r, ok in sorted((c.gpus.tested if c.gpus else {}).items())},
        "saturated": {"scale": sat_scale, "saturated": sat_ok, "output_tok_s": rate("sat_output_tokens"),
                      "processed_tok_s": rate("sat_processed_tokens")},
    }
    ref = (by_label or {}).get(c.against) if c.against else None
    if ref is not None and ref.cap.capacity and cap is not None:
        ref_gpus = int(ref.scenario.replicas.count) * int(ref.scenario.hardware.num_gpus)
        out["change_pct"] = 100.0 * ((cap / gpus) / (ref.cap.capacity / ref_gpus) - 1)
    else:
        out["change_pct"] = None
    return out


def report(o: Outcome, scenario: str | None = None) -> dict:
    by_label = {c.label: c for c in o.configs}
    return {"scenario": scenario, "seeds": list(o.seeds), "tolerance": TOLERANCE,
            "criterion": "every class with an SLO meets it in every seed: P99 TTFT/TPOT within the SLO, "
                         "nothing rejected or unfinished",
            "status": o.status, "runs": o.runs, "reused": o.reused,
            "configurations": [findings(c, by_label) for c in o.configs]}


# ---------------------------------------------------------------------------------------------
# The benchmark table: three scenarios, with and without each remedy


def remedies(sc: Scenario, which: str = "all") -> list[tuple[str, dict, str | None]]:
    """(label, overrides on `sc`, the label it is compared against) for the table's rows.

    How the settings are picked, the same rule for every scenario: the token reserve is a quarter
    of the step budget (2,048 of 8,192: the rescue-buffer scenario's and lesson 6's value); the KV
    reserve a fifth of the usable blocks (classic-inversion's 400 of 2,073, the recap's value);
    the caps go on the least important class: prompts split at the budget (the kv-cap scenario's
    8,192) or at most one running (lesson 9); aging 10 s (the aging scenario); separate replicas
    put the top class on a GPU of its own and everyone else on another. Remedies that need a
    priority order (reserves, inheritance, aging) run on `priority` and are compared with
    `priority` alone, so each row's cost is that remedy's; the policies and the caps are compared
    with the scenario as shipped. `which="reserve"`: the scenario and its token reserve, strict and
    lendable, only."""
    from ..config.memory import breakdown

    budget = int(sc.scheduler.max_num_batched_tokens)
    res = budget // 4
    shipped = sc.scheduler.policy
    first = f"as shipped ({shipped})"
    if which == "reserve":
        return [(first, {}, None),
                (f"token reserve {res} strict", {"mitigations.p0_token_reserve": res,
                                                 "mitigations.reserve_mode": "strict"}, first),
                (f"token reserve {res} lendable", {"mitigations.p0_token_reserve": res,
                                                   "mitigations.reserve_mode": "lendable"}, first)]
    kv = max(1, breakdown(sc).usable_blocks // 5)
    names = sc.class_names
    top, last = names[0], names[-1]
    rows: list[tuple[str, dict, str | None]] = [(first, {}, None)]
    if shipped != "priority":
        prio = "priority"
        rows.append((prio, {"scheduler.policy": "priority"}, first))
    else:
        prio = first
        rows.append(("fcfs (vLLM's default)", {"scheduler.policy": "fcfs"}, first))
    p = {"scheduler.policy": "priority"}
    plus = "priority +"
    rows += [
        (f"{plus} token reserve {res} strict", {**p, "mitigations.p0_token_reserve": res,
                                                "mitigations.reserve_mode": "strict"}, prio),
        (f"{plus} token reserve {res} lendable", {**p, "mitigations.p0_token_reserve": res,
                                                  "mitigations.reserve_mode": "lendable"}, prio),
        (f"{plus} KV reserve {kv} blocks", {**p, "mitigations.p0_kv_reserve": kv}, prio),
        (f"{plus} inheritance", {**p, "mitigations.inheritance": True}, prio),
        (f"{plus} aging 10 s", {**p, "mitigations.aging_s": 10.0}, prio),
        ("preempt", {"scheduler.policy": "preempt"}, first),
        (f"{last} prompts split at {budget}", {f"classes.{last}.caps.max_prompt_tokens": budget,
                                               f"classes.{last}.caps.over_cap": "split"}, first),
        (f"{last} at most 1 running", {f"classes.{last}.caps.max_running": 1}, first),
        (f"2 GPUs: {top} alone / the rest", {"replicas.count": 2, "replicas.routing": "pinned",
                                             "replicas.pin": {n: [0] if n == top else [1] for n in names}}, first),
    ]
    return rows


@dataclass(frozen=True)
class Group:
    """A block of the table: a shipped scenario (with overrides) and which remedies to try."""

    title: str
    scenario: str
    overrides: dict = field(default_factory=dict)
    which: str = "all"


# default, classic-inversion and budget-bound with every remedy; then budget-bound with P0's SLO
# relaxed to 2 s (so P1's 20 s SLO sets the capacity with and without the reserve) on the roofline
# and on a fixed 0.25 s step (a step as long whatever its tokens, the memory-bound extreme): the
# token reserve's cost where a step with fewer tokens is shorter, and where it is not
TABLE = (
    Group("default", "default"),
    Group("classic-inversion", "classic-inversion"),
    Group("budget-bound", "budget-bound"),
    Group("budget-bound, P0 SLO 2 s", "budget-bound", {"classes.P0.slo.ttft_s": 2.0}, "reserve"),
    Group("budget-bound, P0 SLO 2 s, fixed 0.25 s steps", "budget-bound",
          {"classes.P0.slo.ttft_s": 2.0, "cost.model": "fixed", "cost.step_time_s": 0.25}, "reserve"),
)


def group_configs(g: Group) -> list[Config]:
    from ..config.scenario import load

    sc = load(g.scenario, g.overrides)
    return [config(f"{g.title}: {label}", sc, over, f"{g.title}: {against}" if against else None)
            for label, over, against in remedies(sc, g.which)]
