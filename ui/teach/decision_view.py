"""The workshop's decision, on the page: what P0 waited on, the remedies the rule suggests, each
one's benefit over the seeds and its capacity cost, and the choice.

Runs on the workshop's traffic (classic-inversion as shipped, vLLM's FCFS) or on the sidebar's
scenario — an uploaded scenario or trace included — over the sidebar's seeds per figure. Stages,
each waiting for the one before: the configuration as is on N seeds (page workers, `RunSamples`
with the top class's waits) → `engine.sweeps.diagnosis`; under FCFS the same traffic under priority,
diagnosed again (`engine.sweeps.remedy_rule`, rule 1) → the candidates, each on the same N seeds → their
capacity (`ui.runtime.capacity_jobs`, background, shared and kept) → `ui.teach.decision.choose`. A fragment
polls twice a second while anything is missing, and one full rerun stops its timer at the end.
The runs and searches are shared by every session (a second participant gets them at once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from engine.config.scenario import Scenario, apply_overrides, from_dict, load, to_dict
from engine.sweeps.diagnosis import Diagnosis, diagnose
from engine.sweeps.evidence import RunSamples, default_seeds
from engine.sweeps.remedy_rule import NO_RULE, SIGNIFICANT, Remedy, reorder, suggest

from ..charts.fig_decision import benefit_cost
from ..frame import i18n
from ..frame.i18n import _
from ..frame.seeds import gather, seed_keys
from ..frame.untrusted import plain
from ..panels import capacity_table, spread
from ..panels.text import percent, seconds
from ..panels.vocab import look
from ..runtime import runs
from ..runtime.capacity_jobs import Spec
from . import recap
from .decision import AS_IS, Choice, Judged, Option, choose, judge, options

KEY = "ws_decide_on"
ON = ("workshop", "sidebar")
POLL_S = 0.5


def viewer() -> str:
    return runs.viewer_id() + "-decision"


def panel(lab) -> None:
    """The decision step (below the recap)."""
    st.subheader(_("Decide: from P0's waits to a remedy, its benefit and its cost"))
    st.caption(_("What the top class waited on, over the seeds; the remedies a rule of this lab suggests for it, "
                 "sized from the runs; what each buys over the same seeds and what it costs as capacity; and the "
                 "cheapest that brings the top class within its SLO. The rule: `engine/sweeps/remedy_rule.py`."))
    ss = st.session_state
    if ss.get(KEY) not in ON:
        ss[KEY] = ON[0]
    yours = _("an uploaded scenario") if lab.uploaded else lab.preset
    names = {"workshop": _("The workshop's traffic ({name}, vLLM's FCFS)").format(name=recap.TRAFFIC),
             "sidebar": _("Your scenario in the sidebar ({name})").format(name=plain(yours))}
    on = st.radio(_("Decide for"), ON, format_func=names.__getitem__, key=KEY, horizontal=True)
    base = load(recap.TRAFFIC) if on == "workshop" else lab.scenario
    n = int(lab.seeds)
    busy = not progress(base.key(), n).final
    st.fragment(run_every=POLL_S if busy else None)(_draw)(base.key(), n, busy)


@dataclass
class Progress:
    """How far the stages have come (module docstring)."""

    seeds: tuple[int, ...]
    before: Diagnosis | None = None
    after: Diagnosis | None = None
    remedies: list[Remedy] = field(default_factory=list)
    opts: list[Option] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    judged: list[Judged] = field(default_factory=list)
    choice: Choice | None = None
    waiting: str = ""  # what is being run now ("" when nothing)
    failed: dict[int, str] = field(default_factory=dict)
    error: str | None = None  # why the capacity search stopped
    final: bool = False


def progress(base_key: str, n: int) -> Progress:
    """Every stage as far as the shared pools have it; states the wish list and asks for the search."""
    base = from_dict(json.loads(base_key))
    seeds = tuple(default_seeds(base.seed, n))
    pool = runs.samples_pool()
    p = Progress(seeds)
    wish: list[str] = []

    def got(sc: Scenario) -> list[RunSamples] | None:
        """Its seeds' runs once every one has finished or failed (failed ones left out), else None."""
        keys = list(seed_keys(sc, n))
        wish.extend(k for k in keys if k not in wish)
        pool.want(viewer(), wish)
        done, failed = pool.results(viewer(), keys)
        g = gather(seeds, keys, None, done, failed)
        p.failed.update(g.failed)
        return g.complete() if g.settled else None

    first = got(base)
    if first is None:
        p.waiting = _("the configuration as is")
        return p
    if not first:  # every seed failed: nothing to diagnose (the warning says why)
        p.final = True
        return p
    p.before = diagnose([r.waits for r in first])
    fix = reorder(p.before)
    if fix is not None:
        again = got(from_dict(apply_overrides(to_dict(base), fix.overrides)))
        if again is None:
            p.waiting = _("the same traffic under priority, to diagnose it again")
            return p
        p.after = diagnose([r.waits for r in again]) if again else None
    p.remedies = suggest(p.before, p.after)
    if not p.remedies:
        p.final = True
        return p
    p.opts, p.refused = options(base, p.remedies)
    have = {o.key: got(o.scenario) for o in p.opts}
    if any(v is None for v in have.values()):
        p.judged = judge(p.opts, {k: v for k, v in have.items() if v})
        p.waiting = _("the remedies on the same seeds")
        return p
    spec = Spec(tuple(o.scenario.key() for o in p.opts), seeds, 0, gpus=False)
    from ..runtime.capacity_live import jobs

    job = jobs().get(spec, viewer())
    p.judged = judge(p.opts, {k: v for k, v in have.items() if v}, job.view())
    p.choice = choose(p.judged)
    if job.status == "running":
        p.waiting = _("capacity, in the background ({runs} runs so far)").format(runs=len(job.runs))
    elif job.error:
        p.error = job.error
    p.final = job.status != "running"
    return p


