"""Inversion timeline: who waited, why, who got in ahead and whom they waited on — over time."""

import pandas as pd
import streamlit as st

from ui.charts import figures
from ui.charts.fig_timeline import timeline
from ui.frame import layout, views, viewstate
from ui.frame.i18n import _
from ui.frame.state import current
from ui.panels import inversions, kpis, text
from ui.runtime import over_seeds

lab = current()
sc, res = lab.scenario, lab.result
layout.header(lab, _("Inversion timeline"),
              _("Top-priority requests first; thin grey lines drop to whoever was admitted ahead of them, dotted red "
                "ones to the KV holders they waited on"))
over_seeds.show({"cur": (sc, res)}, lab.seeds, lambda overs: st.caption(kpis.strip(overs["cur"])), "tl_numbers")
classes = res.class_names
req = res.requests
t_end = round(float(max(res.summary["sim_time_s"], 1.0)), 2)
params = views.timeline_params(classes, t_end, len(req))
span = inversions.story_span(res)  # open where the story happens; the slider widens it
defaults = {"tl_show": "story", "tl_cls": list(classes), "tl_from": span[0], "tl_to": span[1], "tl_req": -1}
viewstate.seed(params, defaults, ranges=(("tl_from", "tl_to"),))
ss = st.session_state
ss["tl_window"] = (ss["tl_from"], ss["tl_to"])


def copy_window() -> None:
    ss["tl_from"], ss["tl_to"] = (round(float(v), 2) for v in ss["tl_window"])


SHOW = {"story": _("The inversion story"), "all": _("All requests")}
c1, c2, c3 = st.columns([2, 3, 3])
show = c1.radio(_("Show"), list(SHOW), format_func=SHOW.get, key="tl_show",
                help=_("The story: top-priority requests that waited, the KV holders they waited on, and the "
                       "lower-priority requests admitted ahead of them (one lane per class). All: every request."))
chosen = c2.multiselect(_("Classes"), classes, key="tl_cls")
c3.slider(_("Time window (s)"), 0.0, t_end, step=max(round(t_end / 200, 2), 0.1), key="tl_window",
          on_change=copy_window)
window = (ss["tl_from"], ss["tl_to"])
if show == "story":
    lanes, got_ahead, held, note = inversions.story_lanes(res, chosen, window)
else:
    lanes, got_ahead, held, note = inversions.all_lanes(res, chosen, window)
top_ids = [ln.key for ln in lanes if ln.kind == "top"]
options = [-1] + top_ids + ([ss["tl_req"]] if ss["tl_req"] >= 0 and ss["tl_req"] not in top_ids else [])


def label(i: int) -> str:
    if i < 0:
        return _("Pick a request to read its story (top-priority ones listed)")
    ttft = req.at[i, "ttft_s"]
    return f"#{i} {req.at[i, 'class']} · TTFT {text.seconds(ttft if pd.notna(ttft) else None)}"


pick = st.selectbox(_("Read a request's story"), options, format_func=label, key="tl_req")
viewstate.publish(params, defaults)

if not lanes:
    st.info(_("No request matches these filters (in the story view: no top-priority request waited in this window)."),
            icon=":material/filter_alt_off:")
else:
    if note:
        st.caption(f":material/info: {note}")
    strip = inversions.strip(res.episodes, classes, t_end)
    fig = timeline(res, lanes, got_ahead, held, strip, classes, capacity=res.memory.usable_blocks,
                   kv_reserve=sc.mitigations.p0_kv_reserve, window=window, pick=pick if pick >= 0 else None)
    st.plotly_chart(fig, key="tl_fig", theme=None, config={"displaylogo": False})

if pick >= 0:
    row = req.loc[pick]
    mine = inversions.ahead(res, [pick])
    st.subheader(_("Request #{i}, step by step").format(i=pick))
    st.markdown("\n".join(f"1. {line}" for line in text.request_story(row, res.waits, res.holders, mine)))
    if len(mine):
        st.markdown(_("**Admitted ahead of #{i}** (lower priority, during its inversion episodes)").format(i=pick))
        cols = {"overtaker": _("overtaker"), "overtaker_class": _("its class"), "t_s": _("admitted at (s)"),
                "overtaker_need_blocks": _("it needed (blocks)"),
                "need_blocks": _("#{i} needed (blocks)").format(i=pick)}
        st.dataframe(mine.rename(columns=cols)[list(cols.values())], hide_index=True, width="stretch")
    w = res.waits[res.waits["request"] == pick]
    if len(w):
        st.markdown(_("**#{i}'s waits**").format(i=pick))
        st.dataframe(w[["start_s", "end_s", "duration_s", "reason", "need_blocks", "free_blocks", "short_by", "eta_s"]],
                     hide_index=True, width="stretch")
        on = inversions.waited_on(res, [pick])
        if len(on):
            st.markdown(_("**KV holders #{i} waited on** (the biggest three when each wait began)").format(i=pick))
            st.dataframe(on[["start_s", "reason", "rank", "holder", "holder_class", "blocks"]], hide_index=True,
                         width="stretch")

with st.expander(_("What the colours mean"), icon=":material/palette:"):
    st.markdown("\n".join(f"- **{label}** — {meaning}" for label, _c, meaning in figures.reason_legend()))
    st.caption(_("Each lane's thin line is the request's life, the bar in its class colour is it running; thick bars "
                 "are waits, coloured by reason; a dark diamond marks an inversion (a lower-priority request admitted "
                 "while it waited)."))
st.subheader(_("Alerts"))
if sc.mitigations.alert_after_s is None:
    st.caption(_("Alerts are off: set “Alert when a top request waits” under Mitigations to record a “why is it "
                 "waiting” snapshot whenever a top-priority request waits that long."))
elif len(res.alerts):
    st.dataframe(res.alerts, hide_index=True, width="stretch")
else:
    st.caption(_("No top-priority request waited {s} s or more.").format(s=f"{sc.mitigations.alert_after_s:g}"))
