"""Small streamlit layout helpers shared by pages (metric grids, headers)."""

from __future__ import annotations

import streamlit as st

from .i18n import _
from .state import Lab
from .text import Kpi, plain


def header(lab: Lab, title: str, subtitle: str) -> None:
    st.title(title)
    name = _(lab.scenario.title) if lab.scenario.title else lab.scenario.name
    st.caption(_("{subtitle} · Scenario: {name}").format(subtitle=subtitle, name=plain(name)))


def kpi_row(kpis: list[Kpi], cols: int | None = None) -> None:
    columns = st.columns(cols or len(kpis))
    for col, k in zip(columns, kpis):
        col.metric(k.label, k.value, k.delta, delta_color=k.delta_color if k.delta else "off", border=True,
                   delta_arrow=k.arrow, help=k.help)


def description(sc) -> None:
    """The scenario's own description (what to look at), as inert text."""
    if sc.description.strip():
        with st.container(border=True):
            st.markdown(":material/menu_book: " + plain(_(" ".join(sc.description.split()))))
