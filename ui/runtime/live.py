"""The live P99 sweep on the page: ask the shared pool for the points, draw what has finished.

No button: the page states its wish list (coarse curve first) on every full run, so a newer
control change replaces it and the stale points are never started. The full run waits a moment
for the coarse curve and, when the pace of the runs so far says the rest will be in soon, for the
whole sweep: a short sweep (the default's 27 runs) is drawn once, complete, by the run that asked
for it. A longer one is drawn coarse first; then a fragment redraws from the pool's finished
points twice a second until the sweep is complete, without blocking the sidebar; the poll that
finds it complete draws it, then one full rerun stops the timer. (A fragment's rerun must redraw
all it shows — Streamlit clears what it does not — so the chart is re-sent with every poll.)
Nothing here runs inside a cached function.
"""

from __future__ import annotations

import hashlib
import time

import streamlit as st

from ..charts.fig_sweep import p99_panels
from ..frame import i18n
from ..frame.i18n import _
from . import runs
from .pool import RunPool
from .sweeps import Plan, frame, knee

# A poll costs the browser 60–90 ms of CPU whatever it draws (chromium on a P99 page waiting for a
# long sweep: 3.1 CPU-s per 10 s at four polls a second, 1.2–1.4 at two, `tests/e2e/browser_cost.py`),
# so sessions waiting on a long sweep load a shared machine half as much; WAIT_S brings the coarse curve.
POLL_S = 0.5
WAIT_S = 0.3  # a full run waits this long for the coarse curve (two workers draw it in ~0.15 s)
# ...and for the whole sweep when the runs' pace so far says the rest takes at most SOON_S: every
# figure drawn before the last costs the browser a redraw (0.1–0.2 CPU-s) on the cores the runs
# need, and every poll up to 0.5 s of waiting. A wrong guess costs at most LATEST_S.
SOON_S = 1.5
LATEST_S = 2.0
SLICE_S = 0.05  # a newer change to the controls stops the wait within this (see `_wait`)


def fingerprint(plan: Plan) -> str:
    return hashlib.md5("\n".join(plan.order).encode()).hexdigest()[:10]


def sweep(plan: Plan, classes: list[str], x_label: str, slos: dict[str, float | None],
          x_range: tuple[float, float], unit: str) -> None:
    """Ask for the plan's points and draw them as they finish."""
    pool = runs.run_pool()
    viewer = runs.viewer_id()
    t0, missing = time.monotonic(), pool.missing(plan.keys)
    pool.want(viewer, plan.order)
    _wait(pool, plan.order[:plan.coarse], WAIT_S)
    left = pool.missing(plan.keys)
    if left and rest_within(left, missing - left, time.monotonic() - t0, SOON_S):
        _wait(pool, plan.keys, LATEST_S)
    busy = pool.missing(plan.keys) > 0
    st.fragment(run_every=POLL_S if busy else None)(_draw)(plan, classes, x_label, slos, x_range, unit, busy)


def rest_within(left: int, made: int, elapsed_s: float, within_s: float) -> bool:
    """Whether the `left` runs still missing should be in within `within_s`, at the pace of the
    `made` ones that came in over the last `elapsed_s` (on all of the pool's workers)."""
    return made > 0 and left * elapsed_s / made <= within_s


def _wait(pool: RunPool, keys: list[str], timeout_s: float) -> None:
    """Wait for `keys` at most `timeout_s`, in slices: between two, reading the session state lets
    Streamlit stop this run if the controls changed meanwhile (it checks for a newer run at every
    Streamlit call), so a wait never holds up the next change by more than a slice."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if pool.wait(keys, min(SLICE_S, left)):
            return
        st.session_state.get("_viewer")


def _draw(plan: Plan, classes: list[str], x_label: str, slos: dict[str, float | None],
          x_range: tuple[float, float], unit: str, polling: bool) -> None:
    i18n.set_language(st.session_state.get("lang"))  # a fragment's rerun runs without the frame
    pool = runs.run_pool()
    done, failed = pool.results(runs.viewer_id(), plan.keys)
    total = len(plan.keys)
    complete = len(done) + len(failed) == total
    drawn = milestone(plan, set(done) | set(failed))
    stage = "full" if complete else ("partial" if drawn else "wait")
    top = classes[0]
    slo = slos.get(top)
    table = frame(plan, {k: done[k] for k in plan.order[:drawn] if k in done})
    best = knee(table, top, slo, plan.knob.prefer) if complete and slo is not None else None
    # One key for every sweep: a container whose key changes is drawn anew with what it held, so the
    # browser drew the chart twice (the old figure, then the new, 0.1–0.15 s more before the new one
    # showed). Which sweep and how far it is (for the browser tests) name the caption's container.
    with st.container(key="p99_sweep"):
        with st.container(key=f"sweep_{fingerprint(plan)}_{stage}"):
            settings = len(plan.values) - len(plan.refused)
            if complete:
                st.caption(_("{total} runs: {settings} settings × {seeds} seeds · band = min–max over seeds, line = "
                             "median · ✕ = some of the class's requests were rejected there").format(
                    total=total, settings=settings, seeds=len(plan.seeds)))
            else:
                first = _("the coarse curve is drawn; refining") if drawn else _("computing a coarse curve")
                st.caption(":material/progress_activity: " + _(
                    "{done} of {total} runs done — {first} (every setting, then more seeds); the controls stay "
                    "live").format(done=len(done), total=total, first=first))
        knee_text = f"{best:,.4g} {unit}" if best is not None else ""
        cache = st.session_state.setdefault("_sweep_fig", {})
        tag = (fingerprint(plan), drawn, best, x_label, tuple(sorted(slos.items(), key=str)), x_range, i18n.language())
        if cache.get("tag") != tag:  # a new figure only at a milestone: the browser redraws 4 times, not 12
            fig = p99_panels(table, classes, x_label, slos, x_range, best, knee_text)
            fig.layout.meta = {"sweep": fingerprint(plan), "runs": drawn, "of": total}  # unseen; for benchmarks
            cache.update(tag=tag, fig=fig)
        st.plotly_chart(cache["fig"], key="sw_fig", theme=None, config={"displaylogo": False})
        if failed:
            first = next(iter(failed.values()))
            st.warning(_("{k} of {total} runs failed ({first}).").format(k=len(failed), total=total, first=first),
                       icon=":material/error:")
        if complete:
            _verdict(plan, table, top, slo, best, unit)
    if complete and polling:  # shown now; the full run draws the same once more, without the timer
        st.rerun()


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
        st.caption(_("{top} has no TTFT SLO in this scenario, so no knee is marked.").format(top=top))
        return
    if best is None:
        st.warning(_("No setting in this range keeps {top}'s P99 TTFT under its {slo} s SLO for every seed (settings "
                     "that reject more requests than the others do not count).").format(top=top, slo=f"{slo:g}"),
                   icon=":material/trending_up:")
        return
    text = {"low": _("Knee: **{v} {unit}** — the smallest setting at which {top}'s P99 TTFT stays under {slo} s for "
                     "every seed."),
            "high": _("Knee: **{v} {unit}** — the largest setting at which {top}'s P99 TTFT stays under {slo} s for "
                      "every seed.")}[plan.knob.prefer]
    st.success(text.format(v=f"{best:,.4g}", unit=unit, top=top, slo=f"{slo:g}"), icon=":material/flag:")
