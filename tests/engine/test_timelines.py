"""Hand-worked exact timelines (SimPy style): tiny workloads, fixed 1 s steps, exact times.

Each test's docstring walks through the steps; the asserted numbers were worked out by hand
from DESIGN §2 (vLLM v1 semantics), not read off the simulator.
"""

from __future__ import annotations

import math

import pytest
from timeline_helpers import row, waits_of

from engine.result import overtakers

# --- head-of-line stop vs backfill skip ------------------------------------------------------

HOL_CASE = {
    # KV: 10 blocks of 4 tokens. A (P2) holds 6 blocks from t=0 and grows to 9 while it decodes
    # until t=10. B (P0, 5 blocks) never fits before then; C (P1, 1 block) always fits.
    "P0": (0, [(0.5, 20, 1)]),
    "P1": (1, [(0.5, 4, 1)]),
    "P2": (2, [(0.0, 24, 10)]),
}


def test_priority_stops_at_first_misfit(simulate_case):
    """t=0 A admitted (6 blocks), first token t=1. t=1: A grows to 7 blocks, 3 free; B needs 5 →
    kv_short and admission stops, so C waits head_of_line although it fits. A finishes at t=10
    (9 blocks freed); B and C are admitted at t=10 and get their first token at t=11."""
    res = simulate_case(HOL_CASE, policy="priority")
    a, b, c = row(res, "P2"), row(res, "P0"), row(res, "P1")
    assert (a.first_token_s, a.finish_s) == (1.0, 10.0)
    assert (b.first_scheduled_s, b.first_token_s, b.ttft_s) == (10.0, 11.0, 10.5)
    assert (c.first_scheduled_s, c.ttft_s) == (10.0, 10.5)
    assert waits_of(res, b.id) == [(0.5, 10.0, "kv_short")]
    assert waits_of(res, c.id) == [(0.5, 10.0, "head_of_line")]
    # A keeps decoding while B waits: blocking by a holder, not inversion.
    assert b.inversion_s == 0.0 and b.blocked_s == 9.5
    assert len(res.episodes) == 0


def test_backfill_skips_misfit_and_inverts(simulate_case):
    """Same traffic, backfill: at t=1 B (P0) is skipped and C (P1, 1 block) is admitted — a newly
    admitted lower-priority request while P0 waits: one inversion step [1, 2)."""
    res = simulate_case(HOL_CASE, policy="backfill")
    b, c = row(res, "P0"), row(res, "P1")
    assert (c.first_scheduled_s, c.first_token_s, c.finish_s) == (1.0, 2.0, 2.0)
    assert c.blocked_s == 0.0 and c.queue_wait_s == 0.5
    assert b.ttft_s == 10.5
    assert b.inversion_s == 1.0 and b.inversion_episodes == 1
    ep = res.episodes.iloc[0]
    assert (ep.request, ep.start_s, ep.end_s, ep.steps, ep.overtakers, ep.replica) == (b.id, 1.0, 2.0, 1, 1, 0)
    who = overtakers(res, [b.id])
    assert who[["request", "overtaker", "overtaker_class", "t_s", "overtaker_need_blocks"]].values.tolist() == [
        [b.id, c.id, "P1", 1.0, 1]]


def test_admissions_frame_lists_every_admission(simulate_case):
    """Backfill HOL case: A at t=0 (24 tokens → 6 blocks), C at t=1 (1 block), B at t=10 (5 blocks)."""
    res = simulate_case(HOL_CASE, policy="backfill")
    a, b, c = row(res, "P2"), row(res, "P0"), row(res, "P1")
    adm = res.admissions
    assert adm[["request", "t_s", "step", "need_blocks", "readmission"]].values.tolist() == [
        [a.id, 0.0, 0, 6, False], [c.id, 1.0, 1, 1, False], [b.id, 10.0, 10, 5, False]]
    assert adm["class"].astype(str).tolist() == ["P2", "P1", "P0"]


