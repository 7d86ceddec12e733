"""The scenario controls in app.py's sidebar, bound to the URL, and the resolved `Lab` state.

Controls are keyed by the codec's short names with `bind="query-params"`, so the URL always holds
exactly the values that differ from the preset. Presets, Reset, uploads and the workshop's
"Load this scenario" change controls only through `on_click`/`on_change` callbacks that set
`st.session_state` before the widgets render.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from engine import Result, ScenarioError, TraceError, scenario_names, to_yaml
from engine.scenario import Scenario, load_raw
from engine.workload import expected_requests

from . import codec, runs, uploads

UPLOAD_KEY = "_upload_raw"
APP_MAX_REQUESTS = 50_000  # keeps one interactive run to a few seconds; the CLI has no such limit
_frame = threading.local()  # the Lab of the run in progress on this script thread
_RETRIED = "_lab_legacy_retried"
SECTIONS = {"sched": ("Scheduler", ":material/schedule:"), "mit": ("Mitigations", ":material/shield:"),
            "hw": ("GPU and model", ":material/memory:"), "run": ("Run", ":material/casino:")}


@dataclass
class Lab:
    """What every page reads: the scenario in effect, its preset, and link/fallback notes."""

    preset: str
    raw: dict
    values: dict
    scenario: Scenario
    result: Result
    share: dict[str, str]
    problems: list[str] = field(default_factory=list)
    uploaded: bool = False

    @property
    def top_class(self) -> str:
        return self.scenario.class_names[0]


def current() -> Lab:
    """The Lab resolved by app.py in this run (pages call this).

    A `pages/` folder next to app.py makes Streamlit take its legacy multipage code path until
    `st.navigation` has run once in the process (a fresh server's first request, and every
    AppTest run): the page file then runs on its own, without app.py. We switch that path off the
    way `st.navigation` itself does and rerun, so app.py frames the page; if that ever fails,
    the page draws the sidebar itself.
    """
    if getattr(_frame, "lab", None) is not None:
        return _frame.lab
    if not st.session_state.get(_RETRIED):
        from streamlit.runtime.pages_manager import PagesManager

        st.session_state[_RETRIED] = True
        PagesManager.uses_pages_directory = False
        st.rerun()
    return render()


def run_page(page) -> None:
    """app.py: draw the sidebar, then run the selected page inside the frame."""
    lab = render()
    st.session_state[_RETRIED] = False
    _frame.lab = lab  # per script run: each run has its own thread
    try:
        page.run()
    finally:
        _frame.lab = None


def base_raw(preset: str) -> dict:
    """The mapping the controls are relative to: an uploaded scenario, or the preset file."""
    return st.session_state.get(UPLOAD_KEY) or load_raw(preset)


def set_controls(preset: str, values: dict | None = None, raw: dict | None = None) -> None:
    """Callback helper: point every control at `preset` (or `raw`) plus `values` (short names)."""
    st.session_state[codec.PRESET_KEY] = preset
    raw = raw or load_raw(preset)
    defaults = codec.preset_values(raw)
    for key, default in defaults.items():
        st.session_state[key] = default
    for key, v in (values or {}).items():
        if key in defaults:
            st.session_state[key] = v


def load_scenario(preset: str, values: dict | None = None) -> None:
    """on_click target: drop any upload and load a preset with some controls changed."""
    st.session_state.pop(UPLOAD_KEY, None)
    set_controls(preset, values)


def _on_preset() -> None:
    st.session_state.pop(UPLOAD_KEY, None)
    set_controls(st.session_state[codec.PRESET_KEY])


def _on_reset() -> None:
    preset = st.session_state.get(codec.PRESET_KEY, codec.DEFAULT_PRESET)
    set_controls(preset, raw=base_raw(preset))


def _check_link(presets: list[str]) -> list[str]:
    """First run of a session: one message per bad URL parameter (the widget falls back)."""
    query = {k: st.query_params.get_all(k) for k in st.query_params}
    preset = (query.get(codec.PRESET_KEY) or [codec.DEFAULT_PRESET])[-1]
    raw = load_raw(preset if preset in presets else codec.DEFAULT_PRESET)
    _, problems = codec.decode(query, raw, presets)
    table = {p.short for p in codec.params_for(raw)} | {codec.PRESET_KEY}
    for k in query:
        if k not in table:
            del st.query_params[k]  # unbound, so allowed; keeps the share link clean
    return problems


def _widget(box, p: codec.Param, default) -> None:
    p = codec.widened(p, default)
    kw = dict(key=p.short, bind="query-params", help=p.help or None)
    if p.kind == "choice":
        if len(p.options) == 2:
            box.radio(p.label, p.options, index=p.options.index(default), horizontal=True, **kw)
        else:
            box.selectbox(p.label, p.options, index=p.options.index(default), **kw)
    elif p.kind == "ints":
        box.text_input(p.label, value=default, max_chars=40, **kw)
    elif p.kind == "bool":
        box.toggle(p.label, value=default, **kw)
    elif p.short == "reserve":
        box.slider(p.label, int(p.lo), int(p.hi), int(default), int(p.step), **kw)
    elif p.kind == "int":
        box.number_input(p.label, int(p.lo), int(p.hi), int(default), int(p.step), **kw)
    else:
        box.number_input(p.label, float(p.lo), float(p.hi), float(default), float(p.step), format="%g", **kw)


def _controls(raw: dict) -> dict:
    table = codec.params_for(raw)
    defaults = codec.preset_values(raw)
    by_section: dict[str, list[codec.Param]] = {}
    for p in table:
        by_section.setdefault(p.section, []).append(p)
    sb = st.sidebar
    for sec in ("sched", "mit"):
        title, icon = SECTIONS[sec]
        box = sb.expander(title, icon=icon, expanded=True)
        for p in by_section.get(sec, []):
            _widget(box, p, defaults[p.short])
    sb.caption("Traffic per class (priority: lower number = more important, as in vLLM)")
    for name in codec.class_names(raw):
        prio = (raw["classes"][name] or {}).get("priority", 0)
        box = sb.expander(f"{name} · priority {prio}", icon=":material/group:")
        for p in by_section.get(f"class:{name}", []):
            _widget(box, p, defaults[p.short])
    for sec in ("hw", "run"):
        title, icon = SECTIONS[sec]
        box = sb.expander(title, icon=icon)
        for p in by_section.get(sec, []):
            _widget(box, p, defaults[p.short])
    box = sb.expander("More engine knobs", icon=":material/tune:")
    for p in by_section.get("adv", []):
        _widget(box, p, defaults[p.short])
    return {p.short: st.session_state[p.short] for p in table}


def _share_url(params: dict[str, str]) -> str:
    url = st.context.url or "http://localhost:8501/"
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", codec.query_string(params), ""))


def render() -> Lab:
    """Draw the sidebar, resolve the scenario (falling back to the preset) and run it."""
    presets = scenario_names()
    problems: list[str] = []
    if "_link_checked" not in st.session_state:
        st.session_state["_link_checked"] = True
        problems = _check_link(presets)
    sb = st.sidebar
    sb.selectbox("Scenario", presets, index=presets.index(codec.DEFAULT_PRESET), key=codec.PRESET_KEY,
                 bind="query-params", on_change=_on_preset, help="A shipped scenario; the controls start from it.")
    preset = st.session_state[codec.PRESET_KEY]
    uploaded = UPLOAD_KEY in st.session_state
    raw = base_raw(preset)
    if uploaded:
        sb.info(f"Using the uploaded scenario `{raw.get('name', 'uploaded')}`", icon=":material/upload_file:")
    cols = sb.columns(2)
    cols[1].button("Reset", icon=":material/restart_alt:", on_click=_on_reset, width="stretch",
                   help="Back to the preset's values")
    share_box = cols[0].popover("Share", icon=":material/link:", width="stretch")
    values = _controls(raw)
    sc, fallback = _resolve(raw, values)
    if fallback:
        problems.append(fallback)
    res = runs.result(sc)
    share = codec.encode(values, raw, preset)
    with share_box:
        if uploaded:
            st.write("An uploaded scenario cannot travel in a link: download its YAML instead.")
        else:
            st.caption("This link reproduces the scenario (only values that differ from the preset):")
            st.code(_share_url(share), language=None, wrap_lines=True)
    lab = Lab(preset, raw, values, sc, res, share, problems, uploaded)
    _files(lab)
    if problems:
        st.warning("**Some settings from the link were not used:**\n\n" + "\n".join(f"- {p}" for p in problems),
                   icon=":material/link_off:")
    return lab


def _resolve(raw: dict, values: dict) -> tuple[Scenario, str | None]:
    """The controls' scenario, or the preset's when the combination cannot run (with why)."""
    try:
        sc = codec.scenario(raw, values)
        size = expected_requests(sc)
        if size > APP_MAX_REQUESTS:
            raise ScenarioError(f"it would simulate about {size:,.0f} requests; the app runs at most "
                                f"{APP_MAX_REQUESTS:,} (lower a rate or the duration, or use the CLI)")
        runs.result(sc)
        return sc, None
    except (ScenarioError, TraceError) as err:
        from engine import from_dict

        return from_dict(raw), f"This combination cannot run ({err}); showing the preset's values instead."


def _files(lab: Lab) -> None:
    box = st.sidebar.expander("Import and export", icon=":material/swap_vert:")
    box.download_button("Scenario (YAML)", to_yaml(lab.scenario), f"{lab.scenario.name}.yaml",
                        "application/x-yaml", icon=":material/download:", on_click="ignore", width="stretch")
    box.download_button("Requests (CSV)", lambda: lab.result.requests.to_csv(index=False), "requests.csv",
                        "text/csv", icon=":material/download:", on_click="ignore", width="stretch")
    box.download_button("Steps (CSV)", lambda: lab.result.steps.to_csv(index=False), "steps.csv",
                        "text/csv", icon=":material/download:", on_click="ignore", width="stretch")
    box.file_uploader("Upload a scenario (YAML, ≤ 1 MB)", type=["yaml", "yml"], key="_up_yaml",
                      on_change=_on_yaml_upload)
    box.file_uploader("Upload a trace (CSV/JSONL, ≤ 20 MB)", type=["csv", "jsonl", "json"], key="_up_trace",
                      on_change=_on_trace_upload)
    if err := st.session_state.get("_upload_error"):
        box.error(err, icon=":material/error:")
    if lab.uploaded:
        box.button("Discard the upload", on_click=_on_reset_upload, width="stretch")


def _on_yaml_upload() -> None:
    f = st.session_state.get("_up_yaml")
    if f is None:
        return
    try:
        raw = uploads.scenario_from_upload(f.name, f.getvalue())
    except (ScenarioError, TraceError) as err:
        st.session_state["_upload_error"] = str(err)
        return
    st.session_state.pop("_upload_error", None)
    st.session_state[UPLOAD_KEY] = raw
    set_controls(st.session_state.get(codec.PRESET_KEY, codec.DEFAULT_PRESET), raw=raw)


def _on_trace_upload() -> None:
    f = st.session_state.get("_up_trace")
    if f is None:
        return
    preset = st.session_state.get(codec.PRESET_KEY, codec.DEFAULT_PRESET)
    try:
        raw = uploads.with_trace(base_raw(preset), f.name, f.getvalue())
    except (ScenarioError, TraceError) as err:
        st.session_state["_upload_error"] = str(err)
        return
    st.session_state.pop("_upload_error", None)
    st.session_state[UPLOAD_KEY] = raw
    set_controls(preset, raw=raw)


def _on_reset_upload() -> None:
    st.session_state.pop(UPLOAD_KEY, None)
    st.session_state.pop("_upload_error", None)
    set_controls(st.session_state.get(codec.PRESET_KEY, codec.DEFAULT_PRESET))