def _draw(base_key: str, n: int, polling: bool) -> None:
    i18n.set_language(st.session_state.get("lang"))  # a fragment's rerun runs without the frame
    p = progress(base_key, n)
    with st.container(key=f"ws_decision_{'done' if p.final else 'live'}"):
        if p.waiting:
            st.caption(":material/progress_activity: " + _("Running {what} on seeds {seeds}…").format(
                what=p.waiting, seeds=spread.seed_list(p.seeds)))
        if p.failed:
            seed, why = next(iter(p.failed.items()))
            st.warning(_("{k} seed(s) failed and are left out (seed {seed}: {why}).").format(
                k=len(p.failed), seed=seed, why=plain(why)), icon=":material/error:")
        if p.error:
            st.warning(_("The capacity search stopped: {why}").format(why=plain(p.error)), icon=":material/error:")
        if p.before is not None:
            _diagnosis(p.before, p.seeds, _("**1. What {cls} waited on**, as the configuration is"))
        if p.after is not None:
            _diagnosis(p.after, p.seeds, _("**… and under the priority policy** (the queue's order hid what {cls} "
                                           "would wait on next)"))
        if p.before is not None and p.final and not p.remedies:
            if p.before.waited:
                st.info(_("The rule has no remedy for what {cls} waited on here (each reason under {share} of its "
                          "wait, or one the rule leaves to the server's settings).").format(
                    cls=p.before.top, share=percent(SIGNIFICANT)), icon=":material/info:")
            else:
                st.success(_("{cls} never waited on these seeds: nothing to decide.").format(cls=p.before.top),
                           icon=":material/check_circle:")
        if p.remedies:
            _candidates(p)
    if p.final and polling:
        st.rerun()


