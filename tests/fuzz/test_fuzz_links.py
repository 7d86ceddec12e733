"""Share links fuzzed through the app itself (Streamlit's AppTest), on every page.

`tests/ui/test_links.py` fuzzes the link decoder alone; this opens each fuzzed link as a fresh
session's first request, so a value the decoder lets through must also survive the page that
reads it. Each link must give a page without an exception, and no text from it may come out as a
live link, from any source: Markdown syntax, raw HTML, or GFM's autolink literals (a bare
`https://…` is a link in the browser however it is escaped; `tests/live_links.py`). Hypothesis
draws the links, derandomized (the same cases each run):
40 per run in the suite, `FUZZ_BUDGET=1000 python -m pytest tests/fuzz/test_fuzz_links.py` for a
thousand. A hang fails the run (AppTest gives each script run 60 s).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine.config.scenario import load_raw
from tests.live_links import live_links
from tests.support.fuzz import budget
from ui.frame.codec import Codec
from ui.frame.views import VIEW_KEYS

APP = "../../app.py"  # relative to this file (AppTest resolves it so)
PAGES = ["pages/playground.py", "pages/timeline.py", "pages/p99.py", "pages/compare.py", "pages/story.py",
         "pages/workshop.py", "pages/memory.py", "pages/sweeps.py"]
EVIL = "evil.example"  # the host every injected link points at
HOSTILE = ["inf", "-inf", "nan", "NaN", "Infinity", "1e999", "-1e400", "1e-400", "9" * 120, "2" * 19, "0", "-1",
           "0.5", "512", "4096", "true", "fcfs", "priority", "backfill", "P0,P1", "", " ", "%00", "\u202e", "😀",
           f"[Log in again](https://{EVIL}/login)", f"x` [Log in](https://{EVIL}) `", f"<a href='https://{EVIL}'>x</a>",
           "<script>alert(1)</script>", f"![img](https://{EVIL}/a.png)", "**bold**", "a" * 300,
           f"https://{EVIL}/login", f"www.{EVIL}", f"ceo@{EVIL}", f"mailto:ceo@{EVIL}", f"<https://{EVIL}>"]
KEYS = sorted({p.short for name in ("default", "classic-inversion") for p in Codec(load_raw(name)).params}
              | set().union(*VIEW_KEYS.values()) | {"preset", "lang"})
values = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=30),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.integers(min_value=-10**40, max_value=10**40).map(str))
keys = st.one_of(st.sampled_from(KEYS), st.sampled_from(HOSTILE[-8:]), st.text(min_size=1, max_size=20))
links = st.dictionaries(keys, st.lists(values, min_size=1, max_size=3), max_size=6)


def _texts(at: AppTest) -> list[str]:
    """Every text the page gave Streamlit to render as Markdown (bodies, captions, callouts)."""
    out = []
    for kind in ("markdown", "caption", "warning", "error", "info", "success", "title", "header", "subheader"):
        out += [str(e.value) for e in at.get(kind)]
    return out


@settings(max_examples=budget(40), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(PAGES), links)
def test_a_fuzzed_link_gives_a_page_without_exception_or_live_injection(page, query):
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page)
    for key, vals in query.items():
        at.query_params[key] = vals if len(vals) > 1 else vals[0]
    at.run()
    assert not at.exception, (page, query, [e.value for e in at.exception][:1])
    live = [(t, links) for t in _texts(at) if (links := [x for x in live_links(t) if EVIL in x.lower()])]
    assert not live, (page, query, live[:2])
