"""A page's view settings in session state and in the URL (the tables are in `ui.frame.views`).

Unlike the sidebar's controls, which Streamlit binds to the URL, view settings belong to one page:
`seed` reads them from the link when the page is entered (bad values are noted and leave the
URL), otherwise keeps what this session last used on the page; `publish` writes the ones that
differ from the defaults back to the URL and hands them to the Share link. The widgets are keyed
by the parameter names and given no default of their own, so session state is their one source.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from . import lab as labs
from . import state
from .codec import Param, fmt_value, parse
from .links import check_view
from .sidebar import LINK_NOTES
from .views import STORE

DEFAULTS = "_view_defaults"  # the defaults of the last run, per page


def _page() -> str:
    return st.session_state.get("_page", "")


def _stored() -> dict[str, Any]:
    return st.session_state.setdefault(STORE, {}).setdefault(_page(), {})


def valid(p: Param, v: Any) -> bool:
    try:
        return parse(p, fmt_value(p, v)) == v
    except (ValueError, TypeError):
        return False


def seed(params: list[Param], defaults: dict[str, Any], ranges: tuple[tuple[str, str], ...] = ()) -> None:
    """Before the page's widgets render: give each of them its value (`ranges`: (start, end)
    pairs whose start must be below the end, `ui.frame.links.check_view`)."""
    ss = st.session_state
    lab = state.current()
    stored = _stored()
    linked: set[str] = set()
    if lab.entered:
        texts = {p.short: st.query_params.get_all(p.short)[-1] for p in params if p.short in st.query_params}
        values, notes = check_view(params, defaults, texts, ranges)
        for k in texts:
            if k not in values:
                del st.query_params[k]
        note(lab, notes)
        linked = set(values)
        for p in params:
            ss[p.short] = values.get(p.short, stored.get(p.short, defaults[p.short]))
    before = st.session_state.setdefault(DEFAULTS, {}).setdefault(_page(), {})
    for p in params:
        v = ss.get(p.short, stored.get(p.short, defaults[p.short]))
        if p.short in before and v == before[p.short] and p.short not in linked:
            v = defaults[p.short]  # never changed by hand: follow the default (it moves with the scenario)
        ss[p.short] = v if valid(p, v) else defaults[p.short]
        before[p.short] = defaults[p.short]


def note(lab, notes: list[str]) -> None:
    """Notes about the link's view settings: on this run's page and, like the sidebar's link notes,
    on the reruns that follow until a control changes (a page that reruns at once, as the
    workshop does to load a lesson's scenario, keeps them)."""
    if notes:
        lab.note(notes)
        st.session_state[LINK_NOTES] = [*st.session_state.get(LINK_NOTES, []), *notes]


def publish(params: list[Param], defaults: dict[str, Any]) -> dict[str, str]:
    """After the widgets render: the URL and the Share link get the values that differ from the defaults."""
    ss = st.session_state
    stored = _stored()
    out: dict[str, str] = {}
    for p in params:
        v = ss.get(p.short, defaults[p.short])
        stored[p.short] = v
        if v != defaults[p.short]:
            out[p.short] = fmt_value(p, v)
            if st.query_params.get(p.short) != out[p.short]:
                st.query_params[p.short] = out[p.short]
        elif p.short in st.query_params:
            del st.query_params[p.short]
    labs.share_view(out)
    return out
