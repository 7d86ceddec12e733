"""Sweeps: a base scenario × a grid / random / Latin-hypercube sample over dotted keys × seeds.

A spec is a small YAML file (README, *Sweeps and capacity planning*):

    base: default                        # a shipped scenario name or a YAML path (relative to the spec)
    set: {duration_s: 60}                # fixed overrides applied to every run
    grid:                                # the cartesian product of these values
      scheduler.policy: [fcfs, priority]
    sample:                              # and/or n sampled points (× the grid)
      method: lhs                        # lhs (Latin hypercube) or random
      n: 16
      seed: 0
      keys:
        mitigations.p0_token_reserve: {low: 0, high: 2048, int: true}
        classes.P2.arrival.rate: {low: 0.02, high: 0.2, log: true}
    seeds: 3                             # the base seed and the next two; or a list [1, 5, 9]

Every run is identified by a stable hash of its canonical scenario JSON, so a rerun into the same
output skips what is done, whichever spec produced it. This module is pure (no UI): it parses,
validates and expands specs, and runs them (`engine.sweeps.sweep_runner`: batches on a backend of
`engine.sweeps.sweep_exec`) into an output directory (`engine.sweeps.sweep_store`). `Run`,
`SweepError` and `knob_columns` live in `engine.sweeps.sweep_runs`, which the store shares
(imported here too, under the old names).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config.scenario import ScenarioError, apply_overrides, from_dict, load_raw, parse_yaml, read_yaml
from ..sim.preflight import validate
from .sweep_runner import Bar, OwnBackend, Session, run_batches
from .sweep_runs import Run, SweepError, knob_columns, run_id  # noqa: F401 (knob_columns, run_id: re-exported)
from .sweep_store import Store

SPEC_KEYS = ("name", "description", "base", "set", "grid", "sample", "seeds", "plan")
SAMPLE_KEYS = ("method", "n", "seed", "keys")
RANGE_KEYS = ("low", "high", "int", "log", "choices")
MAX_RUNS = 1_000_000


# ---------------------------------------------------------------------------------------------
# The spec


@dataclass(frozen=True)
class Range:
    """One sampled dimension: a numeric range (optionally integer / log-uniform) or a list of choices."""

    low: float = 0.0
    high: float = 1.0
    integer: bool = False
    log: bool = False
    choices: tuple | None = None

    def value(self, u: float) -> Any:
        """The value at quantile u ∈ [0, 1)."""
        if self.choices is not None:
            return self.choices[min(len(self.choices) - 1, int(u * len(self.choices)))]
        if self.integer:
            lo, hi = int(self.low), int(self.high)
            return min(hi, lo + int(u * (hi - lo + 1)))
        if self.log:
            x = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
            return float(min(self.high, max(self.low, x)))  # exp(log(x)) may round just outside
        return float(self.low + u * (self.high - self.low))


@dataclass(frozen=True)
class Sample:
    method: str  # "lhs" or "random"
    n: int
    seed: int
    keys: dict[str, Range]

    def points(self) -> list[dict[str, Any]]:
        """n points; the same spec always gives the same points (numpy's PCG64 is platform-stable).

        Latin hypercube: each dimension is cut into n equal strata and every stratum is hit once
        (a random permutation per dimension, jittered within the stratum). A dozen lines of numpy
        do it; scipy.stats.qmc would add a 40 MB dependency for this one function.
        """
        rng = np.random.default_rng(self.seed)
        d = len(self.keys)
        if self.method == "lhs":
            u = np.column_stack([(rng.permutation(self.n) + rng.random(self.n)) / self.n for _ in range(d)])
        else:
            u = rng.random((self.n, d))
        return [{k: r.value(float(u[i, j])) for j, (k, r) in enumerate(self.keys.items())} for i in range(self.n)]


@dataclass(frozen=True)
class Spec:
    """A parsed, validated spec. `base_data` is the base scenario's plain data with `set` applied."""

    name: str
    base: str
    base_data: dict[str, Any]
    grid: dict[str, list]
    sample: Sample | None
    seeds: tuple[int, ...]
    plan: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def knobs(self) -> list[str]:
        """The swept dotted keys, in the order they become table columns."""
        return list(self.grid) + (list(self.sample.keys) if self.sample else [])

    def points(self) -> list[dict[str, Any]]:
        """Knob settings (without the seed): the grid's product × the sample's points."""
        grid = [dict(zip(self.grid, combo)) for combo in itertools.product(*self.grid.values())]
        sampled = self.sample.points() if self.sample else [{}]
        return [{**g, **s} for g in grid for s in sampled]


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file (SweepError naming the bad key if it is not usable)."""
    path = Path(path)
    return parse_spec(read_yaml(path), origin=path.name, folder=path.parent, default_name=path.stem)


def parse_spec(data: Any, origin: str = "spec", folder: Path | None = None, default_name: str = "sweep") -> Spec:
    """Validate a spec mapping. Every dotted key and value is tried on the base scenario, so an
    error names the spec key (`grid.scheduler.polcy: unknown key`) before anything runs."""
    if isinstance(data, str):
        data = parse_yaml(data, origin)
    if not isinstance(data, dict):
        raise SweepError(f"{origin}: a spec must be a mapping of keys")
    unknown = [k for k in data if k not in SPEC_KEYS]
    if unknown:
        raise SweepError(f"{origin}: {unknown[0]}: unknown key (a spec has {', '.join(SPEC_KEYS)})")
    base = data.get("base")
    if not isinstance(base, str) or not base:
        raise SweepError(f"{origin}: base: name a shipped scenario (e.g. default) or a scenario .yaml path")
    base_path = Path(base)
    if folder is not None and base_path.suffix in (".yaml", ".yml") and not base_path.is_absolute():
        base = str(folder / base_path)
    try:
        base_data = load_raw(base)
    except ScenarioError as err:
        raise SweepError(f"{origin}: base: {err}") from None
    fixed = data.get("set") or {}
    if not isinstance(fixed, dict):
        raise SweepError(f"{origin}: set: expected a mapping of dotted keys to values")
    try:
        base_data = apply_overrides(base_data, fixed)
    except ScenarioError as err:
        raise SweepError(f"{origin}: set: {err}") from None
    _validate(base_data, {}, f"{origin}: {'set' if fixed else 'base'}")
    grid = _grid(data.get("grid"), origin)
    sample = _sample(data.get("sample"), origin)
    for key in list(grid) + (list(sample.keys) if sample else []):
        _check_key(key, origin)
        if key in fixed:
            raise SweepError(f"{origin}: {key}: set in `set` and swept; keep one")
    if sample and set(grid) & set(sample.keys):
        raise SweepError(f"{origin}: {sorted(set(grid) & set(sample.keys))[0]}: both in grid and sample; keep one")
    for key, values in grid.items():
        for v in values:
            _validate(base_data, {key: v}, f"{origin}: grid.{key} = {v!r}")
    if sample:
        for key, r in sample.keys.items():
            ends = r.choices if r.choices is not None else (r.value(0.0), r.value(0.999999))
            for v in ends:
                _validate(base_data, {key: v}, f"{origin}: sample.keys.{key} = {v!r}")
    seeds = _seeds(data.get("seeds", 1), int(from_dict(base_data).seed), origin)
    plan = data.get("plan")
    if plan is not None and not isinstance(plan, dict):
        raise SweepError(f"{origin}: plan: expected a mapping (see README, python -m engine plan)")
    name = data.get("name") or default_name
    return Spec(name=str(name), base=str(data["base"]), base_data=base_data, grid=grid, sample=sample,
                seeds=seeds, plan=plan, raw=data)


def _validate(data: dict, overrides: dict, where: str) -> None:
    try:
        sc = from_dict(apply_overrides(data, overrides) if overrides else data)

        validate(sc)
    except ScenarioError as err:
        raise SweepError(f"{where}: {err}") from None


def _check_key(key: Any, origin: str) -> None:
    if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
        raise SweepError(f"{origin}: {key!r}: expected a dotted key such as scheduler.policy")
    if key == "seed":
        raise SweepError(f"{origin}: seed: sweep seeds with `seeds:` (a count or a list), not as a key")
    if key.split(".")[0] in ("name", "title", "description", "base"):
        raise SweepError(f"{origin}: {key}: not a setting that changes a run")


def _grid(grid: Any, origin: str) -> dict[str, list]:
    if grid is None:
        return {}
    if not isinstance(grid, dict):
        raise SweepError(f"{origin}: grid: expected a mapping of dotted keys to lists of values")
    out = {}
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{origin}: grid.{key}: expected a non-empty list of values")
        out[key] = values
    return out


def _sample(sample: Any, origin: str) -> Sample | None:
    if sample is None:
        return None
    if not isinstance(sample, dict):
        raise SweepError(f"{origin}: sample: expected a mapping with method, n, seed and keys")
    bad = [k for k in sample if k not in SAMPLE_KEYS]
    if bad:
        raise SweepError(f"{origin}: sample.{bad[0]}: unknown key (use {', '.join(SAMPLE_KEYS)})")
    method = sample.get("method", "lhs")
    if method not in ("lhs", "random"):
        raise SweepError(f"{origin}: sample.method = {method!r}: use lhs or random")
    n, seed = sample.get("n"), sample.get("seed", 0)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_RUNS:
        raise SweepError(f"{origin}: sample.n = {n!r}: expected a whole number of points, 1..{MAX_RUNS}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SweepError(f"{origin}: sample.seed = {seed!r}: expected a whole number >= 0")
    keys = sample.get("keys")
    if not isinstance(keys, dict) or not keys:
        raise SweepError(f"{origin}: sample.keys: expected a mapping of dotted keys to ranges")
    return Sample(method, n, seed, {k: _range(v, f"{origin}: sample.keys.{k}") for k, v in keys.items()})


def _range(spec: Any, where: str) -> Range:
    if isinstance(spec, list):
        spec = {"choices": spec}
    if not isinstance(spec, dict):
        raise SweepError(f"{where}: expected {{low, high}} (with int/log) or a list of choices")
    bad = [k for k in spec if k not in RANGE_KEYS]
    if bad:
        raise SweepError(f"{where}.{bad[0]}: unknown key (use {', '.join(RANGE_KEYS)})")
    if "choices" in spec:
        if not isinstance(spec["choices"], list) or not spec["choices"] or len(spec) > 1:
            raise SweepError(f"{where}: choices: expected a non-empty list (and no low/high)")
        return Range(choices=tuple(spec["choices"]))
    lo, hi = spec.get("low"), spec.get("high")
    for k, v in (("low", lo), ("high", hi)):
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
            raise SweepError(f"{where}.{k} = {v!r}: expected a number")
    if lo > hi:
        raise SweepError(f"{where}: low ({lo}) must be <= high ({hi})")
    integer, log = bool(spec.get("int", False)), bool(spec.get("log", False))
    if log and lo <= 0:
        raise SweepError(f"{where}: log needs low > 0 (got {lo})")
    if integer and (lo != int(lo) or hi != int(hi)):
        raise SweepError(f"{where}: int needs whole-number low and high")
    return Range(float(lo), float(hi), integer, log)


def _seeds(seeds: Any, base_seed: int, origin: str) -> tuple[int, ...]:
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if not 1 <= seeds <= 100_000:
            raise SweepError(f"{origin}: seeds = {seeds}: a count of seeds is 1..100000 (or give a list)")
        out = tuple(base_seed + k for k in range(seeds))
    elif isinstance(seeds, list) and seeds:
        out = tuple(seeds)
    else:
        raise SweepError(f"{origin}: seeds = {seeds!r}: expected a count or a non-empty list of seeds")
    if any(not isinstance(s, int) or isinstance(s, bool) or not 0 <= s <= 2**32 - 1 for s in out):
        raise SweepError(f"{origin}: seeds: every seed must be a whole number 0..{2**32 - 1}")
    if len(set(out)) != len(out):
        raise SweepError(f"{origin}: seeds: each seed once")
    return out


# ---------------------------------------------------------------------------------------------
# Runs


def make_run(base_data: dict, knobs: dict[str, Any], seed: int) -> Run:
    """The run of `base_data` with `knobs` and `seed` set (SweepError naming them if invalid)."""
    try:
        sc = from_dict(apply_overrides(base_data, {**knobs, "seed": seed}))

        validate(sc)
    except ScenarioError as err:
        shown = ", ".join(f"{k}={v!r}" for k, v in knobs.items()) or "the base scenario"
        raise SweepError(f"run {shown} (seed {seed}): {err}") from None
    key = sc.key()
    return Run(key, run_id(key), knobs, seed)


def expand(spec: Spec) -> list[Run]:
    """Every run of the spec: points × seeds, in a fixed order (a point's seeds together)."""
    points = spec.points()
    total = len(points) * len(spec.seeds)
    if total > MAX_RUNS:
        raise SweepError(f"{spec.name}: {total:,} runs is more than {MAX_RUNS:,}; split the sweep")
    runs = [make_run(spec.base_data, p, s) for p in points for s in spec.seeds]
    seen: dict[str, Run] = {}
    for r in runs:  # two points that give the same scenario (e.g. a cap equal to the default) run once
        seen.setdefault(r.run_id, r)
    return list(seen.values())


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class Outcome:
    """What a sweep did: runs planned, skipped (already in the output), run now; where it wrote."""

    out: Path
    total: int
    skipped: int
    ran: int
    status: str  # "complete" or "interrupted"
    wall_s: float


def run_sweep(spec: Spec, out: str | Path, backend=None, *, spec_path: str | None = None, fresh: bool = False,
              progress: bool = True, checkpoint_s: float = 5.0, batch: int | None = None) -> Outcome:
    """Run every run of `spec` not yet in `out`, writing parts as they finish; consolidate at the end.

    Ctrl-C (KeyboardInterrupt) stops the workers, saves what finished and leaves a valid partial
    output: the outcome's status is then "interrupted", and rerunning the same call resumes.
    Unlike a plan's rounds, every run is known up front: those already in `out` are skipped by id
    (their rows stay on disk) and the rest stream into the store."""
    runs = expand(spec)
    store = Store.open(out, kind="sweep", spec=spec.raw, spec_path=spec_path, fresh=fresh)
    store.set_runs(runs, knobs=spec.knobs)
    todo = [r for r in runs if r.run_id not in store.done]
    todo_ids = {r.run_id for r in todo}
    t0 = time.perf_counter()

    def info() -> dict:
        return {"wall_s": round(time.perf_counter() - t0, 3), "ran": len(store.done & todo_ids)}

    with Session(store, backend, checkpoint_s=checkpoint_s, info=info) as s:
        s.bar = Bar(len(todo), len(runs) - len(todo), spec.name) if progress and todo else None
        s.execute(todo, store.add, batch=batch)
    ran = len(store.done & todo_ids)
    return Outcome(store.out, len(runs), len(runs) - len(todo), ran, s.status, time.perf_counter() - t0)


def run_summaries(keys: Sequence[str], *, workers: int | None = None, backend=None,
                  progress: Callable[[float], None] | None = None) -> list[dict]:
    """Summaries of many scenarios (canonical JSON keys), in order: the sweep machinery without an
    output directory (the app's P99 page). Identical keys run once. `progress(fraction)` is
    called as batches finish. A scenario the engine refuses raises ScenarioError."""
    from .sweep_exec import run_batch_summaries

    unique = list(dict.fromkeys(keys))
    if not unique:
        return []
    got: dict[str, dict] = {}

    def on_batch(batch: list[str], results: list[dict]) -> None:
        for key, res in zip(batch, results):
            if "error" in res and len(res) == 1:
                raise ScenarioError(res["error"])
            got[key] = res
        if progress:
            progress(len(got) / len(unique))

    with OwnBackend(backend, workers) as b:
        run_batches(unique, b, on_batch, task=run_batch_summaries)
    return [got[k] for k in keys]
