"""Models and GPUs of 2026: KV capacity, MoE and MLA step time, FP8, vLLM's per-GPU defaults.

The numbers are worked out by hand in the comments (GiB = 2^30 bytes; H100: 79.6 GiB, 3.35 TB/s,
989 TFLOP/s BF16; defaults: gpu_memory_utilization 0.9, 3 GiB activation reserve, blocks of 16).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import from_dict, load, scenario_names, simulate
from engine.config.cost import make_step_cost
from engine.config.memory import breakdown, kv_bytes_per_token, resolve_model
from engine.config.presets import GPUS, MODELS, vllm_batch_defaults
from engine.config.scenario import ScenarioError, bench_names, to_dict

GIB = 2**30


def mem(model: str | dict, gpu: str = "H100-80G", tp: int = 1, **model_keys):
    spec = {"name": model, **model_keys} if isinstance(model, str) else model
    return breakdown(from_dict({"hardware": {"gpu": gpu, "num_gpus": tp}, "model": spec}))


# ---------------------------------------------------------------------------------------------
# KV bytes per token and blocks, by hand


def test_llama31_8b_on_one_h100_by_hand():
    # K and V × 32 layers × 8 KV heads × 128 × 2 bytes = 131,072 B (128 KiB) per token
    # usable 79.6 × 0.9 = 71.64 GiB = 76,922,864,271.36 B; weights 8.03e9 × 2 = 16.06e9 B; 3 GiB reserve
    # KV = 76,922,864,271.36 − 16,060,000,000 − 3,221,225,472 = 57,641,638,799.36 B
    # blocks = ⌊57,641,638,799.36 / (16 × 131,072)⌋ = ⌊27,485.8⌋ = 27,485 → 439,760 tokens
    m = mem("Llama-3.1-8B")
    assert m.kv_bytes_per_token == 131_072
    assert m.weights == 16.06e9
    assert m.kv == pytest.approx(57_641_638_799.36, abs=1e-3)
    assert (m.blocks, m.kv_tokens) == (27_485, 439_760)


def test_deepseek_v3_on_eight_h200_mla_latent_by_hand():
    # MLA caches one latent per layer: (512 + 64) × 61 layers × 2 bytes = 70,272 B per token,
    # whole on every rank (vLLM: one KV head per GPU for MLA, whatever the TP size)
    # weights FP8: 671.03e9 × 1 B / 8 = 83,878,750,000 B per GPU
    # usable 140.4 × 0.9 = 126.36 GiB = 135,678,012,880.64 B; − weights − 3 GiB = 48,578,041,408.64 B
    # blocks = ⌊48,578,041,408.64 / (16 × 70,272)⌋ = ⌊43,205.6⌋ = 43,205
    m = mem("DeepSeek-V3", "H200", 8)
    assert m.kv_bytes_per_token == 70_272
    assert m.weights == 83_878_750_000
    assert m.blocks == 43_205


def test_qwen3_30b_a3b_with_fp8_kv_by_hand():
    # every expert is resident: weights 30.53e9 × 2 = 61.06e9 B although a token uses 3.35 B params
    # FP8 KV: 2 × 48 × 4 × 128 × 1 = 49,152 B per token
    # KV = 76,922,864,271.36 − 61,060,000,000 − 3,221,225,472 = 12,641,638,799.36 B
    # blocks = ⌊12,641,638,799.36 / 786,432⌋ = ⌊16,074.6⌋ = 16,074
    m = mem("Qwen3-30B-A3B", kv_dtype_bytes=1)
    assert (m.kv_bytes_per_token, m.weights, m.blocks) == (49_152, 61.06e9, 16_074)
    assert mem("Qwen3-30B-A3B").kv_bytes_per_token == 98_304  # BF16 KV: twice as much per token


def test_gpt_oss_120b_mxfp4_experts_and_full_attention_layers_only():
    # experts in MXFP4 (4.25 bits): 114.70e9 × 0.53125 = 60,934,375,000 B; the other 2.13e9 params
    # in BF16: 4.26e9 B → 65,194,375,000 B. Only the 18 full-attention layers keep the whole
    # context (the other 18 a 128-token window): 2 × 18 × 8 × 64 × 2 = 36,864 B per token
    m = mem("gpt-oss-120b")
    assert m.weights == pytest.approx(65_194_375_000, abs=1)
    assert m.kv_bytes_per_token == 36_864
    assert m.blocks == int((71.64 * GIB - 65_194_375_000 - 3 * GIB) // (16 * 36_864)) == 14_423


def test_tensor_parallel_splits_kv_heads_but_not_the_mla_latent():
    # Qwen3-30B-A3B has 4 KV heads: TP 2 → 2 per GPU, TP 8 → replicated, 1 per GPU
    per_gpu = [mem("Qwen3-30B-A3B", "H100-80G", tp).kv_bytes_per_token for tp in (1, 2, 4, 8)]
    assert per_gpu == [98_304, 49_152, 24_576, 24_576]
    mla = [mem("DeepSeek-V2-Lite", "H100-80G", tp).kv_bytes_per_token for tp in (1, 2, 4, 8)]
    assert mla == [27 * 576 * 2] * 4


# ---------------------------------------------------------------------------------------------
# Step time


def test_moe_decode_step_by_hand():
    """Qwen3-30B-A3B on one H100, BF16: a decode step of 4 requests, each on a 1,000-token context.

    Experts: 28.99e9 params × 2 B = 57.98e9 B; the rest: (30.53 − 28.99)e9 × 2 = 3.08e9 B.
    4 tokens touch 1 − (1 − 8/128)^4 = 1 − (15/16)^4 = 14,911/65,536 ≈ 22.75 % of each layer's
    experts, so the step reads 3.08e9 + 57.98e9 × 14,911/65,536 ≈ 16.27e9 B of weights (a dense
    30 B model would read 61.06e9) plus KV: 98,304 B × (4,000 context + 4 new) ≈ 0.39e9 B.
    Memory time ≈ 16.67e9 / (3.35e12 × 0.72) ≈ 6.91 ms. Compute: active params 30.53e9 −
    28.99e9 × 15/16 = 3.351875e9 → 2 × 3.351875e9 × 4 ≈ 26.8 GFLOP, attention 4 × 48 × 32 × 128 ×
    4 × 1000.5 ≈ 3.1 GFLOP → ≈ 0.05 ms at 989e12 × 0.6. Step ≈ 6.91 + 2 ms overhead ≈ 8.91 ms.
    """
    sc = from_dict({"model": {"name": "Qwen3-30B-A3B"}})
    cost = make_step_cost(sc.cost, breakdown(sc))
    touched = 1 - (15 / 16) ** 4
    assert touched == pytest.approx(14_911 / 65_536, rel=1e-15)
    weights = 3.08e9 + 57.98e9 * touched
    memory_s = (weights + 98_304 * 4_004) / (3.35e12 * 0.72)
    compute_s = (2 * 3.351875e9 * 4 + 4 * 48 * 32 * 128 * 4 * 1000.5) / (989e12 * 0.6)
    assert memory_s == pytest.approx(6.909e-3, abs=1e-6) and compute_s < 0.06e-3
    assert cost(4, 4 * 1000.5, 4000) == pytest.approx(memory_s + 0.002, rel=1e-12)
    parts = cost.parts(4, 4 * 1000.5, 4000)
    assert parts["compute_s"] == pytest.approx(compute_s, rel=1e-12)
    # one token reads exactly k/E of the experts; a 64-token batch nearly all; a prefill chunk all
    assert cost.touched(1) == pytest.approx(8 / 128, rel=1e-15)
    assert cost.touched(64) == pytest.approx(1 - (15 / 16) ** 64) and cost.touched(64) > 0.98
    assert cost.touched(8192) == pytest.approx(1.0)


def test_dense_models_read_every_weight_every_step():
    sc = from_dict({"model": {"name": "Llama-3.1-8B"}})
    cost = make_step_cost(sc.cost, breakdown(sc))
    assert cost.expert_bytes == 0 and cost.weight_bytes == 16.06e9
    assert cost(1, 1000.5, 1000) == pytest.approx((16.06e9 + 131_072 * 1001) / (3.35e12 * 0.72) + 0.002, rel=1e-12)


def test_moe_prefill_costs_active_flops_not_total():
    """A full 8,192-token chunk is compute-bound: 2 × active params per token, not total."""
    for name, active in (("Qwen3-30B-A3B", 30.53e9 - 28.99e9 * (1 - 8 / 128)),
                         ("gpt-oss-120b", 116.83e9 - 114.70e9 * (1 - 4 / 128))):
        sc = from_dict({"model": {"name": name}})
        cost = make_step_cost(sc.cost, breakdown(sc))
        assert cost.flops_per_token == pytest.approx(2 * active, rel=1e-12)
    assert resolve_model(from_dict({"model": {"name": "Qwen3-235B-A22B"}}).model).active_params == pytest.approx(
        22.19e9, rel=1e-3)


def test_fp8_weights_run_at_the_fp8_peak_where_the_gpu_has_one():
    def rate(model, gpu, **keys):
        sc = from_dict({"hardware": {"gpu": gpu, "num_gpus": 8 if model == "DeepSeek-V3" else 1},
                        "model": {"name": model, **keys}})
        return make_step_cost(sc.cost, breakdown(sc))

    assert rate("DeepSeek-V3", "H200").flops_rate == pytest.approx(1979e12 * 0.6)  # an FP8 checkpoint
    assert rate("Llama-3.1-8B", "H100-80G", dtype_bytes=1).flops_rate == pytest.approx(1979e12 * 0.6)
    a100 = rate("Llama-3.1-8B", "A100-80G", dtype_bytes=1)  # no FP8 tensor cores: weight-only FP8
    assert a100.flops_rate == pytest.approx(312e12 * 0.6) and a100.weight_bytes == 8.03e9
    # attention stays at BF16: counted in FP8-rate FLOPs it weighs 1979/989 times as much on an H100
    bf16, fp8 = rate("Llama-3.1-8B", "H100-80G"), rate("Llama-3.1-8B", "H100-80G", dtype_bytes=1)
    assert fp8.attn_flops_per_unit == pytest.approx(1979 / 989 * bf16.attn_flops_per_unit)
    assert fp8.attn_flops_per_unit / fp8.flops_rate == pytest.approx(bf16.attn_flops_per_unit / bf16.flops_rate)


def test_mla_attention_uses_the_absorbed_latent_width():
    # per query-context pair: 2 × layers × heads × ((512 + 64) + 512) FLOPs, split over 8 ranks,
    # in FP8-rate FLOPs (× 1979/989) because DeepSeek-V3's weights are FP8
    sc = from_dict({"hardware": {"gpu": "H200", "num_gpus": 8}, "model": {"name": "DeepSeek-V3"}})
    cost = make_step_cost(sc.cost, breakdown(sc))
    assert cost.attn_flops_per_unit == pytest.approx(2 * 61 * 128 * (576 + 512) / 8 * 1979 / 989)


# ---------------------------------------------------------------------------------------------
# Claims


def test_claim_an_mla_model_fits_far_more_kv_tokens_than_a_gqa_model_of_similar_size():
    """DeepSeek-V2-Lite (15.7 B, MLA) against Qwen2.5-14B (14.8 B, 8 KV heads × 128) on one H100:
    30.4 KiB against 192 KiB per token, so about 6× the tokens although its weights are larger."""
    qwen25_14b = {"name": "Qwen2.5-14B", "params_b": 14.77, "layers": 48, "hidden": 5120, "q_heads": 40,
                  "kv_heads": 8, "head_dim": 128}
    mla, gqa = mem("DeepSeek-V2-Lite"), mem(qwen25_14b)
    assert mla.weights > gqa.weights
    assert (mla.kv_bytes_per_token, gqa.kv_bytes_per_token) == (31_104, 196_608)
    assert mla.kv_tokens > 5 * gqa.kv_tokens
    # … and that many more requests of a long document run at once before KV runs out
    assert mla.kv_tokens // 32_768 >= 41 and gqa.kv_tokens // 32_768 <= 7


def test_claim_tensor_parallelism_erodes_the_mla_advantage():
    """MLA's latent is replicated on every rank while GQA heads are split: DeepSeek-V3 at TP 8 holds
    68.6 KiB per token on each GPU, more than Llama-3.1-405B's 63 KiB (1 of 8 KV heads each)."""
    ds1 = kv_bytes_per_token(resolve_model(from_dict({"model": {"name": "DeepSeek-V3"}}).model))
    llama1 = kv_bytes_per_token(resolve_model(from_dict({"model": {"name": "Llama-3.1-405B"}}).model))
    assert llama1 / ds1 > 7  # one copy: MLA is 7.3× smaller
    ds8, llama8 = mem("DeepSeek-V3", "H200", 8), mem("Llama-3.1-405B", "H200", 8, dtype_bytes=1)
    assert ds8.kv_bytes_per_token == ds1 and llama8.kv_bytes_per_token == llama1 / 8
    assert ds8.kv_bytes_per_token > llama8.kv_bytes_per_token


