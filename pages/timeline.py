"""Inversion timeline: who waited, why, and who got in ahead — with the KV chart below."""

import pandas as pd
import streamlit as st

from ui import figures, layout, text
from ui.state import current

lab = current()
sc, res = lab.scenario, lab.result
layout.header(lab, "Inversion timeline", "Waits coloured by reason; shaded = a lower-priority request was admitted")
top_prio = int(res.requests["priority"].min()) if len(res.requests) else 0
t_end = float(max(res.summary["sim_time_s"], 1.0))


@st.fragment
def view() -> None:
    """View-only controls: they redraw from the cached result and never re-simulate."""
    c1, c2, c3 = st.columns([2, 3, 2])
    mode = c1.radio("Show", ["Top priority and their cast", "All requests"], key="tl_mode",
                    help="The cast: KV holders they waited on and lower-priority requests admitted during "
                         "their wait.")
    classes = c2.multiselect("Classes", res.class_names, default=res.class_names, key="tl_classes")
    window = c3.slider("Time window (s)", 0.0, t_end, (0.0, t_end), step=max(t_end / 200, 0.1), key="tl_window")
    req = res.requests
    lanes = (figures.default_lanes(req, res.waits, res.holders, top_prio, limit=400) if mode.startswith("Top")
             else req.sort_values("arrival_s")["id"].head(400).tolist())
    shown = req["class"].isin(classes) & (req["arrival_s"] <= window[1]) & (req["finish_s"].fillna(t_end) >= window[0])
    keep = set(req.loc[shown, "id"])
    lanes = [i for i in lanes if i in keep]
    top_ids = [i for i in lanes if req.at[i, "priority"] == top_prio] or lanes
    pick = st.selectbox("Read a request's story", top_ids, key="tl_pick", index=None,
                        format_func=lambda i: f"#{i} {req.at[i, 'class']} · TTFT {text.seconds(req.at[i, 'ttft_s'])}",
                        placeholder="Pick a request (top-priority ones first)")
    if not lanes:
        st.info("No request matches these filters.", icon=":material/filter_alt_off:")
        return
    st.plotly_chart(figures.timeline(req, res.waits, res.holders, res.episodes, res.steps, lanes, res.class_names,
                                     res.memory.blocks, sc.mitigations.p0_kv_reserve, window, pick),
                    key="tl_fig", theme=None)
    if len(lanes) >= 400:
        st.caption("Showing the first 400 requests by arrival; narrow the window or the classes to see others.")
    if pick is not None:
        story(req.loc[pick])


def story(row: pd.Series) -> None:
    st.subheader(f"Request #{int(row['id'])}, step by step")
    st.markdown("\n".join(f"1. {line}" for line in text.request_story(row, res.waits, res.holders)))
    w = res.waits[res.waits["request"] == row["id"]]
    if len(w):
        cols = ["start_s", "end_s", "duration_s", "reason", "need_blocks", "free_blocks", "short_by", "eta_s"]
        st.dataframe(w[cols], hide_index=True, width="stretch")


view()
with st.expander("What the colours mean", icon=":material/palette:"):
    st.dataframe(pd.DataFrame(figures.reason_legend(), columns=["reason", "colour", "meaning"])
                 .drop(columns="colour"), hide_index=True, width="stretch")
st.subheader("Alerts")
if sc.mitigations.alert_after_s is None:
    st.caption("Alerts are off: set “Alert when a top request waits” under Mitigations to record a “why is it "
               "waiting” snapshot whenever a top-priority request waits that long.")
elif len(res.alerts):
    st.dataframe(res.alerts, hide_index=True, width="stretch")
else:
    st.caption(f"No top-priority request waited {sc.mitigations.alert_after_s:g} s or more.")
