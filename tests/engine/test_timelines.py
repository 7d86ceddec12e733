"""Hand-worked exact timelines (SimPy style): tiny workloads, fixed 1 s steps, exact times.

Each test's docstring walks through the steps; the asserted numbers were worked out by hand
from DESIGN §2 (vLLM v1 semantics), not read off the simulator.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from timeline_helpers import row, waits_of

from engine import load, simulate
from engine.sim.result import overtakers
from tests.support.rules import Around

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


# --- time on a fixed step ------------------------------------------------------------------------


def test_idle_engine_starts_at_the_arrival_busy_engine_at_its_next_step(simulate_case):
    """Step 0.1 s (not a binary fraction), synchronous scheduling. vLLM's engine core blocks on
    its input queue when idle and starts a step the moment a request arrives; busy, it runs
    steps back to back, and a request that arrives during a step waits for the next boundary.

    A (4 + 3 tokens) at 0: prefill in the step at 0 (first token at 0.1), decodes at 0.1 and 0.2
    (finish at 0.3). B (4 + 1) arrives at 0.3 = 0 + 3 × 0.1 and is taken at that boundary — not a
    step late, although 0.1 + 0.1 + 0.1 > 0.3 in floating point — first token and finish at 0.4.
    The engine is then idle. C (4 + 3) arrives at 0.75: a step starts at 0.75 at once (a busy
    period with origin 0.75), first token 0.85, finish 1.05. E (4 + 1) arrives at 0.8, during C's
    first step: it is taken at the next boundary 0.75 + 1 × 0.1 and finishes a step later.
    D (4 + 1) arrives at 2.9 (2.9 / 0.1 is 28.999999999999996 in floating point): the idle engine
    starts at 2.9 exactly. Within a busy period, every step starts at exactly origin + k × 0.1."""
    case = {"P0": (0, [(0.0, 4, 3), (0.3, 4, 1), (0.75, 4, 3), (0.8, 4, 1), (2.9, 4, 1)])}
    res = simulate_case(case, overrides={"cost.step_time_s": 0.1})
    a, b, c, e, d = (row(res, "P0", k) for k in range(5))
    assert (a.first_token_s, a.finish_s) == (1 * 0.1, 3 * 0.1)
    assert (b.first_scheduled_s, b.finish_s) == (3 * 0.1, 4 * 0.1)
    assert (c.first_scheduled_s, c.first_token_s, c.finish_s) == (0.75, 0.75 + 0.1, 0.75 + 3 * 0.1)
    assert c.queue_wait_s == 0.0
    assert (e.first_scheduled_s, e.finish_s) == (0.75 + 1 * 0.1, 0.75 + 2 * 0.1)
    assert e.queue_wait_s == pytest.approx(0.05)
    assert (d.first_scheduled_s, d.queue_wait_s, d.finish_s) == (2.9, 0.0, 2.9 + 0.1)
    assert res.steps["t_s"].tolist() == [0.0, 0.1, 2 * 0.1, 3 * 0.1, 0.75, 0.75 + 0.1, 0.75 + 2 * 0.1, 2.9]
    assert set(res.steps["dt_s"]) == {0.1}


# --- vLLM's null block and the watermark ----------------------------------------------------------


def test_num_blocks_includes_vllms_null_block(simulate_case):
    """kv.num_blocks = 4 blocks of 4 is vLLM's num_gpu_blocks: one is the null block, 3 (12
    tokens) are usable. A (prompt 12, output 1: 12 tokens) runs; B (prompt 10, output 4: 13
    tokens, 4 blocks) can never fit and is rejected at arrival."""
    case = {"P0": (0, [(0.0, 12, 1), (0.0, 10, 4)])}
    res = simulate_case(case, overrides={"kv.num_blocks": 4})
    a, b = row(res, "P0", 0), row(res, "P0", 1)
    assert a.status == "finished" and a.finish_s == 1.0
    assert b.status == "rejected" and "at most 3" in b.reason
    assert res.summary["kv_blocks"] == 4 and res.steps["kv_free"].tolist() == [0]


def test_watermark_counts_the_null_block(simulate_case):
    """kv.num_blocks 10 (9 usable), watermark 0.2: vLLM keeps int(0.2 × 10) = 2 blocks free (not
    int(0.2 × 9) = 1). A (prompt 20 = 5 blocks, output 4) is admitted alone at t=0 (no watermark
    while nothing runs) and holds 6 blocks from t=1 (token 21) until it finishes at t=4. B
    (prompt 8 = 2 blocks) arrives at 0.5: at t=1..3 it needs 2 + 2 > 3 free → kv_short; at t=4
    nothing runs and it is admitted: first token at t=5 (TTFT 4.5)."""
    case = {"P0": (0, [(0.0, 20, 4), (0.5, 8, 1)])}
    res = simulate_case(case, overrides={"kv.num_blocks": 10, "scheduler.watermark": 0.2})
    a, b = row(res, "P0", 0), row(res, "P0", 1)
    assert a.finish_s == 4.0
    assert (b.first_scheduled_s, b.ttft_s) == (4.0, 4.5)
    seg = res.waits[res.waits["request"] == b.id].iloc[0]
    assert (seg.reason, seg.start_s, seg.end_s, seg.need_blocks, seg.free_blocks) == ("kv_short", 0.5, 4.0, 2, 1)


def test_watermark_applies_once_an_earlier_admission_runs(simulate_case):
    """Same pool (9 usable, watermark 2 blocks). C and D (prompt 16 = 4 blocks each, output 1)
    arrive at t=0 with nothing running: C is admitted without the watermark; D comes next in the
    same walk, when C already runs: 4 + 2 > 5 free → kv_short. C finishes at t=1, D runs then."""
    case = {"P0": (0, [(0.0, 16, 1), (0.0, 16, 1)])}
    res = simulate_case(case, overrides={"kv.num_blocks": 10, "scheduler.watermark": 0.2})
    c, d = row(res, "P0", 0), row(res, "P0", 1)
    assert (c.first_scheduled_s, c.finish_s) == (0.0, 1.0)
    assert (d.first_scheduled_s, d.finish_s) == (1.0, 2.0)
    assert waits_of(res, d.id) == [(0.0, 1.0, "kv_short")]


# --- the chunk cap (long_prefill_token_threshold) --------------------------------------------------


def test_no_chunk_cap_when_a_request_is_alone(simulate_case):
    """Issue 10's repro: budget 256, cap 64, one request (prompt 300, output 2). It is alone, so
    vLLM 0.33 applies no cap: 256 tokens in step 0, the last 44 in step 1 (first token at t=2),
    one decode in step 2 (finish t=3) — not 64 per step (first token at t=5)."""
    res = simulate_case({"P0": (0, [(0.0, 300, 2)])}, blocks=100, budget=256,
                        overrides={"scheduler.long_prefill_token_threshold": 64})
    a = row(res, "P0")
    assert (a.first_token_s, a.finish_s) == (2.0, 3.0)
    assert (res.steps["prefill_tokens"] + res.steps["decode_tokens"]).tolist() == [256, 44, 1]


def test_chunk_cap_returns_while_another_request_waits(simulate_case):
    """Budget 256, cap 64. A (prompt 600, output 2) alone at t=0: 256 tokens. B (prompt 10,
    output 1) arrives at 0.5, so at t=1 running + waiting = 2 and the cap holds: A gets 64, B is
    admitted with its 10 (first token and finish at t=2). At t=2 A is alone again: 256, then the
    last 24 at t=3 (first token t=4), one decode at t=4 (finish t=5)."""
    res = simulate_case({"P0": (0, [(0.0, 600, 2), (0.5, 10, 1)])}, blocks=200, budget=256,
                        overrides={"scheduler.long_prefill_token_threshold": 64})
    a, b = row(res, "P0", 0), row(res, "P0", 1)
    assert (b.first_scheduled_s, b.finish_s) == (1.0, 2.0)
    assert (a.first_token_s, a.finish_s) == (4.0, 5.0)
    assert (res.steps["prefill_tokens"] + res.steps["decode_tokens"]).tolist() == [256, 74, 256, 24, 1]


def test_adaptive_chunk_cap_floors_at_budget_share(simulate_case):
    """Budget 100, cap 32, A and B (prompt 200, output 1) at t=0. Plain: 32 each per step (64
    a step), 200 tokens take 7 steps → both finish at t=7. Adaptive: the cap is floored at
    100 // (running + waiting = 2) = 50: 100 tokens a step, both finish at t=4."""
    case = {"P0": (0, [(0.0, 200, 1), (0.0, 200, 1)])}
    kw = dict(blocks=200, budget=100)
    plain = simulate_case(case, **kw, overrides={"scheduler.long_prefill_token_threshold": 32})
    adaptive = simulate_case(case, **kw, overrides={"scheduler.long_prefill_token_threshold": 32,
                                                    "scheduler.long_prefill_token_threshold_adaptive": True})
    assert [row(plain, "P0", k).finish_s for k in (0, 1)] == [7.0, 7.0]
    assert (plain.steps["prefill_tokens"]).tolist() == [64] * 6 + [16]
    assert [row(adaptive, "P0", k).finish_s for k in (0, 1)] == [4.0, 4.0]
    assert (adaptive.steps["prefill_tokens"]).tolist() == [100] * 4


