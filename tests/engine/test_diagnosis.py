"""The decision's first two steps: P0's wait by reason over seeds (`engine.sweeps.diagnosis`) and the rule
from it to remedies (`engine.sweeps.remedy_rule`), on hand-worked tallies and on real runs."""

import pytest

from engine import load, simulate
from engine.sim.wait_tally import RunTally, tally
from engine.sweeps.diagnosis import diagnose
from engine.sweeps.evidence import RunSamples
from engine.sweeps.remedy_rule import SIGNIFICANT, suggest


def run(seconds, kv_need=(), prompts=(1000,), holders=None, policy="priority", budget=8192, kv_blocks=2000):
    holders = holders or {}
    return RunTally("P0", 0, dict(seconds), tuple(kv_need), tuple(prompts),
                    {c: s for c, (s, _b) in holders.items()}, {c: tuple(b) for c, (_s, b) in holders.items()},
                    budget, kv_blocks, policy)


def test_shares_pool_seconds_over_seeds_and_keep_each_seeds_share():
    # seed 1: 3 s on KV, 1 s on the budget; seed 2: 1 s on the budget; seed 3: P0 never waited
    d = diagnose([run({"kv_short": 3.0, "token_budget": 1.0}), run({"token_budget": 1.0}), run({})])
    assert list(d.shares) == ["kv_short", "token_budget"]  # most time first
    kv, tb = d.shares["kv_short"], d.shares["token_budget"]
    assert kv.value == pytest.approx(3 / 5) and tb.value == pytest.approx(2 / 5)  # Σ seconds / Σ wait
    assert kv.per_seed == (0.75, 0.0, None) and (kv.lo, kv.hi) == (0.0, 0.75)  # no wait: no share
    assert tb.per_seed == (0.25, 1.0, None) and (tb.lo, tb.hi) == (0.25, 1.0)
    assert d.wait_s.value == pytest.approx(5 / 3) and d.wait_s.per_seed == (4.0, 1.0, 0.0)
    assert d.share("head_of_line") == 0.0 and d.seeds == 3


def test_sizes_are_the_90th_percentile_pooled_over_seeds_and_the_main_holder_is_by_seconds():
    a = run({"kv_short": 1.0}, kv_need=range(1, 11), prompts=range(100, 1100, 100),
            holders={"P2": (2.0, [900, 1000]), "P1": (0.5, [50])})
    b = run({"kv_short": 1.0}, kv_need=range(11, 21), prompts=range(1100, 2100, 100), holders={"P1": (1.0, [60])})
    d = diagnose([a, b])
    assert d.kv_need == 19  # numpy's linear P90 of 1..20 = 18.1, rounded up
    assert d.prompt == 1810  # of 100, 200, …, 2000 (1810.0000000002 in floating point: not 1811)
    assert d.holder == "P2" and d.holder_blocks == 990  # P2 held for 2 s against P1's 1.5 s


def test_waits_only_on_the_budget_suggest_a_lendable_token_reserve_of_p0s_prompt():
    d = diagnose([run({"token_budget": 2.0}, prompts=[900] * 9 + [5000])])
    (r,) = suggest(d)
    assert r.parts == ("token_reserve",)
    # P90 of nine 900s and one 5000 is 1310 → rounded up to 1536 (steps of 256)
    assert r.overrides == {"mitigations.p0_token_reserve": 1536, "mitigations.reserve_mode": "lendable"}
    capped = suggest(diagnose([run({"token_budget": 2.0}, prompts=[9000], budget=8192)]))
    assert capped[0].overrides["mitigations.p0_token_reserve"] == 4096  # never more than half the budget


def test_kv_short_with_a_long_low_priority_holder_suggests_a_kv_reserve_and_splitting_its_prompts():
    d = diagnose([run({"kv_short": 4.0}, kv_need=[150], holders={"P2": (4.0, [1600])}, kv_blocks=2073)])
    got = {r.key: r.overrides for r in suggest(d)}
    split = {"classes.P2.caps.max_prompt_tokens": 4096, "classes.P2.caps.over_cap": "split"}  # half the budget
    assert got == {
        "kv_reserve": {"mitigations.p0_kv_reserve": 160},  # 150 blocks rounded up to 16s
        "holder_split": split,  # one P2 held 1600 blocks × 16 tokens, far over half a step's 8192
        "kv_reserve+holder_split": {"mitigations.p0_kv_reserve": 160, **split},
    }


