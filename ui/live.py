"""The live P99 sweep on the page: ask the shared pool for the points, draw what has finished.

No button: the page states its wish list (coarse curve first) on every full run, so a newer
control change replaces it and the stale points are never started. A fragment redraws from the
pool's finished points every quarter second until the sweep is complete, without blocking the
sidebar; then one full rerun stops the timer. Nothing here runs inside a cached function.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from . import runs
from .fig_sweep import p99_panels
from .sweeps import Plan, frame, knee

POLL_S = 0.25


def fingerprint(plan: Plan) -> str:
    return hashlib.md5("\n".join(plan.order).encode()).hexdigest()[:10]


def sweep(plan: Plan, classes: list[str], x_label: str, slos: dict[str, float | None],
          x_range: tuple[float, float], unit: str) -> None:
    """Ask for the plan's points and draw them as they finish."""
    pool = runs.run_pool()
    viewer = runs.viewer_id()
    pool.want(viewer, plan.order)
    busy = pool.missing(plan.keys) > 0
    st.fragment(run_every=POLL_S if busy else None)(_draw)(plan, classes, x_label, slos, x_range, unit, busy)


def _draw(plan: Plan, classes: list[str], x_label: str, slos: dict[str, float | None],
          x_range: tuple[float, float], unit: str, polling: bool) -> None:
    pool = runs.run_pool()
    done, failed = pool.results(runs.viewer_id(), plan.keys)
    total = len(plan.keys)
    complete = len(done) + len(failed) == total
    if complete and polling:
        st.rerun()  # the full run draws it once more, without the timer
    drawn = milestone(plan, set(done) | set(failed))
    stage = "full" if complete else ("partial" if drawn else "wait")
    top = classes[0]
    slo = slos.get(top)
    table = frame(plan, {k: done[k] for k in plan.order[:drawn] if k in done})
    best = knee(table, top, slo, plan.knob.prefer) if complete and slo is not None else None
    with st.container(key=f"sweep_{fingerprint(plan)}_{stage}"):
        settings = len(plan.values) - len(plan.refused)
        if complete:
            st.caption(f"{total} runs: {settings} settings × {len(plan.seeds)} seeds · band = min–max over seeds, "
                       "line = median · ✕ = some of the class's requests were rejected there")
        else:
            first = "the coarse curve is drawn; refining" if drawn else "computing a coarse curve"
            st.caption(f":material/progress_activity: {len(done)} of {total} runs done — {first} (every setting, "
                       "then more seeds); the controls stay live")
        knee_text = f"{best:,.4g} {unit}" if best is not None else ""
        cache = st.session_state.setdefault("_sweep_fig", {})
        tag = (fingerprint(plan), drawn, best, x_label, tuple(sorted(slos.items(), key=str)), x_range)
        if cache.get("tag") != tag:  # a new figure only at a milestone: the browser redraws 4 times, not 12
            cache.update(tag=tag, fig=p99_panels(table, classes, x_label, slos, x_range, best, knee_text))
        st.plotly_chart(cache["fig"], key="sw_fig", theme=None, config={"displaylogo": False})
        if failed:
            first = next(iter(failed.values()))
            st.warning(f"{len(failed)} of {total} runs failed ({first}).", icon=":material/error:")
        if complete:
            _verdict(plan, table, top, slo, best, unit)


def milestone(plan: Plan, finished: set[str]) -> int:
    """How many keys of the run order to draw: the longest finished prefix that ends at a milestone
    (the coarse curve, every setting with one seed, then each further seed for every setting)."""
    per_seed = len(plan.order) // max(len(plan.seeds), 1)
    marks = [plan.coarse] + [per_seed * j for j in range(1, len(plan.seeds) + 1)]
    best = 0
    for m in sorted(set(marks)):
        if m and all(k in finished for k in plan.order[:m]):
            best = m
    return best


def _verdict(plan: Plan, table, top: str, slo: float | None, best: float | None, unit: str) -> None:
    if slo is None:
        st.caption(f"{top} has no TTFT SLO in this scenario, so no knee is marked.")
        return
    if best is None:
        st.warning(f"No setting in this range keeps {top}'s P99 TTFT under its {slo:g} s SLO for every seed "
                   "(settings that reject more requests than the others do not count).", icon=":material/trending_up:")
        return
    which = {"low": "smallest", "high": "largest"}[plan.knob.prefer]
    st.success(f"Knee: **{best:,.4g} {unit}** — the {which} setting at which {top}'s P99 TTFT stays under "
               f"{slo:g} s for every seed.", icon=":material/flag:")
