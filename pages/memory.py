"""GPU & memory: where the HBM goes, how much KV that leaves, and what a step costs."""

import streamlit as st

from ui import costs, figures, layout
from ui.i18n import _
from ui.state import current

GIB = 1024**3
lab = current()
sc, mem = lab.scenario, lab.result.memory
layout.header(lab, _("GPU & memory"),
              _("The numbers behind KV capacity and step time (change GPU and model in the sidebar)"))

kv_bytes = mem.kv if sc.kv.num_blocks is None else mem.blocks * mem.block_size * mem.kv_bytes_per_token
st.plotly_chart(figures.memory_bar(mem.total, mem.weights, mem.activations, kv_bytes,
                                   _("{model} on {tp}× {gpu} (per GPU)").format(model=mem.model.name, tp=mem.tp,
                                                                                gpu=mem.gpu.name)),
                key="mem_bar", theme=None)
if sc.kv.num_blocks is not None:
    st.caption(_("The KV cache size is overridden to {n:,} blocks (kv.num_blocks).").format(n=sc.kv.num_blocks))

low = sc.class_names[-1]
spec = sc.request_class(low).prompt
doc = spec.value if spec.dist == "constant" else int(spec.median)
c = st.columns(5)
c[0].metric(_("KV blocks"), f"{mem.blocks:,}", border=True)
c[1].metric(_("KV tokens"), f"{mem.kv_tokens:,}", border=True)
c[2].metric(_("KiB per token"), f"{mem.kv_bytes_per_token / 1024:.0f}", border=True,
            help=_("2 × layers × KV heads (per GPU) × head dim × bytes"))
c[3].metric(_("{cls} prompts fit").format(cls=low), f"{mem.kv_tokens // max(doc, 1):,}", border=True,
            help=(_("KV tokens ÷ {cls}'s prompt size ({n:,} tokens)") if spec.dist == "constant" else
                  _("KV tokens ÷ {cls}'s prompt size ({n:,} tokens, median)")).format(cls=low, n=doc))
c[4].metric(_("GiB weights"), f"{mem.weights / GIB:.1f}", border=True, help=_("Model weights per GPU"))

st.subheader(_("Step time"))
df = costs.step_table(sc, mem)
st.plotly_chart(figures.step_time_bars(df), key="mem_steps", theme=None)
st.dataframe(df.rename(columns={"case": _("case"), "compute_ms": _("compute (ms)"), "memory_ms": _("memory (ms)"),
                                "overhead_ms": _("overhead (ms)"), "step_ms": _("step (ms)")}),
             hide_index=True, width="stretch")
st.caption(_(
    "Roofline: a step takes max(compute, memory) + overhead. Decode steps read every weight once whatever the "
    "batch, so they are memory-bound and batching is almost free; a full-budget prefill is compute-bound. "
    "Model: {model}; MFU {mfu}, bandwidth efficiency {bw}.").format(model=sc.cost.model, mfu=f"{sc.cost.mfu:g}",
                                                                    bw=f"{sc.cost.bandwidth_efficiency:g}"))
