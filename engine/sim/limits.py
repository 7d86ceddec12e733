"""How much work a scenario implies, estimated before it runs, and the caps that refuse too much.

A valid scenario can still ask for hours of simulation or gigabytes of memory: a rate of
100,000 req/s, a drain limit of 10^7 s at a 1 µs step, a prompt cap of 1 token that splits every
prompt into thousands of pieces, a thousand classes (every step logs a row per class). The run
itself cannot be interrupted cheaply, so the cost is estimated first, from the same inputs the
run uses, and the scenario is refused with one message naming the key that drives it.

The model (constants measured with `python -m engine.sim.calibrate`, see the README):
- requests R: expected synthetic arrivals + trace rows that replay + follow-up pieces of split
  prompts (lengths sampled deterministically from each class's own distribution);
- steps S per replica, from a fluid queue: the engine serves at most μ requests/s, limited by
  the token budget (B / mean tokens per request) and by how many requests run at once — KV over
  the KV a running request holds, each request weighted by how long it holds it (a few long
  documents fill the cache most of the time), and `max_num_seqs` — over the steps a request
  takes alone (prefill chunks + output tokens). Below saturation S is at most the steps of every
  request run alone, and at most the busy time while arrivals last (prefill steps take their
  FLOPs' share, decode steps fill the rest at the step time of the running set) plus the
  longest requests' drain; above it the backlog grows at λ − μ during the arrivals and drains
  at μ, cut at `drain_limit_s`;
- queue Q: the mean number of waiting requests per step (M/M/1 below saturation, the fluid
  backlog above): waiting requests are what a step walks;
- seconds ≈ base + a·R + b·(decode-only steps) + b'·(steps with prefill) + c·S·classes + d·S·Q
  (d larger for `backfill`, which walks the whole queue), and memory ≈ base + per request + per
  step-log value (`values_per_step`: its columns + 3 per class, per step: the app expands the
  log to one row per step) + per waiting request-step.
The estimate errs high (it is a cap, not a prediction): see the README for measured ratios.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..config.cost import make_step_cost
from ..config.memory import breakdown
from ..config.scenario import Scenario, ScenarioError
from .steplog import COLUMNS

# Time and memory constants: least-squares fits from `python -m engine.sim.calibrate` on the
# development machine (2 cores, 2026-12-01, after the vLLM 0.33 rules: async scheduling and the
# prefix cache on by default; CPU time of each run), times 1.3 for time and 1.25 for memory so
# that the estimate errs high. Where an older fit was higher it is kept (prefill step, step-log
# value); the step × class term is raised to the 200-class case, which the fit underweights.
SEC_BASE = 0.05  # building frames and the summary of even a tiny run
SEC_PER_REQUEST = 33e-6
SEC_PER_STEP = 4.5e-6  # a decode-only step: O(1) bookkeeping
SEC_PER_PREFILL_STEP = 48e-6  # a step with prefill chunks: vectorised work over the running rows
SEC_PER_STEP_CLASS = 1.2e-6
SEC_PER_QUEUE_STEP = {"fcfs": 61e-9, "priority": 61e-9, "preempt": 61e-9, "backfill": 126e-9}
SEC_PER_QUEUE_STEP_AGING = 1.17e-6  # aging re-ranks every waiting request every step (priority order only)
# A strict token reserve that starves the other classes: every step walks their whole queue past
# the reserve to reach the top-priority requests behind it (two-gpus, reserve 8,191 of 8,192:
# 1.35 µs of CPU per waiting request-step, 2026-12-01; × 1.05)
SEC_PER_WALKED_QUEUE_STEP = 1.4e-6
# Behind a gateway every step is stepped (no multi-step runs) and the gateway looks at every
# boundary: measured 1.3-1.5x the run time of the same scenario without one (default, two-gpus,
# stress-100k: 4.6 s -> 6.9 s), so its estimate is scaled by the top of that range.
GATEWAY_SLOWDOWN = 1.5
# The sglang engine decides every step in Python over the running rows (no plans, no multi-step
# runs): stress-100k took 48.0 s for 130,300 steps with up to 256 running (vLLM engine: 8.4 s).
SEC_PER_SGLANG_STEP = 370e-6
# Memory: refitted after the step log became compact and the summary stopped expanding it
# (2026-12-01; × 1.25). The calibration run expands the log to one row per step, as the app does:
# about 4 bytes per count and 8 per time, plus the building.
MIB_BASE = 156.0
MIB_PER_REQUEST = 0.58e-3
MIB_PER_STEP_VALUE = 7.9e-6
MIB_PER_QUEUE_STEP = 0.31e-6
SAMPLES = 2048  # lengths drawn per class for the means (deterministic seed)
# Prefix caching hashes every full block of a request that has a prefix identity (a trace's
# `hash_ids` or prefix groups): Mooncake's conversation trace spends most of a run there. Measured
# on windows of the shipped `mooncake-conv` (Llama-3-8B, one H100; CPU with the cache on minus
# off, per prompt block): 3.6-6.3 µs; × 1.3. Not part of the least-squares fit above.
SEC_PER_HASHED_BLOCK = 8.2e-6
# `backfill` walks every waiting request a prefix hit may help, every step, and looks its blocks up
# (engine.core.walk): with Mooncake's `hash_ids` that is one lookup per waiting request-step, about
# 3.1 µs per hash id (rescue-buffer replaying mooncake-conv: 240,871 lookups, 8.0M ids, 24.5 s);
# × 1.3, charged to every waiting request-step (an upper bound: a walk cut short by the budget
# looks up fewer).
SEC_PER_QUEUE_HASH_ID = 4.0e-6


def values_per_step(classes: int) -> int:
    """Values in a step's row of the step log (its columns, and running, waiting and KV blocks per class)."""
    return len(COLUMNS) + 3 * classes


