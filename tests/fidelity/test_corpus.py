"""The engine against vLLM's own scheduler: replay the recorded corpus (no vLLM needed here).

`fidelity/corpus/<mode>.jsonl.gz` holds what vLLM 0.33.0's `Scheduler` did on 300 random
workloads per mode (`python3 tasks.py fidelity` re-records it). Every workload is replayed through
the engine at a fixed step time and must agree on every request's first-scheduled, first-token
and finish step, its preemptions and every step's token total.

Modes the engine does not match yet are marked `xfail(strict=True)` with the reason found when
the mark was set: once the engine agrees, the test passes, strict xfail turns that into a
failure, and the mark must go.
"""

from __future__ import annotations

import pytest

from fidelity import corpus, replay
from fidelity.workloads import MODES

DT = 0.1  # a step time that is not a binary fraction: the engine's time grid must be exact

NOT_YET: dict[str, str] = {}  # every mode agrees (python -m fidelity.replay)


def _load(mode: str) -> tuple[dict, list[dict]]:
    return corpus.read(corpus.corpus_path(mode))


# --- the stored corpus itself ---------------------------------------------------------------

def test_every_mode_is_recorded_with_vllm_0_33():
    assert corpus.modes() == sorted(MODES)
    for mode in MODES:
        header, workloads = _load(mode)
        assert header["vllm_version"] == "0.33.0", mode
        assert header["mode"] == mode and header["count"] == len(workloads) >= 300, mode


@pytest.mark.parametrize("mode", sorted(MODES))
def test_recorded_results_are_consistent(mode):
    """Invariants any vLLM run obeys: causality per request, budget per step, ids in arrival order."""
    _, workloads = _load(mode)
    for wl in workloads:
        cfg, reqs, res = wl["config"], wl["requests"], wl["result"]
        assert set(cfg) == set(corpus.CONFIG_KEYS)
        assert len(res["requests"]) == len(reqs)
        arrivals = [r[0] for r in reqs]
        assert arrivals == sorted(arrivals), wl["id"]
        for r, (sched, tok, fin, _pre, cached, cached_all) in zip(reqs, res["requests"]):
            assert r[0] <= sched <= tok <= fin, (wl["id"], r)
            assert fin - tok >= r[2] - 1, (wl["id"], r)  # one token per step at most
            assert 0 <= cached <= cached_all and cached < r[1]
            assert cached_all == 0 or cfg["enable_prefix_caching"]
        steps = res["step_tokens"]
        assert max(steps) <= cfg["max_num_batched_tokens"], wl["id"]
        assert len(steps) == max(r[2] for r in res["requests"]) + 1, wl["id"]


def test_corpus_covers_what_issue_10_asks_for():
    """Both policies, threshold on and alone, preemption under tight KV, a watermark of at least
    one block, async on, prefix-cache hits with multi-turn conversations."""
    every = {m: _load(m)[1] for m in MODES}
    all_wl = [w for ws in every.values() for w in ws]
    assert {w["config"]["policy"] for w in all_wl} == {"fcfs", "priority"}
    assert sum(len(w["requests"]) == 1 for w in every["threshold"]) >= 20
    assert sum(any(r[3] for r in w["result"]["requests"]) for w in every["preemption"]) >= 200
    assert sum(int(w["config"]["watermark"] * w["config"]["num_gpu_blocks"]) >= 1 for w in every["watermark"]) >= 250
    assert all(w["config"]["async_scheduling"] for w in every["async"] + every["prefix-async"])
    for mode in ("prefix", "prefix-async"):
        assert sum(any(r[4] for r in w["result"]["requests"]) for w in every[mode]) >= 250
        assert sum(any(r[6] >= 0 for r in w["requests"]) for w in every[mode]) >= 50


# --- the conversion to an engine scenario ------------------------------------------------

def _workload(**cfg) -> dict:
    config = {"num_gpu_blocks": 20, "block_size": 16, "max_num_batched_tokens": 256, "max_num_seqs": 4,
              "long_prefill_token_threshold": 64, "long_prefill_token_threshold_adaptive": False,
              "watermark": 0.05, "policy": "priority", "async_scheduling": False, "enable_prefix_caching": False}
    config.update(cfg)
    return {"id": "hand-0", "config": config,
            "requests": [[0, 300, 2, 1, -1, 0, -1], [3, 20, 5, 0, 0, 16, -1]],
            "result": {"requests": [[0, 1, 2, 0, 0, 0], [3, 3, 7, 0, 0, 0]],
                       "step_tokens": [256, 44, 1, 20, 1, 1, 1, 1], "empty_calls": 0}}


