"""Step time: how long one forward pass (one scheduler iteration) takes (DESIGN §3).

The roofline model takes the larger of compute time and memory time, plus a fixed overhead:
`max(FLOPs / (peak × MFU), bytes / (BW × η)) + overhead (+ TP all-reduce per layer)`, per GPU.
FLOPs are `2 × active params × tokens` plus attention `2 × layers × q_heads × (d_qk + d_v) ×
Σ c·(p + c/2)` for a chunk of c tokens on a context of p (d_qk = d_v = head_dim; MLA in vLLM's
absorbed form attends over the latent: d_qk = kv_lora_rank + rope, d_v = kv_lora_rank); bytes
are the weights once per step plus KV read (context) and written (new tokens).

MoE: a token multiplies only its `k` of `E` experts, so FLOPs use the active parameters; the
weights read per step are the dense part plus the experts *some* token in the batch uses. With
routing spread evenly and independently, an expert is missed by one token with probability
1 − k/E, so a batch of b tokens touches a fraction `1 − (1 − k/E)^b` of each layer's experts:
a decode step of one request reads k/E of the experts, a batch of 64 on Qwen3-30B-A3B (8 of
128) about 98 %. FP8 weights run at the GPU's FP8 peak where it has one (vLLM's W8A8 FP8);
attention runs at the BF16 peak. `fixed` ignores the batch, so hand-worked tests stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .memory import MemoryBreakdown
from .presets import Gpu, Model
from .scenario import Cost


@dataclass(frozen=True)
class StepCost:
    """Callable `(tokens, attn_units, context_tokens) -> seconds` for one step."""

    fixed_s: float | None
    flops_per_token: float = 0.0
    attn_flops_per_unit: float = 0.0
    weight_bytes: float = 0.0  # read every step (dense parts; all weights of a dense model)
    kv_bytes_per_token: float = 0.0
    flops_rate: float = 1.0
    bytes_rate: float = 1.0
    overhead_s: float = 0.0
    expert_bytes: float = 0.0  # routed experts: read in the share the step's tokens touch
    expert_miss: float = 1.0  # 1 − k/E: the chance one token leaves a given expert unused

    def touched(self, tokens: int) -> float:
        """Expected share of each MoE layer's experts that `tokens` tokens use: 1 − (1 − k/E)^tokens."""
        return 1.0 - self.expert_miss ** tokens

    def _weights(self, tokens: int) -> float:
        if not self.expert_bytes:
            return self.weight_bytes
        return self.weight_bytes + self.expert_bytes * self.touched(tokens)

    def decode_times(self, t: float, m: int, n: int, ctx: int, start_by: float,
                     end_by: float) -> tuple[list[float], list[float]]:
        """Start and step times of up to m decode steps of n requests from t, on a context growing
        by n each step — the float additions stepping makes — keeping those that start before
        `start_by` and end before `end_by`."""
        starts, dts = [], []
        for j in range(m):
            c = ctx + j * n
            dt = self(n, float(c) + 0.5 * float(n), c)
            if t >= start_by or t + dt >= end_by:
                break
            starts.append(t)
            dts.append(dt)
            t = t + dt
        return starts, dts

    def __call__(self, tokens: int, attn_units: float, context_tokens: int) -> float:
        if self.fixed_s is not None:
            return self.fixed_s
        flops = self.flops_per_token * tokens + self.attn_flops_per_unit * attn_units
        weights = self.weight_bytes if not self.expert_bytes else self._weights(tokens)  # (hot: one call less)
        moved = weights + self.kv_bytes_per_token * (context_tokens + tokens)
        return max(flops / self.flops_rate, moved / self.bytes_rate) + self.overhead_s

    def many(self, tokens: int, attn_units: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        """Step times of several steps with the same token count: the same float operations as
        calling the step cost once per step, so a run of steps takes exactly as long."""
        if self.fixed_s is not None:
            return np.full(len(context_tokens), self.fixed_s)
        flops = self.flops_per_token * tokens + self.attn_flops_per_unit * attn_units
        moved = self._weights(tokens) + self.kv_bytes_per_token * (context_tokens + tokens)
        return np.maximum(flops / self.flops_rate, moved / self.bytes_rate) + self.overhead_s

    def parts(self, tokens: int, attn_units: float, context_tokens: int) -> dict[str, float]:
        """Compute and memory time separately (for the GPU & memory page)."""
        flops = self.flops_per_token * tokens + self.attn_flops_per_unit * attn_units
        moved = self._weights(tokens) + self.kv_bytes_per_token * (context_tokens + tokens)
        return {
            "compute_s": flops / self.flops_rate,
            "memory_s": moved / self.bytes_rate,
            "overhead_s": self.overhead_s,
            "step_s": self(tokens, attn_units, context_tokens),
        }


def make_step_cost(cost: Cost, mem: MemoryBreakdown) -> StepCost:
    """The step-time function for a scenario's cost settings and its GPU/model (per GPU)."""
    if cost.model == "fixed":
        return StepCost(fixed_s=cost.step_time_s)
    m, tp, gpu = mem.model, mem.tp, mem.gpu
    comm = cost.tp_comm_s_per_layer * m.layers if tp > 1 else 0.0
    linear_peak = linear_peak_flops(m, gpu)
    expert_bytes = m.expert_weight_bytes / tp if m.moe else 0.0
    attn = 4.0 * m.cache_layers * m.q_heads * m.head_dim / tp
    if m.mla:  # absorbed MLA: scores over the latent + rope, values in the latent
        attn = 2.0 * m.cache_layers * m.q_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim) / tp
    if linear_peak != gpu.peak_flops:  # attention stays at the BF16 rate: count it in linear-rate FLOPs
        attn *= linear_peak / gpu.peak_flops
    return StepCost(
        fixed_s=None,
        flops_per_token=2.0 * m.active_params / tp,
        attn_flops_per_unit=attn,
        weight_bytes=mem.weights - expert_bytes,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        flops_rate=linear_peak * cost.mfu,
        bytes_rate=gpu.bandwidth * cost.bandwidth_efficiency,
        overhead_s=cost.overhead_s + comm,
        expert_bytes=expert_bytes,
        expert_miss=1.0 - m.experts_per_token / m.experts if m.moe else 1.0,
    )


def linear_peak_flops(model: Model, gpu: Gpu) -> float:
    """The peak the weight GEMMs run at: FP8 where the weights are FP8 and the GPU has FP8 tensor
    cores, else BF16 (A100 runs FP8 checkpoints weight-only, and MXFP4 experts are counted at BF16)."""
    if model.dtype_bytes == 1 and gpu.fp8_flops:
        return gpu.fp8_flops
    return gpu.peak_flops
