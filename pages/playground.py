"""Playground: per-class numbers over the seeds against the same traffic without remedies; KV and
queue over time (the shown run)."""

import streamlit as st

from ui.charts import figures
from ui.frame import layout
from ui.frame.i18n import _
from ui.frame.state import current
from ui.panels import kpis
from ui.panels.variants import baseline, has_remedies, remedies
from ui.runtime import over_seeds

lab = current()
sc, res = lab.scenario, lab.result
layout.header(lab, _("Playground"), _("Move a control in the sidebar; every number reruns the simulation"))
layout.description(sc)
remedied = has_remedies(sc)
if not remedied:
    st.info(_("No remedy is on, so there is nothing to compare with: try the priority policy, a token reserve, a KV "
              "reserve, inheritance or a class cap in the sidebar. Deltas then show the change against this same "
              "traffic without them."), icon=":material/info:")


def numbers(overs: dict[str, kpis.Over]) -> None:
    """Everything on the page that is a number over the seeds (redrawn when the seeds are in)."""
    cur, base = overs["cur"], overs.get("base")
    st.subheader(_("What happened"))
    st.markdown(kpis.what_happened(cur, base, res.summary, res.waits, res.holders))
    st.subheader(_("Per class"))
    st.caption(kpis.legend(cur, *([base] if base is not None else [])))
    if remedied:
        st.caption(_("Deltas: against the same traffic and seeds on vLLM's defaults — without {remedies} — and on how "
                     "many seeds the remedies do better (seed by seed). Priority: lower number = more important "
                     "(vLLM's convention).").format(remedies=_(", ").join(remedies(sc))))
    for name in cur.class_names:
        layout.kpi_row(kpis.class_cards(name, cur, base))
    details = st.expander(_("Every per-class number"), icon=":material/table:", key="pg_details", on_change="rerun")
    if details.open:  # drawn only when opened: a closed table still cost a first page 0.8 CPU-s of chromium
        details.dataframe(kpis.details(cur, base), hide_index=True, width="stretch")
    st.subheader(_("System"))
    layout.kpi_row(kpis.system_cards(cur, base))


configs = {"cur": (sc, res)}
if remedied:
    configs["base"] = (baseline(sc), None)
over_seeds.show(configs, lab.seeds, numbers, "pg_numbers")

replica = 0
if sc.replicas.count > 1:
    replica = st.selectbox(_("Replica"), list(range(sc.replicas.count)), key="pg_replica")
st.plotly_chart(figures.over_time(res.steps, res.class_names, res.memory.usable_blocks, sc.mitigations.p0_kv_reserve,
                                  replica), key="pg_time", theme=None)
st.caption(_("The shown run, seed {seed}: {steps:,} engine steps, {sim:.1f} s simulated in {wall:.2f} s · KV cache "
             "{usable:,} usable blocks × {bs} tokens · policy {policy}").format(
    seed=sc.seed, steps=res.summary["steps"], sim=res.summary["sim_time_s"], wall=res.summary["wall_time_s"],
    usable=res.memory.usable_blocks, bs=res.memory.block_size, policy=sc.scheduler.policy))
