"""The GPU & memory page's numbers: what a step costs, and what MoE and MLA change.

Pure: the scenario and its memory breakdown in, small tables and sentences out (Markdown-safe:
the model and GPU names, which may come from a pasted config, are escaped).
"""

from __future__ import annotations

import pandas as pd

from engine.config.cost import linear_peak_flops, make_step_cost
from engine.config.memory import MemoryBreakdown, kv_bytes_per_token
from engine.config.scenario import Scenario

from ..frame.i18n import _
from ..frame.untrusted import plain

CONTEXT = 1000  # tokens of context per decoding request in the examples
GIB = 1024**3
KIB = 1024


def step_table(sc: Scenario, mem: MemoryBreakdown) -> pd.DataFrame:
    """Decode steps of 1–128 requests (one token each on a ~1k-token context) and one full-budget
    prefill chunk, with compute, memory, overhead and total time in ms."""
    cost = make_step_cost(sc.cost, mem)
    rows = []
    for b in (1, 8, 32, 128):
        rows.append({"case": _("decode ×{b}").format(b=b), **cost.parts(b, b * CONTEXT, b * CONTEXT)})
    budget = sc.scheduler.max_num_batched_tokens
    rows.append({"case": _("prefill {n:,} tok").format(n=budget), **cost.parts(budget, budget * budget / 2, budget)})
    df = pd.DataFrame(rows)
    for k in ("compute_s", "memory_s", "overhead_s", "step_s"):
        df[k.replace("_s", "_ms")] = (df.pop(k) * 1000).round(2)
    return df


