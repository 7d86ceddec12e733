"""The scenario controls in the sidebar, bound to the URL, and how they stay truthful.

Controls are keyed by the codec's short names with `bind="query-params"`, so the URL always holds
exactly the values that differ from the preset. Three rules keep a control from ever showing a
value the results do not reflect:
- a link is judged once, before any control reads it (`ui.frame.links`): bad values leave the URL with
  a note naming them, and the page reruns on the cleaned URL;
- a change is checked in the control's `on_change` callback (`ui.frame.limits.why_not`); one that cannot
  run is refused there: the control returns to the last value that ran and says why, beside it;
- should a run still fail, every control returns to the last values that ran (one rerun).
Presets, Reset, uploads and the workshop's "Load this scenario" change controls only through
callbacks that set `st.session_state` before the widgets render.
"""

from __future__ import annotations

import functools
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from engine import ScenarioError, TraceError, scenario_names, to_yaml
from engine.config.scenario import load_shipped

from ..runtime import runs
from . import codec as codec_mod
from . import credits, i18n, limits, links, seeds, uploads
from .codec import DEFAULTS_HELP, POLICY_UPSTREAM, Codec, Param
from .i18n import N_, _
from .lab import PAGES, Lab
from .untrusted import plain
from .views import VIEW_KEYS

UPLOAD_KEY = "_upload_raw"
RAN = "_ran"  # the control values of the last run that succeeded
REFUSED = "_refused"  # (control, message) of a change that was refused
REVERT = "_revert"  # a message: the last run failed and the controls went back
LINK_NOTES = "_link_notes"
LANG_KEY = "lang"  # the language switch (ui.frame.i18n), bound to the URL like the controls
SECTIONS = {"sched": (N_("Scheduler"), ":material/schedule:"), "mit": (N_("Mitigations"), ":material/shield:"),
            "src": (N_("Arrivals"), ":material/input:"),
            "hw": (N_("GPU and model"), ":material/memory:"), "run": (N_("Run"), ":material/casino:")}


@lru_cache(maxsize=32)
def preset_codec(preset: str) -> Codec:
    """The codec of a shipped preset (files do not change while the app runs)."""
    return Codec(load_shipped(preset))


def base_raw(preset: str) -> dict:
    """The mapping the controls are relative to: an uploaded scenario, or the preset file."""
    return st.session_state.get(UPLOAD_KEY) or load_shipped(preset)


def codec_of(preset: str) -> Codec:
    raw = st.session_state.get(UPLOAD_KEY)
    return Codec(raw) if raw else preset_codec(preset)


def set_controls(preset: str, values: dict | None = None, raw: dict | None = None) -> None:
    """Callback helper: point every control at `preset` (or `raw`) plus `values` (short names)."""
    ss = st.session_state
    ss[codec_mod.PRESET_KEY] = preset
    c = Codec(raw) if raw else preset_codec(preset)
    for key, default in c.defaults.items():
        ss[key] = default
    for key, v in (values or {}).items():
        if key in c.defaults:
            ss[key] = v
    ss[RAN] = {**c.defaults, **{k: v for k, v in (values or {}).items() if k in c.defaults}}
    for k in (REFUSED, LINK_NOTES, REVERT):
        ss.pop(k, None)


def load_scenario(preset: str, values: dict | None = None) -> None:
    """on_click target: drop any upload and load a preset with some controls changed."""
    st.session_state.pop(UPLOAD_KEY, None)
    set_controls(preset, values)


def snapshot() -> tuple[str, dict, dict | None]:
    """The sidebar's scenario as it stands — (preset, changed controls, the upload or None) — to
    come back to after a page loaded another (the workshop's "Load this lesson's scenario")."""
    ss = st.session_state
    preset = ss.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET)
    c = codec_of(preset)
    return preset, c.changed({k: ss.get(k, d) for k, d in c.defaults.items()}), ss.get(UPLOAD_KEY)


def restore(snap: tuple[str, dict, dict | None]) -> None:
    """on_click target: put back a `snapshot`, upload included."""
    preset, values, raw = snap
    st.session_state.pop(UPLOAD_KEY, None)
    if raw:
        st.session_state[UPLOAD_KEY] = raw
    set_controls(preset, values, raw=raw)


def in_page_language(callback):
    """Callbacks run before the page's script sets its language (`ui.frame.state`), so a refusal or an
    upload error written in one would come out in English on a Chinese page."""
    @functools.wraps(callback)
    def run(*args, **kwargs):
        i18n.set_language(st.session_state.get(LANG_KEY))
        return callback(*args, **kwargs)

    return run


@in_page_language
def _on_preset() -> None:
    st.session_state.pop(UPLOAD_KEY, None)
    set_controls(st.session_state[codec_mod.PRESET_KEY])


