"""Mapping a trace's requests to the scenario's classes (`trace.assign`): hand-worked cases, bad rules,
and properties over random rules (every request in exactly one class, the same classes for a seed).

Real traces have no classes. The rule: `sample` first (each request, by one seeded draw per row of
the trace in arrival order, goes to a sampled class with its share), then `by` (`prompt_length`:
`edges` split prompt lengths, a prompt equal to an edge goes above it; `fraction`; `column`).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import ScenarioError, from_dict, simulate
from engine.config.workload import _assign, _from_trace, rng_for

NAMES = ["P0", "P1", "P2"]
CLASSES = {n: {"priority": i, "arrival": {"rate": 0}} for i, n in enumerate(NAMES)}  # fed by the trace only
EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "150"))


def scenario(assign: dict | None, seed: int = 0, path: str = "azure-code", **trace) -> object:
    return from_dict({"seed": seed, "classes": CLASSES, "trace": {"path": path, "assign": assign, **trace}})


def classes_of(assign: dict | None, prompts: list[int], seed: int = 0) -> list[str]:
    sc = scenario(assign, seed)
    cls = _assign(sc, sc.class_names, pd.DataFrame({"prompt_tokens": prompts}))
    return [sc.class_names[c] for c in cls]


# ---------------------------------------------------------------------------------------------
# Hand-worked


def test_prompt_length_edges_send_an_equal_prompt_above_the_edge():
    rule = {"by": "prompt_length", "edges": [100, 1000], "classes": ["P0", "P1", "P2"]}
    assert classes_of(rule, [1, 99, 100, 101, 999, 1000, 7000]) == ["P0", "P0", "P1", "P1", "P1", "P2", "P2"]


def test_long_prompts_to_batch_short_to_standard_and_a_sampled_share_to_p0():
    """Shares 0 and 1 need no random numbers: nothing sampled, or everything."""
    rule = {"by": "prompt_length", "edges": [4096], "classes": ["P1", "P2"]}
    prompts = [10, 4095, 4096, 9000]
    assert classes_of({**rule, "sample": {"P0": 0.0}}, prompts) == ["P1", "P1", "P2", "P2"]
    assert classes_of({**rule, "sample": {"P0": 1.0}}, prompts) == ["P0"] * 4
    assert classes_of({**rule, "sample": {"P2": 0.0, "P0": 1.0}}, prompts) == ["P0"] * 4


def test_the_sample_is_one_draw_per_trace_row_against_the_cumulative_shares():
    """Row k: u_k from the seed's "assign-sample" stream; u < 0.2 → P0, 0.2 ≤ u < 0.5 → P2, else by length."""
    rule = {"by": "prompt_length", "edges": [4096], "classes": ["P1", "P2"], "sample": {"P0": 0.2, "P2": 0.3}}
    prompts = [100] * 40 + [5000] * 40
    u = rng_for(7, "assign-sample").random(len(prompts))
    expect = ["P0" if x < 0.2 else "P2" if x < 0.5 else ("P1" if p < 4096 else "P2") for x, p in zip(u, prompts)]
    got = classes_of(rule, prompts, seed=7)
    assert got == expect
    assert {"P0", "P1", "P2"} <= set(got)  # all three occur: the case tests something
    assert got != classes_of(rule, prompts, seed=8)  # another seed, another sample


def test_a_request_keeps_its_class_when_the_window_moves():
    """The draw belongs to the trace row, not to its place in the replayed window."""
    rule = {"by": "prompt_length", "edges": [4096], "classes": ["P1", "P2"], "sample": {"P0": 0.3}}

    def by_arrival(**trace) -> dict[float, str]:
        sc = from_dict({"seed": 3, "duration_s": trace.pop("duration_s", 100.0),
                        "classes": CLASSES,
                        "trace": {"path": "azure-conv", "assign": rule, **trace}})
        t, _, _, cls, _ = _from_trace(sc, sc.class_names)
        return {round(float(a) + trace.get("start_s", 0.0), 6): sc.class_names[c] for a, c in zip(t, cls)}

    whole = by_arrival(duration_s=200.0)
    later = by_arrival(start_s=50.0, duration_s=150.0)
    capped = by_arrival(duration_s=200.0, limit=100)
    assert len(later) > 100 and len(capped) == 100
    assert all(whole[k] == v for k, v in later.items())
    assert all(whole[k] == v for k, v in capped.items())
    assert "P0" in later.values()


def test_a_replay_puts_the_sampled_share_near_its_target_on_the_real_trace():
    """azure-code, all 8,819 rows: 10 % sampled to P0 (binomial: 881.9 ± 28.2, so within ± 4 sd);
    the rest split at 4,096 tokens exactly."""
    sc = from_dict({"seed": 1, "duration_s": 4000,
                    "classes": CLASSES,
                    "trace": {"path": "azure-code", "assign": {"by": "prompt_length", "edges": [4096],
                                                               "classes": ["P1", "P2"], "sample": {"P0": 0.1}}}})
    _, prompt, _, cls, _ = _from_trace(sc, sc.class_names)
    n = len(cls)
    assert n == 8819
    p0 = int((cls == 0).sum())
    assert abs(p0 - 0.1 * n) < 4 * np.sqrt(n * 0.1 * 0.9)
    rest = cls != 0
    assert np.array_equal(cls[rest], np.where(prompt[rest] >= 4096, 2, 1))


