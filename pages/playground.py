"""Playground: per-class numbers against the same traffic without remedies; KV and queue over time."""

import streamlit as st

from ui import figures, layout, runs, text
from ui.state import current
from ui.variants import has_remedies, remedies

lab = current()
sc, res = lab.scenario, lab.result
layout.header(lab, "Playground", "Move a control in the sidebar; every number reruns the simulation")
layout.description(sc)
remedied = has_remedies(sc)
base = runs.baseline_result(sc).summary if remedied else None
if not remedied:
    st.info("No remedy is on, so there is nothing to compare with: try the priority policy, a token reserve, a KV "
            "reserve, inheritance or a class cap in the sidebar. Deltas then show the change against this same "
            "traffic without them.", icon=":material/info:")

st.subheader("What happened")
st.markdown(text.what_happened(res.summary, res.waits, res.holders, base))

st.subheader("Per class")
if remedied:
    st.caption(f"Deltas: against the same traffic on vLLM's defaults — without {', '.join(remedies(sc))}. "
               "Priority: lower number = more important (vLLM's convention).")
for name, c in res.summary["classes"].items():
    layout.kpi_row(text.class_kpis(name, c, base["classes"].get(name) if base else None))
with st.expander("Every per-class number", icon=":material/table:"):
    st.dataframe(text.details_table(res.summary, base), hide_index=True, width="stretch")
st.subheader("System")
layout.kpi_row(text.system_kpis(res.summary, base))

replica = 0
if sc.replicas.count > 1:
    replica = st.selectbox("Replica", list(range(sc.replicas.count)), key="pg_replica")
kv = figures.kv_usage(res.steps, res.class_names, res.memory.usable_blocks, sc.mitigations.p0_kv_reserve, replica)
st.plotly_chart(kv, key="pg_kv", theme=None)
st.plotly_chart(figures.waiting_queue(res.steps, res.class_names, replica), key="pg_wait", theme=None)
st.caption(f"{res.summary['steps']:,} engine steps, {res.summary['sim_time_s']:.1f} s simulated in "
           f"{res.summary['wall_time_s']:.2f} s · KV cache {res.memory.blocks:,} blocks × {res.memory.block_size} "
           f"tokens · policy {sc.scheduler.policy}")