@in_page_language
def _on_reset() -> None:
    preset = st.session_state.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET)
    set_controls(preset, raw=st.session_state.get(UPLOAD_KEY))


@in_page_language
def _on_control(short: str) -> None:
    """on_change of every control: accept the new value only if the scenario can run with it."""
    ss = st.session_state
    ss.pop(LINK_NOTES, None)
    ss.pop(REVERT, None)
    c = codec_of(ss.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET))
    values = {p.short: ss.get(p.short, c.defaults[p.short]) for p in c.params}
    try:
        reason = limits.why_not(c.scenario(values))
    except ScenarioError as err:
        reason = str(err)
    if reason is None:
        ss.pop(REFUSED, None)
        return
    ran = ss.get(RAN) or c.defaults
    back = ran.get(short, c.defaults[short])
    p = c.by_short[short]
    ss[short] = back
    ss[REFUSED] = (short, _("{value} cannot run: {reason}. Back to {back}, the last value that ran.").format(
        value=plain(codec_mod.fmt_value(p, values[short])), reason=plain(reason),
        back=plain(codec_mod.fmt_value(p, back))))


def _judge_link(page: str, presets: list[str]) -> None:
    """First run of a session: sort the link's parameters; clean the URL and rerun if needed."""
    ss = st.session_state
    ss["_link_checked"] = True
    query = {k: st.query_params.get_all(k) for k in st.query_params}
    if not query:
        return
    verdict = links.check_link(query, presets, preset_codec,
                               VIEW_KEYS.get(page, frozenset()) | {LANG_KEY, seeds.KEY})
    values, notes = links.runnable_subset(preset_codec(verdict.preset), verdict.values, _why_not_run) \
        if verdict.values else ({}, [])
    drop = verdict.drop | (set(verdict.values) - set(values))
    _n, bad = links.check_seeds(verdict.view.get(seeds.KEY), 1, seeds.MAX, seeds.DEFAULT)
    if bad:  # before the bound control reads it: Streamlit would drop it silently
        notes.append(bad)
        drop.add(seeds.KEY)
    if verdict.notes or notes:
        ss[LINK_NOTES] = verdict.notes + notes
    if drop or verdict.set:
        for k in drop:
            if k in st.query_params:
                del st.query_params[k]
        for k, v in verdict.set.items():
            if k not in drop:
                st.query_params[k] = v
        st.rerun()  # the controls read the cleaned URL


def _why_not_run(sc) -> str | None:
    """Why a link's scenario cannot run: the app's limits, then the run itself (cached, so the page
    reuses it). A value that makes the engine fail is judged here, before any control is bound to
    the URL: once a control is bound, Streamlit alone may change its parameter, and a control that
    went back on the session's first run would leave the failing value in the address bar."""
    reason = limits.why_not(sc)
    if reason is None:
        try:
            runs.result(sc)
        except (ScenarioError, TraceError) as err:
            return str(err)
    return reason


def _widget(box, p: Param, default, disabled: bool = False) -> None:
    help_ = _(p.help) if p.help else None
    if p.short == "policy":
        help_ = f"{help_} " + _("Upstream — {u}.").format(u=POLICY_UPSTREAM)
    elif p.short in ("budget", "seqs"):
        help_ = f"{help_} " + _(DEFAULTS_HELP)
    kw = dict(key=p.short, bind="query-params", help=help_, on_change=_on_control, args=(p.short,), disabled=disabled)
    label = _(p.label)
    if p.kind == "choice":
        if len(p.options) == 2:
            box.radio(label, p.options, index=p.options.index(default), horizontal=True, **kw)
        else:
            box.selectbox(label, p.options, index=p.options.index(default), **kw)
    elif p.kind == "ints":
        box.text_input(label, value=default, max_chars=40, **kw)
    elif p.kind == "bool":
        box.toggle(label, value=default, **kw)
    elif p.short == "reserve":
        box.slider(label, int(p.lo), int(p.hi), int(default), int(p.step), **kw)
    elif p.kind == "int":
        box.number_input(label, int(p.lo), int(p.hi), int(default), int(p.step), **kw)
    else:
        box.number_input(label, float(p.lo), float(p.hi), float(default), float(p.step), format="%g", **kw)
    refused = st.session_state.get(REFUSED)
    if refused and refused[0] == p.short:
        box.error(refused[1], icon=":material/block:")


