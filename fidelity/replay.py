"""Replay the recorded corpus through this project's engine and compare it with vLLM, step by step.

    python -m fidelity.replay [--modes fcfs,async] [--dt 0.1] [--limit N] [--show 3] [--explain]

Each workload becomes an engine scenario: fixed step time DT (`cost.model: fixed`),
`kv.num_blocks` = vLLM's `num_gpu_blocks`, budget, seats, chunk cap, watermark, policy, and the
requests as a simulator-format trace (arrival = arrival_step × DT as a short decimal, 0.3 rather
than 0.30000000000000004; exact prompt and output lengths; one class per priority;
`prefix_group` / `prefix_tokens` columns when prefix caching is on). Engine times map back to
steps: first scheduled = t / DT, first token and finish = t / DT − 1 (the engine stamps them at
the end of the step), a step row's index = t_s / DT (idle
gaps included). A workload agrees when every request's first-scheduled, first-token and finish
steps and preemption count (and prefix-cache hit tokens, when the engine reports
`cached_tokens`) equal vLLM's, and every step's token total does.

`--explain` names, for each shown workload, the smallest set of vLLM rules (those of
`fidelity.reference`) whose absence reproduces the engine's result exactly.

Keys the engine may not know yet (`scheduler.async_scheduling`, `kv.prefix_caching`,
`scheduler.long_prefill_token_threshold_adaptive`) are set only when the engine's schema has them;
a workload that needs one the engine lacks is reported as unsupported, not failed.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from . import corpus

DEFAULT_DT = 0.1

# corpus config flag -> (engine dotted key, value the engine behaves as when it lacks the key)
OPTIONAL_KEYS = {
    "async_scheduling": ("scheduler.async_scheduling", False),
    "enable_prefix_caching": ("kv.prefix_caching", False),
    "long_prefill_token_threshold_adaptive": ("scheduler.long_prefill_token_threshold_adaptive", False),
}
REQUEST_FIELDS = ("first_scheduled", "first_token", "finish", "preemptions")


class Unsupported(Exception):
    """The workload needs a scenario key the engine does not have yet."""


@cache
def engine_knows(dotted: str) -> bool:
    """Whether the engine's scenario schema has this key (validated with a harmless value)."""
    from engine.config.scenario import ScenarioError, apply_overrides, from_dict

    probe = {"kv": {"num_blocks": 10}}
    try:
        from_dict(apply_overrides(probe, {dotted: False}))
    except ScenarioError as err:
        return f"{dotted}: unknown key" not in str(err)
    return True


def scenario(wl: dict, trace_path: Path, dt: float, blocks_offset: int = 0) -> dict:
    """The engine scenario (plain data) for one corpus workload; writes its trace CSV.
    `blocks_offset` (diagnosis only) shifts `kv.num_blocks`, e.g. -1 to give an engine without
    a null block vLLM's usable count."""
    cfg, reqs = wl["config"], wl["requests"]
    sched = {
        "policy": cfg["policy"],
        "max_num_batched_tokens": cfg["max_num_batched_tokens"],
        "max_num_seqs": cfg["max_num_seqs"],
        "long_prefill_token_threshold": cfg["long_prefill_token_threshold"],
        "watermark": cfg["watermark"],
        "chunked_prefill": True,
    }
    data = {
        "name": wl["id"],
        "seed": 0,
        "duration_s": (max(r[0] for r in reqs) + 1) * dt,
        "drain_limit_s": 1e6 * dt,
        "kv": {"block_size": cfg["block_size"], "num_blocks": cfg["num_gpu_blocks"] + blocks_offset},
        "cost": {"model": "fixed", "step_time_s": dt},
        "scheduler": sched,
        "classes": {f"p{p}": {"priority": p, "arrival": {"rate": 0}} for p in sorted({r[3] for r in reqs})},
        "trace": {"path": str(trace_path), "format": "simulator", "assign": {"by": "column"}},
    }
    for flag, (dotted, legacy) in OPTIONAL_KEYS.items():
        value = cfg[flag]
        if engine_knows(dotted):
            section, key = dotted.split(".")
            data[section][key] = value
        elif value != legacy:
            raise Unsupported(f"{dotted}: unknown key")
    prefix = cfg["enable_prefix_caching"]
    head = "arrived_at,num_prefill_tokens,num_decode_tokens,class" + (",prefix_group,prefix_tokens" if prefix else "")
    rows = [head]
    for arrival, prompt, output, prio, group, ptoks, _parent in reqs:
        row = f"{round(arrival * dt, 9)!r},{prompt},{output},p{prio}"  # 0.3, as a trace writes it
        rows.append(row + (f",{group},{ptoks}" if prefix else ""))
    trace_path.write_text("\n".join(rows) + "\n")
    return data


