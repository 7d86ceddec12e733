"""P99 curves: sweep one knob over a range and several seeds; the knee is marked."""

import numpy as np
import streamlit as st

from ui import figures, layout, runs
from ui.sidebar import current
from ui.variants import KNOBS, knee, sweep_frame, sweep_points

lab = current()
sc = lab.scenario
layout.header(lab, "P99 curves", "Each point is a full simulation of the sidebar's scenario with one knob changed")
classes = sc.class_names
top = classes[0]


def start_sweep(lo_key: str, hi_key: str) -> None:
    """Callback: remember the requested sweep (it survives reruns; results are cached)."""
    ss = st.session_state
    knob, cls = ss["sw_knob"], ss["sw_cls"]
    values = [float(v) for v in np.linspace(ss[lo_key], ss[hi_key], int(ss["sw_n"]))]
    if knob in ("reserve", "cap"):
        values = sorted({float(round(v)) for v in values})
    ss["sw_req"] = (knob, cls, tuple(values), tuple(sc.seed + k for k in range(ss["sw_seeds"])), sc.key())


with st.container(border=True):
    c1, c2, c3, c4, c5 = st.columns([3, 2, 2, 2, 2])
    knob = c1.selectbox("Knob", list(KNOBS), format_func=lambda k: KNOBS[k].label, key="sw_knob")
    cls = c2.selectbox("Class (cap / rate)", classes, index=len(classes) - 1, key="sw_cls")
    lo, hi, n = KNOBS[knob].default_range(sc, cls)
    c3.number_input("From", 0.0, 1e7, lo, key=f"sw_lo_{knob}_{cls}", format="%g")
    c4.number_input("To", 0.0, 1e7, hi, key=f"sw_hi_{knob}_{cls}", format="%g")
    c5.number_input("Points", 2, 16, n, key="sw_n")
    st.slider("Seeds per point (the band shows min–max)", 1, 5, 3, key="sw_seeds")
    st.button("Run sweep", icon=":material/play_arrow:", type="primary", on_click=start_sweep,
              args=(f"sw_lo_{knob}_{cls}", f"sw_hi_{knob}_{cls}"))

req = st.session_state.get("sw_req")
if req is None or req[4] != sc.key():
    st.info("Pick a knob and press **Run sweep**. Runs go two at a time in worker processes and are cached.",
            icon=":material/info:")
    st.stop()

knob, cls, values, seed_list, _ = req
points = sweep_points(sc, knob, list(values), list(seed_list), cls)
bar = st.progress(0.0, text=f"Simulating {len(points)} runs…")
summ = runs.summaries(tuple(p[2] for p in points),
                      _progress=lambda f: bar.progress(f, text=f"{f:.0%} of {len(points)} runs"))
bar.empty()
frame = sweep_frame(points, summ)
slo = sc.classes[top].slo.ttft_s if top in sc.classes else None
k = KNOBS[knob]
label = f"{k.label} ({k.unit})" + (f" — {cls}" if knob in ("cap", "rate") else "")
best = knee(frame, top, slo, harder_when_larger=knob in ("rate", "load")) if slo else None
st.plotly_chart(figures.p99_curve(frame, classes, label, slo, best, top), key="sw_fig", theme=None)
if slo is None:
    st.caption(f"{top} has no TTFT SLO in this scenario, so no knee is marked.")
elif best is None:
    st.warning(f"No setting in this range keeps {top}'s worst P99 TTFT over the seeds under its {slo:g} s SLO.",
               icon=":material/trending_up:")
else:
    which = "largest" if knob in ("rate", "load") else "smallest"
    st.success(f"The {which} setting that keeps {top}'s P99 TTFT under {slo:g} s for every seed: **{best:g} {k.unit}**.",
               icon=":material/flag:")
with st.expander("Numbers", icon=":material/table:"):
    st.dataframe(frame, hide_index=True, width="stretch")