def _controls(c: Codec) -> dict:
    by_section: dict[str, list[Param]] = {}
    for p in c.params:
        by_section.setdefault(p.section, []).append(p)
    refused = (st.session_state.get(REFUSED) or ("", ""))[0]
    sections = {p.short: p.section for p in c.params}

    def box_for(title: str, icon: str, sec: str, expanded: bool):
        return st.sidebar.expander(_(title), icon=icon, expanded=expanded or sections.get(refused) == sec)

    sb = st.sidebar
    for sec in ("sched", "mit"):
        title, icon = SECTIONS[sec]
        box = box_for(title, icon, sec, True)
        for p in by_section.get(sec, []):
            _widget(box, p, c.defaults[p.short])
    source = _arrivals(c, by_section.get("src", []), box_for)
    sb.caption(_("Traffic per class (priority: lower number = more important, as in vLLM)"))
    replaced = source is not None and not c.own_trace
    if replaced:
        sb.caption(_("The trace sets every class's arrivals and lengths; the mapping above decides the classes."))
    for name in c.class_names:
        prio = (c.raw["classes"][name] or {}).get("priority", 0)
        box = box_for(_("{cls} · priority {prio}").format(cls=name, prio=prio), ":material/group:", f"class:{name}",
                      False)
        for p in by_section.get(f"class:{name}", []):
            _widget(box, p, c.defaults[p.short], disabled=replaced and p.synthetic)
    for sec in ("hw", "run"):
        title, icon = SECTIONS[sec]
        box = box_for(title, icon, sec, False)
        for p in by_section.get(sec, []):
            _widget(box, p, c.defaults[p.short])
    box = box_for(N_("More engine knobs"), ":material/tune:", "adv", False)
    for p in by_section.get("adv", []):
        _widget(box, p, c.defaults[p.short])
    return {p.short: st.session_state[p.short] for p in c.params}


def _arrivals(c: Codec, params: list[Param], box_for) -> str | None:
    """The arrival source (synthetic or a shipped trace) with the trace's attribution under it, then
    its class mapping (idle while the source is synthetic). Returns the shipped trace in use, if any."""
    if not params:
        return None
    ss = st.session_state
    asked = ss.get("trace", st.query_params.get("trace", c.defaults["trace"]))  # before the bound widget ran
    box = box_for(*SECTIONS["src"], "src", c.trace_source({"trace": asked}) is not None)
    _widget(box, params[0], c.defaults["trace"])
    source = c.trace_source({"trace": ss["trace"]})
    if source is not None:
        box.caption(credits.attribution(source))
    for p in params[1:]:
        _widget(box, p, c.defaults[p.short], disabled=source is None)
    return source


def _revert_if_asked(c: Codec) -> None:
    """Before the widgets: the previous run failed, so every control goes back to what last ran."""
    ss = st.session_state
    target = ss.pop("_revert_to", None)
    if target is not None:
        for k, v in target.items():
            if k in c.defaults:
                ss[k] = v


def render(page: str, eager: bool = True) -> tuple[Lab, object]:
    """Draw the sidebar, resolve and run the scenario; returns the Lab and the Share box."""
    ss = st.session_state
    presets = scenario_names()
    if "_link_checked" not in ss:
        _judge_link(page, presets)
    sb = st.sidebar
    sb.selectbox(_("Scenario"), presets, index=presets.index(codec_mod.DEFAULT_PRESET), key=codec_mod.PRESET_KEY,
                 bind="query-params", on_change=_on_preset, help=_("A shipped scenario; the controls start from it."))
    preset = ss[codec_mod.PRESET_KEY]
    uploaded = UPLOAD_KEY in ss
    c = codec_of(preset)
    _revert_if_asked(c)
    if uploaded:
        sb.info(_("Using the uploaded scenario {name}").format(name=plain(c.raw.get("name", "uploaded"))),
                icon=":material/upload_file:")
    cols = sb.columns(2)
    cols[1].button(_("Reset"), icon=":material/restart_alt:", on_click=_on_reset, width="stretch",
                   help=_("Back to the preset's values"))
    share_box = cols[0].popover(_("Share"), icon=":material/link:", width="stretch")
    if msg := ss.get(REVERT):
        sb.error(msg, icon=":material/undo:")
    n_seeds = sb.number_input(
        _("Seeds per figure"), 1, seeds.MAX, seeds.DEFAULT, 1, key=seeds.KEY, bind="query-params",
        help=_("Every number the pages conclude is over this many runs: the scenario's seed (the one the charts "
               "draw) and the next ones. It shows the value over all of them, the seeds' min–max, and how many "
               "requests a percentile rests on."))
    values = _controls(c)
    sc, res = _run(c, values, eager)
    ss[RAN] = values
    lab = Lab(preset, c.raw, c, values, sc, c.encode(values, preset), uploaded,
              notes=list(ss.get(LINK_NOTES, [])), seeds=int(n_seeds), fetch=runs.result)
    if lab.seeds != seeds.DEFAULT:
        lab.share[seeds.KEY] = str(lab.seeds)
    if res is not None:
        lab.result = res  # already fetched: the page does not unpickle it again
    _files(lab)
    credits.data_notes(st.sidebar.expander(_("Data and licences"), icon=":material/dataset:"))
    return lab, share_box


