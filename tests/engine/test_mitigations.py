"""Hand-worked timelines for each mitigation's mechanism (fixed 1 s steps, exact numbers)."""

from __future__ import annotations

import pytest
from timeline_helpers import row, waits_of

HOG = {"P0": (0, [(0.5, 8, 1)]), "P1": (1, [(0.0, 40, 1)])}


def test_token_reserve_strict(simulate_case):
    """Budget 8. A (P1, 40 tokens) alone: 8 per step. B (P0, 8 tokens) arrives at 0.5.
    No reserve: A takes the whole budget until t=5, B's first token at t=6 (TTFT 5.5).
    Strict reserve of 4: A only ever gets 4 tokens (first token at t=10); B draws 4 from the
    reserve at t=1 and t=2 → first token at t=3 (TTFT 2.5). The reserve sits idle at t=0 and
    t=3..9: 32 of 80 budget tokens."""
    kw = dict(blocks=100, budget=8)
    plain = simulate_case(HOG, **kw)
    res = simulate_case(HOG, **kw, overrides={"mitigations.p0_token_reserve": 4})
    assert row(plain, "P0").ttft_s == 5.5 and row(plain, "P1").first_token_s == 5.0
    assert row(res, "P0").ttft_s == 2.5 and row(res, "P1").first_token_s == 10.0
    assert res.steps["reserve_idle"].tolist() == [4, 0, 0] + [4] * 7
    assert res.summary["reserve_idle_token_frac"] == pytest.approx(32 / 80)


def test_token_reserve_lendable_lends_when_no_p0_needs_it(simulate_case):
    """Lendable: at t=0 no P0 is waiting, so A gets all 8; from t=1 B is waiting/prefilling and
    the reserve is held back; after B's prompt is done A gets the full budget again.
    A: 8 (t=0), 4, 4, 8, 8, 8 → 40 at t=6. B: 4, 4 → first token t=3."""
    res = simulate_case(HOG, blocks=100, budget=8,
                        overrides={"mitigations.p0_token_reserve": 4, "mitigations.reserve_mode": "lendable"})
    assert row(res, "P0").ttft_s == 2.5
    assert row(res, "P1").first_token_s == 6.0
    assert res.summary["reserve_idle_token_frac"] == 0.0


KV_CASE = {"P0": (0, [(0.5, 8, 1)]), "P1": (1, [(0.0, 16, 4), (0.0, 16, 4)])}


def test_kv_reserve_keeps_room_for_p0(simulate_case):
    """10 blocks of 4. Two P1 requests (16 tokens, 4 outputs: 4 then 5 blocks each) and B (P0,
    2 blocks) at 0.5. No reserve: both P1 admitted at t=0 and grow to 10 blocks at t=1; B waits
    kv_short until they finish at t=4 (TTFT 4.5). Reserve 3 (P1 may use 7): the 2nd P1 does not
    fit outside the reserve (`reserve`); B takes 2 blocks at t=1 (TTFT 1.5); the 2nd P1 starts
    when the 1st finishes at t=4."""
    plain = simulate_case(KV_CASE, policy="priority")
    res = simulate_case(KV_CASE, policy="priority", overrides={"mitigations.p0_kv_reserve": 3})
    assert row(plain, "P0").ttft_s == 4.5
    assert row(res, "P0").ttft_s == 1.5
    second = row(res, "P1", 1)
    assert second.first_scheduled_s == 4.0
    # t=1: B took 2 blocks, the pool itself is short (kv_short); from t=2 only the reserve is left.
    assert waits_of(res, second.id) == [(0.0, 1.0, "reserve"), (1.0, 2.0, "kv_short"), (2.0, 4.0, "reserve")]
    assert res.steps["kv_P1"].max() == 5 and res.steps["kv_used"].max() == 7


def test_class_max_running_cap(simulate_case):
    """P1 may run one request at a time: the second P1 waits `class_cap` and is skipped, so the
    P0 behind it in FCFS order is still admitted at t=0."""
    case = {"P0": (0, [(0.1, 4, 1)]), "P1": (1, [(0.0, 4, 3), (0.0, 4, 3)])}
    res = simulate_case(case, overrides={"classes.P1.caps.max_running": 1})
    first, second, p0 = row(res, "P1", 0), row(res, "P1", 1), row(res, "P0")
    assert first.finish_s == 3.0
    assert second.first_scheduled_s == 3.0 and waits_of(res, second.id) == [(0.0, 3.0, "class_cap")]
    assert p0.first_scheduled_s == 1.0
    assert res.steps["running_P1"].max() == 1


