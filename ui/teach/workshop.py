"""The Workshop page's parts: the agenda, one lesson (presenter mode), the recap, the handout.

The lesson is a view setting (`lesson` in the URL). A lesson's runs are its own (its scenario and
overrides: the lesson's contract), so the Workshop never touches the sidebar on its own: opening
the tab, choosing a lesson or following a link leaves the user's scenario where it was. "Load this
lesson's scenario" puts the lesson's last run in the sidebar to explore from, and remembers what
was there; "Back to your scenario" puts it back.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from engine.config.scenario import load_shipped
from engine.sweeps.evidence import default_seeds

from ..charts import lesson_charts
from ..charts.fig_workshop import remedies_bars
from ..frame import views, viewstate
from ..frame.i18n import _, language
from ..frame.lab import Lab
from ..frame.layout import header
from ..frame.seeds import DEFAULT as DEFAULT_SEEDS
from ..frame.sidebar import load_scenario, restore, share_url, snapshot
from ..frame.untrusted import plain
from ..panels.spread import seed_list
from ..runtime import capacity_live, runs
from . import estimate as estimates
from . import handout, lesson_evidence, lessons, recap, room_view

RECAP = "recap"
RECAP_MIN = 5
INTRO_MIN = 3  # the presenter's opening: the question of the day and how the lab works
PRESENT = "present"


@st.cache_data(show_spinner=False)
def _parsed(stamp: tuple) -> tuple[list, list]:
    """Parsed and checked lessons (re-read when a lesson file changes)."""
    return lessons.safe_lessons()


def items() -> tuple[list[lessons.Lesson], list[str]]:
    return _parsed(lessons.stamp())


def starts(items_: list[lessons.Lesson]) -> dict[str, int]:
    """Minute at which each lesson (and the recap) starts, after the introduction."""
    out, t = {}, INTRO_MIN
    for lesson in items_:
        out[lesson.slug] = t
        t += lesson.minutes
    out[RECAP] = t
    return out


def agenda(items_: list[lessons.Lesson]) -> pd.DataFrame:
    """The presenter's agenda: each part with its time box, start and end minute, and how many
    discussion prompts it carries (at most one per three minutes)."""
    at = starts(items_)

    def row(n: str, title: str, minutes: int, start: int, prompts: int) -> dict:
        return {"#": n, _("Lesson"): title, _("Minutes"): minutes, _("Starts at"): f"{start}′",
                _("Ends at"): f"{start + minutes}′", _("Prompts"): prompts}

    rows = [row("", _("Introduction: the question of the day, and how the lab works"), INTRO_MIN, 0, 0)]
    rows += [row(str(n), _(lesson.title), lesson.minutes, at[lesson.slug], len(lesson.prompts))
             for n, lesson in enumerate(items_, 1)]
    rows.append(row("", _("Recap: every remedy on the same traffic"), RECAP_MIN, at[RECAP], 3))
    return pd.DataFrame(rows)


BEFORE = "_ws_before"  # the sidebar's scenario before a lesson's was loaded (ui.frame.sidebar.snapshot)


def _load(lesson: lessons.Lesson) -> None:
    """on_click: the sidebar takes the lesson's last run; what it held is kept to come back to."""
    st.session_state.setdefault(BEFORE, snapshot())
    load_scenario(lesson.scenario, lesson.load_values())


def _back() -> None:
    """on_click: the sidebar gets back the scenario it held before the first lesson was loaded."""
    snap = st.session_state.pop(BEFORE, None)
    if snap is not None:
        restore(snap)


def _step(order: list[str], delta: int) -> None:
    ss = st.session_state
    i = order.index(ss.get("lesson", order[0])) if ss.get("lesson") in order else 0
    ss["lesson"] = order[max(0, min(len(order) - 1, i + delta))]


