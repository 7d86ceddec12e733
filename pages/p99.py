"""P99 curves: sweep one knob over a range and several seeds; curves redraw as the sidebar changes."""

import streamlit as st

from engine.sweeps.evidence import default_seeds
from ui.frame import layout, views, viewstate
from ui.frame.i18n import _
from ui.frame.state import current
from ui.panels.variants import baseline, has_remedies
from ui.runtime import capacity_live, live, runs
from ui.runtime.sweeps import KNOBS, values_for

lab = current()
sc = lab.scenario
classes = sc.class_names
blocks = lab.kv_blocks
layout.header(lab, _("P99 curves"), _("Each point is a full simulation of the sidebar's scenario with one knob "
                                      "changed; the curves follow the sidebar"))


def range_defaults(knob: str, cls: str) -> dict:
    lo, hi = KNOBS[knob].default_range(sc, cls, blocks)
    return {"sw_from": lo, "sw_to": hi, "sw_pts": 9}


def on_knob() -> None:
    """A new knob or class starts from its own default range."""
    ss = st.session_state
    ss.update({k: v for k, v in range_defaults(ss["sw_knob"], ss["sw_cls"]).items() if k in ("sw_from", "sw_to")})


choice_params = views.sweep_choice(tuple(KNOBS), classes)
choice_defaults = {"sw_knob": "reserve", "sw_cls": classes[-1]}
viewstate.seed(choice_params, choice_defaults)
ss = st.session_state
range_params = views.sweep_range(KNOBS[ss["sw_knob"]].integer)
defaults = range_defaults(ss["sw_knob"], ss["sw_cls"])
viewstate.seed(range_params, defaults, ranges=(("sw_from", "sw_to"),))

with st.container(border=True):
    c1, c2, c3, c4, c5 = st.columns([3, 2, 2, 2, 1.4])
    knob = KNOBS[c1.selectbox(_("Knob"), list(KNOBS), format_func=lambda k: _(KNOBS[k].short), key="sw_knob",
                              on_change=on_knob,
                              help="; ".join(f"{_(k.label)}: {_(k.help)}" for k in KNOBS.values()))]
    cls = c2.selectbox(_("Class"), classes, key="sw_cls", on_change=on_knob, disabled=not knob.per_class,
                       help=_("For a class's prompt cap, running cap or rate"))
    step = 1.0 if knob.integer else 0.05
    unit = _(knob.unit)
    lo = c3.number_input(_("From ({unit})").format(unit=unit), 0.0, 1e7, step=step, key="sw_from", format="%g")
    hi = c4.number_input(_("To ({unit})").format(unit=unit), 0.0, 1e7, step=step, key="sw_to", format="%g")
    n = c5.number_input(_("Points"), 3, 16, key="sw_pts")
viewstate.publish(choice_params + range_params, {**choice_defaults, **defaults})

if lo == hi:
    st.warning(_("From and To are the same: give the sweep a range."), icon=":material/straighten:")
    st.stop()
lo, hi = min(lo, hi), max(lo, hi)
values = values_for(knob, lo, hi, int(n))
seeds = tuple(default_seeds(sc.seed, lab.seeds))  # the sidebar's "Seeds per figure", as on every page
plan = runs.sweep_plan(sc.key(), knob.name, tuple(values), seeds, cls if knob.per_class else None)
for v, why in list(plan.refused.items())[:3]:
    st.caption(_("Left out {v} {unit}: {why}").format(v=f"{v:,.4g}", unit=unit, why=why))
if not plan.points:
    st.warning(_("No setting in this range can run; change the range."), icon=":material/block:")
    st.stop()
slos = {c: (sc.classes[c].slo.ttft_s if c in sc.classes else None) for c in classes}
label = f"{_(knob.label)} ({unit})" + (f" — {cls}" if knob.per_class else "")
live.sweep(plan, classes, label, slos, (lo, hi), unit)

st.subheader(_("What the remedies cost: capacity"))
if has_remedies(sc):
    capacity_live.show({_("without remedies"): baseline(sc), _("this scenario"): sc}, _("without remedies"), seeds,
                       "p99_capacity")
else:
    st.caption(_("No remedy is on: the capacity below is the scenario's own; turn one on in the sidebar to see what it "
                 "costs."))
    capacity_live.show({_("this scenario"): sc}, None, seeds, "p99_capacity")

with st.expander(_("Size a reserve for this traffic"), icon=":material/straighten:"):
    from ui.panels.sizing_view import panel

    panel(lab)
