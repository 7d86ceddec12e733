"""Step time: how long one forward pass (one scheduler iteration) takes (DESIGN §3).

The roofline model takes the larger of compute time and memory time, plus a fixed overhead:
`max(FLOPs / (peak × MFU), bytes / (BW × η)) + overhead (+ TP all-reduce per layer)`, per GPU.
FLOPs are `2 × params × tokens` plus attention `4 × layers × q_heads × head_dim × Σ c·(p + c/2)`
for a chunk of c tokens on a context of p; bytes are the weights once per step plus KV read
(context) and written (new tokens). `fixed` ignores the batch, so hand-worked tests stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .memory import MemoryBreakdown
from .scenario import Cost


@dataclass(frozen=True)
class StepCost:
    """Callable `(tokens, attn_units, context_tokens) -> seconds` for one step."""

    fixed_s: float | None
    flops_per_token: float = 0.0
    attn_flops_per_unit: float = 0.0
    weight_bytes: float = 0.0
    kv_bytes_per_token: float = 0.0
    flops_rate: float = 1.0
    bytes_rate: float = 1.0
    overhead_s: float = 0.0

    def __call__(self, tokens: int, attn_units: float, context_tokens: int) -> float:
        if self.fixed_s is not None:
            return self.fixed_s
        flops = self.flops_per_token * tokens + self.attn_flops_per_unit * attn_units
        moved = self.weight_bytes + self.kv_bytes_per_token * (context_tokens + tokens)
        return max(flops / self.flops_rate, moved / self.bytes_rate) + self.overhead_s

    def many(self, tokens: int, attn_units: np.ndarray, context_tokens: np.ndarray) -> np.ndarray:
        """Step times of several steps with the same token count: the same float operations as
        calling the step cost once per step, so a run of steps takes exactly as long."""
        if self.fixed_s is not None:
            return np.full(len(context_tokens), self.fixed_s)
        flops = self.flops_per_token * tokens + self.attn_flops_per_unit * attn_units
        moved = self.weight_bytes + self.kv_bytes_per_token * (context_tokens + tokens)
        return np.maximum(flops / self.flops_rate, moved / self.bytes_rate) + self.overhead_s

    def parts(self, tokens: int, attn_units: float, context_tokens: int) -> dict[str, float]:
        """Compute and memory time separately (for the GPU & memory page)."""
        flops = self.flops_per_token * tokens + self.attn_flops_per_unit * attn_units
        moved = self.weight_bytes + self.kv_bytes_per_token * (context_tokens + tokens)
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
    m, tp = mem.model, mem.tp
    comm = cost.tp_comm_s_per_layer * m.layers if tp > 1 else 0.0
    return StepCost(
        fixed_s=None,
        flops_per_token=2.0 * m.params / tp,
        attn_flops_per_unit=4.0 * m.layers * m.q_heads * m.head_dim / tp,
        weight_bytes=mem.weights,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        flops_rate=mem.gpu.peak_flops * cost.mfu,
        bytes_rate=mem.gpu.bandwidth * cost.bandwidth_efficiency,
        overhead_s=cost.overhead_s + comm,
    )