def test_self_preemption_under_priority_lets_the_pass_go_on(simulate_case):
    """Issue 10's repro in 4-token blocks: 4 usable blocks (16 tokens), priority, budget 100.
    R (P2, prompt 5, output 10) runs from t=0 (2 blocks); X (P0, prompt 5, output 10) arrives at
    t=1 and takes the other 2 blocks; running order [R, X]. At t=4 R computes its 9th token and
    needs a 3rd block; none is free: the victim is max(priority, arrival) = R itself (8 computed
    tokens lost). vLLM 0.33 goes on with X, which decodes in that step (its 8th token: no new
    block), so X's ten tokens come at t=2..11 without a gap. Nothing is admitted in a step that
    preempted; from t=5 R (9 tokens, 3 blocks) is short while X holds 3-4 blocks, until X
    finishes at t=11. R is re-admitted then, recomputes its 9 tokens in one step (its 5th output
    at t=12) and decodes the other 5 at t=12..16 (finish t=17)."""
    case = {"P0": (0, [(1.0, 5, 10)]), "P2": (2, [(0.0, 5, 10)])}
    res = simulate_case(case, blocks=4, policy="priority")
    r, x = row(res, "P2"), row(res, "P0")
    assert (x.first_token_s, x.finish_s) == (2.0, 11.0)
    assert (r.preemptions, r.recomputed_tokens, r.finish_s) == (1, 8, 17.0)
    steps = res.steps.set_index("t_s")
    assert (steps.loc[4.0, "batch_size"], steps.loc[4.0, "preempted"], steps.loc[4.0, "decode_tokens"]) == (1, 1, 1)
    assert steps.loc[11.0, "prefill_tokens"] == 9
    assert waits_of(res, r.id) == [(4.0, 11.0, "preempted")]


