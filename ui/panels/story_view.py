"""*Does this hold?*: the sidebar preset's story, claim by claim, over seeds and ±10 % load.

A shipped scenario's `story:` section (`engine.sweeps.story`) states its headline as claims. This page
judges them as `python -m engine story` does — seed by seed on the scenario's seed and the next
N − 1, at load ×0.9, ×1 and ×1.1 — and shows, per claim and scale, on how many seeds it holds,
the median and min–max of its value, and how many requests stand behind a percentile. A claim the
story marks as an edge gets the story's words for it and a band over a wider load range
(`ui.charts.fig_story`). The runs go to the sweeps' shared pool (worker processes, results kept across
sessions), and a fragment redraws from what has come back until every run is in, so the sidebar
stays live (the P99 page's pattern: `ui.runtime.live`).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.config.scenario import ScenarioError
from engine.core.reasons import Reason
from engine.sweeps import story as story_mod

from ..charts.fig_story import edge_band
from ..frame import i18n, layout, viewstate
from ..frame.codec import Param
from ..frame.i18n import N_, _
from ..frame.untrusted import plain
from ..runtime import runs, story_plan
from ..teach.lessons import fmt_metric, metric_label
from . import vocab
from .text import percent, seconds

POLL_S = 0.5  # as the P99 page's sweep (ui.runtime.live): a poll costs the browser whatever it draws
SEEDS_KEY = "st_seeds"
OPS = {"<": "<", "<=": "≤", ">": ">", ">=": "≥", "==": "="}
CLASS_FIELDS = {  # a class's summary field in words, as the lessons' reveal names them
    "ttft_p99": N_("{cls} P99 TTFT"), "ttft_p50": N_("{cls} median TTFT"), "tpot_p50": N_("{cls} median TPOT"),
    "tpot_p99": N_("{cls} P99 TPOT"), "e2e_p99": N_("{cls} P99 end to end"), "slo_attainment": N_("{cls} SLO met"),
    "inversion_s": N_("{cls} inversion time"), "blocked_s": N_("{cls} blocked time"),
    "cache_hit_rate": N_("{cls} prefix-cache hit rate"),
}
RUN_FIELDS = {  # run-level metrics the lessons' reveal table does not name (`ui.teach.lessons.METRIC_LABELS`)
    "top_holder": N_("Main KV holder when it waits"), "served_tok_s": N_("Served rate"),
    "recomputed_tokens": N_("Recomputed tokens"), "top_reason": N_("Main reason the top class waits"),
    "gateway_inversions": N_("Inversions at the gateway"),
}
PER_REASON = {"wait_s": N_("Top class's time waiting ({reason})"),  # the reason as `ui.panels.vocab` words it
              "wait_share": N_("Share of the top class's wait ({reason})")}
_SHARES = ("slo_attainment", "cache_hit_rate", "kv_use", "wait_share.")


def params() -> list[Param]:
    return [Param(SEEDS_KEY, "", "int", _("Seeds"), 1, story_plan.MAX_SEEDS, 1)]


def story_of(lab) -> story_mod.Story | None:
    """The story of the sidebar's preset; None for an uploaded scenario or a preset without one."""
    if lab.uploaded:
        return None
    return _story(lab.preset)


@st.cache_data(max_entries=64, show_spinner=False)
def _story(preset: str) -> story_mod.Story | None:
    try:
        return story_mod.of_scenario(preset)
    except ScenarioError:
        return None


@st.cache_data(max_entries=64, show_spinner=False)
def _plan(preset: str, n_seeds: int) -> story_plan.Plan:
    """The story's runs (cached: building them loads the scenario once per run, seed and scale)."""
    return story_plan.plan(story_mod.of_scenario(preset), n_seeds)


