"""GPU memory → KV blocks (DESIGN §1).

`usable = HBM × gpu_memory_utilization − weights/TP − activation reserve` per GPU, divided by the
per-GPU bytes of one block. Weights count every parameter, MoE experts included (all are resident
though a token uses few). KV heads are split across tensor-parallel ranks (replicated when there
are fewer KV heads than ranks), so TP multiplies the cache, not just divides the weights. An MLA
model (DeepSeek) caches one latent per layer and token, `kv_lora_rank + qk_rope_head_dim` values,
and every rank holds all of it: vLLM gives MLA one KV head per GPU whatever the TP size
(`ModelConfig.get_num_kv_heads`), so TP divides its weights but not its per-token cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from .presets import GIB, GPUS, MODELS, Gpu, Model
from .scenario import Hardware, ModelSpec, Scenario, ScenarioError


def resolve_gpu(hw: Hardware) -> Gpu:
    base = GPUS.get(hw.gpu)
    return Gpu(
        name=hw.gpu,
        memory_gib=hw.memory_gib if hw.memory_gib is not None else base.memory_gib,
        bandwidth=hw.bandwidth_tbs * 1e12 if hw.bandwidth_tbs is not None else base.bandwidth,
        peak_flops=hw.peak_tflops * 1e12 if hw.peak_tflops is not None else base.peak_flops,
        fp8_flops=hw.fp8_tflops * 1e12 if hw.fp8_tflops is not None else (base.fp8_flops if base else None),
    )


def resolve_model(spec: ModelSpec) -> Model:
    base = MODELS.get(spec.name)

    def pick(field: str, value, default=None):
        if value is not None:
            return value
        return getattr(base, field) if base is not None else default

    return Model(
        name=spec.name,
        params=spec.params_b * 1e9 if spec.params_b is not None else base.params,
        layers=pick("layers", spec.layers),
        hidden=pick("hidden", spec.hidden),
        q_heads=pick("q_heads", spec.q_heads),
        kv_heads=pick("kv_heads", spec.kv_heads),
        head_dim=pick("head_dim", spec.head_dim),
        dtype_bytes=spec.dtype_bytes or (base.dtype_bytes if base else 2),
        kv_dtype_bytes=spec.kv_dtype_bytes or (base.kv_dtype_bytes if base else 2),
        experts=pick("experts", spec.experts, 0),
        experts_per_token=pick("experts_per_token", spec.experts_per_token, 0),
        expert_params=spec.expert_params_b * 1e9 if spec.expert_params_b is not None else (
            base.expert_params if base else 0.0),
        expert_dtype_bytes=pick("expert_dtype_bytes", spec.expert_dtype_bytes),
        kv_lora_rank=pick("kv_lora_rank", spec.kv_lora_rank, 0),
        qk_rope_head_dim=pick("qk_rope_head_dim", spec.qk_rope_head_dim, 0),
        kv_layers=pick("kv_layers", spec.kv_layers),
    )


def kv_bytes_per_token(model: Model) -> int:
    """One copy of a token's cache, whole model: K and V for every layer, `2 × layers × kv_heads ×
    head_dim × bytes`; for MLA one latent per layer, `layers × (kv_lora_rank + qk_rope_head_dim) ×
    bytes` (no separate V: vLLM's `MLAAttentionSpec`). Only layers whose cache grows count."""
    if model.mla:
        return model.cache_layers * (model.kv_lora_rank + model.qk_rope_head_dim) * model.kv_dtype_bytes
    return 2 * model.cache_layers * model.kv_heads * model.head_dim * model.kv_dtype_bytes


def kv_bytes_per_token_per_gpu(model: Model, tp: int) -> float:
    """What one GPU holds per token: KV heads split over the ranks (at least one each); the MLA
    latent whole on every rank."""
    if model.mla:
        return float(kv_bytes_per_token(model))
    heads_per_gpu = max(1, model.kv_heads // tp) if model.kv_heads >= tp else 1
    return 2 * model.cache_layers * heads_per_gpu * model.head_dim * model.kv_dtype_bytes


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory budget in bytes, and the KV blocks/tokens it leaves (whole replica).

    `blocks` is vLLM's `num_gpu_blocks`: one of them is vLLM's null block (block 0, never handed
    out), so `usable_blocks` = blocks − 1 hold requests."""

    gpu: Gpu
    model: Model
    tp: int
    total: float
    usable: float
    weights: float
    activations: float
    kv: float
    kv_bytes_per_token: float
    block_size: int
    blocks: int

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: vLLM keeps one of `num_gpu_blocks` as its null block."""
        return self.blocks - 1

    @property
    def kv_tokens(self) -> int:
        """Tokens of all `num_gpu_blocks` (what vLLM's log calls the KV cache size)."""
        return self.blocks * self.block_size

    @property
    def usable_tokens(self) -> int:
        """Tokens requests can hold (the null block left out)."""
        return self.usable_blocks * self.block_size


def breakdown(sc: Scenario) -> MemoryBreakdown:
    """Memory per GPU and the KV blocks it leaves; raises ScenarioError if nothing is left."""
    gpu, model, tp = resolve_gpu(sc.hardware), resolve_model(sc.model), sc.hardware.num_gpus
    total = gpu.memory_gib * GIB
    usable = total * sc.hardware.gpu_memory_utilization
    weights = model.weight_bytes / tp
    activations = sc.hardware.activation_reserve_gib * GIB
    kv = usable - weights - activations
    per_tok = kv_bytes_per_token_per_gpu(model, tp)
    bs = sc.kv.block_size
    if sc.kv.num_blocks is not None:
        blocks = sc.kv.num_blocks
    else:
        blocks = int(max(kv, 0) // (bs * per_tok))
        if blocks < 2:  # one is vLLM's null block
            raise ScenarioError(
                f"{model.name} on {tp}× {gpu.name} leaves no memory for KV cache "
                f"(weights {weights / GIB:.1f} GiB per GPU of {usable / GIB:.1f} GiB usable): "
                "add GPUs (hardware.num_gpus), pick a smaller model or set kv.num_blocks"
            )
    return MemoryBreakdown(gpu, model, tp, total, usable, weights, activations, max(kv, 0.0), per_tok, bs, blocks)
