"""Playground: per-class numbers against the same traffic without remedies; KV and queue over time."""

import streamlit as st

from ui import figures, layout, runs, text
from ui.i18n import _
from ui.state import current
from ui.variants import has_remedies, remedies

lab = current()
sc, res = lab.scenario, lab.result
layout.header(lab, _("Playground"), _("Move a control in the sidebar; every number reruns the simulation"))
layout.description(sc)
remedied = has_remedies(sc)
base = runs.baseline_result(sc).summary if remedied else None
if not remedied:
    st.info(_("No remedy is on, so there is nothing to compare with: try the priority policy, a token reserve, a KV "
              "reserve, inheritance or a class cap in the sidebar. Deltas then show the change against this same "
              "traffic without them."), icon=":material/info:")

st.subheader(_("What happened"))
st.markdown(text.what_happened(res.summary, res.waits, res.holders, base))

st.subheader(_("Per class"))
if remedied:
    st.caption(_("Deltas: against the same traffic on vLLM's defaults — without {remedies}. Priority: lower number = "
                 "more important (vLLM's convention).").format(remedies=_(", ").join(remedies(sc))))
for name, c in res.summary["classes"].items():
    layout.kpi_row(text.class_kpis(name, c, base["classes"].get(name) if base else None))
details = st.expander(_("Every per-class number"), icon=":material/table:", key="pg_details", on_change="rerun")
if details.open:  # drawn only when opened: a closed table still cost a first page 0.8 CPU-s of chromium
    details.dataframe(text.details_table(res.summary, base), hide_index=True, width="stretch")
st.subheader(_("System"))
layout.kpi_row(text.system_kpis(res.summary, base))

replica = 0
if sc.replicas.count > 1:
    replica = st.selectbox(_("Replica"), list(range(sc.replicas.count)), key="pg_replica")
st.plotly_chart(figures.over_time(res.steps, res.class_names, res.memory.usable_blocks, sc.mitigations.p0_kv_reserve,
                                  replica), key="pg_time", theme=None)
st.caption(_("{steps:,} engine steps, {sim:.1f} s simulated in {wall:.2f} s · KV cache {usable:,} usable blocks × "
             "{bs} tokens · policy {policy}").format(steps=res.summary["steps"], sim=res.summary["sim_time_s"],
                                                    wall=res.summary["wall_time_s"], usable=res.memory.usable_blocks,
                                                    bs=res.memory.block_size, policy=sc.scheduler.policy))