def _step(t: float, dt: float, shift: int = 0) -> int | None:
    return None if t != t else round(t / dt) - shift


def engine_steps(result, dt: float) -> tuple[list[list], dict[int, int]]:
    """Per request [first_scheduled, first_token, finish, preemptions, cached_tokens|None] and
    {step: tokens} (non-zero steps) from an engine Result, in step units."""
    df = result.requests.sort_values("id")
    cached = df["cached_tokens"].tolist() if "cached_tokens" in df.columns else [None] * len(df)
    rows = [
        [_step(fs, dt), _step(ft, dt, 1), _step(fi, dt, 1), int(pre), None if c is None else int(c)]
        for fs, ft, fi, pre, c in zip(df["first_scheduled_s"], df["first_token_s"], df["finish_s"],
                                      df["preemptions"], cached)
    ]
    steps: dict[int, int] = {}
    st = result.steps
    for t, tok in zip(st["t_s"], st["prefill_tokens"] + st["decode_tokens"]):
        if tok:
            k = round(t / dt)
            steps[k] = steps.get(k, 0) + int(tok)
    return rows, steps


@dataclass
class Comparison:
    """One workload: vLLM (corpus) against the engine."""

    id: str
    requests: int
    agreeing: int
    step_diffs: list[tuple[int, int, int]] = field(default_factory=list)  # (step, vllm, engine)
    request_diffs: list[tuple[int, list, list]] = field(default_factory=list)  # (id, vllm, engine)
    unsupported: str = ""
    engine: tuple[list[list], dict[int, int]] | None = None  # the engine's rows and step tokens

    @property
    def agrees(self) -> bool:
        return not self.unsupported and not self.step_diffs and not self.request_diffs

    def describe(self, limit: int = 3) -> str:
        if self.unsupported:
            return f"{self.id}: unsupported by the engine yet ({self.unsupported})"
        parts = [f"{self.id}: {self.agreeing}/{self.requests} requests agree"]
        if self.step_diffs:
            k, a, b = self.step_diffs[0]
            parts.append(f"first differing step {k}: vLLM {a} tokens, engine {b} ({len(self.step_diffs)} steps differ)")
        names = ["first_scheduled", "first_token", "finish", "preemptions", "cached_tokens"]
        for rid, v, e in sorted(self.request_diffs, key=lambda d: _first_diff_step(d[1], d[2]))[:limit]:
            diff = ", ".join(f"{n} {a}≠{b}" for n, a, b in zip(names, v, e) if b is not None and a != b)
            parts.append(f"request {rid}: {diff}")
        return "; ".join(parts)


def _first_diff_step(v: list, e: list) -> int:
    steps = [min(a, b if b is not None else math.inf) for a, b in zip(v[:3], e[:3]) if a != b]
    return min(steps) if steps else 10**9


def compare(wl: dict, engine_rows: list[list], engine_step_tokens: dict[int, int]) -> Comparison:
    vllm_rows = wl["result"]["requests"]
    diffs = []
    for rid, (v, e) in enumerate(zip(vllm_rows, engine_rows)):
        mine = [v[0], v[1], v[2], v[3], v[4]]
        theirs = list(e) + [None] * (5 - len(e))
        if any(b is not None and a != b for a, b in zip(mine[4:], theirs[4:])) or mine[:4] != theirs[:4]:
            diffs.append((rid, mine, theirs))
    vllm_steps = {k: t for k, t in enumerate(wl["result"]["step_tokens"]) if t}
    step_diffs = [(k, vllm_steps.get(k, 0), engine_step_tokens.get(k, 0))
                  for k in sorted(set(vllm_steps) | set(engine_step_tokens))
                  if vllm_steps.get(k, 0) != engine_step_tokens.get(k, 0)]
    n = len(vllm_rows)
    return Comparison(wl["id"], n, n - len(diffs), step_diffs, diffs, engine=(engine_rows, engine_step_tokens))


