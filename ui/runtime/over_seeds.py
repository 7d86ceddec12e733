"""A page's figures over seeds, live: the shown run's at once, all N seeds' when they are in.

The page's full run has the shown run's `Result` (the scenario's own seed) and takes its
`RunSamples` on the server (1 ms). It states its wish list — the other seeds of every
configuration it shows, the baseline's too — to the samples pool (`ui.runtime.runs.samples_pool`: the page
workers, results shared by every session), and draws its numbers in a fragment. While seeds are
missing the fragment polls the pool twice a second and redraws only itself; the poll that finds
every seed in draws the figures over all of them, then one full rerun stops the timer (as the
P99 sweep does, `ui.runtime.live`). A page whose seeds any session has run draws them in its full run,
with no timer at all.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from engine import Result
from engine.config.scenario import Scenario
from engine.sweeps.evidence import RunSamples, default_seeds

from ..frame import i18n
from ..frame.seeds import gather, seed_keys
from ..frame.untrusted import plain
from ..panels.kpis import Over
from . import runs

POLL_S = 0.5  # as the P99 sweep polls (a poll costs the browser 60–90 ms of CPU)
PAGES = ("", "compare", "timeline")  # pages that show figures over seeds (others drop the wish list)


def viewer() -> str:
    return runs.viewer_id() + "-seeds"


def forget() -> None:
    """Leave the pool nothing to run for this session (a page without such figures)."""
    runs.samples_pool().want(viewer(), [])


def show(configs: dict[str, tuple[Scenario, Result | None]], n: int, draw: Callable[[dict[str, Over]], None],
         key: str) -> None:
    """Ask for every configuration's N seeds and call `draw({name: Over})` in a fragment that
    redraws when they are in. `configs`: name → (scenario, its shown Result or None)."""
    plan = {name: (tuple(default_seeds(sc.seed, n)), seed_keys(sc, n),
                   RunSamples.of(res) if res is not None else None) for name, (sc, res) in configs.items()}
    wanted = [k for seeds, keys, first in plan.values() for k in keys[1 if first is not None else 0:]]
    pool = runs.samples_pool()
    pool.want(viewer(), wanted)
    busy = pool.missing(wanted) > 0
    st.fragment(run_every=POLL_S if busy else None)(_draw)(plan, wanted, draw, key, busy)


def _draw(plan: dict, wanted: list[str], draw: Callable[[dict[str, Over]], None], key: str, polling: bool) -> None:
    i18n.set_language(st.session_state.get("lang"))  # a fragment's rerun runs without the frame
    pool = runs.samples_pool()
    done, failed = pool.results(viewer(), wanted)
    gathered = {name: gather(seeds, keys, first, done, failed) for name, (seeds, keys, first) in plan.items()}
    settled = all(g.settled for g in gathered.values())
    with st.container(key=f"{key}_{'all' if settled else 'shown'}"):
        draw({name: Over.of(g) for name, g in gathered.items()})
        bad = {s: why for g in gathered.values() for s, why in g.failed.items()}
        if bad:
            seed, why = next(iter(bad.items()))
            st.warning(i18n._("{k} seed(s) failed and are left out of the figures (seed {seed}: {why}).").format(
                k=len(bad), seed=seed, why=plain(why)), icon=":material/error:")
    if settled and polling:  # shown now; the full run draws the same once more, without the timer
        st.rerun()