def page(lab) -> None:
    layout.header(lab, _("Does this hold?"), _("The preset's story, claim by claim, over seeds and ±10 % load"))
    story = story_of(lab)
    if story is None:
        what = _("The uploaded scenario") if lab.uploaded else plain(lab.preset)
        st.info(_("{what} has no story to check: only shipped scenarios with a `story:` section have one "
                  "(`python -m engine story --all` lists them).").format(what=what), icon=":material/menu_book:")
        return
    layout.description(lab.scenario)
    if changes := lab.codec.describe_changes(lab.values):
        st.caption(_("The story is told on the preset as shipped; the sidebar's changes ({changes}) are not part of "
                     "it.").format(changes=plain(changes)))
    defaults = {SEEDS_KEY: story_plan.DEFAULT_SEEDS}
    viewstate.seed(params(), defaults)
    n = st.columns([1, 3])[0].number_input(_("Seeds"), 1, story_plan.MAX_SEEDS, key=SEEDS_KEY, help=_(
        "Each run on the scenario's seed and the next ones (never picked); more seeds take longer. "
        "`python -m engine story` checks 20."))
    viewstate.publish(params(), defaults)
    p = _plan(lab.preset, int(n))
    pool = runs.run_pool()
    pool.want(viewer(), p.order)
    busy = pool.missing(p.order) > 0
    st.fragment(run_every=POLL_S if busy else None)(_draw)(p, busy)


def viewer() -> str:
    """This session's wish list in the pool, apart from its P99 sweep's (neither replaces the other)."""
    return f"{runs.viewer_id()}-story"


def _draw(p: story_plan.Plan, polling: bool) -> None:
    i18n.set_language(st.session_state.get("lang"))  # a fragment's rerun runs without the frame
    done, failed = runs.run_pool().results(viewer(), p.order)
    total, finished = len(p.order), len(done) + len(failed)
    complete = finished == total
    story = p.story
    labels = [_(label) for label, _o in story.runs]
    seeds = f"{p.seeds[0]}–{p.seeds[-1]}" if len(p.seeds) > 1 else f"{p.seeds[0]}"
    scales = ", ".join(f"×{s:g}" for s in story_plan.SCALES)
    edges = [i for i, c in enumerate(story.claims) if c.get("edge")]
    if complete:
        st.caption(_("{total} runs: each of the story's runs on {n} seeds ({seeds}) at load {scales} · a claim is "
                     "robust (✓) when it holds on at least {k} of {n} seeds at every load · values: median "
                     "[min–max] over the seeds").format(total=total, n=len(p.seeds), seeds=seeds, scales=scales,
                                                        k=story_mod.required(len(p.seeds)))
                   + (" · " + _("~ = not robust, on an edge the story names (below; its runs also at ×0.8 and "
                                "×1.2)") if edges else ""))
    else:
        st.progress(finished / total, text=_("{done} of {total} runs done (×1 first); the table fills in as they "
                                             "come, the controls stay live").format(done=finished, total=total))
    a = story_plan.judge(p, done)
    # a static table: its cells wrap, so a long claim and its three scales stay readable (inert text)
    st.table(pd.DataFrame(_table(a, labels, complete)).map(plain), hide_index=True)
    if failed:
        st.warning(_("{k} of {total} runs failed ({first}).").format(k=len(failed), total=total,
                                                                     first=next(iter(failed.values()))),
                   icon=":material/error:")
    if edges:
        st.subheader(_("On an edge"))
        st.markdown(":material/warning: " + plain(_(story.edge)))
        for i in edges:
            _edge(p, done, i, labels)
    if complete and polling:  # shown now; the full run draws the same once more, without the timer
        st.rerun()


def claim_text(claim: dict, labels: list[str]) -> str:
    """The claim in words: `P0 P99 TTFT [P0 alone on GPU 0] ≤ 1 s`, `… < 0.2 × [shared pool]`."""
    rhs = (f"{claim.get('factor', 1.0):g} × [{labels[claim['other']]}]" if "other" in claim
           else value_text(claim["metric"], claim["value"]))
    return f"{metric_name(claim['metric'])} [{labels[claim['run']]}] {OPS[claim['op']]} {rhs}"


def metric_name(name: str) -> str:
    head, _dot, field = name.partition(".")
    if field in CLASS_FIELDS and head[:1].isupper():
        return _(CLASS_FIELDS[field]).format(cls=head)
    if head in PER_REASON and field:
        return _(PER_REASON[head]).format(reason=reason_text(field))
    return _(RUN_FIELDS[name]) if name in RUN_FIELDS else metric_label(name)


