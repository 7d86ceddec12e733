"""GPU memory → KV blocks (DESIGN §1).

`usable = HBM × gpu_memory_utilization − weights/TP − activation reserve` per GPU, divided by the
per-GPU bytes of one block. KV heads are split across tensor-parallel ranks (replicated when there
are fewer KV heads than ranks), so TP multiplies the cache, not just divides the weights.
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
    )


def resolve_model(spec: ModelSpec) -> Model:
    base = MODELS.get(spec.name)

    def pick(field: str, value):
        return value if value is not None else getattr(base, field)

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
    )


def kv_bytes_per_token(model: Model) -> int:
    """K and V for every layer: `2 × layers × kv_heads × head_dim × dtype_bytes` (whole model)."""
    return 2 * model.layers * model.kv_heads * model.head_dim * model.kv_dtype_bytes


def kv_bytes_per_token_per_gpu(model: Model, tp: int) -> float:
    heads_per_gpu = max(1, model.kv_heads // tp) if model.kv_heads >= tp else 1
    return 2 * model.layers * heads_per_gpu * model.head_dim * model.kv_dtype_bytes


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
        return self.blocks * self.block_size


def breakdown(sc: Scenario) -> MemoryBreakdown:
    """Memory per GPU and the KV blocks it leaves; raises ScenarioError if nothing is left."""
    gpu, model, tp = resolve_gpu(sc.hardware), resolve_model(sc.model), sc.hardware.num_gpus
    total = gpu.memory_gib * GIB
    usable = total * sc.hardware.gpu_memory_utilization
    weights = model.params * model.dtype_bytes / tp
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