def page(lab: Lab) -> None:
    found, broken = items()
    for b in broken:
        st.warning(_("A lesson file could not be loaded: {err}").format(err=plain(b)), icon=":material/error:")
    if not found:
        header(lab, _("Workshop"), _("No lessons found"))
        return
    by_slug = {lesson.slug: lesson for lesson in found}
    order = list(by_slug) + [RECAP]
    params = views.workshop_params(order)
    defaults = {"lesson": order[0], PRESENT: False}
    viewstate.seed(params, defaults)
    ss = st.session_state
    slug = ss["lesson"]
    lesson = by_slug.get(slug)
    at = starts(found)
    total = lessons.total_minutes(found, RECAP_MIN) + INTRO_MIN
    number = {s: n for n, s in enumerate(order, 1)}
    title = _(lesson.title) if lesson else _("Recap: every remedy on the same traffic")
    header(lab, _("Workshop"), _("{total} minutes in {n} lessons and a recap · now: {title}").format(
        total=total, n=len(found), title=title))

    recap_title = _("Recap: every remedy on the same traffic")
    names = {s: (f"{number[s]}. {_(by_slug[s].title)}" if s in by_slug else recap_title) for s in order}

    def minutes(s: str) -> int:
        return by_slug[s].minutes if s in by_slug else RECAP_MIN

    with st.container(border=True):
        c1, c2, c3, c4 = st.columns([4.4, 1.7, 1.7, 2.2], vertical_alignment="bottom")
        mins = _("{m} min")
        c1.selectbox(_("Lesson"), order, format_func=lambda s: f"{names[s]} · {mins.format(m=minutes(s))}",
                     key="lesson")
        c2.button(_("Previous"), icon=":material/arrow_back:", width="stretch", disabled=slug == order[0],
                  on_click=_step, args=(order, -1))
        c3.button(_("Next"), icon=":material/arrow_forward:", width="stretch", disabled=slug == order[-1],
                  on_click=_step, args=(order, 1))
        c4.toggle(_("Presenter mode"), key=PRESENT,
                  help=_("Shows the agenda with its time boxes, and lets you run a lesson without a "
                         "prediction."))
    viewstate.publish(params, defaults)
    present = ss[PRESENT]
    room = room_view.resolve(lab)
    room_view.bar(room, present)
    if present:
        with st.expander(_("Agenda: {total} minutes").format(total=total), icon=":material/schedule:", expanded=False):
            st.dataframe(agenda(found), hide_index=True, width="stretch")
    if lesson is None:
        show_recap(lab)
    else:
        show_lesson(lab, lesson, number[slug], at[slug], present, room)
    _share_box(lab)
    st.divider()
    handout_button(found)


def _share_box(lab: Lab) -> None:
    with st.expander(_("Link to this lesson"), icon=":material/link:"):
        if lab.uploaded:
            st.write(_("An uploaded scenario cannot travel in a link."))
        else:
            st.caption(_("Opens the Workshop at this lesson, with the sidebar's scenario as it is now:"))
            st.code(share_url(lab), language=None, wrap_lines=True)


def _results(lesson: lessons.Lesson):
    scs = lesson.scenarios()
    return scs, [runs.result(sc) for sc in scs]


def _sweep_done(lesson: lessons.Lesson) -> dict[str, dict]:
    p = lesson_charts.sweep_plan(lesson)
    if p is None:
        return {}
    with st.spinner(_("Running {n} points of the P99 curve…").format(n=len(p.keys))):
        done, _failed = runs.summaries(p.keys, purpose="ws-sweep")
    return done


def _run(base: lessons.Lesson, room: str | None, present: bool) -> None:
    """on_click of Run: the reveal opens; in a room a participant's prediction is stored first."""
    ss = st.session_state
    ss[f"ws_ran_{base.slug}"] = True
    if room is None or present:
        return
    typed = ss.get(f"ws_est_{base.slug}")
    value = estimates.from_input(base.estimate, typed) if base.estimate and typed is not None else None
    curve = [ss.get(f"ws_curve_{base.slug}_{i}") for i in range(len(base.curve["at"]))] if base.curve else None
    err = room_view.submit(room, base.slug, ss.get(f"ws_q_{base.slug}"), value, curve)
    ss[f"ws_sent_{base.slug}"] = err or ""


