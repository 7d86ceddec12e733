"""Room mode on the Workshop page: a presenter opens a room, participants join by link or code,
their predictions go to the room's store (`ui.teach.room_store`) and the presenter sees them live.

The room is in the URL (`/workshop?room=CODE`), so a link joins it and a page reopened after a
server restart finds it again (the store is a file); a participant's anonymous id is in the URL too
(`you=…`), so a reload or a reconnect keeps their predictions theirs. Nobody types a name: nothing a
participant writes is ever shown to anyone. A code that is malformed or names no room gets a note
and the page goes on without a room.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from ..charts.fig_room import choices_bars, curves_figure, estimates_histogram
from ..frame.i18n import _
from ..frame.untrusted import plain, quoted
from . import estimate as estimates
from . import room_store

ROOM = "room"  # URL parameters
YOU = "you"
SS_ROOM = "_room"
SS_YOU = "_room_you"
SS_ERROR = "_room_error"
REFRESH_S = 2.0


@st.cache_resource(show_spinner=False)
def _store(path: str) -> room_store.RoomStore:
    return room_store.RoomStore(path)


def store() -> room_store.RoomStore | None:
    """The store (one per database file and process), or None with a warning when it cannot be used."""
    try:
        return _store(str(room_store.default_target()))
    except room_store.RoomError as err:
        st.warning(_("Rooms are not available: {err}").format(err=plain(err)), icon=":material/error:")
        return None


def _safe(call: Callable, default):
    """A store call; on a database failure a warning and `default` (the page goes on)."""
    try:
        return call()
    except room_store.RoomError as err:
        st.warning(_("Rooms are not available: {err}").format(err=plain(err)), icon=":material/error:")
        return default


def resolve(lab) -> str | None:
    """The room this session is in: from the link (checked against the store) or from earlier in
    the session; kept in the URL. A bad code is noted and dropped."""
    ss = st.session_state
    asked = st.query_params.get(ROOM)
    if asked is not None:
        code = room_store.normalize_code(asked)
        s = store()
        if code is None or s is None or not _safe(lambda: s.exists(code), False):
            lab.note([_("{key} = {value} is not an open room; the Workshop runs without one").format(
                key=quoted(ROOM), value=quoted(asked))])
            del st.query_params[ROOM]
            ss.pop(SS_ROOM, None)
            return None
        ss[SS_ROOM] = code
    code = ss.get(SS_ROOM)
    if code is None:
        return None
    if st.query_params.get(ROOM) != code:
        st.query_params[ROOM] = code
    you = st.query_params.get(YOU)
    if room_store.valid_participant(you):
        ss[SS_YOU] = you
    elif room_store.valid_participant(ss.get(SS_YOU)):
        st.query_params[YOU] = ss[SS_YOU]
    else:
        ss[SS_YOU] = room_store.new_participant()
        st.query_params[YOU] = ss[SS_YOU]
    return code


def join_url(code: str) -> str:
    """The link participants open: this app's Workshop page with the room, nothing else."""
    parts = urlsplit(st.context.url or "http://localhost:8501/workshop")
    path = parts.path.rstrip("/")
    path = path[: -len("/workshop")] if path.endswith("/workshop") else path
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/workshop", f"{ROOM}={code}", ""))


def _open() -> None:
    s = store()
    if s is None:
        return
    try:
        st.session_state[SS_ROOM] = s.open_room()
    except room_store.RoomError as err:
        st.session_state[SS_ERROR] = plain(err)  # (made inert here: the message is shown as Markdown)


def _join() -> None:
    ss = st.session_state
    typed = ss.get("room_code", "")
    code = room_store.normalize_code(typed)
    s = store()
    try:
        found = code is not None and s is not None and s.exists(code)
    except room_store.RoomError as err:
        ss[SS_ERROR] = plain(err)
        return
    if not found:
        ss[SS_ERROR] = _("{value} is not an open room (a code is {n} letters and digits)").format(
            value=quoted(typed), n=room_store.CODE_LEN)
        return
    ss[SS_ROOM] = code
    ss["room_code"] = ""


def _leave() -> None:
    st.session_state.pop(SS_ROOM, None)
    for k in (ROOM, YOU):
        if k in st.query_params:
            del st.query_params[k]