def reason_text(code: str) -> str:
    """A wait reason's code (`kv_short`) in words, in the current language; other text as it is."""
    return vocab.look(code).short if code.upper() in Reason.__members__ else code


def value_text(name: str, v) -> str:
    """A value of metric `name` as the lessons show it (shares as percentages, times in seconds,
    wait reasons in words)."""
    if name == "top_reason" and isinstance(v, str):
        return reason_text(v)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return "–" if v is None else str(v)
    if any(s in name for s in _SHARES):
        return percent(v) if v in (0, 1) or abs(v) >= 0.01 else f"{v:.1%}"
    if name.endswith("_s") or name.startswith("wait_s."):
        return "0 s" if v == 0 else seconds(v)
    return fmt_metric(name, v)


def _spread(name: str, values) -> str:
    got = story_plan.spread(values)
    if got is None:  # a class name (top holder), a reason or nothing: each value with its count
        return story_mod.spread([value_text(name, v) if v is not None else None for v in values])
    mid, lo, hi = (value_text(name, v) for v in got)
    if lo.endswith(" s") and hi.endswith(" s"):  # one unit for the three: `0.70 s [0.63–0.77]`
        lo, hi = lo[:-2], hi[:-2]
    return f"{mid} [{lo}–{hi}]"


def _table(a: story_mod.Audit, labels: list[str], complete: bool) -> list[dict]:
    """One row per claim: robust?, the claim, per scale `k/N · median [min–max]`, requests behind it."""
    rows = []
    for i, c in enumerate(a.story.claims):
        robust = all(a.tallies[s][i].robust for s in a.scales)  # marked as `python -m engine story` marks it
        mark = ("✓" if robust else "~" if c.get("edge") else "✗") if complete else "…"
        row = {"": mark, _("Claim"): claim_text(c, labels)}
        support = []
        for s in a.scales:
            t = a.tallies[s][i]
            cell = f"{t.k}/{t.n}" if t.n else "–"
            if t.n:
                cell += " · " + _spread(c["metric"], [v.value for v in t.verdicts])
                if "other" in c:
                    cell += " " + _("vs {ref}").format(ref=_spread(c["metric"], [v.ref for v in t.verdicts]))
            row[f"×{s:g}"] = cell
            support.extend(t.support)
        n = story_plan.support_range(support)
        if n is None:
            row[_("Requests behind")] = "–"
        else:
            text = f"n {n[0]}" if n[0] == n[1] else f"n {n[0]}–{n[1]}"
            row[_("Requests behind")] = text + (" · " + _("n < 100") if n[0] < story_plan.FEW else "")
        rows.append(row)
    return rows


def _edge(p: story_plan.Plan, done: dict, i: int, labels: list[str]) -> None:
    c = p.story.claims[i]
    frame = story_plan.edge_frame(p, done, i)
    name = metric_name(c["metric"])
    st.markdown("**" + plain(claim_text(c, labels)) + "**")
    if "other" in c:
        threshold, threshold_name = None, _("{factor} × [{run}] (median)").format(
            factor=f"{c.get('factor', 1.0):g}", run=labels[c["other"]])
    else:
        threshold, threshold_name = float(c["value"]), _("threshold: {op} {value}").format(
            op=OPS[c["op"]], value=value_text(c["metric"], c["value"]))
    timed = value_text(c["metric"], 1.0).endswith(" s")
    fig = edge_band(frame, y_title=f"{name} (s)" if timed else name,
                    x_title=_("load (every class's arrival rate × the scale)"),
                    value_name=_("{name} [{run}], median over seeds").format(name=name, run=labels[c["run"]]),
                    band_name=_("min–max over the seeds"),
                    threshold_name=threshold_name, threshold=threshold)
    st.plotly_chart(fig, key=f"story_edge_{i}", theme=None, config={"displaylogo": False})
    held = frame.groupby("scale")["ok"].agg(["sum", "count"]) if len(frame) else None
    if held is not None:
        st.caption(_("Holds on: {per_scale} · band = min–max over the seeds, line = median").format(
            per_scale=", ".join(f"×{s:g} {int(r['sum'])}/{int(r['count'])}" for s, r in held.iterrows())))