def show_lesson(lab: Lab, base: lessons.Lesson, n: int, start: int, present: bool, room: str | None = None) -> None:
    lesson = lessons.localized(base)
    ss = st.session_state
    st.subheader(f"{n}. {lesson.title}")
    st.caption(_("{m} minutes · from minute {start} · scenario {name} · {runs} run(s)").format(
        m=lesson.minutes, start=start, name=plain(base.scenario), runs=len(lesson.runs)))
    st.info(_("**Goal:** {goal}").format(goal=lesson.goal), icon=":material/flag:")
    _sidebar_note(lab, base)
    st.markdown(lesson.body)
    labels = [label for label, _o in lesson.runs]
    est = base.estimate
    ran_key = f"ws_ran_{base.slug}"
    ran = ss.get(ran_key, False)
    with st.container(border=True):
        guess = st.radio(_("**Predict:** {q}").format(q=lesson.question), range(len(lesson.options)),
                         format_func=lambda i: lesson.options[i], index=None, key=f"ws_q_{base.slug}")
        if est is not None:
            st.number_input(estimates.question(est, labels), min_value=0.0, max_value=1e9, value=None,
                            step=0.1, format="%g", key=f"ws_est_{base.slug}", disabled=ran,
                            placeholder=_("a number; scored against {n} seeds after the reveal").format(
                                n=lesson_evidence.SEEDS))
        if base.curve is not None:
            _curve_inputs(base, ran)
        c1, c2 = st.columns(2)
        c1.button(_("Run"), key=f"ws_run_{base.slug}", icon=":material/play_arrow:", type="primary", width="stretch",
                  disabled=guess is None and not ran and not present, on_click=_run, args=(base, room, present),
                  help=_("Make a prediction first") if guess is None and not present else None)
        c2.button(_("Load this lesson's scenario"), key=f"ws_load2_{base.slug}", icon=":material/input:",
                  width="stretch", on_click=_load, args=(base,),
                  help=_("Sets the sidebar to this lesson's last configuration, to explore further; "
                         "“Back to your scenario” puts yours back"))
    sent = ss.get(f"ws_sent_{base.slug}")
    if room is not None and not present and sent is not None:
        if sent:
            st.warning(_("Your prediction could not be sent to the room: {err}").format(err=plain(sent)),
                       icon=":material/error:")
        else:
            st.caption(_("Your prediction is in room {code}.").format(code=room))
    band = lesson_evidence.estimate_band(base.slug, est)
    if not ran:
        if room is not None and present:
            room_view.live(room, base.slug, est, band, list(lesson.options), lambda: None, _room_curve(base))
        return
    scs, results = _results(base)
    right = lesson.options[lesson.answer]
    if guess == lesson.answer:
        st.success(_("Your prediction matches the simulation: **{answer}**").format(answer=right),
                   icon=":material/check_circle:")
    else:
        st.info(_("The simulation says: **{answer}**").format(answer=right), icon=":material/lightbulb:")
    done = _sweep_done(base)
    fig = lesson_charts.figure(base, scs, results, labels, done)
    st.plotly_chart(fig, key=f"ws_fig_{base.slug}", theme=None, config={"displaylogo": False})
    st.markdown(lessons.fill(lesson.reveal, results))
    if est is not None:
        _estimate_score(base, est, band, results)
    if base.curve is not None:
        _curve_score(base, scs, done)
    if room is not None and present:
        value = estimates.actual(est, results) if est is not None else None
        room_view.live(room, base.slug, est, band, list(lesson.options), lambda: (base.answer, value),
                       _room_curve(base, done))
    st.table(lessons.reveal_table(lesson, results))  # static, cells wrap: four runs' columns fit at 1280 px
    if lesson.article:
        article_note(lesson, results)
    with st.expander(_("Claims this lesson makes: here, and over 20 seeds"), icon=":material/fact_check:"):
        st.caption(_("Each claim on the run above (✓ or ✗), then how often it held on the lesson's seed and the next "
                     "19 at 0.9×, 1× and 1.1× the load (`lessons/evidence.json`, written by "
                     "`python -m ui.teach.lesson_evidence`)."))
        for line in claim_lines(base, results, labels):
            st.markdown(line)
        if lesson.edge:
            st.info(_("**On an edge:** {why}").format(why=lesson.edge), icon=":material/warning:")
    if base.sizing:
        from ..panels.sizing_view import panel

        panel(lab)
    if lesson.prompts:  # after the reveal, in presenter mode too: a prompt may name the answer
        _prompts(lesson)