def test_scenario_maps_every_knob_and_request(tmp_path):
    path = tmp_path / "t.csv"
    data = replay.scenario(_workload(), path, 0.1)
    assert data["kv"]["num_blocks"] == 20 and data["kv"]["block_size"] == 16
    assert data["cost"] == {"model": "fixed", "step_time_s": 0.1}
    s = data["scheduler"]
    assert (s["policy"], s["max_num_batched_tokens"], s["max_num_seqs"]) == ("priority", 256, 4)
    assert (s["long_prefill_token_threshold"], s["watermark"]) == (64, 0.05)
    assert data["classes"] == {"p0": {"priority": 0, "arrival": {"rate": 0}},
                               "p1": {"priority": 1, "arrival": {"rate": 0}}}
    assert path.read_text().splitlines() == [
        "arrived_at,num_prefill_tokens,num_decode_tokens,class", "0.0,300,2,p1",
        "0.3,20,5,p0"]
    assert data["duration_s"] > 3 * 0.1


def test_prefix_columns_and_unknown_keys(tmp_path):
    path = tmp_path / "t.csv"
    wl = _workload(enable_prefix_caching=True)
    if replay.engine_knows("kv.prefix_caching"):
        data = replay.scenario(wl, path, 0.1)
        assert data["kv"]["prefix_caching"] is True
        assert path.read_text().splitlines()[0].endswith(",prefix_group,prefix_tokens")
        assert path.read_text().splitlines()[2].endswith(",0,16")
    else:
        with pytest.raises(replay.Unsupported, match="kv.prefix_caching"):
            replay.scenario(wl, path, 0.1)
    assert replay.engine_knows("scheduler.watermark")
    assert not replay.engine_knows("scheduler.no_such_knob")


def test_engine_times_map_to_step_indices():
    """One request arriving at step 2 (t = 0.2), prompt 3, output 2, nothing else: scheduled and
    prefilled in step 2 (first token sampled at its end), second token in step 3."""
    wl = {"id": "hand-1", "config": _workload(long_prefill_token_threshold=0, watermark=0.0)["config"],
          "requests": [[2, 3, 2, 0, -1, 0, -1]],
          "result": {"requests": [[2, 2, 3, 0, 0, 0]], "step_tokens": [0, 0, 3, 1], "empty_calls": 1}}
    comparison = replay.replay(wl, DT)
    assert comparison.agrees, comparison.describe()


def test_comparison_reports_the_first_difference():
    wl = _workload()
    engine_rows = [[0, 4, 5, 0, None], [3, 3, 7, 0, None]]
    engine_steps = {0: 64, 1: 64, 2: 64, 3: 64 + 20, 4: 45, 5: 2, 6: 1, 7: 1}
    c = replay.compare(wl, engine_rows, engine_steps)
    assert not c.agrees and c.agreeing == 1
    assert c.step_diffs[0] == (0, 256, 64)
    text = c.describe()
    assert "request 0: first_token 1≠4, finish 2≠5" in text and "first differing step 0" in text
    assert replay.compare(wl, [r[:5] for r in wl["result"]["requests"]],
                          {k: t for k, t in enumerate(wl["result"]["step_tokens"])}).agrees


# --- the replay: every workload of every mode -------------------------------------------

def _mode_param(mode: str):
    if mode in NOT_YET:
        return pytest.param(mode, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[mode]))
    return mode


@pytest.mark.parametrize("mode", [_mode_param(m) for m in sorted(MODES)])
def test_engine_agrees_with_vllm(mode):
    report = replay.replay_mode(mode, DT)
    failures = report.failures()
    if failures:
        shown = "\n".join("  " + c.describe() for c in failures[:10])
        more = f"\n  … and {len(failures) - 10} more" if len(failures) > 10 else ""
        pytest.fail(f"{report.line()}\n{shown}{more}", pytrace=False)