def _diagnosis(d: Diagnosis, seeds: tuple[int, ...], title: str) -> None:
    st.markdown(title.format(cls=d.top))
    if not d.waited:
        st.caption(_("{cls} did not wait on any of these seeds.").format(cls=d.top))
        return
    rows = []
    for reason, e in d.shares.items():
        lk = look(reason)
        rows.append({_("wait reason"): f"{lk.name}: {lk.short}", _("share of the wait"): percent(e.value),
                     _("seeds' range"): spread.span(e.lo, e.hi, percent)})
    st.dataframe(rows, hide_index=True, width="stretch")
    w = d.wait_s
    st.caption(_("{cls} waited {s} a run on average ({n} seeds: {range}); a share is the seconds {cls} waited on "
                 "that reason over every seed / all its waiting, the range is each seed's own share.").format(
        cls=d.top, s=seconds(w.value), n=d.seeds, range=spread.span(w.lo, w.hi, seconds)))
    silent = [r for r in NO_RULE if d.share(r) >= SIGNIFICANT]
    if silent:
        st.caption(_("No rule here for {reasons}: a server setting or the top class's own cap.").format(
            reasons=", ".join(look(r).name for r in silent)))


def remedy_words(r: Remedy | None) -> str:
    if r is None:
        return _("as is")
    words = {"priority": lambda: _("priority policy"),
             "token_reserve": lambda: _("lendable token reserve of {n:,} tokens").format(n=r.sizes["token_reserve"]),
             "kv_reserve": lambda: _("KV reserve of {n:,} blocks").format(n=r.sizes["kv_reserve"]),
             "holder_split": lambda: _("{cls} prompts split at {n:,} tokens").format(n=r.sizes["holder_split"],
                                                                                    cls=r.sizes["holder"]),
             "holder_cap": lambda: _("at most {n} {cls} running").format(n=r.sizes["holder_cap"],
                                                                          cls=r.sizes["holder"])}
    return " + ".join(words[part]() for part in r.parts)


def why_words(p: Progress) -> list[str]:
    """Where each size comes from: the runs, not a number typed in."""
    d = p.after or p.before
    out = []
    parts = {part: r for r in p.remedies for part in r.parts}
    if "priority" in parts:
        out.append(_("**Priority policy**: under {policy}, {share} of {cls}'s wait was behind the queue's order "
                     "(head of line: a request ahead that does not fit).").format(
            policy=p.before.policy, share=percent(p.before.share("head_of_line")), cls=p.before.top))
    if "token_reserve" in parts:
        out.append(_("**Token reserve**: {cls}'s prompts, 90th percentile {p:,} tokens → {n:,} reserved of each "
                     "step's {b:,}; lendable, so a step without {cls} waiting gives it to the others.").format(
            cls=d.top, p=d.prompt, n=parts["token_reserve"].sizes["token_reserve"], b=d.budget))
    if "kv_reserve" in parts:
        out.append(_("**KV reserve**: the blocks {cls}'s KV waits needed, 90th percentile {b:,} → {n:,} of "
                     "{kv:,} blocks only {cls} may take.").format(
            cls=d.top, b=d.kv_need, n=parts["kv_reserve"].sizes["kv_reserve"], kv=d.kv_blocks))
    if "holder_split" in parts:
        r = parts["holder_split"]
        out.append(_("**Split {h}'s prompts**: {h} held the most KV while {cls} waited, {hb:,} blocks a request "
                     "(90th percentile, {t:,} tokens); pieces of half the step's budget, {n:,} tokens, submitted in "
                     "sequence, never fill a step and leave {cls} room between them.").format(
            h=r.sizes["holder"], cls=d.top, hb=d.holder_blocks, t=d.holder_blocks * d.block_size,
            n=r.sizes["holder_split"]))
    if "holder_cap" in parts:
        r = parts["holder_cap"]
        out.append(_("**Running cap**: {h} held the most KV while {cls} waited, {hb:,} blocks a request (90th "
                     "percentile); ({kv:,} − {need:,}) ÷ {hb:,} → at most {n} at once beside one {cls} prompt.").format(
            h=r.sizes["holder"], cls=d.top, hb=d.holder_blocks, kv=d.kv_blocks, need=d.kv_need,
            n=r.sizes["holder_cap"]))
    return out