def bar(code: str | None, present: bool) -> None:
    """The room line above the lesson: the code and link (presenter), the room joined (participant),
    or how to open or join one."""
    ss = st.session_state
    with st.container(border=True):
        if code is not None:
            c1, c2 = st.columns([5, 1.4], vertical_alignment="center")
            s = store()
            n = _safe(lambda: s.participants(code), 0) if s is not None else 0
            if present:
                c1.markdown(_("**Room {code}** · {n} participant(s) so far · participants open this link or type "
                              "the code:").format(code=code, n=n))
                c1.code(join_url(code), language=None)
            else:
                c1.markdown(_("**Room {code}**: your predictions go to the presenter's screen (anonymously).").format(
                    code=code))
            c2.button(_("Leave the room"), key="room_leave", icon=":material/logout:", width="stretch",
                      on_click=_leave)
            return
        if present:
            c1, c2 = st.columns([5, 1.4], vertical_alignment="center")
            c1.caption(_("Open a room to collect the participants' predictions and show them here, live."))
            c2.button(_("Open a room"), key="room_open", icon=":material/groups:", width="stretch", on_click=_open)
        else:
            c1, c2 = st.columns([5, 1.4], vertical_alignment="bottom")
            c1.text_input(_("Room code (from the presenter)"), key="room_code", max_chars=12,
                          placeholder="ABCDE")
            c2.button(_("Join"), key="room_join", icon=":material/login:", width="stretch", on_click=_join)
        if err := ss.pop(SS_ERROR, None):
            st.warning(err, icon=":material/error:")  # inert already (plain, quoted)


def submit(code: str, slug: str, choice: int | None, estimate: float | None,
           curve: list[float | None] | None = None) -> str | None:
    """Store this participant's prediction (and the curve drawn); an error message if it could not be stored."""
    s = store()
    you = st.session_state.get(SS_YOU)
    if s is None or not room_store.valid_participant(you):
        return _("Rooms are not available")
    try:
        s.submit(code, slug, you, choice, estimate, curve)
    except room_store.RoomError as err:
        return str(err)
    return None


def live(code: str, slug: str, est: dict | None, band: dict | None, options: list[str],
         answer: Callable[[], tuple[int, float | None] | None], curve: Mapping | None = None) -> None:
    """The presenter's live view of the room's predictions for a lesson, redrawn every couple of
    seconds: the answers as counts, the estimates as a histogram over the seed band, and on a lesson
    that asks for a curve every participant's curve, faint, over each point's band. `answer()`
    gives (right option, the run's value) once revealed, else None. `curve`: `{at, x_label,
    y_label, bands (per point, or None), shown (the run's value per point, or None)}`; the bands
    and the run are drawn only once revealed."""

    @st.fragment(run_every=REFRESH_S)
    def panel() -> None:
        s = store()
        if s is None:
            return
        preds = _safe(lambda: s.predictions(code, slug), [])
        shown = answer()
        st.markdown(_("**The room's predictions** ({n} so far)").format(n=len(preds)))
        c1, c2 = st.columns(2)
        counts = room_store.choice_counts(preds, len(options))
        c1.plotly_chart(choices_bars(counts, options, shown[0] if shown else None), key=f"room_choices_{slug}",
                        theme=None, config={"displaylogo": False})
        if est is not None:
            values = [p.estimate for p in preds if p.estimate is not None]
            lo, hi = (band["min"], band["max"]) if band and shown else (None, None)
            fig = estimates_histogram(values, lo, hi, shown[1] if shown else None,
                                      estimates.UNITS[estimates.kind(est)],
                                      fmt=lambda v: estimates.shown(est, v))
            c2.plotly_chart(fig, key=f"room_estimates_{slug}", theme=None, config={"displaylogo": False})
        if curve is not None:
            drawn = [p.curve for p in preds if p.curve is not None]
            bands = curve.get("bands") if shown else None
            fig = curves_figure(drawn, curve["at"], bands, curve.get("shown") if shown else None, curve["x_label"],
                                curve["y_label"], fmt=lambda v: f"{v:.3g} s")
            st.plotly_chart(fig, key=f"room_curves_{slug}", theme=None, config={"displaylogo": False})

    panel()