# ---------------------------------------------------------------------------------------------
# Bad rules: one line naming the key


@pytest.mark.parametrize(("assign", "must"), [
    ({"by": "prompt_length", "edges": [4096], "classes": ["P1", "P9"]}, ("trace.assign.classes", "'P9'", "P0, P1, P2")),
    ({"by": "fraction", "fractions": {"P1": 1, "Q": 1}}, ("trace.assign.fractions.Q", "'Q'")),
    ({"by": "prompt_length", "edges": [10], "classes": ["P1", "P2"], "sample": {"X": 0.1}}, ("sample.X", "'X'")),
    ({"by": "prompt_length", "edges": [10], "classes": ["P1", "P2"], "sample": {"P0": -0.1}}, ("from 0 to 1",)),
    ({"by": "prompt_length", "edges": [10], "classes": ["P1", "P2"], "sample": {"P0": 0.7, "P1": 0.4}},
     ("add up to 1.1",)),
    ({"by": "prompt_length", "edges": [10], "classes": ["P1", "P2"], "sample": {"P0": float("nan")}}, ("sample",)),
    ({"by": "prompt_length", "edges": [10, 5], "classes": ["P0", "P1", "P2"]}, ("increasing",)),
    ({"by": "prompt_length", "edges": [10], "classes": ["P1"]}, ("one more `classes`",)),
])
def test_bad_rules_are_one_line_naming_what_is_wrong(assign, must):
    with pytest.raises(ScenarioError) as info:
        scenario(assign)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 400
    for word in must:
        assert word in msg, (word, msg)


# ---------------------------------------------------------------------------------------------
# Properties over random rules


@st.composite
def rules(draw):
    prompts = draw(st.lists(st.integers(1, 20_000), min_size=1, max_size=200))
    k = draw(st.integers(0, 3))
    edges = sorted(draw(st.lists(st.integers(1, 20_000), min_size=k, max_size=k)))
    by = draw(st.sampled_from(["prompt_length", "fraction"]))
    if by == "prompt_length":
        rule = {"by": by, "edges": edges or [1], "classes": draw(st.lists(st.sampled_from(NAMES),
                                                                         min_size=len(edges or [1]) + 1,
                                                                         max_size=len(edges or [1]) + 1))}
    else:
        names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
        weights = draw(st.lists(st.floats(0.01, 10), min_size=len(names), max_size=len(names)))
        rule = {"by": by, "fractions": dict(zip(names, weights))}
    sampled = draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
    if sampled:
        raw = draw(st.lists(st.floats(0, 1), min_size=len(sampled), max_size=len(sampled)))
        total = max(sum(raw), 1.0)
        rule["sample"] = {n: r / total for n, r in zip(sampled, raw)}
    return rule, prompts, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(rules())
def test_every_request_lands_in_exactly_one_named_class_the_same_for_a_seed(case):
    rule, prompts, seed = case
    sc = scenario(rule, seed)
    df = pd.DataFrame({"prompt_tokens": prompts})
    cls = _assign(sc, sc.class_names, df)
    assert cls.shape == (len(prompts),)  # one class per request, no request lost or doubled
    assert set(cls.tolist()) <= {sc.class_names.index(n) for _, n in sc.trace.assign.named_classes()}
    assert np.array_equal(cls, _assign(sc, sc.class_names, df))  # deterministic for the seed
    assert np.array_equal(cls, _assign(scenario(rule, seed), sc.class_names, df.copy()))
    if rule["by"] == "prompt_length":  # a request not taken by the sample follows its length
        u = rng_for(seed, "assign-sample").random(len(prompts))
        free = u >= sum((rule.get("sample") or {}).values())
        by_len = np.array([sc.class_names.index(c) for c in rule["classes"]])[
            np.searchsorted(rule["edges"], prompts, side="right")]
        assert np.array_equal(cls[free], by_len[free])


@settings(max_examples=max(EXAMPLES // 5, 10), deadline=None, derandomize=True)
@given(rules(), st.integers(0, 100))
def test_a_replay_runs_every_mapped_request_once(case, start):
    """Through the whole run: each replayed trace row is one request, of the class the rule gives."""
    rule, _, seed = case
    sc = from_dict({"seed": seed, "duration_s": 20, "cost": {"model": "fixed", "step_time_s": 0.05},
                    "kv": {"num_blocks": 4000},
                    "classes": CLASSES,
                    "trace": {"path": "azure-conv", "start_s": float(start), "assign": rule}})
    t, _, _, cls, _ = _from_trace(sc, sc.class_names)
    res = simulate(sc)
    assert len(res.requests) == len(t)
    got = res.requests.sort_values(["arrival_s", "id"])["class"].astype(str).tolist()
    order = np.lexsort((cls, t))
    assert got == [sc.class_names[c] for c in cls[order]]