# --- a schedule() call that schedules nothing -----------------------------------------------------


def _empty_call_at(t_empty: float, changed: bool) -> tuple[list, object]:
    """Rules whose first schedule() call at t_empty schedules nothing (as if it had preempted
    every running request, or had changed nothing at all); the calls after it run as usual.
    Returns the calls' times and the `around` that makes them (run one call per step)."""
    from engine.core.step import Step

    calls = []

    def schedule(rules, now, unchanged):
        calls.append(now)
        if now == t_empty and calls.count(now) == 1:
            step = Step(None)
            step.flushed = changed
            return step
        return rules.schedule(now, unchanged)

    return calls, lambda rules: Around(rules, schedule)


def test_an_empty_call_that_changes_something_takes_no_time(simulate_case):
    """One request (prompt 4, output 3): steps at t=0, 1, 2. The first call at t=1 schedules
    nothing but changed the engine's state (vLLM: every running request preempted, or async
    outputs taken in): no forward pass, no time — the next call, at the same t=1, builds step 1,
    and the request still finishes at t=3."""
    calls, around = _empty_call_at(1.0, changed=True)
    res = simulate_case({"P0": (0, [(0.0, 4, 3)])}, skip_steps=False, around=around)
    assert calls == [0.0, 1.0, 1.0, 2.0]
    assert res.steps["t_s"].tolist() == [0.0, 1.0, 2.0] and row(res, "P0").finish_s == 3.0