def test_claim_moe_decode_is_cheap_at_small_batch_and_pays_for_all_experts_at_large():
    """Qwen3-30B-A3B: one decode token reads 1/16 of the experts, so a single-request step costs
    about a fifth of a full read; by 64 requests nearly every expert is read."""
    sc = from_dict({"model": {"name": "Qwen3-30B-A3B"}})
    cost = make_step_cost(sc.cost, breakdown(sc))
    full = (cost.weight_bytes + cost.expert_bytes) / cost.bytes_rate
    one = cost.parts(1, 1.5, 1)["memory_s"]
    many = cost.parts(64, 96.0, 64)["memory_s"]
    assert one < 0.2 * full and many > 0.95 * full


# ---------------------------------------------------------------------------------------------
# vLLM 0.33's default token budget and seats per GPU class


@pytest.mark.parametrize("gpu,expected", [
    ("A100-80G", (2048, 256)), ("L40S", (2048, 256)), ("L20", (2048, 256)),
    ("H100-80G", (8192, 1024)), ("H200", (8192, 1024)), ("H800", (8192, 1024)), ("H20", (8192, 1024)),
    ("B200", (16384, 1024)), ("MI300X", (16384, 1024)),
])
def test_an_unset_budget_and_seat_count_take_vllms_default_for_the_gpu(gpu, expected):
    sc = from_dict({"hardware": {"gpu": gpu}})
    assert (sc.scheduler.max_num_batched_tokens, sc.scheduler.max_num_seqs) == expected
    assert sc.device_defaults == {"max_num_batched_tokens", "max_num_seqs"}
    assert vllm_batch_defaults(gpu, GPUS[gpu].memory_gib) == expected