def _run(c: Codec, values: dict, eager: bool):
    """The controls' scenario (and, if `eager`, its run); if it cannot run, go back to the last
    values that ran."""
    ss = st.session_state
    try:
        sc = c.scenario(values)
        reason = limits.why_not(sc)
        if reason is None:
            return sc, (runs.result(sc) if eager else None)
    except (ScenarioError, TraceError) as err:
        reason = str(err)
    ran = ss.get(RAN) or c.defaults
    if ran == values:  # what last ran no longer runs (e.g. an upload changed): the preset's values
        ran = c.defaults
        if values == c.defaults:
            st.error(_("This scenario cannot run: {reason}").format(reason=plain(reason)), icon=":material/error:")
            st.stop()
    ss["_revert_to"] = ran
    ss[REVERT] = _("That combination cannot run ({reason}); the controls are back to the last values that ran.").format(
        reason=plain(reason))
    st.rerun()


def fill_share(box, lab: Lab) -> None:
    """The Share popover: this page with the scenario's and the view's settings."""
    with box:
        if lab.uploaded:
            st.write(_("An uploaded scenario cannot travel in a link: download its YAML instead."))
            return
        st.caption(_("This link opens this page with these settings (only values that differ from the preset):"))
        st.code(share_url(lab), language=None, wrap_lines=True)


def share_url(lab: Lab) -> str:
    url = st.context.url or "http://localhost:8501/"
    parts = urlsplit(url)
    known = {s.path for s in PAGES if s.url}
    root = parts.path or "/"
    last = root.rstrip("/").rsplit("/", 1)[-1]
    if last in known:  # the app's own page path: drop it, add the running page's
        root = root.rstrip("/")[: -len(last)]
    path = root.rstrip("/") + "/" + lab.page
    return urlunsplit((parts.scheme, parts.netloc, path, codec_mod.query_string({**lab.share, **lab.view}), ""))


def _files(lab: Lab) -> None:
    box = st.sidebar.expander(_("Import and export"), icon=":material/swap_vert:")
    box.download_button(_("Scenario (YAML)"), lambda sc=lab.scenario: to_yaml(sc), f"{lab.scenario.name}.yaml",
                        "application/x-yaml", icon=":material/download:", on_click="ignore", width="stretch")
    box.download_button(_("Requests (CSV)"), lambda: lab.result.requests.to_csv(index=False), "requests.csv",
                        "text/csv", icon=":material/download:", on_click="ignore", width="stretch")
    box.download_button(_("Steps (CSV)"), lambda: lab.result.steps.to_csv(index=False), "steps.csv",
                        "text/csv", icon=":material/download:", on_click="ignore", width="stretch")
    box.file_uploader(_("Upload a scenario (YAML, ≤ 1 MB)"), type=["yaml", "yml"], key="_up_yaml",
                      on_change=_on_yaml_upload)
    box.file_uploader(_("Upload a trace (CSV/JSONL, ≤ 20 MB)"), type=["csv", "jsonl", "json"], key="_up_trace",
                      on_change=_on_trace_upload)
    if err := st.session_state.pop("_upload_error", None):  # shown once: the next rerun starts clean
        box.error(plain(err), icon=":material/error:")
    if lab.uploaded:
        box.button(_("Discard the upload"), on_click=_on_reset_upload, width="stretch")


@in_page_language
def _on_yaml_upload() -> None:
    f = st.session_state.get("_up_yaml")
    if f is None:
        return
    up = uploads.try_scenario(f.name, f.getvalue())
    if up.error:  # the app keeps what it had: a refused upload changes nothing
        st.session_state["_upload_error"] = up.error
        return
    st.session_state.pop("_upload_error", None)
    st.session_state[UPLOAD_KEY] = up.raw
    set_controls(st.session_state.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET), raw=up.raw)


@in_page_language
def _on_trace_upload() -> None:
    f = st.session_state.get("_up_trace")
    if f is None:
        return
    preset = st.session_state.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET)
    up = uploads.try_trace(base_raw(preset), f.name, f.getvalue(), st.session_state)  # a folder per session
    if up.error:
        st.session_state["_upload_error"] = up.error
        return
    st.session_state.pop("_upload_error", None)
    st.session_state[UPLOAD_KEY] = up.raw
    set_controls(preset, raw=up.raw)


@in_page_language
def _on_reset_upload() -> None:
    st.session_state.pop(UPLOAD_KEY, None)
    st.session_state.pop("_upload_error", None)
    set_controls(st.session_state.get(codec_mod.PRESET_KEY, codec_mod.DEFAULT_PRESET))
