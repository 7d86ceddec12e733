"""A custom model from a pasted Hugging Face `config.json`: parsed, checked, counted.

The text becomes the scenario's `model` section (every field explicit, so the scenario stays
self-contained): the shape the KV cache and the step time need, and the parameters counted from
the shape — embeddings, attention (GQA or DeepSeek's MLA), dense MLPs, routed and shared experts,
norms — since a config.json does not state them. The same counting gives the presets' numbers.

Input from a browser is untrusted: at most `MAX_CONFIG_BYTES`, JSON with bounded nesting, no
NaN/Infinity, every field used checked for type and range. A problem is one `ConfigError` line
naming the field (`num_hidden_layers = 'abc': must be a whole number from 1 to 512`); nothing
else escapes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .literal import brief, clip
from .presets import MODELS, MXFP4_BYTES
from .scenario import ScenarioError

MAX_CONFIG_BYTES = 256 * 1024  # real config.json files are a few KiB; id2label tables stay far below
MAX_DEPTH = 32
ORIGIN = "config.json"
SLIDING = ("sliding_attention", "sliding", "local", "local_attention", "chunked_attention")
CONSTANT_STATE = ("linear_attention", "mamba", "mamba2", "ssm", "conv", "recurrent")


class ConfigError(ScenarioError):
    """A config.json that cannot describe a model; the message names the field."""


@dataclass(frozen=True)
class CustomModel:
    """The scenario's `model` section for a config, and what the counting assumed."""

    section: dict[str, Any]
    notes: tuple[str, ...]
    params: float
    active_params: float


# ---------------------------------------------------------------------------------------------
# Text → mapping


def parse_text(text: str | bytes) -> dict[str, Any]:
    """The JSON object in `text` (bounded size and nesting, finite numbers), or ConfigError."""
    if isinstance(text, bytes):
        if len(text) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{ORIGIN}: {len(text):,} bytes is over the {MAX_CONFIG_BYTES // 1024} KiB limit")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise ConfigError(f"{ORIGIN}: not UTF-8 text (byte {err.start})") from None
    if not isinstance(text, str):
        raise ConfigError(f"{ORIGIN}: expected text, got {type(text).__name__}")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{ORIGIN}: over the {MAX_CONFIG_BYTES // 1024} KiB limit")
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise ConfigError(f"{ORIGIN}: empty — paste the contents of the model's config.json")
    if _depth(text) > MAX_DEPTH:
        raise ConfigError(f"{ORIGIN}: nested more than {MAX_DEPTH} levels deep")

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        data = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{ORIGIN}: not valid JSON (line {err.lineno}, column {err.colno}): {clip(err.msg, 80)}"
                          ) from None
    except (ValueError, RecursionError) as err:  # NaN/Infinity, a 5,000-digit integer, deep nesting
        raise ConfigError(f"{ORIGIN}: not usable JSON: {clip(str(err), 120)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{ORIGIN}: expected a JSON object {{...}}, got {_kind(data)}")
    return data


def _depth(text: str) -> int:
    """Deepest bracket nesting outside strings (checked before json.loads recurses)."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(v), "a number")


# ---------------------------------------------------------------------------------------------
# Reading fields


class _Fields:
    """Typed, range-checked access to the config's fields; messages name the field."""

    def __init__(self, cfg: dict[str, Any], prefix: str = ""):
        self.cfg, self.prefix = cfg, prefix

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.cfg.get(key)

    def int(self, key: str, lo: int, hi: int, default: int | None = None, why: str = "") -> int:
        v = self.cfg.get(key)
        if v is None:
            if default is not None:
                return default
            raise ConfigError(f"{ORIGIN}: {self.prefix}{key} is missing{why}")
        if isinstance(v, float) and v.is_integer() and lo <= v <= hi:
            v = int(v)  # 32.0 is 32
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ConfigError(f"{ORIGIN}: {self.prefix}{key} = {brief(v)}: "
                              f"must be a whole number from {lo:,} to {hi:,}")
        return v

    def first_int(self, keys: tuple[str, ...], lo: int, hi: int, default: int | None = None, why: str = "") -> int:
        for k in keys:
            if self.has(k):
                return self.int(k, lo, hi)
        if default is not None:
            return default
        raise ConfigError(f"{ORIGIN}: {self.prefix}{' or '.join(keys)} is missing{why}")

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(f"{ORIGIN}: {self.prefix}{key} = {brief(v)}: must be true or false")
        return v

    def str(self, key: str, default: str = "") -> str:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise ConfigError(f"{ORIGIN}: {self.prefix}{key} = {brief(v)}: must be text")
        return v

    def int_list(self, key: str, hi: int) -> list[int]:
        v = self.cfg.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= hi
                                          for x in v):
            raise ConfigError(f"{ORIGIN}: {self.prefix}{key} = {brief(v)}: must be a list of layer numbers 0 to {hi}")
        return v


