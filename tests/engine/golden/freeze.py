"""Golden results: frozen outputs of the engine that a rewrite must reproduce.

`cases.json` holds the workloads (plain scenario mappings, so the file is self-contained):
every shipped scenario × every policy, derandomized random small workloads, and overloaded
long-queue workloads — under vLLM's default async scheduling — and a few of them again with
synchronous scheduling (`*/sync`, `*-sync/*`). `expected.json` holds, per case, a fingerprint of each result frame and
the summary. The fingerprint is taken over a canonical form of the frames (`canonical`), which
is the one place to adapt when a frame's *representation* changes but its content must not.

    python -m tests.engine.golden.freeze            # write cases.json and expected.json
    python -m tests.engine.golden.freeze --dump DIR # also write every canonical frame as CSV (debugging)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pandas as pd

from engine import from_dict, simulate
from engine.config.scenario import apply_overrides, load_raw
from engine.sim.metrics import clean

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases.json"
EXPECTED = HERE / "expected.json"
SHIPPED = ["default", "classic-inversion", "aging", "inheritance", "kv-cap", "preempt", "rescue-buffer", "prefix-cache",
           "separate-replicas"]
POLICIES = ["fcfs", "priority", "backfill", "preempt"]


# ---------------------------------------------------------------------------------------------
# Workloads


def random_small(rng: random.Random) -> dict:
    """A small random scenario over every policy and knob (the property tests' shape)."""
    n_classes = rng.randint(1, 3)
    per_class = max(1, 25 // n_classes)
    num_blocks, budget = rng.randint(8, 200), rng.randint(8, 256)
    classes = {}
    for k in range(n_classes):
        times = [round(rng.random(), 3) for _ in range(rng.randint(1, per_class))]
        caps: dict = {}
        if rng.random() < 0.5:
            caps["max_running"] = rng.randint(1, 4)
        if rng.random() < 0.5:
            caps["max_kv_blocks"] = rng.randint(1, num_blocks)
        if rng.random() < 0.5:
            caps["max_prompt_tokens"] = rng.randint(1, 300)
            caps["over_cap"] = rng.choice(["reject", "split"])
        classes[f"C{k}"] = {"priority": rng.randint(0, 2), "arrival": {"process": "times", "times": times},
                            "prompt": {"dist": "constant", "value": rng.randint(1, 300)},
                            "output": {"dist": "constant", "value": rng.randint(1, 40)}, "caps": caps}
    scheduler = {"policy": rng.choice(POLICIES), "max_num_batched_tokens": budget,
                 "max_num_seqs": rng.randint(1, 8)}
    if rng.random() < 0.5:
        scheduler["long_prefill_token_threshold"] = rng.randint(1, 300)
    if rng.random() < 0.5:
        scheduler["watermark"] = rng.choice([0.01, 0.05, 0.1, 0.2])
    mit: dict = {}
    if rng.random() < 0.5:
        mit["p0_token_reserve"] = rng.randint(0, budget - 1)
        mit["reserve_mode"] = rng.choice(["strict", "lendable"])
    if rng.random() < 0.5:
        mit["p0_kv_reserve"] = min(rng.randint(0, num_blocks - 1), num_blocks - 2)  # N - 1 usable (null block)
    if rng.random() < 0.3:
        mit["inheritance"] = True
    if rng.random() < 0.3:
        mit["aging_s"] = rng.choice([0.05, 0.5, 2.0])
    if rng.random() < 0.2:
        mit["alert_after_s"] = rng.choice([0.02, 0.1])
    if rng.random() < 0.1:
        mit["preempt_mode"] = "swap"
    return {"name": "prop", "seed": rng.randint(0, 5), "duration_s": 10.0, "drain_limit_s": 100_000.0,
            "kv": {"num_blocks": num_blocks, "block_size": rng.choice([1, 4, 16])},
            "cost": {"model": "fixed", "step_time_s": 0.01}, "scheduler": scheduler, "classes": classes,
            "mitigations": mit}


def overloaded(rng: random.Random) -> dict:
    """An overloaded three-class run with long queues (the long-queue tests' shape)."""
    def cls(prio, rate, prompt, out):
        return {"priority": prio, "arrival": {"rate": rate}, "prompt": {"dist": "uniform", "low": 1, "high": prompt},
                "output": {"dist": "uniform", "low": 1, "high": out}}

    data = {"seed": rng.randint(0, 10_000), "duration_s": 2.0, "drain_limit_s": 20.0,
            "kv": {"num_blocks": rng.randint(40, 200), "block_size": 4},
            "cost": {"model": "fixed", "step_time_s": 0.05},
            "scheduler": {"policy": rng.choice(POLICIES), "max_num_batched_tokens": rng.choice([16, 48, 128]),
                          "max_num_seqs": rng.randint(2, 12), "watermark": rng.choice([0.0, 0.05])},
            "mitigations": {"p0_token_reserve": rng.choice([0, 8]), "p0_kv_reserve": rng.choice([0, 10])},
            "classes": {"P0": cls(0, 15, 60, 8), "P1": cls(1, 60, 30, 8), "P2": cls(2, 10, 150, 8)}}
    cap_running, cap_kv = rng.choice([None, 2]), rng.choice([None, 60])
    if cap_running or cap_kv:
        data["classes"]["P1"]["caps"] = {"max_running": cap_running, "max_kv_blocks": cap_kv}
    return data


def prefix_async(rng: random.Random) -> dict:
    """Class system prompts the prefix cache shares (3 to 700 tokens), prompts longer than them,
    tight KV, async scheduling mostly: where freeing finished requests' blocks early changed which
    cached block the next call evicts (`outputs.take_early`)."""
    n_classes, bs = rng.randint(1, 3), rng.choice([4, 16])
    classes, most = {}, 0
    for k in range(n_classes):
        pre = rng.choice([3, 23, rng.randint(1, 4 * bs), rng.randint(bs, 700), 653])
        hi, out = pre + rng.randint(1, 300), rng.randint(1, 40)
        most = max(most, -(-(hi + out) // bs))
        times = sorted(round(rng.random() * rng.choice([0.2, 1, 3]), 3) for _ in range(rng.randint(1, 12)))
        classes[f"C{k}"] = {"priority": rng.randint(0, 2), "arrival": {"process": "times", "times": times},
                            "prompt": {"dist": "uniform", "low": pre + 1, "high": hi},
                            "output": {"dist": "uniform", "low": 1, "high": out}, "prefix_tokens": pre}
    blocks = most + 1 + rng.randint(0, most * rng.choice([0, 1, 3]))  # the longest request fits, barely or not
    return {"name": "pa", "seed": rng.randint(0, 9), "duration_s": 10.0, "drain_limit_s": 100_000.0,
            "kv": {"num_blocks": blocks, "block_size": bs, "prefix_caching": True},
            "cost": {"model": "fixed", "step_time_s": 0.01},
            "scheduler": {"policy": rng.choice(["priority", "fcfs", "backfill", "preempt"]),
                          "max_num_batched_tokens": rng.choice([16, 48, 132, 512, 2048]),
                          "max_num_seqs": rng.randint(1, 16), "async_scheduling": rng.random() < 0.8,
                          "watermark": rng.choice([0.0, 0.0, 0.01, 0.05])},
            "classes": classes}


# prefix_async workloads 177, 201 and 268 of stream 1 (of 400 drawn) were the ones on which the
# multi-step fast path found other cached tokens than vLLM's plain loop, before the fix
PREFIX_ASYNC = [177, 201, 268, *range(27)]


def build_cases() -> dict[str, dict]:
    cases: dict[str, dict] = {}
    for name in SHIPPED:
        for policy in POLICIES:
            cases[f"{name}/{policy}"] = apply_overrides(load_raw(name), {"scheduler.policy": policy})
    cases["default/roofline-threshold"] = apply_overrides(load_raw("default"), {
        "scheduler.long_prefill_token_threshold": 512, "mitigations.inheritance": True,
        "mitigations.alert_after_s": 0.5, "classes.P2.caps.max_prompt_tokens": 4096,
        "classes.P2.caps.over_cap": "split"})
    rng = random.Random(20261130)
    for k in range(80):
        cases[f"random/{k:02d}"] = random_small(rng)
    for k in range(30):
        cases[f"overloaded/{k:02d}"] = overloaded(rng)
    # vLLM's default is async scheduling; these keep the synchronous loop under the same guard
    for name in ("default", "classic-inversion"):
        cases[f"{name}/sync"] = apply_overrides(load_raw(name), {"scheduler.async_scheduling": False})
    for k in range(0, 40, 2):
        cases[f"random-sync/{k:02d}"] = apply_overrides(cases[f"random/{k:02d}"], {"scheduler.async_scheduling": False})
    for k in range(0, 30, 3):
        cases[f"overloaded-sync/{k:02d}"] = apply_overrides(cases[f"overloaded/{k:02d}"],
                                                            {"scheduler.async_scheduling": False})
    for k in range(1, 80, 4):  # every class's prompts start with a shared system prompt
        data = cases[f"random/{k:02d}"]
        cases[f"random-prefix/{k:02d}"] = apply_overrides(data, {
            f"classes.{c}.prefix_tokens": 3 + 37 * (j % 2) for j, c in enumerate(data["classes"])})
    for k in PREFIX_ASYNC:
        cases[f"prefix-async/{k:03d}"] = prefix_async(random.Random(1_000_003 + k))
    for data in cases.values():
        data.pop("description", None)
    return cases


# ---------------------------------------------------------------------------------------------
# Canonical frames and fingerprints


WAIT_COLUMNS = ["request", "class", "priority", "start_s", "end_s", "need_blocks", "free_blocks", "blocker", "eta_s",
                "replica", "duration_s", "reason", "short_by", "holders"]
ALERT_COLUMNS = ["time_s", "request", "class", "waited_s", "reason", "short_by_blocks", "holders", "eta_s", "replica"]


def canonical(res) -> dict[str, pd.DataFrame]:
    """The frames in a representation-independent form (what must not change)."""
    waits = res.waits.assign(holders=holder_strings(res, alerts=False))[WAIT_COLUMNS]
    alerts = res.alerts.assign(holders=holder_strings(res, alerts=True))[ALERT_COLUMNS]
    episodes = res.episodes[["request", "class", "priority", "start_s", "end_s", "steps", "overtakers",
                             "duration_s"]].sort_values(["request", "start_s"], kind="stable").reset_index(drop=True)
    return {"requests": res.requests, "steps": res.steps, "waits": waits, "episodes": episodes, "alerts": alerts}


def holder_strings(res, alerts: bool) -> list[str]:
    """Each wait segment's (or alert's) top holders as "id:class:blocks …" (the first representation)."""
    frame = res.alerts if alerts else res.waits
    if "holders" in frame.columns:
        return frame["holders"].astype(str).replace("nan", "").tolist()
    h = res.holders[res.holders["alert"] == alerts].sort_values(["wait", "rank"])
    text = {w: " ".join(f"{r}:{c}:{b}" for r, c, b in zip(g["request"], g["class"].astype(str), g["blocks"]))
            for w, g in h.groupby("wait", sort=False)}
    return [text.get(w, "") for w in frame["wait" if alerts else "id"]]


def fingerprint(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(repr(list(df.columns)).encode())
    h.update(str(len(df)).encode())
    for col in df.columns:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(str)
        if s.dtype == object or pd.api.types.is_string_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
            h.update("\x1f".join(map(str, s.tolist())).encode())
        else:
            a = np.ascontiguousarray(s.to_numpy(dtype=np.float64))
            a = np.where(np.isnan(a), np.nan, a) + 0.0  # one NaN pattern, no negative zero
            h.update(a.tobytes())
    return h.hexdigest()[:20]


def summary_of(res) -> dict:
    s = json.loads(json.dumps(clean(res.summary)))
    s.pop("wall_time_s", None)
    return s


def run_case(data: dict, **options):
    return simulate(from_dict(data), **options)


def expected_of(res) -> dict:
    return {"frames": {k: fingerprint(v) for k, v in canonical(res).items()}, "summary": summary_of(res)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", type=Path, help="also write every canonical frame as CSV here")
    args = ap.parse_args()
    cases = build_cases()
    CASES.write_text(json.dumps(cases, indent=0, sort_keys=True) + "\n")
    expected = {}
    for name, data in cases.items():
        res = run_case(data)
        expected[name] = expected_of(res)
        if args.dump:
            for k, df in canonical(res).items():
                out = args.dump / name.replace("/", "__")
                out.mkdir(parents=True, exist_ok=True)
                df.to_csv(out / f"{k}.csv", index=False, float_format="%.17g")
    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"{len(cases)} cases frozen")


if __name__ == "__main__":
    main()
