"""The frame every page runs in: navigation, the sidebar's resolved `Lab`, link notes, the share link.

app.py calls `frame()`. It draws the sidebar (the scenario controls, bound to the URL), runs the
selected page, and then fills what depends on the page: the notes about a link's bad values and
the Share link (scenario values + the page's view settings).

Why `current()` can run the frame itself: a folder named `pages/` next to app.py makes Streamlit
take its legacy multipage path until `st.navigation` has run once in the process, so the first
request of a fresh server may run a page file on its own. Each page file is named after its URL
path (`pages/p99.py` is `/p99`), so that path finds the right file instead of showing "Page not
found"; the page then asks for the frame, which runs `st.navigation` and the page inside it.
No Streamlit internals are touched (tests/e2e checks the first request of a fresh server).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import streamlit as st

from engine import Result
from engine.scenario import Scenario

from .codec import Codec
from .i18n import N_

ROOT = Path(__file__).resolve().parent.parent
ICON = ROOT / "ui" / "icon.png"  # served by the app itself: no font CDN at page load


@dataclass(frozen=True)
class PageSpec:
    file: str
    title: str
    icon: str
    help: str
    url: str = ""  # "" = the default page, served at /

    @property
    def path(self) -> str:
        return self.url or Path(self.file).stem


PAGES = (
    PageSpec("pages/playground.py", N_("Playground"), ":material/science:",
             N_("Per-class numbers against the same traffic without remedies")),
    PageSpec("pages/timeline.py", N_("Timeline"), ":material/timeline:",
             N_("Who waited, why, and who got in ahead"), "timeline"),
    PageSpec("pages/p99.py", N_("P99 curves"), ":material/show_chart:", N_("Sweep one knob; curves redraw live"),
             "p99"),
    PageSpec("pages/compare.py", N_("Compare"), ":material/compare_arrows:",
             N_("Two or three configurations on the same traffic"), "compare"),
    PageSpec("pages/workshop.py", N_("Workshop"), ":material/school:",
             N_("Eleven lessons, presenter mode, a recap and a handout"), "workshop"),
    PageSpec("pages/memory.py", N_("GPU & memory"), ":material/memory:", N_("Where the HBM goes; what a step costs"),
             "memory"),
    PageSpec("pages/sweeps.py", N_("Sweeps"), ":material/scatter_plot:",
             N_("Explore a sweep or capacity plan made with python -m engine sweep / plan"), "sweeps"),
)


@dataclass
class Lab:
    """What every page reads: the scenario in effect, its preset and controls, and link notes."""

    preset: str
    raw: dict
    codec: Codec
    values: dict
    scenario: Scenario
    share: dict[str, str]
    uploaded: bool = False
    page: str = ""  # the running page's URL path ("" = Playground)
    entered: bool = True  # first run of this page since another page (or the session) ran
    notes: list[str] = field(default_factory=list)  # problems with the link's values, named
    view: dict[str, str] = field(default_factory=dict)  # the page's view settings for the share link

    def note(self, lines: list[str]) -> None:
        self.notes.extend(lines)

    @cached_property
    def result(self) -> Result:
        """The scenario's run (cached across sessions). Fetched on first use, so a page that
        only sweeps never waits for it."""
        from . import runs

        return runs.result(self.scenario)

    @property
    def kv_blocks(self) -> int:
        """The KV cache size in blocks, without running anything."""
        from engine.memory import breakdown

        return breakdown(self.scenario).blocks


_frame = threading.local()  # the Lab of the run in progress on this script thread


def current() -> Lab:
    """The Lab resolved by the frame in this run (every page calls this first)."""
    lab = getattr(_frame, "lab", None)
    if lab is not None:
        return lab
    frame()  # this page file runs on its own (see the module docstring): frame it, then stop here
    st.stop()
    raise AssertionError("unreachable")  # pragma: no cover


def frame() -> None:
    """app.py: language, navigation, sidebar, the page, then the notes and the share link."""
    from . import i18n, sidebar

    st.set_page_config(page_title="Inversion Lab", page_icon=str(ICON), layout="wide")
    from .layout import calm_reruns

    calm_reruns()
    lang, bad_lang = _language()
    _ = i18n._
    page = st.navigation([st.Page(s.file, title=_(s.title), icon=s.icon, url_path=s.url or None, default=not s.url,
                                  help=_(s.help)) for s in PAGES], position="top")
    path = page.url_path or ""
    ss = st.session_state
    entered = ss.get("_page") != path
    ss["_page"] = path
    lab, share_box = sidebar.render(path, eager=path != "p99")
    if path != "p99" and "_viewer" in ss:
        from . import runs

        runs.run_pool().want(runs.viewer_id(), [])  # a sweep left behind is abandoned
    lab.page, lab.entered = path, entered
    if lang != i18n.DEFAULT:
        lab.share[sidebar.LANG_KEY] = lang
    if bad_lang is not None:
        from .text import quoted

        lab.note([_("{key} = {value} is not a language of this app (use one of {codes}); using English").format(
            key=quoted(sidebar.LANG_KEY), value=quoted(bad_lang), codes=", ".join(i18n.LANGUAGES))])
    notes_box = st.container()
    _frame.lab = lab
    try:
        page.run()
    finally:
        _frame.lab = None
    sidebar.fill_share(share_box, lab)
    if lab.notes:
        notes_box.warning(_("**Some settings from the link were not used:**") + "\n\n"
                          + "\n".join(f"- {n}" for n in lab.notes), icon=":material/link_off:")


def _language() -> tuple[str, str | None]:
    """The language switch (English / 中文) at the top of the sidebar, kept in the URL as `lang`.

    Not a bound widget: Streamlit writes a bound radio's *label* into the URL (`lang=中文`), and a
    link should say `lang=zh`. So the link is read once per session, the URL is kept in step on
    every run (page switches drop unbound parameters), and English leaves no parameter at all.
    Returns (code, the link's unusable value or None)."""
    from . import i18n
    from .sidebar import LANG_KEY

    ss = st.session_state
    bad = None
    if LANG_KEY not in ss:
        asked = st.query_params.get(LANG_KEY)
        ss[LANG_KEY] = asked if asked in i18n.LANGUAGES else i18n.DEFAULT
        bad = asked if asked is not None and asked not in i18n.LANGUAGES else None
    codes = list(i18n.LANGUAGES)
    st.sidebar.radio("Language · 语言", codes, index=codes.index(ss[LANG_KEY]), format_func=i18n.LANGUAGES.get,
                     horizontal=True, key="_lang_pick", label_visibility="collapsed",
                     on_change=lambda: ss.__setitem__(LANG_KEY, ss["_lang_pick"]))
    lang = ss[LANG_KEY]
    i18n.set_language(lang)
    if lang != i18n.DEFAULT:
        if st.query_params.get(LANG_KEY) != lang:
            st.query_params[LANG_KEY] = lang
    elif LANG_KEY in st.query_params:
        del st.query_params[LANG_KEY]
    return lang, bad


def share_view(params: dict[str, Any]) -> None:
    """A page's view settings (short name → URL text) for the Share link."""
    lab = getattr(_frame, "lab", None)
    if lab is not None:
        lab.view.update(params)
