"""Hardware and model presets: the numbers behind KV capacity and step time.

GPU figures are dense (no 2:4 sparsity) BF16 and FP8 peaks and HBM bandwidth from the vendor
sheets; memory is what the driver reports, in GiB (it decides vLLM's default batch sizes, see
`vllm_batch_defaults`). Model shapes come from each model's HF `config.json` (parameter counts
as `engine.config.hfconfig` counts them from that file). Sources are listed in the README ("Presets").
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
MXFP4_BYTES = 4.25 / 8  # OCP MXFP4: 4-bit values plus one 8-bit scale per 32 values


@dataclass(frozen=True)
class Gpu:
    """One accelerator: memory (GiB), HBM bandwidth (bytes/s), dense BF16 peak and dense FP8 peak
    (FLOP/s; None: no FP8 tensor cores, FP8 weights are then only a memory saving)."""

    name: str
    memory_gib: float
    bandwidth: float
    peak_flops: float
    fp8_flops: float | None = None


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer, as far as KV size and step time care.

    Dense: `params` are read and multiplied for every token. MoE: `experts` routed experts per
    MoE layer, `experts_per_token` of them per token; `expert_params` are all routed-expert
    parameters (part of `params`), stored at `expert_dtype_bytes` when that differs (MXFP4).
    MLA (DeepSeek): the KV cache holds one latent of `kv_lora_rank + qk_rope_head_dim` values per
    layer and token instead of K and V per KV head. `kv_layers`: layers whose KV grows with the
    context (sliding-window layers keep a fixed window and are left out); None = all layers.
    """

    name: str
    params: float
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2
    kv_dtype_bytes: int = 2
    experts: int = 0
    experts_per_token: int = 0
    expert_params: float = 0.0
    expert_dtype_bytes: float | None = None
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    kv_layers: int | None = None

    @property
    def moe(self) -> bool:
        return self.experts > 0 and self.expert_params > 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def routed_params(self) -> float:
        """Routed-expert parameters (0 for a dense model)."""
        return self.expert_params if self.moe else 0.0

    @property
    def active_params(self) -> float:
        """Parameters one token multiplies: all but the routed experts it does not use."""
        if not self.moe:
            return self.params
        return self.params - self.expert_params * (1 - self.experts_per_token / self.experts)

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights (the whole model, before tensor parallelism)."""
        routed = self.routed_params
        expert_b = self.expert_dtype_bytes if self.expert_dtype_bytes is not None else self.dtype_bytes
        return (self.params - routed) * self.dtype_bytes + routed * expert_b

    @property
    def expert_weight_bytes(self) -> float:
        """Bytes of the routed experts alone (what a small batch reads only in part)."""
        expert_b = self.expert_dtype_bytes if self.expert_dtype_bytes is not None else self.dtype_bytes
        return self.routed_params * expert_b

    @property
    def cache_layers(self) -> int:
        return self.kv_layers if self.kv_layers is not None else self.layers


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        Gpu("A100-80G", 80.0, 2.039e12, 312e12),
        Gpu("H100-80G", 79.6, 3.35e12, 989e12, 1979e12),
        Gpu("H200", 140.4, 4.8e12, 989e12, 1979e12),
        Gpu("L40S", 45.0, 0.864e12, 362e12, 733e12),
        Gpu("B200", 179.1, 8.0e12, 2250e12, 4500e12),
        Gpu("MI300X", 191.5, 5.3e12, 1307.4e12, 2614.9e12),
        Gpu("H20", 95.6, 4.0e12, 148e12, 296e12),
        Gpu("H800", 79.6, 3.35e12, 989e12, 1979e12),
        Gpu("L20", 45.0, 0.864e12, 119.5e12, 239e12),
    )
}

MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("Llama-3-8B", 8.03e9, 32, 4096, 32, 8, 128),
        Model("Llama-3-70B", 70.6e9, 80, 8192, 64, 8, 128),
        Model("Qwen2.5-7B", 7.61e9, 28, 3584, 28, 4, 128),
        Model("Qwen2.5-32B", 32.5e9, 64, 5120, 40, 8, 128),
        Model("Mistral-7B", 7.24e9, 32, 4096, 32, 8, 128),
        Model("Llama-3.1-8B", 8.03e9, 32, 4096, 32, 8, 128),
        Model("Llama-3.1-70B", 70.55e9, 80, 8192, 64, 8, 128),
        Model("Llama-3.1-405B", 405.85e9, 126, 16384, 128, 8, 128),
        Model("Qwen3-30B-A3B", 30.53e9, 48, 2048, 32, 4, 128,
              experts=128, experts_per_token=8, expert_params=28.99e9),
        Model("Qwen3-235B-A22B", 235.09e9, 94, 4096, 64, 4, 128,
              experts=128, experts_per_token=8, expert_params=227.10e9),
        Model("DeepSeek-V3", 671.03e9, 61, 7168, 128, 128, 128, dtype_bytes=1,
              experts=256, experts_per_token=8, expert_params=653.91e9, kv_lora_rank=512, qk_rope_head_dim=64),
        Model("DeepSeek-R1", 671.03e9, 61, 7168, 128, 128, 128, dtype_bytes=1,
              experts=256, experts_per_token=8, expert_params=653.91e9, kv_lora_rank=512, qk_rope_head_dim=64),
        Model("DeepSeek-V2-Lite", 15.71e9, 27, 2048, 16, 16, 128,
              experts=64, experts_per_token=6, expert_params=14.39e9, kv_lora_rank=512, qk_rope_head_dim=64),
        Model("gpt-oss-120b", 116.83e9, 36, 2880, 64, 8, 64,
              experts=128, experts_per_token=4, expert_params=114.70e9, expert_dtype_bytes=MXFP4_BYTES, kv_layers=18),
    )
}


# vLLM 0.33's default batch sizes per device class, for its OpenAI API server
# (`EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py): (max_num_batched_tokens, max_num_seqs).
BATCH_DEFAULTS_LARGE = (16384, 1024)  # device memory >= 160 GiB (B200, B300, MI300X)
BATCH_DEFAULTS_HOPPER = (8192, 1024)  # >= 70 GiB and not an A100 (H100, H200, H800, H20)
BATCH_DEFAULTS_OTHER = (2048, 256)  # everything else (A100, L40S, L20)


def vllm_batch_defaults(gpu_name: str, memory_gib: float) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.33 picks for an API server on this device,
    from the memory the driver reports and the device name, exactly as `get_batch_defaults` does."""
    if memory_gib >= 160:
        return BATCH_DEFAULTS_LARGE
    if memory_gib >= 70 and "a100" not in gpu_name.lower():
        return BATCH_DEFAULTS_HOPPER
    return BATCH_DEFAULTS_OTHER
