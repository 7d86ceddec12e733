"""GPU & memory: where the HBM goes, how much KV that leaves, what a step costs, and a model from
its config.json."""

import streamlit as st

from engine.config.hfconfig import MAX_CONFIG_BYTES, describe
from engine.config.scenario import to_dict
from ui.charts import figures
from ui.frame import codec as codec_mod
from ui.frame import layout, sidebar, uploads
from ui.frame.i18n import _
from ui.frame.state import current
from ui.frame.untrusted import plain
from ui.panels import costs

GIB = 1024**3
CFG_ERROR, CFG_NOTES = "_cfg_error", "_cfg_notes"
lab = current()
sc, mem = lab.scenario, lab.result.memory
m = mem.model
layout.header(lab, _("GPU & memory"),
              _("The numbers behind KV capacity and step time (change GPU and model in the sidebar)"))

kv_bytes = mem.kv if sc.kv.num_blocks is None else mem.blocks * mem.block_size * mem.kv_bytes_per_token
st.plotly_chart(figures.memory_bar(mem.total, mem.weights, mem.activations, kv_bytes,
                                   _("{model} on {tp}× {gpu} (per GPU)").format(model=m.name, tp=mem.tp,
                                                                                gpu=mem.gpu.name)),
                key="mem_bar", theme=None)
if sc.kv.num_blocks is not None:
    st.caption(_("The KV cache size is overridden to {n:,} blocks (kv.num_blocks).").format(n=sc.kv.num_blocks))

low = sc.class_names[-1]
spec = sc.request_class(low).prompt
doc = spec.value if spec.dist == "constant" else int(spec.median)
c = st.columns(5)
usable = mem.usable_tokens
c[0].metric(_("Usable blocks"), f"{mem.usable_blocks:,}", border=True,
            help=_("Blocks requests can use: vLLM keeps one of its {n:,} blocks (num_gpu_blocks) as its null "
                   "block.").format(n=mem.blocks))
c[1].metric(_("Usable tokens"), f"{usable:,}" if usable < 1_000_000 else f"{usable / 1e6:.2f} M", border=True,
            help=_("{n:,} usable blocks × {bs} tokens").format(n=mem.usable_blocks, bs=mem.block_size))
c[2].metric(_("KiB per token"), f"{mem.kv_bytes_per_token / 1024:,.1f}", border=True, help=costs.kv_formula(mem))
c[3].metric(_("{cls} prompts fit").format(cls=low), f"{usable // max(doc, 1):,}", border=True,
            help=(_("Usable KV tokens ÷ {cls}'s prompt size ({n:,} tokens)") if spec.dist == "constant" else
                  _("Usable KV tokens ÷ {cls}'s prompt size ({n:,} tokens, median)")).format(cls=low, n=doc))
c[4].metric(_("GiB weights"), f"{mem.weights / GIB:.1f}", border=True,
            help=_("Model weights per GPU: every parameter (all experts of an MoE model), split over the GPUs"))
st.caption(plain(_("KV per token on one GPU: {formula}. {precision}").format(formula=costs.kv_formula(mem),
                                                                            precision=costs.precision_text(mem))))
if note := costs.defaults_text(sc, mem):
    st.caption(note)

if m.moe:
    st.subheader(_("Mixture of experts: memory from all parameters, step time from the used ones"))
    st.markdown(costs.moe_text(mem))
    st.dataframe(costs.moe_table(sc, mem), hide_index=True, width="stretch")
if m.mla:
    st.subheader(_("Multi-head latent attention: a small KV cache"))
    st.markdown(costs.mla_text(mem))

st.subheader(_("Step time"))
df = costs.step_table(sc, mem)
st.plotly_chart(figures.step_time_bars(df), key="mem_steps", theme=None)
st.dataframe(df.rename(columns={"case": _("case"), "compute_ms": _("compute (ms)"), "memory_ms": _("memory (ms)"),
                                "overhead_ms": _("overhead (ms)"), "step_ms": _("step (ms)")}),
             hide_index=True, width="stretch")
st.caption(_(
    "Roofline: a step takes max(compute, memory) + overhead. Decode steps read every weight once whatever the "
    "batch (an MoE model: the experts the batch uses), so they are memory-bound and batching is almost free; a "
    "full-budget prefill is compute-bound. Model: {model}; MFU {mfu}, bandwidth efficiency {bw}."
).format(model=sc.cost.model, mfu=f"{sc.cost.mfu:g}", bw=f"{sc.cost.bandwidth_efficiency:g}"))


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


with st.expander(_("Use a model from its config.json"), icon=":material/data_object:",
                 expanded=bool(st.session_state.get(CFG_ERROR))):
    st.caption(_("Paste the model's Hugging Face config.json (from huggingface.co/<model>/blob/main/config.json). "
                 "The lab counts its parameters from the shape (GQA or MLA attention, dense or MoE layers, FP8 or "
                 "MXFP4 weights) and runs the current scenario on it; the scenario then works like an uploaded one."))
    st.text_area("config.json", key="_cfg_text", height=180, max_chars=MAX_CONFIG_BYTES,
                 placeholder='{"model_type": "llama", "hidden_size": 4096, ...}')
    st.text_input(_("Name (optional)"), key="_cfg_name", max_chars=56, placeholder="e.g. Qwen3-32B")
    st.button(_("Use this model"), key="_cfg_use", icon=":material/check:", on_click=_on_config,
              args=(to_dict(sc),))
    if err := st.session_state.pop(CFG_ERROR, None):
        st.error(plain(err), icon=":material/error:")
    if (notes := st.session_state.pop(CFG_NOTES, None)) is not None and sc.model.params_b is not None:
        st.success(plain(" ".join([describe(to_dict(sc)["model"]) + "."]
                                  + [n[0].upper() + n[1:] + "." for n in notes])), icon=":material/check_circle:")
