"""The live P99 sweep on the page: ask the shared pool for the points, draw what has finished.

No button: the page states its wish list (coarse curve first) on every full run, so a newer
control change replaces it and the stale points are never started. The full run waits a moment
for the coarse curve; then a fragment redraws from the pool's finished points twice a second
until the sweep is complete, without blocking the sidebar; the poll that finds it complete draws
it, then one full rerun stops the timer. (A fragment's rerun must redraw all it shows — Streamlit
clears what it does not — so the chart is re-sent with every poll.) Nothing here runs inside a
cached function.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from ..charts.fig_sweep import p99_panels
from ..frame import i18n
from ..frame.i18n import _
from . import runs
from .sweeps import Plan, frame, knee

# A poll costs the browser 60–90 ms of CPU whatever it draws (chromium on a P99 page waiting for a
# long sweep: 3.1 CPU-s per 10 s at four polls a second, 1.2–1.4 at two, `tests/e2e/browser_cost.py`),
# so sessions waiting on a long sweep load a shared machine half as much; WAIT_S brings the coarse curve.
POLL_S = 0.5
WAIT_S = 0.3  # a full run waits this long for the coarse curve (two workers draw it in ~0.15 s)


def fingerprint(plan: Plan) -> str:
    return hashlib.md5("\n".join(plan.order).encode()).hexdigest()[:10]


def sweep(plan: Plan, classes: list[str], x_label: str, slos: dict[str, float | None],
          x_range: tuple[float, float], unit: str) -> None:
    """Ask for the plan's points and draw them as they finish."""
    pool = runs.run_pool()
    viewer = runs.viewer_id()
    pool.want(viewer, plan.order)
    pool.wait(plan.order[:plan.coarse], WAIT_S)
    busy = pool.missing(plan.keys) > 0
    st.fragment(run_every=POLL_S if busy else None)(_draw)(plan, classes, x_label, slos, x_range, unit, busy)


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
    with st.container(key=f"sweep_{fingerprint(plan)}_{stage}"):
        settings = len(plan.values) - len(plan.refused)
        if complete:
            st.caption(_("{total} runs: {settings} settings × {seeds} seeds · band = min–max over seeds, line = median "
                         "· ✕ = some of the class's requests were rejected there").format(
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
