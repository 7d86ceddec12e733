"""A custom model from a pasted config.json: the counting reproduces the presets and the published
parameter counts; malformed input is one clear line naming the field, never anything else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import from_dict
from engine.config.hfconfig import MAX_CONFIG_BYTES, ConfigError, describe, model_from_config, model_from_text
from engine.config.memory import breakdown
from engine.config.presets import MODELS
from tests.engine import hf_configs as C


@pytest.mark.parametrize("name", sorted(C.PUBLISHED))
def test_counting_reproduces_the_presets_and_the_published_sizes(name):
    cfg, total_b, active_b, card_counts_embedding = C.PUBLISHED[name]
    m = model_from_config(cfg)
    preset = MODELS[name]
    assert m.params == pytest.approx(preset.params, rel=1e-3)
    assert m.params / 1e9 == pytest.approx(total_b, rel=0.01)
    s = m.section
    assert (s["layers"], s["hidden"], s["q_heads"]) == (preset.layers, preset.hidden, preset.q_heads)
    if preset.mla:
        assert (s["kv_lora_rank"], s["qk_rope_head_dim"]) == (preset.kv_lora_rank, preset.qk_rope_head_dim)
    else:
        assert (s["kv_heads"], s["head_dim"]) == (preset.kv_heads, preset.head_dim)
    assert s["dtype_bytes"] == preset.dtype_bytes
    assert s.get("kv_layers") == preset.kv_layers
    assert s.get("experts", 0) == preset.experts
    if preset.moe:
        assert s["experts_per_token"] == preset.experts_per_token
        assert s["expert_params_b"] * 1e9 == pytest.approx(preset.expert_params, rel=1e-3)
        embedding = 0 if card_counts_embedding else cfg["vocab_size"] * cfg["hidden_size"]
        assert (m.active_params - embedding) / 1e9 == pytest.approx(active_b, rel=0.03)


def test_a_pasted_config_runs_like_the_preset():
    """DeepSeek-V3's config.json as text: the same memory and KV as the preset."""
    m = model_from_text(json.dumps(C.DEEPSEEK_V3, indent=2), name="my DeepSeek")
    assert m.section["name"] == "my DeepSeek"
    assert any("multi-token-prediction" in n for n in m.notes)
    hw = {"gpu": "H200", "num_gpus": 8}
    custom = breakdown(from_dict({"hardware": hw, "model": m.section}))
    preset = breakdown(from_dict({"hardware": hw, "model": {"name": "DeepSeek-V3"}}))
    assert custom.kv_bytes_per_token == preset.kv_bytes_per_token == 70_272
    assert custom.weights == pytest.approx(preset.weights, rel=1e-4)
    assert custom.blocks == pytest.approx(preset.blocks, rel=1e-3)
    assert "MoE, 8 of 256 experts per token" in describe(m.section) and "MLA latent 512 + 64" in describe(m.section)


def test_multimodal_configs_use_their_text_model_and_names_are_made_safe():
    wrapped = {"model_type": "qwen3_vl_moe", "architectures": ["X"], "text_config": dict(C.QWEN3_30B_A3B),
               "vision_config": {"depth": 27}}
    m = model_from_config(wrapped, name="<b>Qwen3-30B-A3B</b>")
    assert m.section["name"] == "bQwen3-30B-A3B/b"  # markup characters dropped
    assert model_from_config(C.QWEN3_30B_A3B, name="Qwen3-30B-A3B").section["name"] == "Qwen3-30B-A3B (custom)"
    assert model_from_config(C.QWEN3_30B_A3B).section["name"] == "Custom qwen3_moe"


def test_fp8_and_quantization_methods():
    fp8 = {**C.LLAMA_31_8B, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    assert model_from_config(fp8).section["dtype_bytes"] == 1
    ct = {**C.LLAMA_31_8B, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 8, "type": "float"}}}}}
    assert model_from_config(ct).section["dtype_bytes"] == 1
    assert model_from_config(C.GPT_OSS_120B).section["expert_dtype_bytes"] == 0.53125
    with pytest.raises(ConfigError, match=r"^config.json: quantization_config.quant_method = 'awq': the lab models"):
        model_from_config({**C.LLAMA_31_8B, "quantization_config": {"quant_method": "awq", "bits": 4}})