# ---------------------------------------------------------------------------------------------
# Mapping → model section


def model_from_text(text: str | bytes, name: str | None = None) -> CustomModel:
    """A pasted config.json → the scenario's `model` section (ConfigError if it cannot be used)."""
    return model_from_config(parse_text(text), name)


def model_from_config(cfg: dict[str, Any], name: str | None = None) -> CustomModel:
    """The `model` section for a parsed config (its text model's, for a multimodal config)."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{ORIGIN}: expected a JSON object, got {_kind(cfg)}")
    top = _Fields(cfg)
    text_cfg = cfg.get("text_config")
    prefix = ""
    if isinstance(text_cfg, dict) and "num_hidden_layers" not in cfg:
        cfg, prefix = text_cfg, "text_config."
    f = _Fields(cfg, prefix)
    notes: list[str] = []
    model_type = f.str("model_type") or top.str("model_type") or "model"
    if any(t in model_type.lower() for t in ("mamba", "rwkv", "t5", "bert")) and not f.has("num_attention_heads"):
        raise ConfigError(f"{ORIGIN}: model_type {brief(model_type)} is not a decoder-only transformer "
                          "with attention layers, which is what the lab models")

    layers = f.first_int(("num_hidden_layers", "n_layer", "num_layers"), 1, 512,
                         why=" (the number of transformer layers)")
    hidden = f.first_int(("hidden_size", "n_embd", "d_model"), 64, 65536, why=" (the model width)")
    q_heads = f.first_int(("num_attention_heads", "n_head"), 1, 1024, why=" (query heads per layer)")
    vocab = f.int("vocab_size", 1, 10_000_000, why=" (the embedding size)")
    tied = f.bool("tie_word_embeddings", top.bool("tie_word_embeddings", False))
    if not f.has("tie_word_embeddings") and not top.has("tie_word_embeddings"):
        notes.append("tie_word_embeddings not given: the output head is counted as its own matrix")

    # attention
    mla = f.has("kv_lora_rank")
    if mla:
        rank = f.int("kv_lora_rank", 1, 8192)
        rope = f.int("qk_rope_head_dim", 0, 1024, default=0)
        nope = f.int("qk_nope_head_dim", 0, 1024, why=" (MLA: the non-rotary part of each query/key head)")
        v_dim = f.int("v_head_dim", 1, 1024, why=" (MLA: the value head width)")
        q_rank = f.int("q_lora_rank", 1, 65536) if f.has("q_lora_rank") else 0
        q_proj = (hidden * q_rank + q_rank + q_rank * q_heads * (nope + rope)) if q_rank else hidden * q_heads * (
            nope + rope)
        attn = q_proj + hidden * (rank + rope) + rank + rank * q_heads * (nope + v_dim) + q_heads * v_dim * hidden
        kv_heads, head_dim = q_heads, max(v_dim, 8)
    else:
        rank = rope = 0
        kv_heads = f.first_int(("num_key_value_heads", "num_kv_heads"), 1, 1024, default=q_heads)
        if q_heads % kv_heads:
            raise ConfigError(f"{ORIGIN}: {prefix}num_key_value_heads = {kv_heads} must divide "
                              f"num_attention_heads = {q_heads}")
        if f.has("head_dim"):
            head_dim = f.int("head_dim", 8, 1024)
        else:
            if hidden % q_heads:
                raise ConfigError(f"{ORIGIN}: {prefix}head_dim is missing and hidden_size {hidden} is not a multiple "
                                  f"of num_attention_heads {q_heads}")
            head_dim = hidden // q_heads
            if not 8 <= head_dim <= 1024:
                raise ConfigError(f"{ORIGIN}: hidden_size / num_attention_heads = {head_dim}: a head must be "
                                  "8 to 1,024 wide")
        bias = f.bool("attention_bias", model_type in ("qwen2", "qwen2_moe"))
        attn = hidden * head_dim * (q_heads + 2 * kv_heads) + q_heads * head_dim * hidden
        if bias:
            attn += head_dim * (q_heads + 2 * kv_heads) + (hidden if f.bool("attention_bias", False) else 0)

    # feed-forward: dense layers, MoE layers, routed and shared experts
    experts = 0
    for key in ("num_experts", "n_routed_experts", "num_local_experts"):
        if f.has(key):
            experts = f.int(key, 0, 4096)
            break
    dense_ffn = f.int("intermediate_size", 1, 1_048_576, default=0) if f.has("intermediate_size") else 0
    moe_layers = 0
    routed = shared = router = 0
    top_k = 0
    if experts > 0:
        top_k = f.first_int(("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k"), 1, experts,
                            why=" (experts each token uses)")
        expert_ffn = f.int("moe_intermediate_size", 1, 1_048_576) if f.has("moe_intermediate_size") else dense_ffn
        if not expert_ffn:
            raise ConfigError(f"{ORIGIN}: {prefix}moe_intermediate_size (or intermediate_size) is missing "
                              "(the width of one expert)")
        moe_layers = _moe_layer_count(f, layers)
        bias = model_type == "gpt_oss"
        per_expert = 3 * hidden * expert_ffn + ((2 * expert_ffn + hidden) if bias else 0)
        routed = experts * per_expert
        n_shared = f.first_int(("n_shared_experts", "num_shared_experts"), 0, 64, default=0)
        shared = n_shared * 3 * hidden * expert_ffn
        if f.has("shared_expert_intermediate_size"):
            shared += 3 * hidden * f.int("shared_expert_intermediate_size", 0, 1_048_576) + hidden
        router = hidden * experts + (experts if bias or model_type.startswith("deepseek_v3") else 0)
    elif not dense_ffn:
        raise ConfigError(f"{ORIGIN}: {prefix}intermediate_size is missing (the MLP width)")
    dense_layers = layers - moe_layers
    if dense_layers and not dense_ffn:
        raise ConfigError(f"{ORIGIN}: {prefix}intermediate_size is missing (the MLP width of the "
                          f"{dense_layers} dense layers)")

    params = (vocab * hidden * (1 if tied else 2) + layers * (attn + 2 * hidden) + hidden
              + dense_layers * 3 * hidden * dense_ffn + moe_layers * (routed + shared + router))
    expert_params = moe_layers * routed

    # layers whose cache grows with the context
    kv_layers = layers
    types = f.raw("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or not all(isinstance(t, str) for t in types):
            raise ConfigError(f"{ORIGIN}: {prefix}layer_types = {brief(types)}: must list one type per layer "
                              f"({layers})")
        bounded = [t for t in types if t in SLIDING or t in CONSTANT_STATE]
        kv_layers = layers - len(bounded)
        if not kv_layers:
            raise ConfigError(f"{ORIGIN}: {prefix}layer_types: no full-attention layer; a KV cache that does not grow "
                              "with the context is not what the lab models")
        if bounded:
            notes.append(f"{len(bounded)} of {layers} layers ({', '.join(sorted(set(bounded)))}) keep a fixed-size "
                         "state per request: left out of the KV cache, whose per-request window is not modelled")
    elif f.has("sliding_window") and f.bool("use_sliding_window", True) and not mla:
        notes.append("sliding_window without layer_types: every layer is treated as full attention")

    dtype_bytes, expert_bytes = _dtypes(f, _Fields(cfg.get("quantization_config") or top.raw("quantization_config")
                                                   or {}, "quantization_config."), experts > 0, notes)
    if f.int("num_nextn_predict_layers", 0, 64, default=0):
        notes.append("num_nextn_predict_layers: the multi-token-prediction layer is left out (vLLM loads it only "
                     "for speculative decoding)")

    if experts and not moe_layers:
        notes.append("no layer is an MoE layer under the config's layer rules: counted as a dense model")
    section: dict[str, Any] = {
        "name": _name(name, model_type),
        "params_b": round(params / 1e9, 6),
        "layers": layers,
        "hidden": hidden,
        "q_heads": q_heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "dtype_bytes": dtype_bytes,
    }
    if experts and moe_layers:
        section.update(experts=experts, experts_per_token=top_k, expert_params_b=round(expert_params / 1e9, 6))
        if expert_bytes is not None:
            section["expert_dtype_bytes"] = expert_bytes
    if mla:
        section.update(kv_lora_rank=rank, qk_rope_head_dim=rope)
    if kv_layers != layers:
        section["kv_layers"] = kv_layers
    if not 0 < section["params_b"] <= 2000:
        raise ConfigError(f"{ORIGIN}: the shape gives {params / 1e9:,.1f} B parameters; the lab models 0 to 2,000 B")
    active = params - (expert_params * (1 - top_k / experts) if experts and moe_layers else 0)
    return CustomModel(section, tuple(notes), float(params), float(active))


def _moe_layer_count(f: _Fields, layers: int) -> int:
    """How many layers are MoE layers, by the config's own rules (DeepSeek, Qwen, the rest)."""
    if f.has("first_k_dense_replace") or f.has("moe_layer_freq"):
        first = f.int("first_k_dense_replace", 0, layers, default=0)
        freq_raw = f.raw("moe_layer_freq")
        if isinstance(freq_raw, list):  # a 0/1 pattern per layer
            if len(freq_raw) != layers or any(x not in (0, 1) or isinstance(x, bool) for x in freq_raw):
                raise ConfigError(f"{ORIGIN}: {f.prefix}moe_layer_freq = {brief(freq_raw)}: "
                                  "must be a number or one 0/1 per layer")
            return sum(1 for i in range(layers) if freq_raw[i] and i >= first)
        freq = f.int("moe_layer_freq", 1, layers, default=1)
        return sum(1 for i in range(first, layers) if i % freq == 0)
    if f.has("decoder_sparse_step") or f.has("mlp_only_layers"):
        step = f.int("decoder_sparse_step", 1, layers, default=1)
        dense = set(f.int_list("mlp_only_layers", layers - 1))
        return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return layers


