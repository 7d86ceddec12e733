"""Capacity on the P99 page and Compare: what each remedy costs as the load the GPU can still carry.

The searches (`engine.sweeps.capacity`: bisection over the load scale, every seed of each tested load)
run off the server: `ui.runtime.capacity_jobs` drives them round by round through the shared sweep pool
(`ui.runtime.runs.run_pool`, worker processes at low CPU priority, results remembered across sessions),
as a *background* wish list that a page's sweep always overtakes. The page asks for its job on
every full run and draws the answers in a fragment that polls twice a second until the search is
settled; a second session asking for the same configurations and seeds gets the finished job.
A page left behind releases its job (`leave`), which stops when nobody wants it.
"""

from __future__ import annotations

import streamlit as st

from engine.config.scenario import Scenario

from ..frame import i18n, limits
from ..frame.i18n import _
from ..frame.untrusted import plain
from ..panels import capacity_table
from . import runs
from .capacity_jobs import Jobs, Spec

POLL_S = 0.5
PAGES = ("p99", "compare", "workshop")  # pages that show capacity (others release their job); the workshop's recap
_JOB = "_capacity_job"


@st.cache_resource(show_spinner=False)
def jobs() -> Jobs:
    """The process-wide registry of capacity searches (one per configurations + seeds)."""
    return Jobs(runs.run_pool(), limits.why_not)


def leave(page: str) -> None:
    """On a page without capacity, stop wanting the one a previous page asked for."""
    if page not in PAGES and st.session_state.get(_JOB):
        jobs().release(runs.viewer_id())
        st.session_state[_JOB] = None


def show(configs: dict[str, Scenario], against: str | None, seeds: tuple[int, ...], key: str) -> None:
    """Search every configuration's capacity on `seeds` (against `against`'s) and draw the table."""
    names = list(configs)
    spec = Spec(tuple(sc.key() for sc in configs.values()), tuple(int(s) for s in seeds),
                names.index(against) if against in configs else None)
    reg, viewer = jobs(), runs.viewer_id()
    reg.release(viewer, keep={spec.id})
    job = reg.get(spec, viewer)
    st.session_state[_JOB] = spec.id
    busy = job.status == "running"
    st.fragment(run_every=POLL_S if busy else None)(_draw)(names, spec, key, busy)


def _draw(names: list[str], spec: Spec, key: str, polling: bool) -> None:
    i18n.set_language(st.session_state.get("lang"))  # a fragment's rerun runs without the frame
    job = jobs().get(spec, runs.viewer_id())
    found = job.view()
    done = job.status != "running"
    with st.container(key=f"{key}_{'done' if done else 'live'}"):
        st.caption(_(
            "Capacity: the largest scale of this traffic (every class's rate × s) at which every class with an SLO "
            "still meets it on every seed ({seeds}), found by bisection to 2 %. A remedy's cost is the capacity per "
            "GPU it loses; batch fill and KV use are at the offered load (1×), the mean over the seeds with their "
            "min–max.").format(seeds=_spread_seeds(spec.seeds)))
        if not done:
            st.caption(":material/progress_activity: " + _(
                "Searching: {runs} runs so far, in the background (the page stays live).").format(runs=len(job.runs)))
        st.dataframe(capacity_table.table(names, found), hide_index=True, width="stretch")
        for line in capacity_table.why(names, found)[:4]:
            st.caption(plain(line))
        if any(f.get("limited") for f in found):
            st.caption(_("“≥”: the next load to try is over what the app runs interactively; `python -m engine "
                         "capacity` searches further."))
        if job.status == "stopped" and job.error:
            st.warning(_("The capacity search stopped: {why}").format(why=plain(job.error)), icon=":material/error:")
    if done and polling:
        st.rerun()


def _spread_seeds(seeds: tuple[int, ...]) -> str:
    from ..panels.spread import seed_list

    return seed_list(seeds)