def curve_question(base: lessons.Lesson) -> str:
    """"Draw your curve" in words (Markdown): the metric, the knob and its unit."""
    from ..runtime.sweeps import KNOBS

    knob = KNOBS[base.chart["knob"]]
    return _("**Draw your curve:** {metric} (s) at these values of the {knob} ({unit})").format(
        metric=lessons.metric_label(base.curve["metric"]), knob=_(knob.label).lower() if language() == "en"
        else _(knob.label), unit=_(knob.unit))


def _curve_inputs(base: lessons.Lesson, ran: bool) -> None:
    """"Draw your curve": one number per point of the sweep, before the reveal."""
    st.markdown(curve_question(base))
    cols = st.columns(len(base.curve["at"]))
    for i, (col, v) in enumerate(zip(cols, base.curve["at"])):
        col.number_input(f"{v:,g}", min_value=0.0, max_value=1e6, value=None, step=0.1, format="%g",
                         key=f"ws_curve_{base.slug}_{i}", disabled=ran)


def _curve_score(base: lessons.Lesson, scs, done: dict) -> None:
    """The drawn curve against each point's seed band, with the run shown, as words and a figure."""
    from ..charts.fig_curve import curve_figure
    from ..runtime.sweeps import KNOBS

    bands = lesson_evidence.curve_bands(base.slug, base.curve)
    if bands is None:
        st.caption(_("*Not in the seed audit yet (the lesson changed since it ran).*"))
        return
    ss = st.session_state
    typed = [ss.get(f"ws_curve_{base.slug}_{i}") for i in range(len(base.curve["at"]))]
    points = estimates.curve_points(base.curve, bands, typed)
    shown = _curve_shown(base, done)
    knob = KNOBS[base.chart["knob"]]
    if all(g is None for g in typed):  # nothing drawn (presenter mode runs without): the chart above says it
        return
    st.markdown(estimates.curve_words(points, bands["seeds"]))
    st.plotly_chart(curve_figure(points, shown, f"{_(knob.label)} ({_(knob.unit)})",
                                 _("{metric} (s)").format(metric=lessons.metric_label(base.curve["metric"]))),
                    key=f"ws_curve_fig_{base.slug}", theme=None, config={"displaylogo": False})


def _curve_shown(base: lessons.Lesson, done: dict) -> list[float | None]:
    """The run's value at each point of the lesson's curve (None where its sweep point is not back)."""
    from ..runtime.sweeps import frame

    cls = base.curve["metric"].split(".", 1)[0]
    table = frame(lesson_charts.sweep_plan(base), done)
    mine = table[(table["class"] == cls)]
    shown = []
    for v in base.curve["at"]:
        hit = mine[mine["value"] == float(v)]["ttft_p99"]
        shown.append(float(hit.iloc[0]) if len(hit) else None)
    return shown


def _room_curve(base: lessons.Lesson, done: dict | None = None) -> dict | None:
    """What the presenter's live panel needs to draw the room's curves (None: the lesson asks for none)."""
    if base.curve is None:
        return None
    from ..runtime.sweeps import KNOBS

    knob = KNOBS[base.chart["knob"]]
    bands = lesson_evidence.curve_bands(base.slug, base.curve)
    return {"at": base.curve["at"], "x_label": f"{_(knob.label)} ({_(knob.unit)})",
            "y_label": _("{metric} (s)").format(metric=lessons.metric_label(base.curve["metric"])),
            "bands": bands["points"] if bands else None,
            "shown": _curve_shown(base, done) if done is not None else None}