def _dtypes(f: _Fields, q: _Fields, moe: bool, notes: list[str]) -> tuple[int, float | None]:
    """Weight bytes per parameter, and per routed-expert parameter when it differs (MXFP4)."""
    dtype = (f.str("torch_dtype") or f.str("dtype") or "bfloat16").lower()
    if dtype in ("bfloat16", "float16", "bf16", "fp16", "half"):
        size = 2
    elif dtype in ("float32", "fp32", "float"):
        size = 2
        notes.append("torch_dtype float32: served in 16-bit, as vLLM's dtype=auto does")
    else:
        raise ConfigError(f"{ORIGIN}: torch_dtype = {brief(dtype)}: use bfloat16, float16 or float32")
    if not q.cfg:
        return size, None
    if not isinstance(q.cfg, dict):
        raise ConfigError(f"{ORIGIN}: quantization_config must be an object")
    method = q.str("quant_method").lower()
    if method == "fp8" or (method == "modelopt" and q.str("quant_algo").upper() == "FP8"):
        return 1, None
    if method == "compressed-tensors" and _compressed_fp8(q.cfg):
        return 1, None
    if method == "mxfp4":
        if not moe:
            raise ConfigError(f"{ORIGIN}: quantization_config.quant_method 'mxfp4' is modelled for MoE experts only")
        notes.append("MXFP4 experts: 4.25 bits per expert weight, the other weights at torch_dtype")
        return size, MXFP4_BYTES
    raise ConfigError(f"{ORIGIN}: quantization_config.quant_method = {brief(method or None)}: the lab models "
                      "BF16/FP16, FP8 and MXFP4 (experts) weights; delete quantization_config to model the "
                      "unquantized model")