def test_class_kv_cap_rejects_what_can_never_fit(simulate_case):
    """A P1 cap of 5 blocks: a 24-token prompt (6 blocks of 4) can never run → rejected."""
    case = {"P1": (1, [(0.0, 24, 1), (0.0, 8, 1)])}
    res = simulate_case(case, overrides={"classes.P1.caps.max_kv_blocks": 5})
    big, small = row(res, "P1", 0), row(res, "P1", 1)
    assert big.status == "rejected" and "class P1" in big.reason
    assert small.status == "finished"


INHERIT = {"P0": (0, [(0.5, 36, 1)]), "P1": (1, [(0.0, 8, 20)]), "P2": (2, [(0.0, 40, 2)])}


def test_inheritance_reorders_holders_but_holder_takes_as_long(simulate_case):
    """14 blocks of 4, budget 16. t=0: A (P1, 8 tokens) and D (P2, 8 of 40 tokens) admitted.
    t=1: A decodes, D gets 15 (9 blocks used). t=2: B (P0, 9 blocks) cannot fit in the 5 free:
    with inheritance D (the bigger holder) runs first and takes all 16 tokens, so A's decode is
    skipped that step — yet D still gets its first token at t=4 and finishes at t=5 either way
    (its last prompt tokens just move from t=3 to t=2), and B's TTFT is unchanged."""
    kw = dict(blocks=14, budget=16, policy="priority")
    plain = simulate_case(INHERIT, **kw)
    boosted = simulate_case(INHERIT, **kw, overrides={"mitigations.inheritance": True})
    assert plain.steps["batch_size"].tolist()[:3] == [2, 2, 2]
    assert boosted.steps["batch_size"].tolist()[:3] == [2, 2, 1]
    for res in (plain, boosted):
        assert (row(res, "P2").first_token_s, row(res, "P2").finish_s) == (4.0, 5.0)
    assert row(boosted, "P0").ttft_s == row(plain, "P0").ttft_s
    assert row(boosted, "P1").finish_s == row(plain, "P1").finish_s + 1.0


PREEMPT = {"P0": (0, [(0.5, 16, 1)]), "P2": (2, [(0.0, 32, 8)])}


def test_preempt_policy_evicts_lower_priority_holder(simulate_case):
    """10 blocks of 4. A (P2, 32 tokens, 8 outputs) holds 9 blocks at t=1; B (P0, 4 blocks) is
    short. `priority`: B waits for A to finish at t=8 (TTFT 8.5). `preempt`: B evicts A at t=1
    (32 computed tokens lost), B's first token at t=2; A re-prefills 33 tokens at t=2 and
    finishes one step later than otherwise, at t=9."""
    plain = simulate_case(PREEMPT, policy="priority")
    res = simulate_case(PREEMPT, policy="preempt")
    assert row(plain, "P0").ttft_s == 8.5 and row(plain, "P2").finish_s == 8.0
    b, a = row(res, "P0"), row(res, "P2")
    assert b.ttft_s == 1.5
    assert (a.preemptions, a.recomputed_tokens, a.finish_s) == (1, 32, 9.0)
    assert res.summary["recomputed_tokens"] == 32
    assert b.inversion_s == 0.0


def test_preempt_swap_costs_transfer_time_not_recompute(simulate_case):
    """Same case with swap: A's 9 blocks (Llama-3-8B: 128 KiB/token × 4 tokens = 512 KiB each)
    go to the host in 0.5 s, re-admission brings 8 blocks back (32 computed tokens) in 4/9 s; no
    token is recomputed. On a fixed step a transfer stalls the engine for whole steps (the grid
    stays exact): step t=1 lasts ceil(1.5) = 2 s, so B's first token comes at t=3 (TTFT 2.5);
    A's re-admission step at t=3 lasts ceil(1 + 4/9) = 2 s."""
    bw = 9 * 512 * 1024 / 0.5 / 1e9
    res = simulate_case(PREEMPT, policy="preempt",
                        overrides={"mitigations.preempt_mode": "swap", "mitigations.host_bandwidth_gbs": bw})
    a = row(res, "P2")
    assert (a.preemptions, a.recomputed_tokens) == (1, 0)
    assert res.steps["t_s"].tolist()[:4] == [0.0, 1.0, 3.0, 5.0]
    assert res.steps["dt_s"].tolist()[:4] == [1.0, 2.0, 2.0, 1.0]
    assert row(res, "P0").first_token_s == 3.0 and row(res, "P0").ttft_s == 2.5


