"""Workshop: ordered lessons — read, predict, run, compare with what the engine says."""

import streamlit as st

from ui import layout, lessons, runs, views, viewstate
from ui.sidebar import load_scenario
from ui.state import current


@st.cache_data(show_spinner=False)
def _lessons(stamp: tuple) -> tuple[list, list]:
    """Parsed and checked lessons (re-read when a lesson file changes)."""
    return lessons.safe_lessons()


lab = current()
layout.header(lab, "Workshop", "Six short lessons on priority inversion in LLM serving")
items, broken = _lessons(lessons.stamp())
for b in broken:
    st.warning(f"A lesson file could not be loaded: {b}", icon=":material/error:")
if not items:
    st.stop()
by_slug = {lesson.slug: lesson for lesson in items}
params, defaults = views.workshop_params(list(by_slug)), {"lesson": items[0].slug}
viewstate.seed(params, defaults)
numbered = {lesson.slug: f"{n}. {lesson.title}" for n, lesson in enumerate(items, 1)}
slug = st.radio("Lesson", list(by_slug), format_func=numbered.get, horizontal=True, key="lesson",
                label_visibility="collapsed")
viewstate.publish(params, defaults)
lesson = by_slug[slug]

st.subheader(numbered[slug])
st.markdown(lesson.body)
with st.container(border=True):
    guess = st.radio(f"**Predict:** {lesson.question}", lesson.options, index=None, key=f"ws_q_{lesson.slug}")
    ran = st.session_state.get(f"ws_ran_{lesson.slug}", False)
    c1, c2 = st.columns(2)
    c1.button("Run", key=f"ws_run_{lesson.slug}", icon=":material/play_arrow:", type="primary", width="stretch",
              disabled=guess is None and not ran, on_click=st.session_state.__setitem__,
              args=(f"ws_ran_{lesson.slug}", True), help="Make a prediction first" if guess is None else None)
    c2.button("Load this scenario", key=f"ws_load_{lesson.slug}", icon=":material/input:", width="stretch",
              on_click=load_scenario, args=(lesson.scenario, lesson.load_values()),
              help="Sets the sidebar to this lesson's last configuration, to explore further")
if ran:
    results = [runs.result(sc) for sc in lesson.scenarios()]
    right = lesson.options[lesson.answer]
    if guess == right:
        st.success(f"Your prediction matches the simulation: **{right}**", icon=":material/check_circle:")
    else:
        st.info(f"The simulation says: **{right}**", icon=":material/lightbulb:")
    table = lessons.reveal_table(lesson, results)
    st.dataframe(table, width="stretch", height=36 * (len(table) + 1) + 2,
                 column_config={"_index": st.column_config.Column(width="medium")})
    st.markdown(lesson.reveal)
    with st.expander("Claims this lesson makes, checked against the run", icon=":material/fact_check:"):
        for ok, sentence in (lessons.check(c, results) for c in lesson.claims):
            st.markdown(f"{':material/check:' if ok else ':material/close:'} `{sentence}`")