def _compressed_fp8(q: dict) -> bool:
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return False
    for g in groups.values():
        w = g.get("weights") if isinstance(g, dict) else None
        if not isinstance(w, dict) or w.get("num_bits") != 8 or w.get("type") != "float":
            return False
    return True


NAME_OK = re.compile(r"[^A-Za-z0-9 ._+()/-]")


def _name(name: str | None, model_type: str) -> str:
    """A model name the schema accepts, never one of the presets' (they would be overridden)."""
    raw = name if isinstance(name, str) and name.strip() else f"Custom {model_type}"
    clean = NAME_OK.sub("", raw).strip()[:56] or "Custom model"
    if clean in MODELS:
        clean = f"{clean} (custom)"
    return clean


def describe(section: dict[str, Any]) -> str:
    """One line for the app: what the section describes."""
    p = section["params_b"]
    parts = [f"{section['name']}: {p:,.1f} B parameters"]
    if section.get("experts"):
        e, k = section["experts"], section["experts_per_token"]
        active = p - section["expert_params_b"] * (1 - k / e)
        parts.append(f"MoE, {k} of {e} experts per token ({active:,.1f} B active)")
    if section.get("kv_lora_rank"):
        parts.append(f"MLA latent {section['kv_lora_rank']} + {section['qk_rope_head_dim']}")
    else:
        parts.append(f"{section['kv_heads']} KV heads × {section['head_dim']}")
    parts.append(f"{section['layers']} layers" + (f" ({section['kv_layers']} with a growing KV cache)"
                                                  if section.get("kv_layers") else ""))
    parts.append({1: "FP8 weights", 2: "16-bit weights"}.get(section.get("dtype_bytes"), ""))
    return ", ".join(x for x in parts if x)
