"""GPU & memory: where the HBM goes, how much KV that leaves, and what a step costs."""

import streamlit as st

from ui import costs, figures, layout
from ui.state import current

GIB = 1024**3
lab = current()
sc, mem = lab.scenario, lab.result.memory
layout.header(lab, "GPU & memory", "The numbers behind KV capacity and step time (change GPU and model in the sidebar)")

kv_bytes = mem.kv if sc.kv.num_blocks is None else mem.blocks * mem.block_size * mem.kv_bytes_per_token
st.plotly_chart(figures.memory_bar(mem.total, mem.weights, mem.activations, kv_bytes,
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
c[2].metric("KiB per token", f"{mem.kv_bytes_per_token / 1024:.0f}", border=True,
            help="2 × layers × KV heads (per GPU) × head dim × bytes")
c[3].metric(f"{low} prompts fit", f"{mem.kv_tokens // max(doc, 1):,}", border=True,
            help=f"KV tokens ÷ {low}'s prompt size ({doc:,} tokens{'' if spec.dist == 'constant' else ', median'})")
c[4].metric("GiB weights", f"{mem.weights / GIB:.1f}", border=True, help="Model weights per GPU")

st.subheader("Step time")
df = costs.step_table(sc, mem)
st.plotly_chart(figures.step_time_bars(df), key="mem_steps", theme=None)
st.dataframe(df, hide_index=True, width="stretch")
st.caption(
    "Roofline: a step takes max(compute, memory) + overhead. Decode steps read every weight once whatever the "
    "batch, so they are memory-bound and batching is almost free; a full-budget prefill is compute-bound. "
    f"Model: {sc.cost.model}; MFU {sc.cost.mfu:g}, bandwidth efficiency {sc.cost.bandwidth_efficiency:g}."
)