def kv_formula(mem: MemoryBreakdown) -> str:
    """How the KiB per token on one GPU come about, with the model's numbers."""
    m, tp = mem.model, mem.tp
    layers = (_("{n} layers").format(n=m.cache_layers) if m.cache_layers == m.layers else
              _("{n} layers (of {all}; the others keep a fixed window)").format(n=m.cache_layers, all=m.layers))
    kib = f"{mem.kv_bytes_per_token / KIB:,.1f}"
    if m.mla:
        return _("({lora} latent + {rope} rope) × {layers} × {b} B = {kib} KiB, the same on every GPU (MLA's latent "
                 "is not split by tensor parallelism)").format(lora=m.kv_lora_rank, rope=m.qk_rope_head_dim,
                                                               layers=layers, b=m.kv_dtype_bytes, kib=kib)
    heads = max(1, m.kv_heads // tp)
    split = _(" ({n} split over {tp} GPUs)").format(n=m.kv_heads, tp=tp) if tp > 1 else ""
    return _("2 (K, V) × {layers} × {heads} KV heads{split} × {dim} × {b} B = {kib} KiB").format(
        layers=layers, heads=heads, split=split, dim=m.head_dim, b=m.kv_dtype_bytes, kib=kib)


def moe_table(sc: Scenario, mem: MemoryBreakdown) -> pd.DataFrame | None:
    """For an MoE model: per step size, the share of each layer's experts the tokens use and the
    weight bytes a step reads per GPU (None for a dense model)."""
    if not mem.model.moe:
        return None
    cost = make_step_cost(sc.cost, mem)
    total = cost.weight_bytes + cost.expert_bytes
    rows = []
    for n in sorted({1, 8, 32, 128, sc.scheduler.max_num_batched_tokens}):
        read = cost.weight_bytes + cost.expert_bytes * cost.touched(n)
        rows.append({_("tokens in the step"): n, _("experts used (%)"): round(100 * cost.touched(n), 1),
                     _("weights read per GPU (GiB)"): round(read / GIB, 2),
                     _("of all weights (%)"): round(100 * read / total, 1)})
    return pd.DataFrame(rows)


def moe_text(mem: MemoryBreakdown) -> str:
    m = mem.model
    k, e = m.experts_per_token, m.experts
    return _(
        "**{name}** keeps all **{params} B** parameters in memory ({gib} GiB per GPU), but each token uses only "
        "**{k} of {e}** experts per layer: **{active} B active** parameters, which set the FLOPs. What a step "
        "*reads* depends on the batch: with routing spread evenly, one token leaves an expert unused with "
        "probability 1 − {k}/{e}, so b tokens use a share 1 − (1 − {k}/{e})^b of the experts. A lone decode reads "
        "{lone} % of them; a busy decode step almost all. So an MoE model's decode gets *dearer* per step as the "
        "batch grows, where a dense model's barely changes."
    ).format(name=plain(m.name), params=f"{m.params / 1e9:,.1f}", gib=f"{mem.weights / GIB:,.1f}", k=k, e=e,
             active=f"{m.active_params / 1e9:,.1f}", lone=f"{100 * k / e:.1f}")


def mla_text(mem: MemoryBreakdown) -> str:
    m, tp = mem.model, mem.tp
    mha = m.cache_layers * m.q_heads * (2 * m.head_dim + m.qk_rope_head_dim) * m.kv_dtype_bytes  # K: nope + rope; V
    one_copy = kv_bytes_per_token(m)
    text = _(
        "**{name}** uses multi-head latent attention: per layer and token it caches one compressed latent of {lora} "
        "values plus {rope} for positions, **{kib} KiB** per token, where keys and values for its {heads} heads "
        "would take {mha} KiB ({ratio}×). vLLM gives MLA one KV head per GPU whatever the tensor parallelism, so "
        "every GPU holds the whole latent of every token it serves"
    ).format(name=plain(m.name), lora=m.kv_lora_rank, rope=m.qk_rope_head_dim, kib=f"{one_copy / KIB:,.1f}",
             heads=m.q_heads, mha=f"{mha / KIB:,.0f}", ratio=f"{mha / one_copy:,.0f}")
    if tp > 1:
        text += _(": at {tp} GPUs a grouped-query model's cache per GPU shrinks {tp}×, this one's does not, so the "
                  "advantage narrows as the replica grows.").format(tp=tp)
    else:
        text += _(": adding GPUs per replica divides its weights but not its per-token cache.")
    return text


def defaults_text(sc: Scenario, mem: MemoryBreakdown) -> str | None:
    """Which scheduler numbers are vLLM's defaults for this GPU (None if both are set)."""
    keys = sc.device_defaults
    if not keys:
        return None
    s = sc.scheduler
    parts = []
    if "max_num_batched_tokens" in keys:
        parts.append(_("token budget {n:,}").format(n=s.max_num_batched_tokens))
    if "max_num_seqs" in keys:
        parts.append(_("{n:,} running requests").format(n=s.max_num_seqs))
    what = _(" and ").join(parts)
    return _("{what}: vLLM 0.33's default for a {gib} GiB {gpu} (set them in the sidebar to override).").format(
        what=what[:1].upper() + what[1:], gib=f"{mem.gpu.memory_gib:,.0f}", gpu=plain(mem.gpu.name))


def precision_text(mem: MemoryBreakdown) -> str:
    """Which peak the matrix multiplies run at, and the bytes per weight and per cached value."""
    m, g = mem.model, mem.gpu
    peak = linear_peak_flops(m, g)
    weights = {1: "FP8", 2: _("16-bit"), 4: _("32-bit")}.get(m.dtype_bytes,
                                                              _("{n}-byte").format(n=m.dtype_bytes))
    if m.moe and m.expert_dtype_bytes is not None:
        weights += _(" (experts {n} bits)").format(n=f"{m.expert_dtype_bytes * 8:g}")
    fp8_note = " (FP8)" if peak != g.peak_flops else (
        _(" (BF16: this GPU has no FP8 tensor cores)") if m.dtype_bytes == 1 else " (BF16)")
    kv = {1: "FP8", 2: _("16-bit")}.get(m.kv_dtype_bytes, _("{n}-byte").format(n=m.kv_dtype_bytes))
    return _("Weights {w}, KV cache {kv}; matrix multiplies at {peak} TFLOP/s peak{note}.").format(
        w=weights, kv=kv, peak=f"{peak / 1e12:,.0f}", note=fp8_note)