def test_explicit_values_win_and_unset_ones_follow_the_gpu():
    sc = from_dict({"hardware": {"gpu": "B200"}, "scheduler": {"max_num_seqs": 64}})
    assert (sc.scheduler.max_num_batched_tokens, sc.scheduler.max_num_seqs) == (16384, 64)
    assert sc.device_defaults == {"max_num_batched_tokens"}
    data = to_dict(sc)  # written back unset, so a changed GPU changes it
    assert data["scheduler"]["max_num_batched_tokens"] is None and data["scheduler"]["max_num_seqs"] == 64
    data["hardware"]["gpu"] = "L20"
    assert from_dict(data).scheduler.max_num_batched_tokens == 2048
    assert from_dict(to_dict(sc)) == sc  # the round trip is exact


def test_a_custom_gpu_is_classed_by_its_memory_and_name():
    custom = {"memory_gib": 180, "bandwidth_tbs": 7, "peak_tflops": 2000}
    assert from_dict({"hardware": {"gpu": "Next", **custom}}).scheduler.max_num_batched_tokens == 16384
    mid = {**custom, "memory_gib": 79.2}
    assert from_dict({"hardware": {"gpu": "A100 SXM 80GB", **mid}}).scheduler.max_num_batched_tokens == 2048
    assert from_dict({"hardware": {"gpu": "Other", **mid}}).scheduler.max_num_batched_tokens == 8192
    # overriding a preset's memory moves it between classes, as the driver's number would
    assert from_dict({"hardware": {"gpu": "H100-80G", "memory_gib": 40}}).scheduler.max_num_seqs == 256