def _estimate_score(base: lessons.Lesson, est: dict, band: dict | None, results) -> None:
    """The numeric prediction against the seed band, and the value on the run shown."""
    typed = st.session_state.get(f"ws_est_{base.slug}")
    here = _("On the run shown: {value}.").format(value=estimates.shown(est, estimates.actual(est, results)))
    if band is None:
        st.caption(here + " " + _("*Not in the seed audit yet (the lesson changed since it ran).*"))
        return
    if typed is None:
        st.caption(here + " " + estimates.band_words(est, band))
        return
    text = estimates.words(est, estimates.from_input(est, typed), band) + " " + here
    if estimates.score(estimates.from_input(est, typed), band["min"], band["max"]).inside:
        st.success(text, icon=":material/target:")
    else:
        st.info(text, icon=":material/straighten:")


def claim_lines(base: lessons.Lesson, results, labels: list[str]) -> list[str]:
    """One line per claim: the verdict on the shown run, in words, and its record over seeds."""
    out = []
    for claim, ev in zip(base.claims, lesson_evidence.of_lesson(base.slug, base.claims)):
        ok, sentence = lessons.check(claim, results, labels)
        mark = ":material/check:" if ok else ":material/close:"
        out.append(f"{mark} {plain(sentence)}  \n{evidence_words(ev)}")
    return out


def evidence_words(ev) -> str:
    if ev is None:
        return _("*Not in the seed audit yet (the lesson changed since it ran).*")
    holds = " · ".join(f"{x}×: {k}/{ev.seeds}" for x, k in ev.holds.items())
    text = _("*Held on {holds} seeds.*").format(holds=holds)
    if ev.fewest is not None and ev.fewest < 100:
        text += " " + _("*The percentile rests on {n} requests or more per seed (under 100: about their "
                        "maximum).*").format(n=ev.fewest)
    return text


def _sidebar_note(lab: Lab, base: lessons.Lesson) -> None:
    """Where the sidebar stands against the lesson: the lesson's runs never depend on it."""
    ss = st.session_state
    before = ss.get(BEFORE)
    c1, c2 = st.columns([4, 1.6], vertical_alignment="center")
    if before is not None:
        c1.caption(_("The sidebar holds a lesson's scenario ({name}); yours ({yours}) is kept.").format(
            name=plain(lab.preset), yours=plain(_("an uploaded scenario") if before[2] else before[0])))
        c2.button(_("Back to your scenario"), key=f"ws_back_{base.slug}", icon=":material/undo:", width="stretch",
                  on_click=_back)
    elif lab.uploaded or lab.preset != base.scenario:
        c1.caption(_("This lesson runs {lesson} on its own; the sidebar keeps your scenario ({name}).").format(
            lesson=plain(base.scenario), name=plain(_("an uploaded scenario") if lab.uploaded else lab.preset)))
        c2.button(_("Load this lesson's scenario"), key=f"ws_load_{base.slug}", icon=":material/input:",
                  width="stretch", on_click=_load, args=(base,))


def article_note(lesson: lessons.Lesson, results) -> None:
    a = lesson.article
    k0, k1 = a["runs"]
    v0, v1 = (lessons.metric(results[k], a["metric"]) for k in (k0, k1))
    st.markdown(_("**The article's example, next to the simulation.** The article (illustrative numbers): "
                  "{metric} {says}. Simulated here ({r0} → {r1}): {v0} → {v1}.").format(
        metric=lessons.metric_label(a["metric"]).lower() if language() == "en" else lessons.metric_label(a["metric"]),
        says=a["says"], r0=lesson.runs[k0][0], r1=lesson.runs[k1][0],
        v0=lessons.fmt_metric(a["metric"], v0), v1=lessons.fmt_metric(a["metric"], v1)))