def test_aging_lets_old_low_priority_request_go_first(simulate_case):
    """Budget 4, plenty of KV. A P2 request waits from t=0 behind a 12-token P1 prefill; with
    aging_s=1 it reaches P0's level after 2 s and is admitted ahead of the P0 request that
    arrived at 0.5 (same effective priority, earlier arrival)."""
    case = {"P0": (0, [(0.5, 4, 1)]), "P1": (1, [(0.0, 12, 1)]), "P2": (2, [(0.0, 4, 1)])}
    plain = simulate_case(case, budget=4, policy="priority")
    aged = simulate_case(case, budget=4, policy="priority", overrides={"mitigations.aging_s": 1.0})
    assert row(plain, "P0").first_scheduled_s < row(plain, "P2").first_scheduled_s
    assert row(aged, "P2").first_scheduled_s < row(aged, "P0").first_scheduled_s
    assert row(aged, "P0").inversion_s > 0


def test_a_vanishing_aging_period_lifts_everyone_to_the_top_at_once(simulate_case):
    """aging_s = 5e-324 (a hand-edited link): waited / aging_s overflows a float, yet every waiting
    request is simply at P0's level from its first step — the same order as aging_s = 1e-6, and
    the same as pure FCFS on this case (P2 arrived first, so it goes first)."""
    case = {"P0": (0, [(0.5, 4, 1)]), "P1": (1, [(0.0, 12, 1)]), "P2": (2, [(0.0, 4, 1)])}
    tiny = simulate_case(case, budget=4, policy="priority", overrides={"mitigations.aging_s": 5e-324})
    small = simulate_case(case, budget=4, policy="priority", overrides={"mitigations.aging_s": 1e-6})
    assert tiny.requests["first_scheduled_s"].tolist() == small.requests["first_scheduled_s"].tolist()
    assert row(tiny, "P2").first_scheduled_s < row(tiny, "P0").first_scheduled_s


def test_alert_names_reason_holder_and_eta(simulate_case):
    """HOL case, priority, alert after 2 s: B (arrived 0.5) is still kv_short at t=3, short by 2
    blocks; A holds 7 and has 7 decode steps left → ETA 7 s."""
    case = {"P0": (0, [(0.5, 20, 1)]), "P1": (1, [(0.5, 4, 1)]), "P2": (2, [(0.0, 24, 10)])}
    res = simulate_case(case, policy="priority", overrides={"mitigations.alert_after_s": 2.0})
    assert len(res.alerts) == 1 and res.summary["alerts"] == 1
    al = res.alerts.iloc[0]
    a = row(res, "P2")
    assert (al.time_s, al.request, al.reason, al.short_by_blocks) == (3.0, row(res, "P0").id, "kv_short", 2)
    assert al.eta_s == 7.0
    h = res.holders[(res.holders["wait"] == al.wait) & res.holders["alert"]]
    assert h[["rank", "request", "blocks"]].values.tolist() == [[0, a.id, 7]]


def test_replicas_shared_and_pinned_routing(simulate_case):
    """Two replicas. Shared: the two t=0 requests go to the least-loaded replica, one each.
    Pinned: P0 only on replica 0, P1 only on replica 1, whatever the load."""
    case = {"P0": (0, [(0.0, 4, 2), (0.1, 4, 2)]), "P1": (1, [(0.0, 4, 2)])}
    shared = simulate_case(case, overrides={"replicas.count": 2})
    assert sorted(shared.requests.sort_values("arrival_s")["replica"].tolist()[:2]) == [0, 1]
    pinned = simulate_case(case, overrides={"replicas.count": 2, "replicas.routing": "pinned",
                                            "replicas.pin": {"P0": [0], "P1": [1]}})
    by_class = pinned.requests.groupby("class", observed=True)["replica"].apply(set).to_dict()
    assert by_class == {"P0": {0}, "P1": {1}}
    assert pinned.summary["gpus"] == 2
    assert set(pinned.steps["replica"]) == {0, 1}