def test_every_shipped_scenario_sets_its_budget_and_seats_so_its_results_are_unchanged():
    for name in scenario_names() + bench_names():
        sc = load(name)
        assert sc.device_defaults == frozenset(), name


def test_a_run_uses_the_gpu_default_seats(tmp_path):
    """2,000 one-token requests at once on an L20-class GPU: vLLM's default 256 seats bind."""
    data = {"duration_s": 1, "hardware": {"gpu": "L20"}, "model": {"name": "Llama-3.1-8B"},
            "cost": {"model": "fixed", "step_time_s": 0.01},
            "classes": {"A": {"arrival": {"process": "times", "times": [0.0] * 600},
                              "prompt": {"value": 1}, "output": {"value": 1}}}}
    assert int(simulate(from_dict(data)).steps["batch_size"].max()) == 256
    data["hardware"]["gpu"] = "H20"  # a Hopper-class default: 1,024 seats, all 600 in one step
    assert int(simulate(from_dict(data)).steps["batch_size"].max()) == 600


# ---------------------------------------------------------------------------------------------
# Presets and the schema


def test_every_preset_resolves_and_leaves_kv_on_a_sensible_gpu_count():
    needs = {"Llama-3.1-405B": ("H200", 8, {"dtype_bytes": 1}), "DeepSeek-V3": ("H200", 8, {}),
             "DeepSeek-R1": ("B200", 8, {}), "Qwen3-235B-A22B": ("MI300X", 4, {}), "Llama-3.1-70B": ("H20", 2, {}),
             "Llama-3-70B": ("H800", 2, {})}
    for name in MODELS:
        gpu, tp, keys = needs.get(name, ("H100-80G", 1, {}))
        m = mem(name, gpu, tp, **keys)
        assert m.blocks > 1000, name