def test_an_empty_call_that_changes_nothing_is_an_idle_step(simulate_case):
    """Same, but the empty call changed nothing: repeating it at once could loop forever, so it
    is an idle step of the usual length (t=1..2, no row in the step log: no forward pass) and
    the request finishes a step later, at t=4."""
    calls, around = _empty_call_at(1.0, changed=False)
    res = simulate_case({"P0": (0, [(0.0, 4, 3)])}, skip_steps=False, around=around)
    assert calls == [0.0, 1.0, 2.0, 3.0]
    assert row(res, "P0").finish_s == 4.0


# --- async scheduling (vLLM's AsyncScheduler, on by default) ---------------------------------------


def test_async_sees_a_finish_one_call_late(simulate_case):
    """6 usable blocks of 4. A (prompt 12, output 2) and B (prompt 4, output 6) at t=0: 3 + 1
    blocks. C (prompt 8, output 1: 2 blocks) arrives at 0.5. At t=1 A grows to 4 blocks and B to
    2: none free, C waits kv_short. A samples its last token in step 1 (finish t=2 either way).
    Sync: A's blocks are free for the call at t=2, C is admitted then (TTFT 2.5). Async: the call
    at t=2 is built before step 1's outputs are taken in — A still holds its 4 blocks (skipped,
    not scheduled); B decodes, so the call is not empty and takes its step; C waits until t=3
    (TTFT 3.5). A prompt completed in a step is not late: B's tokens come at t=1..6 both ways."""
    case = {"P0": (0, [(0.0, 12, 2), (0.0, 4, 6), (0.5, 8, 1)])}
    sync, asyn = (simulate_case(case, blocks=6, asyn=a) for a in (False, True))
    for res in (sync, asyn):
        a, b = row(res, "P0", 0), row(res, "P0", 1)
        assert a.finish_s == 2.0 and (b.first_token_s, b.finish_s) == (1.0, 6.0)
    assert (row(sync, "P0", 2).first_scheduled_s, row(sync, "P0", 2).ttft_s) == (2.0, 2.5)
    c = row(asyn, "P0", 2)
    assert (c.first_scheduled_s, c.ttft_s) == (3.0, 3.5)
    assert waits_of(asyn, c.id) == [(0.5, 3.0, "kv_short")]


def test_async_empty_call_takes_no_time(simulate_case):
    """3 usable blocks of 4. A (prompt 8, output 2) holds 3 blocks from t=1 and samples its last
    token in step 1; B (prompt 8, output 1) arrives at 0.5 and waits kv_short. Async: the call at
    t=2 finds A's last token in flight (skipped) and B still short, so it schedules nothing — no
    forward pass, no time; taking in step 1's outputs finishes A, and the next call, still at
    t=2, admits B: first token at t=3, exactly as with sync scheduling. No step is logged twice."""
    case = {"P0": (0, [(0.0, 8, 2), (0.5, 8, 1)])}
    sync, asyn = (simulate_case(case, blocks=3, asyn=a) for a in (False, True))
    for res in (sync, asyn):
        b = row(res, "P0", 1)
        assert (row(res, "P0", 0).finish_s, b.first_scheduled_s, b.ttft_s) == (2.0, 2.0, 2.5)
        assert res.steps["t_s"].tolist() == [0.0, 1.0, 2.0]


