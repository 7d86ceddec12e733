"""What a page reads, and where it comes from: the page table and the `Lab` the frame resolves.

A module apart from the frame (`ui.frame.state`) so that the sidebar and the layout helpers, which the
frame imports, can name `Lab` without importing the frame back: no import cycles in `ui/`
(`tests/test_imports.py`; the app's pages are imported by concurrent sessions on a cold server).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from engine import Result
from engine.config.scenario import Scenario

from .codec import Codec
from .i18n import N_

ROOT = Path(__file__).resolve().parents[2]
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
    PageSpec("pages/story.py", N_("Does this hold?"), ":material/fact_check:",
             N_("The preset's story, claim by claim, over seeds and ±10 % load"), "story"),
    PageSpec("pages/workshop.py", N_("Workshop"), ":material/school:",
             N_("A primer, eleven lessons, presenter mode, a recap and handouts"), "workshop"),
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
    seeds: int = 5  # every figure that is a conclusion is over this many seeds (`ui.frame.seeds`)
    fetch: Callable[[Scenario], Result] | None = field(default=None, repr=False)  # the frame's: `runs.result`

    def note(self, lines: list[str]) -> None:
        self.notes.extend(lines)

    @cached_property
    def result(self) -> Result:
        """The scenario's run (cached across sessions). Fetched on first use, so a page that
        only sweeps never waits for it; the frame hands over how (`fetch`), so that this module,
        which pure ones import, reaches no Streamlit cache itself."""
        if self.fetch is None:
            raise RuntimeError("this Lab was made without a way to fetch its run")
        return self.fetch(self.scenario)

    @property
    def kv_blocks(self) -> int:
        """The KV cache size in blocks, without running anything."""
        from engine.config.memory import breakdown

        return breakdown(self.scenario).blocks


_frame = threading.local()  # the Lab of the run in progress on this script thread


def active() -> Lab | None:
    """The Lab of the run in progress on this script thread (None outside the frame)."""
    return getattr(_frame, "lab", None)


def set_active(lab: Lab | None) -> None:
    _frame.lab = lab


def share_view(params: dict[str, Any]) -> None:
    """A page's view settings (short name → URL text) for the Share link."""
    lab = active()
    if lab is not None:
        lab.view.update(params)
