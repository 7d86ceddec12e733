"""Small streamlit layout helpers shared by pages (metric grids, headers)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.config.shipped_traces import shipped_name

from ..panels.text import Kpi
from . import credits
from .i18n import _
from .lab import Lab
from .untrusted import plain

# While a rerun runs, Streamlit dims the elements it has not re-sent yet: after 0.5 s they fade to a
# third over 1 s. In a browser without a GPU that fade repaints the whole page every frame: a 2 s
# rerun of the memory page costs chromium 0.69–0.74 CPU-s with it and 0.50 with the same dimming as
# one step after the same 0.5 s (`tests/e2e/browser_cost.py`), and under eight sessions on two
# cores most reruns last long enough to fade. So the dimming stays, the frames in between go.
# (Constant CSS of ours, never text from a user.)
CALM_RERUNS = """<style>
[data-testid="stElementContainer"], [data-testid="stExpander"] details, [data-testid="stExpander"] summary {
  transition-duration: 0s !important;
}
</style>"""


# Every key step on a slider is a rerun in Streamlit (react-aria ends a "drag" per key press): four
# steps of the token reserve were four runs of the page and its simulation (10.4 s under an eight-
# session load, 1.4 s quiet). `ui/frame/slider_keys.js` holds the page's rerun request back while such a
# key is held and sends the last one when it is released: one run per key sequence. Nothing about
# the slider changes (it moves with each step; Streamlit's own binding keeps the URL in step).
SLIDER_KEYS = "<script>" + (Path(__file__).with_name("slider_keys.js")).read_text() + "</script>"


def calm_reruns() -> None:
    """The frame's constant helpers for the browser: calmer reruns (CSS), one run per slider key
    sequence (script). Constant text of ours, never text from a user."""
    st.html(CALM_RERUNS)
    st.html(SLIDER_KEYS, unsafe_allow_javascript=True)


def header(lab: Lab, title: str, subtitle: str) -> None:
    st.title(title)
    name = _(lab.scenario.title) if lab.scenario.title else lab.scenario.name
    if changes := lab.codec.describe_changes(lab.values):
        name = _("{name}, changed: {changes}").format(name=name, changes=changes)
    st.caption(_("{subtitle} · Scenario: {name}").format(subtitle=subtitle, name=plain(name)))
    if (trace := shipped_name(lab.scenario.trace.path if lab.scenario.trace else None)) is not None:
        st.caption(credits.attribution(trace))  # a shipped trace's licence asks for credit wherever it is shown


def kpi_row(kpis: list[Kpi], cols: int | None = None) -> None:
    columns = st.columns(cols or len(kpis))
    for col, k in zip(columns, kpis):
        col.metric(k.label, k.value, k.delta, delta_color=k.delta_color if k.delta else "off", border=True,
                   delta_arrow=k.arrow, help=k.help)
        # on how many seeds the delta holds, then what the figure rests on: under the card, where it
        # wraps (beside the delta it overflowed a fifth-width card at 1280 px)
        note = " · ".join(x for x in (k.description if k.delta else None, k.note) if x)
        if note:
            col.caption(note)


def description(sc) -> None:
    """The scenario's own description (what to look at), as inert text."""
    if sc.description.strip():
        with st.container(border=True):
            st.markdown(":material/menu_book: " + plain(_(" ".join(sc.description.split()))))
