"""The GPU & memory page's MoE and MLA explanations: numbers that match the engine's."""

import pytest

from engine import from_dict
from engine.config.memory import breakdown
from ui.panels import costs


def setup(model: str, gpu: str = "H100-80G", tp: int = 1, **keys):
    sc = from_dict({"hardware": {"gpu": gpu, "num_gpus": tp}, "model": {"name": model, **keys}})
    return sc, breakdown(sc)


def test_moe_table_shows_the_share_of_experts_a_step_reads():
    sc, mem = setup("Qwen3-30B-A3B")
    t = costs.moe_table(sc, mem).set_index("tokens in the step")
    assert list(t.index) == [1, 8, 32, 128, 8192]  # the budget: vLLM's H100 default
    assert t.loc[1, "experts used (%)"] == 6.2  # 8 of 128 = 6.25 %
    assert t.loc[8, "experts used (%)"] == pytest.approx(100 * (1 - (15 / 16) ** 8), abs=0.05)
    assert t.loc[8192, "of all weights (%)"] == 100.0
    # one token: 3.08e9 dense + 57.98e9 × 1/16 = 6.70e9 B = 6.24 GiB of 56.87 GiB
    assert t.loc[1, "weights read per GPU (GiB)"] == pytest.approx((3.08e9 + 57.98e9 / 16) / 2**30, abs=0.01)
    assert costs.moe_table(*setup("Llama-3.1-8B")) is None
    assert "8 of 128" in costs.moe_text(mem) and "3.4 B active" in costs.moe_text(mem)


def test_kv_formula_and_mla_text_say_why_the_numbers_are_what_they_are():
    _, gqa = setup("Qwen3-30B-A3B", tp=8)
    assert costs.kv_formula(gqa) == "2 (K, V) × 48 layers × 1 KV heads (4 split over 8 GPUs) × 128 × 2 B = 24.0 KiB"
    _, mla = setup("DeepSeek-V3", "H200", 8)
    assert costs.kv_formula(mla).startswith("(512 latent + 64 rope) × 61 layers × 2 B = 68.6 KiB, the same on every")
    text = costs.mla_text(mla)
    # keys 128 + 64 and values 128 for 128 heads: 61 × 128 × 320 × 2 B = 4,880 KiB, 71× the latent
    assert "4,880 KiB (71×)" in text and "at 8 GPUs" in text
    _, oss = setup("gpt-oss-120b")
    assert "18 layers (of 36; the others keep a fixed window)" in costs.kv_formula(oss)
    assert "experts 4.25 bits" in costs.precision_text(oss)


def test_defaults_and_precision_notes():
    sc, mem = setup("Llama-3.1-8B", "L20")
    assert costs.defaults_text(sc, mem) == ("Token budget 2,048 and 256 running requests: vLLM 0.33's default for a "
                                            "45 GiB L20 (set them in the sidebar to override).")
    explicit = from_dict({"scheduler": {"max_num_batched_tokens": 4096, "max_num_seqs": 64}})
    assert costs.defaults_text(explicit, breakdown(explicit)) is None
    assert costs.precision_text(setup("Llama-3.1-8B", "A100-80G", dtype_bytes=1)[1]).endswith(
        "312 TFLOP/s peak (BF16: this GPU has no FP8 tensor cores).")
    assert "1,979 TFLOP/s peak (FP8)" in costs.precision_text(setup("DeepSeek-V3", "H200", 8)[1])