def explain(wl: dict, comparison: Comparison, max_rules: int = 4) -> tuple[str, ...] | None:
    """The smallest set of vLLM rules (`reference.RULES`) whose absence reproduces the engine's
    result exactly: the reference model with those rules dropped behaves like the engine on this
    workload. None if no set of up to `max_rules` does (e.g. a time-grid error, or a new rule)."""
    from itertools import combinations

    from .reference import RULES, Model, agrees

    if comparison.engine is None:
        return None
    rows, steps = comparison.engine
    want_rows = [list(r[:4]) for r in rows]
    n = max(steps) + 1 if steps else 0
    want_steps = [steps.get(k, 0) for k in range(n)]
    # only rules that change this workload at all can be part of the explanation
    candidates = [r for r in RULES if not agrees(wl, {r})[0]]
    for k in range(1, max_rules + 1):
        for drop in combinations(candidates, k):
            try:
                got = Model(wl, set(drop)).run()
            except (RuntimeError, KeyError, ValueError):
                continue
            if got["step_tokens"] == want_steps and [r[:4] for r in got["requests"]] == want_rows:
                return drop
    return None


def replay(wl: dict, dt: float = DEFAULT_DT, workdir: Path | None = None, blocks_offset: int = 0) -> Comparison:
    """Run one corpus workload through the engine and compare."""
    from engine import from_dict, simulate

    n = len(wl["requests"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(workdir or tmp) / f"{wl['id']}.csv"
        try:
            data = scenario(wl, path, dt, blocks_offset)
        except Unsupported as why:
            return Comparison(wl["id"], n, 0, unsupported=str(why))
        result = simulate(from_dict(data))
    rows, steps = engine_steps(result, dt)
    return compare(wl, rows, steps)


@dataclass
class ModeReport:
    mode: str
    comparisons: list[Comparison]

    @property
    def unsupported(self) -> str:
        reasons = sorted({c.unsupported for c in self.comparisons if c.unsupported})
        return "; ".join(reasons)

    @property
    def workloads_agreeing(self) -> int:
        return sum(c.agrees for c in self.comparisons)

    @property
    def requests_agreeing(self) -> int:
        return sum(c.agreeing for c in self.comparisons if not c.unsupported)

    @property
    def requests(self) -> int:
        return sum(c.requests for c in self.comparisons)

    def line(self) -> str:
        n = len(self.comparisons)
        if self.unsupported and all(c.unsupported for c in self.comparisons):
            return f"{self.mode:>13}: unsupported by the engine yet ({self.unsupported})"
        w, r = self.workloads_agreeing, self.requests_agreeing
        return (f"{self.mode:>13}: {w}/{n} workloads agree ({100 * w / n:.1f} %), "
                f"{r}/{self.requests} requests ({100 * r / max(self.requests, 1):.1f} %)")

    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.agrees]


def replay_mode(mode: str, dt: float = DEFAULT_DT, limit: int | None = None,
                directory: Path = corpus.CORPUS_DIR, blocks_offset: int = 0) -> ModeReport:
    _, workloads = corpus.read(corpus.corpus_path(mode, directory))
    if limit is not None:
        workloads = workloads[:limit]
    return ModeReport(mode, [replay(wl, dt, blocks_offset=blocks_offset) for wl in workloads])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fidelity.replay", description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="", help="comma-separated modes (default: every mode in the corpus)")
    ap.add_argument("--dt", type=float, default=DEFAULT_DT, help="fixed step time in seconds")
    ap.add_argument("--limit", type=int, default=None, help="only the first N workloads per mode")
    ap.add_argument("--show", type=int, default=1, help="differing workloads to describe per mode")
    ap.add_argument("--explain", action="store_true",
                    help="name the vLLM rules whose absence reproduces the engine on each shown workload")
    ap.add_argument("--blocks-offset", type=int, default=0,
                    help="diagnosis: add this to kv.num_blocks (-1: give the engine vLLM's usable count)")
    ap.add_argument("--dir", type=Path, default=corpus.CORPUS_DIR, help="corpus directory")
    args = ap.parse_args(argv)
    available = corpus.modes(args.dir)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()] or available
    missing = [m for m in modes if m not in available]
    if missing:
        print(f"error: no corpus for mode(s) {', '.join(missing)} in {args.dir}", file=sys.stderr)
        return 2
    header, _ = corpus.read(corpus.corpus_path(modes[0], args.dir))
    print(f"corpus: vLLM {header['vllm_version']} ({header.get('vllm_commit', '')}), step time {args.dt} s")
    t0 = time.perf_counter()
    for mode in modes:
        rep = replay_mode(mode, args.dt, args.limit, args.dir, args.blocks_offset)
        print(rep.line(), flush=True)
        wls = {w["id"]: w for w in corpus.read(corpus.corpus_path(mode, args.dir))[1]}
        for c in [c for c in rep.failures() if not c.unsupported][: args.show]:
            print("    " + c.describe())
            if args.explain:
                why = explain(wls[c.id], c)
                print("      engine = vLLM without: " + (" + ".join(why) if why else
                      "no combination of up to 4 named rules (time grid? a rule not in the model?)"))
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
