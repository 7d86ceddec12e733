"""GPU & memory: where the HBM goes, how much KV that leaves, and what a step costs."""

import pandas as pd
import streamlit as st

from engine.cost import make_step_cost
from ui import figures, layout
from ui.state import current

GIB = 1024**3
lab = current()
sc, mem = lab.scenario, lab.result.memory
layout.header(lab, "GPU & memory", "The numbers behind KV capacity and step time (change GPU and model in the sidebar)")

st.plotly_chart(figures.memory_bar(mem.total, mem.weights, mem.activations,
                                   mem.kv if sc.kv.num_blocks is None else mem.blocks * mem.block_size * mem.kv_bytes_per_token,
                                   f"{mem.model.name} on {mem.tp}× {mem.gpu.name} (per GPU)"),
                key="mem_bar", theme=None)
if sc.kv.num_blocks is not None:
    st.caption(f"The KV cache size is overridden to {sc.kv.num_blocks:,} blocks (kv.num_blocks).")

low = sc.class_names[-1]
spec = sc.request_class(low).prompt
doc = spec.value if spec.dist == "constant" else int(spec.median)
c = st.columns(5)
c[0].metric("KV blocks", f"{mem.blocks:,}", border=True)
c[1].metric("KV tokens", f"{mem.kv_tokens:,}", border=True)
c[2].metric("KV per token", f"{mem.kv_bytes_per_token / 1024:.0f} KiB", border=True,
            help="2 × layers × KV heads (per GPU) × head dim × bytes")
c[3].metric(f"{low} documents that fit", f"{mem.kv_tokens // max(doc, 1):,}", border=True,
            help=f"{low}'s prompt size ({doc:,} tokens{'' if spec.dist == 'constant' else ', median'})")
c[4].metric("Weights per GPU", f"{mem.weights / GIB:.1f} GiB", border=True)

st.subheader("Step time")
cost = make_step_cost(sc.cost, mem)
ctx = 1000
rows = []
for b in (1, 8, 32, 128):
    p = cost.parts(b, b * ctx, b * ctx)  # decode: one token each on a ~1k-token context
    rows.append({"case": f"decode ×{b}", **p})
budget = sc.scheduler.max_num_batched_tokens
p = cost.parts(budget, budget * budget / 2, budget)  # one full-budget prefill chunk from scratch
rows.append({"case": f"prefill {budget:,} tok", **p})
df = pd.DataFrame(rows)
for k in ("compute_s", "memory_s", "overhead_s", "step_s"):
    df[k.replace("_s", "_ms")] = df.pop(k) * 1000
left, right = st.columns([3, 2])
left.plotly_chart(figures.step_time_bars(df), key="mem_steps", theme=None)
right.dataframe(df.round(2), hide_index=True, width="stretch")
right.caption(
    "Roofline: a step takes max(compute, memory) + overhead. Decode steps read every weight once whatever the "
    "batch, so they are memory-bound and batching is almost free; a full-budget prefill is compute-bound. "
    f"Model: {sc.cost.model}; MFU {sc.cost.mfu:g}, bandwidth efficiency {sc.cost.bandwidth_efficiency:g}."
)