def _candidates(p: Progress) -> None:
    st.markdown(_("**2. The remedies the rule suggests**, sized from these runs"))
    st.markdown("\n".join(f"- {line}" for line in why_words(p)))
    for key, why in p.refused.items():
        st.caption(_("Left out ({key}): {why}").format(key=key, why=plain(why)))
    if not p.judged:
        return
    st.markdown(_("**3. What each buys, over seeds {seeds}, and what it costs**").format(
        seeds=spread.seed_list(p.seeds)))
    names = {j.option.key: remedy_words(j.option.remedy) for j in p.judged}
    top = p.judged[0].top
    base = p.judged[0] if p.judged[0].option.key == AS_IS else None
    rows = []
    for j in p.judged:
        row = {_("configuration"): names[j.option.key]}
        e = j.p99[top]
        row[_("{cls} P99 TTFT").format(cls=top)] = spread.cell(e, seconds)
        row[_("requests behind")] = spread.requests(e.n)
        row[_("vs as is")] = spread.better_on(j.better.k, j.better.n) if j.better else "–"
        row[_("{cls} within its SLO").format(cls=top)] = _("{k} of {n} seeds").format(k=j.meets.k, n=j.meets.n)
        for c, other in j.p99.items():
            if c != top:
                row[_("{cls} P99 TTFT").format(cls=c)] = spread.cell(other, seconds)
        row[_("not served")] = f"{j.lost:,}"
        f = j.capacity or {}
        row[_("capacity (× the offered load)")] = capacity_table.scale(f) if f else "…"
        row[_("capacity change per GPU")] = capacity_table.change(f, base.capacity if base else None) if f else "…"
        rows.append(row)
    st.table(pd.DataFrame(rows), hide_index=True)  # static, cells wrap: its ten columns show at 1280 px
    st.caption(_("P99 TTFT: every seed's requests pooled, the seeds' min–max in brackets (“n < 100”: some seed had "
                 "fewer requests, its P99 is about their maximum). Capacity: the largest scale of this traffic at "
                 "which every class with an SLO meets it on every seed, by bisection to 2 %; its change is per GPU "
                 "against as is."))
    slo = p.opts[0].scenario.request_class(top).slo.ttft_s if p.opts else None
    ch = p.choice
    chosen = ch.pick.option.key if ch and ch.pick and ch.kind == "remedy" else None
    if any(j.capacity_known for j in p.judged):
        st.plotly_chart(benefit_cost(p.judged, names, slo, chosen), key="ws_decision_fig", theme=None,
                        config={"displaylogo": False})
        pending = [names[j.option.key] for j in p.judged if not j.capacity_known]
        if pending:
            st.caption(_("Not drawn yet (capacity still searched): {names}.").format(names=", ".join(pending)))
    _choice(ch, names, top, base)


def _choice(ch: Choice | None, names: dict[str, str], top: str, base: Judged | None) -> None:
    if ch is None:
        return
    if ch.kind == "keep":
        st.success(_("**Decision: keep it as it is.** {cls} meets its SLO on {k} of {n} seeds without a "
                     "remedy.").format(cls=top, k=ch.k, n=ch.n), icon=":material/check_circle:")
        return
    j = ch.pick
    if ch.kind == "none":
        if j is None:
            return
        st.warning(_("**No decision:** no remedy the rule suggests brings {cls} within its SLO on more than half the "
                     "seeds; the closest, {name}, on {k} of {n} (P99 TTFT {v}).").format(
            cls=top, name=names[j.option.key], k=ch.k, n=ch.n, v=spread.cell(j.p99[top], seconds)),
            icon=":material/warning:")
        return
    f = j.capacity or {}
    text = _("**Decision: {name}.** It brings {cls} within its SLO on {k} of {n} seeds (P99 TTFT {v}; as is "
             "{v0}) and leaves a capacity of {cap} the offered load (as is: {cap0}; per GPU: {change}): the most "
             "capacity left among the remedies that do so on {k} of {n} seeds.").format(
        name=names[j.option.key], cls=top, k=ch.k, n=ch.n, v=spread.cell(j.p99[top], seconds),
        v0=spread.cell(base.p99[top], seconds) if base else "–",
        cap=capacity_table.scale(f) if f else "…",
        cap0=capacity_table.scale(base.capacity) if base and base.capacity else "…",
        change=capacity_table.change(f, base.capacity if base else None) if f else "…")
    if not ch.final:
        text += " " + _("*Provisional: the capacity of some of them is still being searched.*")
    st.success(text, icon=":material/task_alt:")