def test_async_counts_a_request_whose_last_token_is_in_flight_as_running(simulate_case):
    """Budget 256, cap 64, plenty of KV. A (prompt 4, output 1) runs alone at t=0 and samples its
    only token. B (prompt 300, output 1) arrives at 0.5. Sync: at t=1 A is gone, B is alone and
    uncapped: 256 + 44 tokens. Async: at t=1 A (last token in flight) still counts as running,
    so running + waiting = 2 and B's first chunk is capped at 64; at t=2 B is alone: 236."""
    case = {"P0": (0, [(0.0, 4, 1), (0.5, 300, 1)])}
    kw = dict(blocks=100, budget=256, overrides={"scheduler.long_prefill_token_threshold": 64})
    sync, asyn = (simulate_case(case, asyn=a, **kw) for a in (False, True))
    assert (sync.steps["prefill_tokens"]).tolist() == [4, 256, 44]
    assert (asyn.steps["prefill_tokens"]).tolist() == [4, 64, 236]
    assert row(sync, "P0", 1).finish_s == row(asyn, "P0", 1).finish_s == 3.0


def test_async_victim_whose_last_token_is_in_flight_finishes_from_the_queue(simulate_case):
    """fcfs, 4 usable blocks of 2. B (prompt 4, output 4) and A (prompt 4, output 1) at t=0,
    2 blocks each; A samples its only token in step 0. Async: at t=1 A's output is still in
    flight; B computes its 5th token and needs a 3rd block; none is free, so fcfs evicts the
    last running request — A, which holds its blocks until its output is taken in. Its 2 blocks
    are freed at once (B grows), nothing is admitted in that step, and at the end of the call A's
    last token arrives: A finishes from the queue at t=1 with one preemption and nothing to
    recompute: its 4 computed tokens (prompt 4 + output 1 − the last, sampled one) stand as in the
    sync run. Sync: A is gone before the call at t=1, nobody is preempted. B finishes at t=4."""
    case = {"P0": (0, [(0.0, 4, 4), (0.0, 4, 1)])}
    sync, asyn = (simulate_case(case, blocks=4, block_size=2, asyn=a) for a in (False, True))
    assert (row(sync, "P0", 1).preemptions, row(sync, "P0", 1).finish_s) == (0, 1.0)
    a = row(asyn, "P0", 1)
    assert (a.status, a.finish_s, a.preemptions, a.recomputed_tokens) == ("finished", 1.0, 1, 0)
    assert a.computed_tokens == row(sync, "P0", 1).computed_tokens == 4
    assert waits_of(asyn, a.id) == []
    assert asyn.steps["preempted"].tolist() == [0, 1, 0, 0]
    for res in (sync, asyn):
        assert row(res, "P0", 0).finish_s == 4.0


# --- prefix caching (vLLM's default) ------------------------------------------------------------------


def test_a_shared_prefix_is_found_in_the_cache(simulate_case):
    """Blocks of 4. A and B (prompt 12, output 1) share their first 8 tokens (group 0). A runs at
    t=0 and finishes at t=1; its full blocks stay cached. B arrives at 2: its hit is the longest
    run of cached blocks, at most (12 − 1) // 4 = 2 blocks — all 8 shared tokens — so it computes
    only its last 4 (cached_tokens 8). C (same lengths, no shared prefix) computes all 12."""
    case = {"P0": (0, [(0.0, 12, 1, 0, 8), (2.0, 12, 1, 0, 8), (4.0, 12, 1)])}
    res = simulate_case(case, blocks=20)
    a, b, c = (row(res, "P0", k) for k in range(3))
    assert (a.cached_tokens, b.cached_tokens, c.cached_tokens) == (0, 8, 0)
    assert res.steps["prefill_tokens"].tolist() == [12, 4, 12]
    off = simulate_case(case, blocks=20, overrides={"kv.prefix_caching": False})
    assert off.steps["prefill_tokens"].tolist() == [12, 12, 12] and off.requests["cached_tokens"].sum() == 0