class WorkLimitError(ScenarioError):
    """A valid scenario whose estimated work is over a cap (the message names the key)."""


@dataclass(frozen=True)
class WorkLimits:
    """Caps on a scenario's estimated work; `None` means no cap on that quantity."""

    requests: float | None
    classes: int | None
    seconds: float | None
    memory_mib: float | None

    def describe(self) -> str:
        """'an estimated 60 s of simulation, 3,072 MiB, 5,000,000 requests, 256 classes' (caps set)."""
        parts = [f"an estimated {self.seconds:g} s of simulation" if self.seconds is not None else "",
                 f"{self.memory_mib:,.0f} MiB" if self.memory_mib is not None else "",
                 f"{self.requests:,.0f} requests" if self.requests is not None else "",
                 f"{self.classes} classes" if self.classes is not None else ""]
        return ", ".join(p for p in parts if p) or "no cap"


INTERACTIVE = WorkLimits(requests=50_000, classes=16, seconds=5.0, memory_mib=1024)
"""The app: one run stays within seconds and a fraction of the server's memory."""
BATCH = WorkLimits(requests=5_000_000, classes=256, seconds=30.0, memory_mib=3072)
"""The CLI's default: generous (about 8× the 100k-request benchmark, yet well inside a minute on a
busy machine); `--no-work-limit` lifts it."""


@dataclass(frozen=True)
class Work:
    """The estimate; `key_*` name the scenario key that contributes most to each quantity."""

    requests: float
    classes: int
    steps: float
    queue: float
    seconds: float
    memory_mib: float
    key_requests: str = "duration_s"
    key_steps: str = "duration_s"
    parts: dict = field(default_factory=dict, compare=False)


@dataclass
class _Load:
    """Traffic as additive sums over requests (one class, or one replica's share of several)."""

    n: float = 0.0
    prompt: float = 0.0  # Σ prompt tokens
    prompt_sq: float = 0.0  # Σ prompt² (attention work of prefill grows with its square)
    output: float = 0.0  # Σ output tokens
    own: float = 0.0  # Σ steps each request takes alone: ceil(prompt / chunk) + output
    prefill_own: float = 0.0  # Σ ceil(prompt / chunk): steps with a prefill chunk, if none overlap
    kv_own: float = 0.0  # Σ (prompt + output) × own: KV a request holds, weighted by how long it holds it
    starved: float = 0.0  # Σ (prompt + output) of the classes a strict top-priority token reserve shuts out of it
    tail: float = 0.0  # the 99th percentile of `own` (not a sum: the longest requests drain last)

    def add(self, other: _Load, share: float = 1.0) -> None:
        for f in ("n", "prompt", "prompt_sq", "output", "own", "prefill_own", "kv_own", "starved"):
            setattr(self, f, getattr(self, f) + share * getattr(other, f))
        self.tail = max(self.tail, other.tail)