def test_kv_short_detail_names_holder_and_eta(simulate_case):
    """At t=1 B needs 5 blocks, 3 are free (short by 2); the only holder is A with 7 blocks, which
    has 9 decode steps left at 1 s each → ETA 9 s (it indeed finishes at t=10)."""
    res = simulate_case(HOL_CASE, policy="priority")
    b, a = row(res, "P0"), row(res, "P2")
    seg = res.waits[res.waits["request"] == b.id].iloc[0]
    assert (seg.need_blocks, seg.free_blocks, seg.short_by) == (5, 3, 2)
    h = res.holders[res.holders["wait"] == seg.id]
    assert h[["rank", "request", "blocks", "eta_s", "alert"]].values.tolist() == [[0, a.id, 7, 9.0, False]]
    assert h["class"].astype(str).tolist() == ["P2"]
    assert seg.eta_s == 9.0


def test_fcfs_admits_earlier_lower_priority_and_inverts(simulate_case):
    """FCFS: C (P1) arrived at 0.4, before B (P0) at 0.5, so at t=1 C is admitted first and B then
    does not fit: an inversion step for B. Under priority order B would be first and stop the queue."""
    case = dict(HOL_CASE, P1=(1, [(0.4, 4, 1)]))
    fcfs = simulate_case(case, policy="fcfs")
    prio = simulate_case(case, policy="priority")
    assert row(fcfs, "P0").inversion_s == 1.0
    assert row(fcfs, "P1").first_scheduled_s == 1.0
    assert row(prio, "P0").inversion_s == 0.0
    assert row(prio, "P1").first_scheduled_s == 10.0


# --- whole-prompt gate, chunked prefill, budget order -----------------------------------------


def test_chunked_prefill_in_budget_order(simulate_case):
    """Budget 8, 10 blocks of 4. t=0: A takes all 8 tokens (gate: 5 blocks fit). t=1: A 8 more.
    t=2: A's last 4, B admitted with the other 4. t=3: A decodes 1, B gets 7. A finishes at t=4;
    t=4: B's last 5, C admitted with 3. t=5: B decodes, C's last 5. Tokens per step 8,8,8,8,8,6."""
    case = {"P0": (0, [(0.0, 20, 2), (0.0, 16, 2), (0.0, 8, 1)])}
    res = simulate_case(case, blocks=10, block_size=4, budget=8)
    a, b, c = (row(res, "P0", k) for k in range(3))
    assert (a.first_scheduled_s, a.first_token_s, a.finish_s) == (0.0, 3.0, 4.0)
    assert (b.first_scheduled_s, b.first_token_s, b.finish_s) == (2.0, 5.0, 6.0)
    assert (c.first_scheduled_s, c.first_token_s, c.finish_s) == (4.0, 6.0, 6.0)
    tokens = (res.steps["prefill_tokens"] + res.steps["decode_tokens"]).tolist()
    assert tokens == [8, 8, 8, 8, 8, 6]
    assert res.steps["decode_tokens"].tolist() == [0, 0, 0, 1, 0, 1]
    assert waits_of(res, b.id) == [(0.0, 2.0, "token_budget")]
    assert waits_of(res, c.id) == [(0.0, 4.0, "token_budget")]


def test_whole_prompt_gate(simulate_case):
    """7 blocks of 4, budget 8. A (16 tokens) fills 5 blocks by t=2 (4 prompt + 1 decode growth).
    At t=2 B's first chunk (7 tokens, 2 blocks) would fit in the 2 free blocks, but its whole
    prompt needs 3: kv_short until A finishes at t=4. Then 8 + 4 tokens: first token at t=6."""
    case = {"P0": (0, [(0.0, 16, 3), (0.0, 12, 1)])}
    res = simulate_case(case, blocks=7, block_size=4, budget=8)
    a, b = row(res, "P0", 0), row(res, "P0", 1)
    assert (a.first_token_s, a.finish_s) == (2.0, 4.0)
    assert (b.first_scheduled_s, b.first_token_s) == (4.0, 6.0)
    assert waits_of(res, b.id) == [(0.0, 2.0, "token_budget"), (2.0, 4.0, "kv_short")]
    seg = res.waits[(res.waits["request"] == b.id) & (res.waits["reason"] == "kv_short")].iloc[0]
    assert (seg.need_blocks, seg.free_blocks) == (3, 2)


