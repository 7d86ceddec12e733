"""The chart each lesson shows after its run, from the lesson's `chart:` header.

- `timeline`: an excerpt of the inversion timeline of one run (the story view, where it happens);
- `bars`: P99 TTFT per class, one bar per run;
- `sweep`: P99 curves against a knob (`ui.charts.fig_sweep`), run on the lesson's scenario;
- `dashboard`: the usual dashboard beside the top class's P99 (`ui.charts.fig_workshop`);
- `step`: one engine step of one run — budget, KV cache, queue (`ui.charts.fig_primer`, the primer's);
- `wait`: one top-class request's wait in each of `runs` (the one most overtaken in run `pick`), with
  who got in meanwhile, the KV cache and the budget (`ui.charts.fig_wait`).
Pure: results and summaries in, a plotly figure out; the sweep's points are run by the caller.
"""

from __future__ import annotations

import plotly.graph_objects as go

from engine import Result
from engine.config.scenario import Scenario, device_batch_defaults
from engine.sim import derived

from ..frame.i18n import _
from ..panels import inversions
from ..runtime.sweeps import KNOBS, Plan, frame, knee, plan
from ..teach.lessons import Lesson
from . import fig_wait, fig_workshop
from .fig_primer import step_picture, teaching_step
from .fig_sweep import p99_panels
from .fig_timeline import timeline


def slos(sc: Scenario) -> dict[str, float | None]:
    return {c: sc.classes[c].slo.ttft_s for c in sc.class_names}


def sweep_plan(lesson: Lesson) -> Plan | None:
    """The sweep a `sweep` chart runs (one seed: the lesson's), or None."""
    ch = lesson.chart
    if ch.get("kind") != "sweep":
        return None
    sc = lesson.scenarios()[int(ch.get("run", 0))]
    return plan(sc, ch["knob"], [float(v) for v in ch["values"]], [sc.seed])


def figure(lesson: Lesson, scenarios: list[Scenario], results: list[Result], labels: list[str],
           sweep_done: dict[str, dict] | None = None) -> go.Figure:
    ch = lesson.chart
    kind = ch.get("kind", "bars")
    if kind == "timeline":
        k = int(ch.get("run", 0))
        res, sc = results[k], scenarios[k]
        classes = res.class_names
        window = inversions.story_span(res)
        lanes, got_ahead, held, _note = inversions.story_lanes(res, classes, window)
        strip = inversions.strip(res.episodes, classes, float(max(res.summary["sim_time_s"], 1.0)))
        fig = timeline(res, lanes, got_ahead, held, strip, classes, capacity=res.memory.usable_blocks,
                       kv_reserve=sc.mitigations.p0_kv_reserve, window=window)
        fig.update_layout(title=dict(text=_("Inversion timeline: {run}").format(run=labels[k]), x=0,
                                     font=dict(size=15)), margin=dict(t=50))
        return fig
    if kind == "step":
        k = int(ch.get("run", 0))
        res, sc = results[k], scenarios[k]
        budget = device_batch_defaults(sc.scheduler, sc.hardware)[0].max_num_batched_tokens
        step = teaching_step(res.steps, res.waits, res.class_names[0])
        return step_picture(step, int(budget), res.memory.usable_blocks, res.class_names)
    if kind == "wait":
        ks = [int(k) for k in ch.get("runs", range(len(results)))]
        pick = results[int(ch.get("pick", ks[0]))]
        request = fig_wait.most_overtaken(pick)
        if request is None:
            return fig_workshop.runs_bars(labels, [r.summary for r in results], slos(scenarios[0]))
        window = fig_wait.window_of([results[k] for k in ks], request)
        waits = [fig_wait.one_wait(results[k], request, labels[k], window) for k in ks]
        sc = scenarios[ks[0]]
        budget = device_batch_defaults(sc.scheduler, sc.hardware)[0].max_num_batched_tokens
        return fig_wait.wait_figure(waits, results[ks[0]].class_names, results[ks[0]].memory.usable_blocks,
                                    int(budget))
    if kind == "dashboard":
        ks = [int(k) for k in ch.get("runs", [0, 1])]
        series = {labels[k]: derived.dashboard_series(results[k]) for k in ks}
        top = results[ks[0]].class_names[0]
        return fig_workshop.dashboard_vs_p99(series, top, slos(scenarios[ks[0]]).get(top), derived.SCRAPE_S)
    if kind == "sweep":
        p = sweep_plan(lesson)
        table = frame(p, sweep_done or {})
        sc = scenarios[int(ch.get("run", 0))]
        top = sc.class_names[0]
        knob = KNOBS[ch["knob"]]
        best = knee(table, top, slos(sc)[top], knob.prefer) if slos(sc)[top] is not None else None
        label = f"{_(knob.label)} ({_(knob.unit)})"
        return p99_panels(table, sc.class_names, label, slos(sc), (min(p.values), max(p.values)), best,
                          f"{best:,.4g} {_(knob.unit)}" if best is not None else "")
    return fig_workshop.runs_bars(labels, [r.summary for r in results], slos(scenarios[0]))