def estimate_work(sc: Scenario) -> Work:
    """The work `simulate(sc)` implies (ScenarioError if the scenario cannot even be sized,
    e.g. a trace that cannot be read or a model that leaves no KV memory)."""
    from ..config.workload import _from_trace, lengths, rng_for

    mem = breakdown(sc)
    cost = make_step_cost(sc.cost, mem)
    s = sc.scheduler
    chunk = min(s.long_prefill_token_threshold or s.max_num_batched_tokens, s.max_num_batched_tokens)
    names = sc.class_names
    loads: dict[str, _Load] = {}
    keys: dict[str, str] = {}

    kv_tokens = mem.usable_blocks * mem.block_size  # one of num_gpu_blocks is vLLM's null block
    priorities = [sc.request_class(n).priority for n in names]
    reserve = sc.mitigations.p0_token_reserve if len(set(priorities)) > 1 else 0
    # a strict reserve leaves the other classes B − R tokens a step, for prefill and decode alike
    others_budget = s.max_num_batched_tokens - (reserve if sc.mitigations.reserve_mode == "strict" else 0)

    def add(name: str, n: float, prompt: np.ndarray, output: np.ndarray, key: str) -> None:
        caps = sc.request_class(name).caps
        starved = others_budget < s.max_num_batched_tokens and sc.request_class(name).priority > min(priorities)
        never = prompt + output > kv_tokens  # rejected at arrival: the engine never runs them
        if not s.chunked_prefill:
            never |= prompt > s.max_num_batched_tokens
        if never.any():
            n *= 1.0 - float(never.mean())
            prompt, output = prompt[~never], output[~never]
        pieces = np.ones(len(prompt))
        if caps.max_prompt_tokens is not None:
            over = prompt > caps.max_prompt_tokens
            if caps.over_cap == "reject":
                n *= 1.0 - float(over.mean()) if len(prompt) else 1.0
                prompt, output, pieces = prompt[~over], output[~over], pieces[~over]
            else:  # pieces run one after another: count each as a request of its own
                pieces = np.ceil(prompt / caps.max_prompt_tokens)
                prompt, output = prompt / pieces, np.ceil(output / pieces)
                if pieces.mean() > 1.5:
                    key = f"classes.{name}.caps.max_prompt_tokens"
        if not len(prompt) or n <= 0:
            return
        w = pieces / len(prompt)  # per-sample weight: pieces per sampled request
        prefill = np.ceil(prompt / (min(chunk, others_budget) if starved else chunk))
        own = prefill + output
        load = _Load(n=n * pieces.mean(), prompt=n * float(w @ prompt), prompt_sq=n * float(w @ (prompt * prompt)),
                     output=n * float(w @ output), own=n * float(w @ own), prefill_own=n * float(w @ prefill),
                     kv_own=n * float(w @ ((prompt + output) * own)),
                     starved=n * float(w @ (prompt + output)) if starved else 0.0, tail=float(np.percentile(own, 99)))
        prev = loads.setdefault(name, _Load())
        if load.n >= prev.n:  # the class's key is that of its larger part (synthetic or trace)
            keys[name] = key
        prev.add(load)

    for name in names:
        if name not in sc.classes:
            continue
        spec = sc.classes[name]
        n = _expected_arrivals(sc, spec.arrival)
        if n <= 0:
            continue
        prompt = lengths(spec.prompt, SAMPLES, rng_for(0, "estimate-prompt", name)).astype(float)
        output = lengths(spec.output, SAMPLES, rng_for(0, "estimate-output", name)).astype(float)
        rate_key = "times" if spec.arrival.process == "times" else "rate"
        add(name, n, prompt, output, f"classes.{name}.arrival.{rate_key}")
    hashed_blocks = hash_ids = 0.0  # blocks of requests with a prefix identity; Mooncake ids per request
    if sc.trace is not None:
        _, prompt, output, cls, ident = _from_trace(sc, names)
        if ident is not None and sc.kv.prefix_caching:
            src, _, hashes = ident
            named = src >= 0
            named[list(hashes)] = True
            hashed_blocks = float(np.ceil(prompt[named] / sc.kv.block_size).sum())
            hash_ids = sum(len(h) for h in hashes.values())
        for ci in np.unique(cls).tolist():
            rows = cls == ci
            add(names[ci], float(rows.sum()), prompt[rows].astype(float), output[rows].astype(float),
                "trace.limit" if sc.trace.limit is not None else "duration_s")  # what bounds the rows replayed

    requests = sum(v.n for v in loads.values())
    ids_per_request = hash_ids / requests if requests else 0.0
    key_requests = keys[max(loads, key=lambda k: loads[k].n)] if loads else "duration_s"
    steps = queue_steps = prefill_steps = starved_steps = walked = 0.0
    for mix in _replica_loads(sc, loads):
        st, qs, starved = _replica_steps(sc, mix, kv_tokens, chunk, cost, others_budget)
        steps += st
        queue_steps += qs
        prefill_steps += min(st, mix.prefill_own)
        starved_steps += starved
        walked += qs if starved else 0.0
    n_cls = len(names)
    per_step = values_per_step(n_cls)
    aging = sc.mitigations.aging_s > 0 and s.policy != "fcfs"
    seconds = (SEC_BASE + SEC_PER_REQUEST * requests + SEC_PER_STEP * (steps - prefill_steps)
               + SEC_PER_PREFILL_STEP * prefill_steps + SEC_PER_STEP_CLASS * steps * n_cls
               + (SEC_PER_QUEUE_STEP[s.policy] + SEC_PER_QUEUE_STEP_AGING * aging) * queue_steps
               + SEC_PER_WALKED_QUEUE_STEP * walked
               + (SEC_PER_SGLANG_STEP * steps if s.engine == "sglang" else 0.0)
               + SEC_PER_HASHED_BLOCK * hashed_blocks
               + (SEC_PER_QUEUE_HASH_ID * ids_per_request * queue_steps if s.policy == "backfill" else 0.0))
    if sc.gateway is not None and sc.gateway.enabled:
        seconds *= GATEWAY_SLOWDOWN
    memory = (MIB_BASE + MIB_PER_REQUEST * requests + MIB_PER_STEP_VALUE * steps * per_step
              + MIB_PER_QUEUE_STEP * queue_steps)
    min_dt = cost(1, 1.0, 1)
    hard = sc.replicas.count * (sc.duration_s + sc.drain_limit_s) / min_dt
    prompt_mean = sum(v.prompt for v in loads.values()) / requests if requests else 0.0
    if starved_steps >= steps / 2:  # the other classes crawl through what a strict reserve leaves them
        key_steps = "mitigations.p0_token_reserve"
    elif steps >= 0.99 * hard:
        key_steps = "drain_limit_s"
    elif prefill_steps > steps / 2 and chunk < prompt_mean / 4:  # prompts crawl in tiny chunks
        small = s.long_prefill_token_threshold and s.long_prefill_token_threshold < s.max_num_batched_tokens
        key_steps = "scheduler.long_prefill_token_threshold" if small else "scheduler.max_num_batched_tokens"
    else:
        key_steps = key_requests
    return Work(requests=float(requests), classes=n_cls, steps=float(steps),
                queue=float(queue_steps / steps) if steps else 0.0, seconds=float(seconds),
                memory_mib=float(memory), key_requests=key_requests, key_steps=key_steps,
                parts={"queue_steps": float(queue_steps), "prefill_steps": float(prefill_steps), "min_step_s": min_dt,
                       "starved_steps": float(starved_steps), "hashed_blocks": hashed_blocks})


