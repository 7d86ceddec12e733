"""The live P99 sweep on the page: ask the shared pool for the points, draw what has finished.

No button: the page states its wish list (coarse curve first) on every full run, so a newer
control change replaces it and the stale points are never started. The full run waits a moment
for the coarse curve, then a fragment polls the pool without blocking the sidebar; it rewrites
the progress line on every poll but the chart only when a milestone adds points (a redrawn chart
is most of a poll's cost in the browser). When the sweep is complete one full rerun draws it and
stops the timer. Nothing here runs inside a cached function.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import streamlit as st

from . import i18n, runs
from .fig_sweep import p99_panels
from .i18n import _
from .sweeps import Plan, frame, knee

# A poll costs the browser 50–75 ms of CPU whatever it draws (Streamlit re-renders the page's
# state twice per run; measured with chromium on the P99 page): twice a second, not four times,
# keeps sessions that wait for a long sweep from loading a shared machine.
POLL_S = 0.5
WAIT_S = 0.3  # a full run waits this long for the coarse curve (two workers draw it in ~0.15 s)


@dataclass(frozen=True)
class View:
    """What the sweep is drawn against (the page's knob, labels, SLOs and range)."""

    plan: Plan
    classes: list[str]
    x_label: str
    slos: dict[str, float | None]
    x_range: tuple[float, float]
    unit: str


def fingerprint(plan: Plan) -> str:
    return hashlib.md5("\n".join(plan.order).encode()).hexdigest()[:10]


def sweep(plan: Plan, classes: list[str], x_label: str, slos: dict[str, float | None],
          x_range: tuple[float, float], unit: str) -> None:
    """Ask for the plan's points and draw them as they finish."""
    pool = runs.run_pool()
    pool.want(runs.viewer_id(), plan.order)
    pool.wait(plan.order[:plan.coarse], WAIT_S)
    view = View(plan, classes, x_label, slos, x_range, unit)
    progress, body = st.empty(), st.empty()  # written by this run, then by the polls
    st.session_state.pop("_sweep_shown", None)  # `body` is new: it holds nothing yet
    if not _draw(view, progress, body):
        st.fragment(run_every=POLL_S)(_poll)(view, progress, body)


def _poll(view: View, progress, body) -> None:
    i18n.set_language(st.session_state.get("lang"))  # a fragment's rerun runs without the frame
    if _draw(view, progress, body, polled=True):
        st.rerun()  # complete: the full run draws it once more, without the timer


def _draw(view: View, progress, body, polled: bool = False) -> bool:
    """Draw the sweep's state into the two slots; whether it is complete (a poll then leaves the
    drawing to the full rerun)."""
    plan = view.plan
    done, failed = runs.run_pool().results(runs.viewer_id(), plan.keys)
    total = len(plan.keys)
    complete = len(done) + len(failed) == total
    if complete and polled:
        return True
    drawn = milestone(plan, set(done) | set(failed))
    if complete:
        progress.empty()
    else:
        first = _("the coarse curve is drawn; refining") if drawn else _("computing a coarse curve")
        progress.caption(":material/progress_activity: " + _(
            "{done} of {total} runs done — {first} (every setting, then more seeds); the controls stay "
            "live").format(done=len(done), total=total, first=first))
    stage = "full" if complete else ("partial" if drawn else "wait")
    top = view.classes[0]
    slo = view.slos.get(top)
    table = frame(plan, {k: done[k] for k in plan.order[:drawn] if k in done})
    best = knee(table, top, slo, plan.knob.prefer) if complete and slo is not None else None
    tag = (fingerprint(plan), stage, drawn, best, len(failed), view.x_label,
           tuple(sorted(view.slos.items(), key=str)), view.x_range, i18n.language())
    if st.session_state.get("_sweep_shown") == tag:
        return complete  # the chart in `body` is still right: leave it (and the browser) alone
    st.session_state["_sweep_shown"] = tag
    with body.container(key=f"sweep_{fingerprint(plan)}_{stage}"):
        if complete:
            st.caption(_("{total} runs: {settings} settings × {seeds} seeds · band = min–max over seeds, line = median "
                         "· ✕ = some of the class's requests were rejected there").format(
                total=total, settings=len(plan.values) - len(plan.refused), seeds=len(plan.seeds)))
        knee_text = f"{best:,.4g} {view.unit}" if best is not None else ""
        cache = st.session_state.setdefault("_sweep_fig", {})
        if cache.get("tag") != tag:
            cache.update(tag=tag, fig=p99_panels(table, view.classes, view.x_label, view.slos, view.x_range, best,
                                                 knee_text))
        st.plotly_chart(cache["fig"], key="sw_fig", theme=None, config={"displaylogo": False})
        if failed:
            first = next(iter(failed.values()))
            st.warning(_("{k} of {total} runs failed ({first}).").format(k=len(failed), total=total, first=first),
                       icon=":material/error:")
        if complete:
            _verdict(plan, table, top, slo, best, view.unit)
    return complete


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