# --- preemption ---------------------------------------------------------------------------------


def test_fcfs_preempts_most_recent_and_skips_admission(simulate_case):
    """4 blocks of 2. t=0: A (4 tokens) and B (3 tokens) admitted, 2 blocks each. t=1: A needs a
    3rd block → FCFS evicts the most recently admitted, B (3 computed tokens lost). A grows; 1 block
    is free and D (1 token) would fit, but nothing is admitted in a step that preempted: B, now at
    the queue front, waits (preempted) and D behind it head_of_line. t=2: B needs 2 blocks for
    prompt+1 output, 1 free → stop (D still head_of_line). A finishes at t=3; B (recompute 4
    tokens) and D are admitted at t=3."""
    case = {"P0": (0, [(0.0, 4, 3), (0.0, 3, 3), (0.5, 1, 1)])}
    res = simulate_case(case, blocks=4, block_size=2)
    a, b, d = (row(res, "P0", k) for k in range(3))
    assert (a.first_token_s, a.finish_s) == (1.0, 3.0)
    assert (b.preemptions, b.recomputed_tokens, b.first_token_s, b.finish_s) == (1, 3, 1.0, 5.0)
    assert (d.first_scheduled_s, d.first_token_s) == (3.0, 4.0)
    assert waits_of(res, b.id) == [(1.0, 3.0, "preempted")]
    assert waits_of(res, d.id) == [(0.5, 3.0, "head_of_line")]
    assert res.steps["preempted"].tolist()[:2] == [0, 1]
    assert res.steps["admitted"].tolist()[:4] == [2, 0, 0, 2]


def test_priority_victim_is_lowest_priority_even_itself(simulate_case):
    """Priority policy, 4 blocks of 2. Running order [B (P1), A (P2)]. t=1: B decodes without
    growing; A needs a 3rd block and the victim max(priority, arrival) is A itself → A is evicted
    (4 tokens lost) and the step ends there; D (P0) is not admitted in that step although 2 blocks
    are free. t=2: D admitted (1 block), A kv_short. t=3 B and D finish; A re-admitted, done t=5."""
    case = {"P0": (0, [(0.5, 1, 1)]), "P1": (1, [(0.0, 3, 3)]), "P2": (2, [(0.0, 4, 3)])}
    res = simulate_case(case, blocks=4, block_size=2, policy="priority")
    d, b, a = row(res, "P0"), row(res, "P1"), row(res, "P2")
    assert (a.preemptions, a.recomputed_tokens, a.finish_s) == (1, 4, 5.0)
    assert (b.preemptions, b.finish_s) == (0, 3.0)
    assert (d.first_scheduled_s, d.first_token_s, d.ttft_s) == (2.0, 3.0, 2.5)
    assert waits_of(res, d.id) == [(0.5, 2.0, "kv_short")]
    assert res.steps["batch_size"].tolist()[:2] == [2, 1]
    assert d.inversion_s == 0.0


# --- rejection ------------------------------------------------------------------------------


def test_too_large_is_rejected_not_hung(simulate_case):
    """4 blocks of 4 = 16 tokens. A 20-token prompt, and a 10-token prompt with 10 outputs
    (19 tokens = 5 blocks), can never fit: rejected at arrival with the reason; the rest runs."""
    case = {"P0": (0, [(0.0, 20, 1), (0.0, 10, 10), (0.0, 8, 2)])}
    res = simulate_case(case, blocks=4, block_size=4)
    big, long, ok = (row(res, "P0", k) for k in range(3))
    assert big.status == "rejected" and "5 KV blocks" in big.reason and "at most 4" in big.reason
    assert long.status == "rejected" and "19 tokens" in long.reason
    assert ok.status == "finished" and ok.finish_s == 2.0
    assert res.summary["rejected"] == 2
    assert math.isnan(big.ttft_s)


@pytest.mark.parametrize("policy", ["fcfs", "priority", "backfill", "preempt"])
def test_every_policy_finishes_the_hol_case(simulate_case, policy):
    res = simulate_case(HOL_CASE, policy=policy)
    assert set(res.requests["status"]) == {"finished"}
