"""Each page's view settings as `Param`s: what a share link carries besides the scenario.

The sidebar's controls describe the scenario; these describe how a page looks at it (a sweep's
knob and range, the timeline's filters and picked request, Compare's configurations, the
workshop's lesson). They use the same `Param` type and `parse` as the controls, so a bad value
in a link is refused the same way, with a note naming it. Pure: no streamlit import.
"""

from __future__ import annotations

from .codec import POLICIES, Param
from .i18n import _

STORE = "_views"  # session state: each page's view settings (`ui.frame.viewstate`)
CONFIG_FIELDS = ("name", "pol", "res", "kv", "inh", "cap")
COMPARE_SLOTS = (2, 3)  # column 1 is always the sidebar's scenario

VIEW_KEYS: dict[str, frozenset[str]] = {
    "p99": frozenset({"sw_knob", "sw_cls", "sw_from", "sw_to", "sw_pts"}),
    "timeline": frozenset({"tl_show", "tl_cls", "tl_from", "tl_to", "tl_req"}),
    "compare": frozenset({"cmp_n"} | {f"c{i}_{f}" for i in COMPARE_SLOTS for f in CONFIG_FIELDS}),
    "workshop": frozenset({"lesson", "present", "room", "you"}),  # room, you: ui.teach.room_view
    "story": frozenset({"st_seeds"}),  # ui.panels.story_view
}


def sweep_choice(knobs: tuple[str, ...], classes: list[str]) -> list[Param]:
    """The P99 page's knob (`ui.runtime.sweeps.KNOBS`, which the page passes) and class."""
    return [
        Param("sw_knob", "", "choice", _("Knob"), options=tuple(knobs)),
        Param("sw_cls", "", "choice", _("Class"), options=tuple(classes)),
    ]


def sweep_range(integer: bool) -> list[Param]:
    """The sweep's range and points; whole steps for a knob of whole numbers."""
    step = 1.0 if integer else 0.05
    return [
        Param("sw_from", "", "float", _("From"), 0.0, 1e7, step),
        Param("sw_to", "", "float", _("To"), 0.0, 1e7, step),
        Param("sw_pts", "", "int", _("Points"), 3, 16, 1),
    ]


def timeline_params(classes: list[str], t_end: float, n_requests: int) -> list[Param]:
    return [
        Param("tl_show", "", "choice", _("Show"), options=("story", "all")),
        Param("tl_cls", "", "names", _("Classes"), options=tuple(classes)),
        Param("tl_from", "", "float", _("Window start (s)"), 0.0, t_end, 0.1),
        Param("tl_to", "", "float", _("Window end (s)"), 0.0, t_end, 0.1),
        Param("tl_req", "", "int", _("Request"), -1, max(n_requests - 1, -1), 1),
    ]


def compare_params() -> list[Param]:
    out = [Param("cmp_n", "", "int", _("Configurations"), 2, 3, 1)]
    for i in COMPARE_SLOTS:
        out += [
            Param(f"c{i}_name", "", "text", _("Configuration {i} name").format(i=i), 1, 30),
            Param(f"c{i}_pol", "", "choice", _("Configuration {i} policy").format(i=i), options=POLICIES),
            Param(f"c{i}_res", "", "int", _("Configuration {i} token reserve").format(i=i), 0, 65536, 64),
            Param(f"c{i}_kv", "", "int", _("Configuration {i} KV reserve").format(i=i), 0, 10_000_000, 16),
            Param(f"c{i}_inh", "", "bool", _("Configuration {i} inheritance").format(i=i)),
            Param(f"c{i}_cap", "", "int", _("Configuration {i} prompt cap").format(i=i), 0, 10_000_000, 512),
        ]
    return out


def compare_defaults() -> dict:
    return {"cmp_n": 3,
            "c2_name": _("Priority"), "c2_pol": "priority", "c2_res": 0, "c2_kv": 0, "c2_inh": False, "c2_cap": 0,
            "c3_name": _("Priority + reserve"), "c3_pol": "priority", "c3_res": 1024, "c3_kv": 0, "c3_inh": False,
            "c3_cap": 0}


def workshop_params(slugs: list[str]) -> list[Param]:
    return [Param("lesson", "", "choice", _("Lesson"), options=tuple(slugs)),
            Param("present", "", "bool", _("Presenter mode"))]