def test_cached_free_blocks_count_against_the_room_and_are_evicted_lru(simulate_case):
    """5 usable blocks of 4. A (prompt 9, output 1; first 8 tokens in group 0) runs at t=0 (3
    blocks) and finishes at t=1: its partial block goes to the front of the free queue, its two
    hashed blocks to the back, the last one first (evicted first). D (prompt 12, output 4, no
    prefix) is admitted at t=1 with 3 blocks taken from the front: the cached two survive. B
    (like A) arrives at 1.5. At t=2 D's decode needs a 4th block: the front of the free queue is
    A's block 1 — evicted. B finds only block 0 (4 tokens), and that block sits free in the cache,
    so it still counts: B needs 3 − 1 + 1 = 3 blocks with 1 free → kv_short until D finishes at
    t=5. Then B is admitted with its 4 cached tokens and computes 5: first token at t=6."""
    case = {"P0": (0, [(0.0, 9, 1, 0, 8), (0.5, 12, 4), (1.5, 9, 1, 0, 8)])}
    res = simulate_case(case, blocks=5)
    a, d, b = (row(res, "P0", k) for k in range(3))
    assert (a.finish_s, d.first_scheduled_s, d.finish_s) == (1.0, 1.0, 5.0)
    assert (b.first_scheduled_s, b.cached_tokens, b.first_token_s) == (5.0, 4, 6.0)
    seg = res.waits[res.waits["request"] == b.id].iloc[0]
    assert (seg.reason, seg.start_s, seg.end_s, seg.need_blocks, seg.free_blocks) == ("kv_short", 1.5, 5.0, 3, 1)
    assert res.steps.set_index("t_s").loc[5.0, "prefill_tokens"] == 5


def test_a_preempted_request_finds_its_own_blocks_again(simulate_case):
    """The fcfs preemption timeline (4 usable blocks of 2): B (prompt 3, output 3) is preempted at
    t=1 with 3 computed tokens, one full block of them hashed; A's growth takes the free block
    without a hash, so B's block stays cached. Re-admitted at t=3 with 4 tokens (prompt + 1
    output), B finds that block (at most (4 − 1) // 2 = 1) and computes 2 tokens, not 4. Its
    recomputed_tokens (progress lost) stay 3; cached_tokens_all counts the 2 found."""
    case = {"P0": (0, [(0.0, 4, 3), (0.0, 3, 3), (0.5, 1, 1)])}
    on = simulate_case(case, blocks=4, block_size=2)
    off = simulate_case(case, blocks=4, block_size=2, overrides={"kv.prefix_caching": False})
    for res, computed in ((on, 2), (off, 4)):
        b = row(res, "P0", 1)
        assert (b.preemptions, b.recomputed_tokens, b.cached_tokens) == (1, 3, 0)
        assert res.steps.set_index("t_s").loc[3.0, "prefill_tokens"] == computed + 1  # + D's one token
    assert (row(on, "P0", 1).cached_tokens_all, row(off, "P0", 1).cached_tokens_all) == (2, 0)


def test_a_shared_block_is_charged_to_one_class_and_passes_on(simulate_case):
    """Blocks of 4. A (P2, prompt 12, output 6) and B (P0, prompt 12, output 10) share their first
    8 tokens. A runs from t=0 (3 blocks, a 4th from t=1). B arrives at 0.5 and at t=1 finds A's two
    shared blocks in use: they cost P0 nothing, B's class is charged only its own block (the
    pool holds 5 blocks, not 7). A finishes at t=6 while B still uses the two: their charge passes
    to P0, which then holds all of B's 5 blocks."""
    case = {"P0": (0, [(0.5, 12, 10, 0, 8)]), "P2": (2, [(0.0, 12, 6, 0, 8)])}
    res = simulate_case(case, blocks=20)
    steps = res.steps.set_index("t_s")
    assert (steps.loc[1.0, "kv_P2"], steps.loc[1.0, "kv_P0"], steps.loc[1.0, "kv_used"]) == (4, 1, 5)
    assert (steps.loc[6.0, "kv_P2"], steps.loc[6.0, "kv_P0"]) == (0, 5)
    assert (res.steps["kv_P0"] + res.steps["kv_P2"] == res.steps["kv_used"]).all()
    assert row(res, "P0").cached_tokens == 8


# --- vLLM's observability words and the queue limits of its API server -------------------------------


