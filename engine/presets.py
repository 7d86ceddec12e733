"""Hardware and model presets: the numbers behind KV capacity and step time.

GPU figures are dense (no 2:4 sparsity) BF16 peaks and HBM bandwidth from the vendor sheets;
memory is what the driver reports, in GiB. Model shapes come from each model's HF `config.json`.
Sources are listed in the README ("Presets").
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    """One accelerator: memory (GiB), HBM bandwidth (bytes/s) and dense BF16 peak (FLOP/s)."""

    name: str
    memory_gib: float
    bandwidth: float
    peak_flops: float


@dataclass(frozen=True)
class Model:
    """A dense decoder-only transformer, as far as KV size and step time care."""

    name: str
    params: float
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2
    kv_dtype_bytes: int = 2


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        Gpu("A100-80G", 80.0, 2.039e12, 312e12),
        Gpu("H100-80G", 79.6, 3.35e12, 989e12),
        Gpu("H200", 140.4, 4.8e12, 989e12),
        Gpu("L40S", 45.0, 0.864e12, 362e12),
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
    )
}