BAD = [
    ("", "empty"),
    ("   ", "empty"),
    ("{", "not valid JSON (line 1, column 2)"),
    ("[1, 2]", "expected a JSON object"),
    ('"text"', "expected a JSON object"),
    ('{"num_hidden_layers": NaN}', "not usable JSON"),
    ('{"num_hidden_layers": Infinity}', "not usable JSON"),
    ('{"a": ' + "9" * 5000 + "}", "not usable JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 32 levels"),
    (json.dumps({**C.LLAMA_31_8B, "num_hidden_layers": None}), "num_hidden_layers or n_layer or num_layers is missing"),
    (json.dumps({**C.LLAMA_31_8B, "num_hidden_layers": "32"}), "num_hidden_layers = '32': must be a whole number"),
    (json.dumps({**C.LLAMA_31_8B, "num_hidden_layers": True}), "num_hidden_layers = True: must be a whole number"),
    (json.dumps({**C.LLAMA_31_8B, "num_hidden_layers": 1e30}), "num_hidden_layers = 1e+30: must be a whole number"),
    (json.dumps({**C.LLAMA_31_8B, "hidden_size": -4096}), "hidden_size = -4096: must be a whole number from 64"),
    (json.dumps({**C.LLAMA_31_8B, "num_key_value_heads": 5}), "num_key_value_heads = 5 must divide"),
    (json.dumps({k: v for k, v in C.LLAMA_31_8B.items() if k != "vocab_size"}), "vocab_size is missing"),
    (json.dumps({k: v for k, v in C.LLAMA_31_8B.items() if k != "intermediate_size"}), "intermediate_size is missing"),
    (json.dumps({**C.QWEN3_30B_A3B, "num_experts_per_tok": 300}), "num_experts_per_tok = 300: must be a whole"),
    (json.dumps({**C.GPT_OSS_120B, "layer_types": ["full_attention"] * 3}), "layer_types = a list of 3 items"),
    (json.dumps({**C.GPT_OSS_120B, "layer_types": ["sliding_attention"] * 36}), "no full-attention layer"),
    (json.dumps({**C.LLAMA_31_8B, "torch_dtype": "int4"}), "torch_dtype = 'int4'"),
    (json.dumps({**C.DEEPSEEK_V3, "v_head_dim": None}), "v_head_dim is missing (MLA"),
    (json.dumps({**C.QWEN3_30B_A3B, "mlp_only_layers": [0, 99]}), "mlp_only_layers = a list of 2 items: must be"),
    (json.dumps({**C.LLAMA_31_405B, "num_hidden_layers": 512, "hidden_size": 65536}), "the lab models 0 to 2,000 B"),
    (json.dumps({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24}), "not a decoder-only"),
]


@pytest.mark.parametrize("text,expected", BAD)
def test_malformed_configs_get_one_clear_line_naming_the_field(text, expected):
    with pytest.raises(ConfigError) as err:
        model_from_text(text)
    msg = str(err.value)
    assert msg.startswith("config.json: ") and expected in msg
    assert "\n" not in msg and len(msg) < 400


def test_size_and_encoding_are_bounded():
    with pytest.raises(ConfigError, match="over the 256 KiB limit"):
        model_from_text(b"{" + b" " * MAX_CONFIG_BYTES + b"}")
    with pytest.raises(ConfigError, match="over the 256 KiB limit"):
        model_from_text("{" + " " * MAX_CONFIG_BYTES + "}")
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 1\)"):
        model_from_text(b"{\xff}")
    assert model_from_text(b"\xef\xbb\xbf" + json.dumps(C.LLAMA_31_8B).encode()).section["layers"] == 32  # BOM


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(base=st.sampled_from(sorted(C.PUBLISHED)), key=st.sampled_from(sorted(
    set().union(*(v[0] for v in C.PUBLISHED.values())))), value=JSON_VALUES, drop=st.booleans())
def test_any_damaged_config_either_validates_as_a_scenario_model_or_is_refused(base, key, value, drop):
    cfg = dict(C.PUBLISHED[base][0])
    if drop:
        cfg.pop(key, None)
    else:
        cfg[key] = value
    try:
        m = model_from_text(json.dumps(cfg))
    except ConfigError as err:
        assert str(err).startswith("config.json: ") and "\n" not in str(err)
        return
    from_dict({"model": m.section})  # whatever is accepted is a valid scenario model


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_arbitrary_text_never_escapes_as_anything_but_config_error(text):
    try:
        model_from_text(text)
    except ConfigError:
        pass
