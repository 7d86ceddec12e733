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

from urllib.parse import urlsplit

import streamlit as st

from . import i18n, sidebar
from .lab import ICON, PAGES, Lab, active, set_active
from .layout import calm_reruns
from .untrusted import quoted


def current() -> Lab:
    """The Lab resolved by the frame in this run (every page calls this first)."""
    lab = active()
    if lab is not None:
        return lab
    frame()  # this page file runs on its own (see the module docstring): frame it, then stop here
    st.stop()
    raise AssertionError("unreachable")  # pragma: no cover


def frame() -> None:
    """app.py: language, navigation, sidebar, the page, then the notes and the share link."""
    st.set_page_config(page_title="Inversion Lab", page_icon=str(ICON), layout="wide")
    calm_reruns()
    lang, bad_lang = _language()
    _ = i18n._
    page = st.navigation([st.Page(s.file, title=_(s.title), icon=s.icon, url_path=s.url or None, default=not s.url,
                                  help=_(s.help)) for s in PAGES], position="top")
    path = page.url_path or ""
    ss = st.session_state
    entered = ss.get("_page") != path
    ss["_page"] = path
    lab, share_box = sidebar.render(path, eager=path not in ("p99", "story"))  # pages that run in the pool
    if path != "p99" and "_viewer" in ss:
        from ..runtime import runs

        runs.run_pool().want(runs.viewer_id(), [])  # a sweep left behind is abandoned
    if "_viewer" in ss:
        from ..runtime import capacity_live, over_seeds

        if path not in over_seeds.PAGES:
            over_seeds.forget()  # so are the seeds of a page left behind
        capacity_live.leave(path)  # and capacity searches only another page wanted
    lab.page, lab.entered = path, entered
    if lang != i18n.DEFAULT:
        lab.share[sidebar.LANG_KEY] = lang
    if bad_lang is not None:
        lab.note([_("{key} = {value} is not a language of this app (use one of {codes}); using English").format(
            key=quoted(sidebar.LANG_KEY), value=quoted(bad_lang), codes=", ".join(i18n.LANGUAGES))])
    notes_box = st.container()
    set_active(lab)
    try:
        page.run()
    finally:
        set_active(None)
    if "_path_checked" not in ss:
        ss["_path_checked"] = True
        if path == "" and (asked := _unknown_path()):
            note = [_("{path} is not a page of this app (use one of {pages}); showing the Playground").format(
                path=quoted("/" + asked), pages=", ".join("/" + s.url for s in PAGES))]
            lab.note(note)
            ss[sidebar.LINK_NOTES] = [*ss.get(sidebar.LINK_NOTES, []), *note]
    sidebar.fill_share(share_box, lab)
    if lab.notes:
        notes_box.warning(_("**Some settings from the link were not used:**") + "\n\n"
                          + "\n".join(f"- {n}" for n in lab.notes), icon=":material/link_off:")


def _unknown_path() -> str | None:
    """The path the session's first request asked for when it names no page of the app (Streamlit
    then runs the default page and the browser shows `/`), else None."""
    url = st.context.url
    if not url:
        return None
    base = "/" + (st.get_option("server.baseUrlPath") or "").strip("/")
    asked = urlsplit(url).path
    asked = asked[len(base):] if asked.startswith(base) else asked
    asked = asked.strip("/")
    return asked if asked and asked not in {s.path for s in PAGES} else None


def _language() -> tuple[str, str | None]:
    """The language switch (English / 中文) at the top of the sidebar, kept in the URL as `lang`.

    Not a bound widget: Streamlit writes a bound radio's *label* into the URL (`lang=中文`), and a
    link should say `lang=zh`. So the link is read once per session, the URL is kept in step on
    every run (page switches drop unbound parameters), and English leaves no parameter at all.
    Returns (code, the link's unusable value or None)."""
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