def _prompts(lesson: lessons.Lesson) -> None:
    st.markdown(_("**Discuss**") + "\n" + "\n".join(f"{i}. {p}" for i, p in enumerate(lesson.prompts, 1)))


def recap_runs(n: int) -> list[list]:
    """Every remedy's N seeds (`RunSamples`, from the page workers; shared by every session)."""
    per = recap.keys(n)
    flat = [k for ks in per for k in ks]
    with st.spinner(_("Running every remedy on the same traffic…")):
        done, failed = runs.samples(flat, purpose="ws-recap")
    if failed or len(done) < len(set(flat)):
        raise RuntimeError(next(iter(failed.values()), "timed out"))
    return [[done[k] for k in ks] for ks in per]


def show_recap(lab: Lab) -> None:
    st.subheader(_("Recap: every remedy on the same traffic"))
    title = load_shipped(recap.TRAFFIC).get("title", recap.TRAFFIC)
    st.caption(_("Traffic: {name}. P0's SLO is 1 s. Cost columns: P1's P99 TTFT, P2's P99 end to end, the "
                 "served rate (the offered load when everything finishes, not a capacity) and GPUs; the capacity "
                 "each remedy leaves is below.").format(name=plain(_(title))))
    st.caption(_("Over seeds {seeds}: each percentile pools every seed's requests, the seeds' min–max in brackets "
                 "(“n < 100”: a seed had fewer requests, its P99 is about their maximum); SLO met: all seeds' "
                 "requests within it / all; served rate: the mean; not served: over every seed.").format(
        seeds=seed_list(default_seeds(recap.scenarios()[0].seed, lab.seeds))))
    try:
        t = recap.table(recap_runs(lab.seeds))
    except RuntimeError as err:
        st.warning(_("The recap could not run: {err}").format(err=plain(err)), icon=":material/error:")
        return
    st.plotly_chart(remedies_bars(t, 1.0), key="ws_recap_fig", theme=None, config={"displaylogo": False})
    st.table(recap.shown(t), hide_index=True)  # static, cells wrap: every row and column shows at 1280 px
    st.markdown(_("**What each remedy costs, as capacity**"))
    if st.toggle(_("Search every remedy's capacity"), key="ws_recap_cap",
                 help=_("Eleven capacity searches in the background; the decision below searches only its own "
                        "candidates'.")):
        scs = recap.scenarios()  # searched in the background, over the sidebar's seeds per figure
        capacity_live.show({_(label): sc for (label, _o), sc in zip(recap.REMEDIES, scs)}, _(recap.REMEDIES[0][0]),
                           tuple(default_seeds(scs[0].seed, lab.seeds)), "ws_recap_capacity")
    st.divider()
    from .decision_view import panel

    panel(lab)  # the workshop ends with a decision
    st.markdown(_("**Discuss**") + "\n" + "\n".join(f"{i}. {p}" for i, p in enumerate([
        _("Which remedies protect P0 without taking capacity from anyone? Which ones move the wait to P2?"),
        _("Which of them would you try first on your own traffic, and what would you measure before?"),
        _("Where did the workshop's numbers surprise you?")], 1)))