ADVICE = {"rate": "lower it or duration_s", "times": "use fewer times or a shorter duration_s",
          "max_prompt_tokens": "raise it, or use over_cap: reject",
          "long_prefill_token_threshold": "raise it, or 0 (off)",
          "max_num_batched_tokens": "raise it", "drain_limit_s": "lower it", "limit": "set or lower it",
          "duration_s": "lower it"}


def check_work(sc: Scenario, limits: WorkLimits, work: Work | None = None) -> Work:
    """The estimate, or WorkLimitError (a ScenarioError) naming the key when it is over a limit."""
    w = work or estimate_work(sc)

    def how(key: str) -> str:
        return f"; {ADVICE.get(key.rsplit('.', 1)[-1], 'lower it')}"

    if limits.classes is not None and w.classes > limits.classes:
        raise WorkLimitError(f"classes: {w.classes} classes is more than the {limits.classes} allowed here")
    if limits.requests is not None and w.requests > limits.requests:
        raise WorkLimitError(f"{w.key_requests}: the scenario implies about {_n(w.requests)} requests, more than "
                             f"the {_n(limits.requests)} allowed here{how(w.key_requests)}")
    if limits.seconds is not None and w.seconds > limits.seconds:
        raise WorkLimitError(f"{w.key_steps}: the scenario implies about {_n(w.steps)} engine steps with about "
                             f"{_n(w.queue)} requests waiting per step, an estimated {w.seconds:,.0f} s of "
                             f"simulation (limit {limits.seconds:g} s){how(w.key_steps)}")
    if limits.memory_mib is not None and w.memory_mib > limits.memory_mib:
        key = "classes" if w.classes > 16 else w.key_steps
        raise WorkLimitError(f"{key}: the run would need an estimated {w.memory_mib:,.0f} MiB of memory "
                             f"({_n(w.steps)} steps × {w.classes} classes, {_n(w.requests)} requests; "
                             f"limit {limits.memory_mib:,.0f} MiB){how(key) if key != 'classes' else ''}")
    return w


