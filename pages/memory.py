"""GPU & memory: where the HBM goes, how much KV that leaves, what a step costs, and a model from
its config.json."""

import streamlit as st

from engine.hfconfig import MAX_CONFIG_BYTES, describe
from engine.scenario import to_dict
from ui import codec as codec_mod
from ui import costs, figures, layout, sidebar, uploads
from ui.state import current
from ui.text import plain

GIB = 1024**3
CFG_ERROR, CFG_NOTES = "_cfg_error", "_cfg_notes"
lab = current()
sc, mem = lab.scenario, lab.result.memory
m = mem.model
layout.header(lab, "GPU & memory", "The numbers behind KV capacity and step time (change GPU and model in the sidebar)")

kv_bytes = mem.kv if sc.kv.num_blocks is None else mem.blocks * mem.block_size * mem.kv_bytes_per_token
st.plotly_chart(figures.memory_bar(mem.total, mem.weights, mem.activations, kv_bytes,
                                   f"{m.name} on {mem.tp}× {mem.gpu.name} (per GPU)"),
                key="mem_bar", theme=None)
if sc.kv.num_blocks is not None:
    st.caption(f"The KV cache size is overridden to {sc.kv.num_blocks:,} blocks (kv.num_blocks).")

low = sc.class_names[-1]
spec = sc.request_class(low).prompt
doc = spec.value if spec.dist == "constant" else int(spec.median)
c = st.columns(5)
c[0].metric("KV blocks", f"{mem.blocks:,}", border=True)
c[1].metric("KV tokens", f"{mem.kv_tokens:,}", border=True)
c[2].metric("KiB per token", f"{mem.kv_bytes_per_token / 1024:,.1f}", border=True, help=costs.kv_formula(mem))
c[3].metric(f"{low} prompts fit", f"{mem.kv_tokens // max(doc, 1):,}", border=True,
            help=f"KV tokens ÷ {low}'s prompt size ({doc:,} tokens{'' if spec.dist == 'constant' else ', median'})")
c[4].metric("GiB weights", f"{mem.weights / GIB:.1f}", border=True,
            help="Model weights per GPU: every parameter (all experts of an MoE model), split over the GPUs")
st.caption(plain(f"KV per token on one GPU: {costs.kv_formula(mem)}. {costs.precision_text(mem)}"))
if note := costs.defaults_text(sc, mem):
    st.caption(note)

if m.moe:
    st.subheader("Mixture of experts: memory from all parameters, step time from the used ones")
    st.markdown(costs.moe_text(mem))
    st.dataframe(costs.moe_table(sc, mem), hide_index=True, width="stretch")
if m.mla:
    st.subheader("Multi-head latent attention: a small KV cache")
    st.markdown(costs.mla_text(mem))

st.subheader("Step time")
df = costs.step_table(sc, mem)
st.plotly_chart(figures.step_time_bars(df), key="mem_steps", theme=None)
st.dataframe(df, hide_index=True, width="stretch")
st.caption(
    "Roofline: a step takes max(compute, memory) + overhead. Decode steps read every weight once whatever the "
    "batch (an MoE model: the experts the batch uses), so they are memory-bound and batching is almost free; a "
    f"full-budget prefill is compute-bound. Model: {sc.cost.model}; MFU {sc.cost.mfu:g}, "
    f"bandwidth efficiency {sc.cost.bandwidth_efficiency:g}."
)


def _on_config(current_raw: dict) -> None:
    """Callback: the pasted config.json becomes the model of the scenario the controls show."""
    ss = st.session_state
    up = uploads.try_model_config(current_raw, ss.get("_cfg_text") or "", ss.get("_cfg_name") or None)
    if up.error:  # a refusal changes nothing
        ss[CFG_ERROR] = up.error
        return
    ss.pop(CFG_ERROR, None)
    ss[CFG_NOTES] = up.notes
    ss[sidebar.UPLOAD_KEY] = up.raw
    sidebar.set_controls(ss.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET), raw=up.raw)


with st.expander("Use a model from its config.json", icon=":material/data_object:",
                 expanded=bool(st.session_state.get(CFG_ERROR))):
    st.caption("Paste the model's Hugging Face config.json (from huggingface.co/<model>/blob/main/config.json). "
               "The lab counts its parameters from the shape (GQA or MLA attention, dense or MoE layers, FP8 or "
               "MXFP4 weights) and runs the current scenario on it; the scenario then works like an uploaded one.")
    st.text_area("config.json", key="_cfg_text", height=180, max_chars=MAX_CONFIG_BYTES,
                 placeholder='{"model_type": "llama", "hidden_size": 4096, ...}')
    st.text_input("Name (optional)", key="_cfg_name", max_chars=56, placeholder="e.g. Qwen3-32B")
    st.button("Use this model", key="_cfg_use", icon=":material/check:", on_click=_on_config, args=(to_dict(sc),))
    if err := st.session_state.pop(CFG_ERROR, None):
        st.error(plain(err), icon=":material/error:")
    if (notes := st.session_state.pop(CFG_NOTES, None)) is not None and sc.model.params_b is not None:
        st.success(plain(" ".join([describe(to_dict(sc)["model"]) + "."]
                                  + [n[0].upper() + n[1:] + "." for n in notes])), icon=":material/check_circle:")