def test_waiting_counts_per_reason_and_in_vllms_two_words(simulate_case):
    """The HOL case under backfill, P1 capped at one running request: at t=1 A (P2) holds 7 of
    the 10 blocks; B (P0, 5 blocks) waits kv_short and is skipped, C (P1) is admitted, D (P1)
    waits class_cap. vLLM exports a class-cap skip as "deferred" (like its LoRA budget) and every
    other wait as "capacity": 1 and 1. The fine counts add up to the per-class ones every step."""
    case = {"P0": (0, [(0.5, 20, 1)]), "P1": (1, [(0.5, 4, 1), (0.5, 4, 1)]), "P2": (2, [(0.0, 24, 10)])}
    res = simulate_case(case, policy="backfill", overrides={"classes.P1.caps.max_running": 1})
    s = res.steps.set_index("t_s").loc[1.0]
    assert (s.waiting_for_kv_short, s.waiting_for_class_cap) == (1, 1)
    assert (s.waiting_by_reason_capacity, s.waiting_by_reason_deferred) == (1, 1)
    w = res.steps
    fine = w[[c for c in w.columns if c.startswith("waiting_for_")]].sum(axis=1)
    assert (fine == w["waiting_by_reason_capacity"] + w["waiting_by_reason_deferred"]).all()
    assert (fine == w["waiting_P0"] + w["waiting_P1"] + w["waiting_P2"]).all()


def test_queue_limits_shed_requests_before_the_engine(simulate_case):
    """max_num_queued_reqs = 1 (vLLM's API server answers HTTP 503 beyond it). A (P1, 24 tokens,
    output 10) runs from t=0 and holds the KV (10 blocks); B (P0, 20 tokens) arrives at 0.5 and
    waits; C (P1, 12 tokens) arrives at 0.6 while one request waits: shed, counted as rejected
    with that reason in its class. With max_num_queued_tokens = 30 instead, A (24) and B (20) are
    accepted — each found nobody waiting — and C shed: 20 waiting + 12 > 30."""
    case = {"P0": (0, [(0.5, 20, 1)]), "P1": (1, [(0.0, 24, 10), (0.6, 12, 1)])}
    for knob, value in (("max_num_queued_reqs", 1), ("max_num_queued_tokens", 30)):
        res = simulate_case(case, policy="priority", overrides={f"scheduler.{knob}": value})
        b, c = row(res, "P0"), row(res, "P1", 1)
        assert b.status == "finished" and c.status == "rejected" and c.reason.startswith("HTTP 503")
        assert knob in c.reason
        shed = (res.summary["shed"], res.summary["classes"]["P1"]["shed"], res.summary["classes"]["P0"]["shed"])
        assert shed == (1, 1, 0)


def _per_episode(res, ids) -> pd.DataFrame:
    """The definition, one episode at a time: the admissions of a less important request in the
    same replica during [start, end) of each of these requests' episodes."""
    ep, adm = res.episodes_of(ids), res.admissions
    rows = []
    for rid, prio, start, end, rep in zip(ep["request"], ep["priority"], ep["start_s"], ep["end_s"], ep["replica"]):
        m = adm[(adm["replica"] == rep) & (adm["t_s"] >= start) & (adm["t_s"] < end) & (adm["priority"] > prio)]
        rows += [(rid, o, str(c), t, n, rep)
                 for o, c, t, n in zip(m["request"], m["class"], m["t_s"], m["need_blocks"])]
    cols = ["request", "overtaker", "overtaker_class", "t_s", "overtaker_need_blocks", "replica"]
    return pd.DataFrame(rows, columns=cols).sort_values(["request", "t_s", "overtaker"], kind="stable") \
        .reset_index(drop=True)


@pytest.mark.parametrize("name", ["default", "classic-inversion", "separate-replicas", "inheritance", "preempt"])
def test_overtakers_are_the_admissions_during_each_episode(name):
    """The binary-search pass gives exactly the per-episode definition (many episodes, several replicas)."""
    res = simulate(load(name))
    ids = res.episodes["request"].unique().tolist()
    want = _per_episode(res, ids)
    got = overtakers(res, ids)
    assert len(got) == len(want) and (len(got) > 100 or name != "classic-inversion")
    pd.testing.assert_frame_equal(got[list(want.columns)], want, check_dtype=False)