@dataclass(frozen=True)
class Stop:
    """When a run gives up: after `seconds` of CPU time (what the estimate predicts, whatever else the
    machine runs) or `steps` engine steps (None: no limit).

    The estimate refuses before a run what would pass a limit, but it is a model: a run it lets
    through that outlives the limit all the same is stopped there, with a message naming the key
    that drives its work (`key`, from the estimate) instead of running on."""

    seconds: float | None = None
    steps: float | None = None
    key: str = "duration_s"

    def watch(self, steps_done):
        """A check to call now and then during the run: raises WorkLimitError past a limit.
        `steps_done()` counts the steps simulated so far."""
        deadline = time.process_time() + self.seconds if self.seconds is not None else math.inf
        most = self.steps if self.steps is not None else math.inf

        def check(now: float) -> None:
            done = steps_done()
            over_time = time.process_time() > deadline
            if done > most or over_time:
                limit = f"{self.seconds:g} s of simulation" if over_time else f"{_n(most)} engine steps"
                raise WorkLimitError(f"{self.key}: the run passed its limit of {limit} after {_n(done)} steps "
                                     f"({now:,.1f} s of simulated time) and was stopped; "
                                     f"{ADVICE.get(self.key.rsplit('.', 1)[-1], 'lower it')}")

        return check


def _n(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:,.1f}M"
    return f"{x:,.0f}"


def _expected_arrivals(sc: Scenario, a) -> float:
    if a.process == "times":
        return float(sum(t < sc.duration_s for t in a.times or ()))
    span = max(sc.duration_s - a.start_s, 0.0)
    share = a.on_s / (a.on_s + a.off_s) if a.process == "on_off" else 1.0
    return a.rate * span * share


def _replica_loads(sc: Scenario, loads: dict[str, _Load]) -> list[_Load]:
    """Each replica's share: `shared` splits everything evenly, `pinned` each class over its pins."""
    count = sc.replicas.count
    mixes = [_Load() for _ in range(count)]
    pin = sc.replicas.pin or {}
    for name, load in loads.items():
        where = sorted(set(pin[name])) if sc.replicas.routing == "pinned" and name in pin else list(range(count))
        for r in where:
            mixes[r].add(load, 1.0 / len(where))
    return mixes


