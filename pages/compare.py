"""Compare: the sidebar's scenario beside one or two other configurations on the same traffic."""

import streamlit as st

from engine import ScenarioError
from engine.sweeps.evidence import default_seeds
from ui.charts import figures
from ui.frame import layout, limits, untrusted, views, viewstate
from ui.frame.codec import POLICIES
from ui.frame.i18n import _
from ui.frame.state import current
from ui.panels import kpis
from ui.panels.compare import SIDEBAR, config_of, overrides, refuse_duplicate, sidebar_config
from ui.runtime import capacity_live, over_seeds, runs

lab = current()
sc = lab.scenario
layout.header(lab, _("Compare"), _("Same arrivals and lengths (same seed); only the scheduling choices differ"))
low = sc.class_names[-1]
params, defaults = views.compare_params(), views.compare_defaults()
viewstate.seed(params, defaults)
if lab.entered:
    lab.note(refuse_duplicate(st.session_state, defaults, entering=True))

n = st.radio(_("Configurations"), [2, 3], horizontal=True, key="cmp_n")
cols = st.columns(n)
with cols[0].container(border=True):
    st.text_input(_("Name"), _(SIDEBAR), disabled=True, key="cmp_sidebar_name",
                  help=_("The sidebar's scenario: this column always follows the sidebar"))
    for label, value in sidebar_config(sc, low):
        st.markdown(f"**{label}:** {untrusted.plain(value)}")
for i, col in zip(views.COMPARE_SLOTS[: n - 1], cols[1:]):
    with col.container(border=True):
        st.text_input(_("Name"), key=f"c{i}_name", max_chars=30, on_change=refuse_duplicate,
                      args=(st.session_state, defaults, False, i), help=_("Names must differ"))
        if err := st.session_state.get(f"_c{i}_name_error"):
            st.error(err, icon=":material/block:")
        st.selectbox(_("Policy"), POLICIES, key=f"c{i}_pol")
        st.number_input(_("Token reserve"), 0, 65536, step=64, key=f"c{i}_res")
        st.number_input(_("KV reserve (blocks)"), 0, 10_000_000, step=16, key=f"c{i}_kv")
        st.toggle(_("Inheritance"), key=f"c{i}_inh")
        st.number_input(_("{cls} prompt cap (0 = none)").format(cls=low), 0, 10_000_000, step=512, key=f"c{i}_cap")
viewstate.publish(params, defaults)

configs = {SIDEBAR: sc}
problems = []
for i in views.COMPARE_SLOTS[: n - 1]:
    c = config_of(st.session_state, i)
    try:
        variant = overrides(sc, c, low)
        reason = limits.why_not(variant)
    except ScenarioError as err:
        reason = str(err)
    if reason:
        problems.append(f"{untrusted.plain(c['name'])}: {untrusted.plain(reason)}")
    else:
        configs[c["name"]] = variant
for p in problems:
    st.warning(p, icon=":material/error:")
results = {name: runs.result(s) for name, s in configs.items()}


def shown(name: str) -> str:
    return _(name) if name == SIDEBAR else name


def kpi_table(overs: dict[str, kpis.Over]) -> None:
    """The configurations side by side over the seeds (redrawn when the seeds are in)."""
    st.subheader(_("KPIs"))
    st.caption(kpis.legend(*overs.values()) + " " + _(
        "In the other columns: on how many seeds the configuration does better than the sidebar's (seed by seed: the "
        "same traffic)."))
    # a static table: its cells (value, the seeds' range, n < 100, better on k of N) wrap at 1280 px,
    # where a data grid's columns scrolled sideways
    st.table(kpis.compare_table({shown(k): o for k, o in overs.items()}, shown(SIDEBAR)))


over_seeds.show({name: (s, results[name]) for name, s in configs.items()}, lab.seeds, kpi_table, "cmp_numbers")
st.subheader(_("What each configuration costs: capacity"))
capacity_live.show({shown(k): s for k, s in configs.items()}, shown(SIDEBAR), tuple(default_seeds(sc.seed, lab.seeds)),
                   "cmp_capacity")
st.subheader(_("Time to first token, per class"))
st.caption(_("The shown run of each configuration: seed {seed} (the figures above are over {n} seeds).").format(
    seed=sc.seed, n=lab.seeds))
st.plotly_chart(figures.ttft_cdf({shown(k): r.requests for k, r in results.items()}, sc.class_names),
                key="cmp_cdf", theme=None)