def test_kv_short_behind_many_shorter_holders_caps_how_many_of_them_run():
    # P2 requests of 200 blocks (3,200 tokens: under half the budget) held the cache
    d = diagnose([run({"kv_short": 4.0}, kv_need=[150], holders={"P2": (4.0, [200])}, kv_blocks=2073)])
    # as many P2 as fit beside one P0 prompt: (2073 − 150) // 200 = 9
    assert {r.key: r.overrides for r in suggest(d)}["holder_cap"] == {"classes.P2.caps.max_running": 9}


def test_both_reasons_combine_every_remedy_and_a_small_reason_suggests_nothing():
    d = diagnose([run({"kv_short": 3.0, "token_budget": 1.0}, kv_need=[100], holders={"P2": (3.0, [150])})])
    keys = [r.key for r in suggest(d)]
    assert keys == ["token_reserve", "kv_reserve", "holder_cap", "token_reserve+kv_reserve+holder_cap"]
    combined = suggest(d)[-1]
    assert combined.overrides == {"mitigations.p0_token_reserve": 1024, "mitigations.reserve_mode": "lendable",
                                  "mitigations.p0_kv_reserve": 112, "classes.P2.caps.max_running": 12}
    assert combined.answers == ("token_budget", "kv_short")
    tiny = SIGNIFICANT / 2
    assert [r.key for r in suggest(diagnose([run({"kv_short": 1 - tiny, "token_budget": tiny},
                                                 kv_need=[100])]))] == ["kv_reserve"]
    assert suggest(diagnose([run({})])) == []  # P0 never waited: nothing to fix


def test_fcfs_is_fixed_first_and_the_rest_read_the_diagnosis_under_priority():
    before = diagnose([run({"head_of_line": 9.0, "token_budget": 1.0}, policy="fcfs")])
    assert [r.key for r in suggest(before)] == ["priority"]  # until the traffic is diagnosed again
    after = diagnose([run({"kv_short": 1.0, "token_budget": 1.0}, kv_need=[40], holders={"P2": (1.0, [800])})])
    got = suggest(before, after)
    assert [r.key for r in got] == ["priority", "priority+token_reserve", "priority+kv_reserve",
                                    "priority+holder_split", "priority+token_reserve+kv_reserve+holder_split"]
    assert all(r.overrides["scheduler.policy"] == "priority" for r in got)
    assert got[0].answers == ("head_of_line",)


def test_under_priority_a_head_of_line_wait_is_a_wait_for_blocks():
    d = diagnose([run({"head_of_line": 0.95, "kv_short": 0.05}, kv_need=[64])])
    assert [r.key for r in suggest(d)] == ["kv_reserve"]
    assert suggest(d)[0].answers == ("kv_short", "head_of_line")


def test_tally_of_real_runs_budget_bound_waits_on_the_budget_classic_inversion_on_kv():
    t = tally(simulate(load("budget-bound")))
    assert set(t.seconds) == {"token_budget"} and t.top == "P0" and t.policy == "priority"
    assert not t.kv_need and not t.holder_seconds and t.budget == 8192
    assert [r.key for r in suggest(diagnose([t]))] == ["token_reserve"]
    res = simulate(load("classic-inversion", {"scheduler.policy": "priority"}))
    k = tally(res)
    assert k.seconds["kv_short"] > k.seconds.get("token_budget", 0) and k.kv_need and max(k.kv_need) <= k.kv_blocks
    assert max(k.holder_seconds, key=k.holder_seconds.get) == "P2"
    waits = res.waits[res.waits["priority"] == 0]
    assert sum(k.seconds.values()) == pytest.approx(waits["duration_s"].sum())
    assert RunSamples.of(res).waits == k  # what a page worker sends back carries it