@st.cache_data(show_spinner=False, max_entries=4)
def _handout(stamp: tuple, lang: str, answers: bool = True) -> str:
    from ..frame import i18n

    i18n.set_language(lang)  # the cached call runs on this script thread with its language
    found, _broken = lessons.safe_lessons()
    at = starts(found)
    sections = []
    for n, base in enumerate(found, 1):
        lesson = lessons.localized(base)
        labels = [label for label, _o in lesson.runs]
        if not answers:  # the participants' copy: the questions only, nothing run
            sections.append(handout.lesson_html(n, lesson, at[base.slug], None, None, [], None, answers=False,
                                                asked=numbers_asked(base, labels)))
            continue
        scs, results = _results(base)
        lesson = replace(lesson, reveal=lessons.fill(lesson.reveal, results))
        p = lesson_charts.sweep_plan(base)
        done = runs.summaries(p.keys, purpose="ws-sweep")[0] if p else {}
        fig = lesson_charts.figure(base, scs, results, labels, done)
        claims = [lessons.check(c, results, labels) for c in base.claims]
        note = None
        if lesson.article:
            a = lesson.article
            vals = [lessons.fmt_metric(a["metric"], lessons.metric(results[k], a["metric"])) for k in a["runs"]]
            note = _("The article (illustrative): {says}. Simulated: {v0} → {v1}.").format(
                says=a["says"], v0=vals[0], v1=vals[1])
        sections.append(handout.lesson_html(n, lesson, at[base.slug], lessons.reveal_table(lesson, results), fig,
                                            claims, note, asked=numbers_asked(base, labels, results, done)))
    total = lessons.total_minutes(found, RECAP_MIN) + INTRO_MIN
    if not answers:
        return handout.document(sections, agenda(found), None, None, total, answers=False)
    t = recap.table(recap_runs(DEFAULT_SEEDS))  # the handout's recap: over the pages' default seeds
    return handout.document(sections, agenda(found), recap.shown(t), remedies_bars(t, 1.0), total)


def numbers_asked(base: lessons.Lesson, labels: list[str], results=None, done: dict | None = None
                  ) -> list[handout.NumberAsked]:
    """The lesson's numbers to predict as the handout asks them: the estimate's question and, for a
    sweep lesson, the curve's; with `results` (the presenter's copy) each with its band over the
    seeds and the run's own value."""
    out = []
    est = base.estimate
    if est is not None:
        answer = ()
        if results is not None:
            band = lesson_evidence.estimate_band(base.slug, est)
            here = _("On the run shown: {value}.").format(value=estimates.shown(est, estimates.actual(est, results)))
            answer = ((estimates.band_words(est, band) + " " if band else "") + here,)
        out.append(handout.NumberAsked(estimates.question(est, labels), answer=answer))
    if base.curve is not None:
        question = curve_question(base)
        at = tuple(f"{v:,g}" for v in base.curve["at"])
        answer = ()
        bands = lesson_evidence.curve_bands(base.slug, base.curve) if results is not None else None
        if bands is not None:
            fmt = lessons.fmt_metric
            m = base.curve["metric"]
            answer = tuple(_("{lo}–{hi} (median {median})").format(
                lo=fmt(m, b["min"]), hi=fmt(m, b["max"]), median=fmt(m, b["median"])) for b in bands["points"])
        out.append(handout.NumberAsked(question, at, answer))
    return out


def handout_button(found: list[lessons.Lesson]) -> None:
    c1, c2 = st.columns([2, 3], vertical_alignment="center")
    ss = st.session_state
    key = (lessons.stamp(), language())
    if c1.button(_("Prepare the handouts"), icon=":material/description:", width="stretch",
                 help=_("Two HTML files: the participants' copy (each lesson's question, no answers) and the "
                        "presenter's copy (every lesson with its answer, numbers, chart and claims, and the recap). "
                        "Runs what has not run yet: up to a minute the first time.")):
        with st.spinner(_("Running every lesson…")):
            ss["_ws_handout"] = (key, _handout(*key, answers=False), _handout(*key, answers=True))
    ready = ss.get("_ws_handout")
    if ready and ready[0] == key:
        c2.download_button(_("Participants' copy (HTML, no answers)"), ready[1],
                           file_name=f"inversion-lab-workshop-{key[1]}.html", mime="text/html",
                           icon=":material/download:", on_click="ignore", width="stretch", key="ws_handout_part")
        c2.download_button(_("Presenter's copy (HTML, with answers)"), ready[2],
                           file_name=f"inversion-lab-workshop-{key[1]}-presenter.html", mime="text/html",
                           icon=":material/download:", on_click="ignore", width="stretch", key="ws_handout_pres")
    else:
        c2.caption(_("A participants' copy without answers and a presenter's copy with them, in this language."))
