"""The vectorised pre-filter for long queues (skipping policies) must not change anything.

`VLLMRules._schedule_waiting` walks only the requests that can fit when the queue is long and the
policy skips misfits; these tests run the same overloaded workloads with the pre-filter on for
every queue length and with the plain walk (`shortcuts=False`), and require identical frames.
"""

from __future__ import annotations

import pandas.testing as pdt
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import from_dict, simulate
from tests.support.rules import keeping


def overloaded(seed: int, blocks: int, budget: int, max_seqs: int, reserve: int, kv_reserve: int,
               cap_running: int | None, cap_kv: int | None, watermark: float, system_prompt: int = 0) -> dict:
    cls = lambda prio, rate, prompt, out: {  # noqa: E731
        "priority": prio, "arrival": {"rate": rate},
        "prompt": {"dist": "uniform", "low": 1, "high": prompt}, "output": {"dist": "uniform", "low": 1, "high": out}}
    data = {
        "seed": seed, "duration_s": 2.0, "drain_limit_s": 20.0,
        "kv": {"num_blocks": blocks, "block_size": 4},
        "cost": {"model": "fixed", "step_time_s": 0.05},
        "scheduler": {"policy": "backfill", "max_num_batched_tokens": budget, "max_num_seqs": max_seqs,
                      "watermark": watermark},
        "mitigations": {"p0_token_reserve": reserve, "p0_kv_reserve": kv_reserve},
        "classes": {"P0": cls(0, 15, 60, 8), "P1": cls(1, 60, 30, 8), "P2": cls(2, 10, 150, 8)},
    }
    if system_prompt:  # prefix-cache hits shrink some needs: those requests must still be walked
        data["classes"]["P1"]["prefix_tokens"] = system_prompt
        data["classes"]["P1"]["prompt"] = {"dist": "uniform", "low": system_prompt + 1, "high": system_prompt + 30}
    if cap_running or cap_kv:
        data["classes"]["P1"]["caps"] = {"max_running": cap_running, "max_kv_blocks": cap_kv}
    return data


def run_both(data: dict, seen: list | None = None):
    """The plain walk and the pre-filtered one (`seen`: keeps the latter's rulebook, with its counts)."""
    sc = from_dict(data)
    walk_all = simulate(sc, shortcuts=False)
    filtered = simulate(sc, prefilter_min_queue=0, around=keeping(seen if seen is not None else []))
    return walk_all, filtered


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), blocks=st.integers(40, 200), budget=st.sampled_from([16, 48, 128]),
       max_seqs=st.integers(2, 12), reserve=st.sampled_from([0, 8]), kv_reserve=st.sampled_from([0, 10]),
       cap_running=st.sampled_from([None, 2]), cap_kv=st.sampled_from([None, 60]),
       watermark=st.sampled_from([0.0, 0.05]), system_prompt=st.sampled_from([0, 0, 12]))
def test_prefilter_changes_nothing(seed, blocks, budget, max_seqs, reserve, kv_reserve,
                                   cap_running, cap_kv, watermark, system_prompt):
    a, b = run_both(overloaded(seed, blocks, budget, max_seqs, reserve, kv_reserve, cap_running, cap_kv,
                               watermark, system_prompt))
    for name in ("requests", "steps", "waits", "holders", "admissions", "episodes"):
        pdt.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)


def test_the_long_queue_case_is_really_long():
    """Guard against a vacuous test: the workloads above do build queues well over the threshold,
    and the pre-filter really runs (and leaves requests out of the walk)."""
    seen = []
    a, _ = run_both(overloaded(1, 60, 16, 12, 0, 0, None, None, 0.0), seen)
    waiting = a.steps[[c for c in a.steps if c.startswith("waiting_P")]].sum(axis=1)
    assert waiting.max() > 50
    assert seen[0].paths.prefilters > 10 and seen[0].paths.prefilters_leaving_out > 0


def test_the_prefilter_runs_beside_the_prefix_cache():
    """With a class system prompt (hits possible) and preemptions (cached segments), the pre-filter
    still runs, walks every request a hit may help, and changes nothing."""
    seen = []
    a, b = run_both(overloaded(1, 60, 16, 12, 0, 0, None, None, 0.0, system_prompt=12), seen)
    assert seen[0].paths.prefilters_with_hits > 10
    for name in ("requests", "steps", "waits", "holders", "admissions", "episodes"):
        pdt.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
