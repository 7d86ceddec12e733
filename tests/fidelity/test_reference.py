"""The reference model (`fidelity/reference.py`) against the recorded corpus and by hand.

The model states vLLM 0.33's scheduling rules in a few hundred lines. It must reproduce every
recorded workload exactly; and switching off any one of its named rules must change the result
of at least one recorded workload, which shows that the corpus really exercises that rule.
"""

from __future__ import annotations

import pytest

from fidelity import corpus, reference
from fidelity.workloads import MODES


def _request(arrival, prompt, output, prio=0, group=-1, prefix=0):
    return [arrival, prompt, output, prio, group, prefix, -1]


def _workload(requests, **cfg):
    config = {"num_gpu_blocks": 100, "block_size": 16, "max_num_batched_tokens": 256, "max_num_seqs": 8,
              "long_prefill_token_threshold": 0, "long_prefill_token_threshold_adaptive": False,
              "watermark": 0.0, "policy": "fcfs", "async_scheduling": False, "enable_prefix_caching": False}
    config.update(cfg)
    return {"id": "hand", "config": config, "requests": requests}


def test_long_prompt_alone_ignores_the_chunk_cap():
    """Issue 10's first repro: one request, prompt 300, output 2, budget 256, cap 64. Alone, so no
    cap: step 0 prefills 256, step 1 the last 44 (first token), step 2 decodes the second token."""
    wl = _workload([_request(0, 300, 2)], long_prefill_token_threshold=64)
    assert reference.Model(wl).run() == {"requests": [[0, 1, 2, 0, 0, 0]], "step_tokens": [256, 44, 1]}
    capped = reference.Model(wl, {"no_cap_when_alone"}).run()
    assert capped["requests"] == [[0, 4, 5, 0, 0, 0]] and capped["step_tokens"] == [64, 64, 64, 64, 44, 1]


def test_self_preemption_under_priority_lets_the_pass_go_on():
    """Issue 10's second repro with 16-token blocks and 5 blocks (4 usable, 64 tokens): R (prio 2,
    prompt 20, output 40) from step 0, X (prio 0, same lengths) from step 1. Both hold 2 blocks
    from step 1; R reaches 32 tokens after step 11 and X after step 12, each taking a third block;
    at step 13 R needs a fourth block for token 48 (20 + 28 outputs) while none is free: R is the
    lowest priority, preempts itself, and X still decodes in step 13. Had the pass stopped, that
    schedule() call would have scheduled nothing (no forward pass, no time) and the next call
    would have decoded X as step 13: vLLM's timing only differs from a stop when requests after
    the victim would have run."""
    wl = _workload([_request(0, 20, 40, prio=2), _request(1, 20, 40, prio=0)], num_gpu_blocks=5,
                   max_num_batched_tokens=100, policy="priority")
    m = reference.Model(wl)
    out = m.run()
    step13 = next(entry for entry in m.log if entry[0] == 13)
    assert step13[1] == {1: 1} and step13[2] == [0]
    assert out["requests"][1][:3] == [1, 1, 40] and out["requests"][0][3] == 1
    stopped = reference.Model(wl, {"priority_self_preemption_continues"})
    assert stopped.run() == out
    assert (None, {}, [0]) in stopped.log  # the call that stopped scheduled nothing


def test_a_repeated_prompt_hits_all_but_its_last_block():
    """Prefix caching, 4-token blocks: A's 8-token prompt (group 0) is cached after step 0; B sends
    the same 8 tokens at step 5. The hit stops one token short, so it covers 1 block (4 tokens),
    not 2, and B computes 4 tokens in step 5."""
    wl = _workload([_request(0, 8, 1, group=0, prefix=8), _request(5, 8, 1, group=0, prefix=8)],
                   block_size=4, enable_prefix_caching=True)
    out = reference.Model(wl).run()
    assert out["requests"][1] == [5, 5, 5, 0, 4, 4]
    assert out["step_tokens"] == [8, 0, 0, 0, 0, 4]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_reference_reproduces_every_recorded_workload(mode):
    _, workloads = corpus.read(corpus.corpus_path(mode))
    wrong = [msg for ok, msg in map(reference.agrees, workloads) if not ok]
    assert not wrong, f"{len(wrong)} of {len(workloads)} differ; first: {wrong[0]}"


# where each rule shows first (searching these modes in order keeps the test quick)
WHERE = {
    "null_block": ["fcfs"], "watermark_on_num_gpu_blocks": ["watermark"],
    "watermark_only_while_running": ["watermark"], "full_sequence_gate": ["fcfs"],
    "no_cap_when_alone": ["threshold"], "alone_counts_in_flight_last_token": ["async"],
    "adaptive_floor": ["adaptive"], "priority_self_preemption_continues": ["preemption"],
    "victim_grant_returned": ["threshold", "adaptive"], "no_admission_after_preemption": ["async"],
    "fcfs_preempted_to_front": ["fcfs"], "async_output_one_step_late": ["async"],
    "async_skip_last_token_in_flight": ["async"], "empty_step_takes_no_time": ["async"],
    "hit_stops_one_token_short": ["prefix"],
    "free_cached_hits_count": ["prefix"], "unhashed_freed_first": ["prefix"],
    "freed_last_block_first": ["prefix"],
}


def test_every_rule_is_covered():
    assert set(WHERE) == set(reference.RULES)


@pytest.mark.parametrize("rule", sorted(reference.RULES))
def test_the_corpus_sees_each_rule(rule):
    for mode in WHERE[rule]:
        _, workloads = corpus.read(corpus.corpus_path(mode))
        if any(not reference.agrees(wl, {rule})[0] for wl in workloads):
            return
    pytest.fail(f"no recorded workload changes without {rule!r}: {reference.RULES[rule]}")


def test_explain_names_the_missing_rule():
    """An 'engine' that is vLLM without the chunk-cap exception is explained as exactly that."""
    from fidelity import replay

    _, workloads = corpus.read(corpus.corpus_path("threshold"))
    wl = next(w for w in workloads if len(w["requests"]) == 1)
    got = reference.Model(wl, {"no_cap_when_alone"}).run()
    steps = {k: t for k, t in enumerate(got["step_tokens"]) if t}
    comparison = replay.compare(wl, [r[:4] + [None] for r in got["requests"]], steps)
    assert not comparison.agrees
    assert replay.explain(wl, comparison) == ("no_cap_when_alone",)