def test_moe_fields_that_contradict_each_other_are_refused_with_the_field_named():
    with pytest.raises(ScenarioError, match=r"model: experts_per_token \(200\) must be 1 to experts \(128\)"):
        from_dict({"model": {"name": "Qwen3-30B-A3B", "experts_per_token": 200}})
    with pytest.raises(ScenarioError, match=r"expert_params_b .* below params_b"):
        from_dict({"model": {"name": "Qwen3-30B-A3B", "params_b": 10}})
    with pytest.raises(ScenarioError, match=r"kv_layers \(40\) must be at most layers \(32\)"):
        from_dict({"model": {"name": "Llama-3.1-8B", "kv_layers": 40}})
    custom = {"name": "X", "params_b": 10, "layers": 8, "hidden": 1024, "q_heads": 8, "kv_heads": 8, "head_dim": 128}
    with pytest.raises(ScenarioError, match="experts_per_token"):
        from_dict({"model": {**custom, "experts": 8}})
    # switching an MoE preset to dense (experts 0) is allowed: all its parameters then count
    dense = resolve_model(from_dict({"model": {"name": "Qwen3-30B-A3B", "experts": 0}}).model)
    assert dense.active_params == dense.params == 30.53e9


# ---------------------------------------------------------------------------------------------
# Properties


@settings(max_examples=200, deadline=None, derandomize=True)
@given(gpu=st.sampled_from(sorted(GPUS)), budget=st.none() | st.integers(1, 100_000),
       seqs=st.none() | st.integers(1, 5000), other=st.sampled_from(sorted(GPUS)))
def test_unset_keys_follow_the_gpu_through_any_round_trip(gpu, budget, seqs, other):
    sc = from_dict({"hardware": {"gpu": gpu}, "scheduler": {"max_num_batched_tokens": budget, "max_num_seqs": seqs}})
    default = vllm_batch_defaults(gpu, GPUS[gpu].memory_gib)
    assert sc.scheduler.max_num_batched_tokens == (budget if budget is not None else default[0])
    assert sc.scheduler.max_num_seqs == (seqs if seqs is not None else default[1])
    assert from_dict(to_dict(sc)) == sc and from_dict(to_dict(sc)).key() == sc.key()
    moved = to_dict(sc)
    moved["hardware"]["gpu"] = other
    again = from_dict(moved)
    expect = vllm_batch_defaults(other, GPUS[other].memory_gib)
    assert again.scheduler.max_num_batched_tokens == (budget if budget is not None else expect[0])
    assert again.scheduler.max_num_seqs == (seqs if seqs is not None else expect[1])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(model=st.sampled_from(sorted(n for n, m in MODELS.items() if m.moe)), a=st.integers(1, 20_000),
       b=st.integers(1, 20_000), ctx=st.integers(0, 10**7))
def test_moe_weight_reads_grow_with_the_step_and_stay_between_k_over_e_and_all(model, a, b, ctx):
    sc = from_dict({"hardware": {"gpu": "B200", "num_gpus": 8}, "model": {"name": model}})
    cost = make_step_cost(sc.cost, breakdown(sc))
    m = resolve_model(sc.model)
    lo, hi = min(a, b), max(a, b)
    assert m.experts_per_token / m.experts - 1e-12 <= cost.touched(lo) <= cost.touched(hi) <= 1.0
    assert cost.parts(lo, 0.0, ctx)["memory_s"] <= cost.parts(hi, 0.0, ctx)["memory_s"]
    assert cost(lo, lo * (ctx + 0.5), ctx) <= cost(hi, hi * (ctx + 0.5), ctx)