def _replica_steps(sc: Scenario, m: _Load, kv_tokens: int, chunk: int, cost,
                   others_budget: int) -> tuple[float, float, float]:
    """(steps, Σ waiting requests over steps, steps when the reserve's starvation binds, else 0)
    of one replica, from the fluid model above. Near
    saturation (λ/μ between 1/2 and 2) the engine alternates full prefill steps and short decode
    steps in proportions the fluid model cannot tell, so the larger of the two branches is taken;
    classes a strict token reserve starves need at least their tokens / (B − R) steps."""
    if m.n <= 0:
        return 0.0, 0.0, 0.0
    s = sc.scheduler
    d, drain = sc.duration_s, sc.drain_limit_s
    p_mean, o_mean, own_mean = m.prompt / m.n, m.output / m.n, m.own / m.n
    tokens = max(p_mean + o_mean, 1.0)
    # how many run at once: KV over the KV a running request holds, weighting each request by how
    # long it holds it (a few long documents fill the cache most of the time)
    held = max(m.kv_own / m.own, 1.0)
    running = max(1.0, min(float(s.max_num_seqs), kv_tokens / held))
    per_step = min(s.max_num_batched_tokens / tokens, running / own_mean)  # requests finished per step
    step_tokens = min(float(s.max_num_batched_tokens), per_step * tokens)
    context = running * (p_mean + o_mean / 2)
    dt_sat = cost(max(int(step_tokens), 1), context + step_tokens * p_mean / 2, int(context))
    dt_min = cost(1, 1.0, 1)
    mu = per_step / dt_sat  # requests per second at saturation
    lam = m.n / d
    hard = (d + drain) / dt_min
    steps, queue_steps = _above(m, d, drain, lam, mu, dt_sat, hard) if lam >= mu else (0.0, 0.0)
    if lam < 2 * mu:
        below = _below(sc, m, lam, min(lam, 0.99 * mu) / mu, running, chunk, cost, dt_min, hard)
        steps, queue_steps = max(steps, below[0]), max(queue_steps, below[1])
    if m.starved:
        starved = min(m.starved / others_budget, hard)
        if starved >= steps:  # the starved classes' backlog: about half their requests wait at a time
            return starved, max(queue_steps, starved * m.n / 2), starved
    return steps, queue_steps, 0.0


def _below(sc: Scenario, m: _Load, lam: float, rho: float, running: float, chunk: int, cost, dt_min: float,
           hard: float) -> tuple[float, float]:
    """Below saturation the engine alternates compute-bound prefill steps and memory-bound decode
    steps. Prefill takes a share of each second (its FLOPs); decode steps fill the rest at the
    step time of the running set (Little's law for its size, a fixed point)."""
    s, d = sc.scheduler, sc.duration_s
    p_mean, o_mean = m.prompt / m.n, m.output / m.n
    prefill_steps = m.prompt / min(float(s.max_num_batched_tokens), chunk * running)
    if cost.fixed_s is None:
        flops = lam * (m.prompt * cost.flops_per_token + m.prompt_sq / 2 * cost.attn_flops_per_unit) / m.n
        prefill_share = min(0.9, flops / cost.flops_rate)
    else:  # every step lasts the same: prefill steps take their count's share of the time
        prefill_share = min(0.9, prefill_steps * cost.fixed_s / d)
    dt = dt_min
    for _ in range(30):
        run = min(running, lam * o_mean * dt / (1 - prefill_share))
        ctx = run * (p_mean + o_mean / 2)
        dt = cost(max(int(run), 1), ctx + 1.0, int(ctx))
    busy = d * (1 - prefill_share) / dt + prefill_steps
    steps = min(m.own, busy + m.tail, hard)  # busy while arrivals last, then the longest drain
    queue = min(m.n, rho * rho / (1 - rho))
    return steps, steps * queue


def _above(m: _Load, d: float, drain: float, lam: float, mu: float, dt_sat: float, hard: float) -> tuple[float, float]:
    """Above saturation the backlog grows at λ − μ while arrivals last and drains at μ, cut at the
    drain limit."""
    peak = (lam - mu) * d
    drain_s = min(peak / mu, drain)
    end = max(0.0, peak - mu * drain)
    steps = min((d + drain_s) / dt_sat, hard)
    queue_steps = (d / dt_sat) * peak / 2 + (drain_s / dt_sat) * (peak + end) / 2
    return steps, queue_steps
