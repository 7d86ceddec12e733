"""The reserve-sizing aid on a page: a button, then the smallest token and KV reserve that keep the
top class inside its SLO on the sidebar's traffic, and what each costs (`ui.runtime.sizing`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..frame.i18n import _
from ..frame.lab import Lab
from ..frame.limits import why_not
from ..frame.untrusted import plain
from ..runtime import runs, sizing
from .text import seconds

STORE = "_sizing"


def _summarize(keys: list[str]) -> list[dict]:
    done, failed = runs.summaries(keys, purpose="sizing")
    missing = [k for k in keys if k not in done]
    if missing:
        raise RuntimeError(failed.get(missing[0], _("timed out")))
    return [done[k] for k in keys]


def _spread(e: dict) -> str:
    """A P99 over seeds: the one value, or 'lo–hi s (N seeds)'."""
    if e["value"] is None:
        return "–"
    if len(e["per_seed"]) == 1 or e["lo"] == e["hi"]:
        return seconds(e["value"])
    return _("{lo}–{hi} ({n} seeds)").format(lo=seconds(e["lo"]).removesuffix(" s"), hi=seconds(e["hi"]),
                                               n=len(e["per_seed"]))


def _lost(s: dict, names) -> str:
    """'P2: 3 of 3 rejected; P1: 2 of 500 unfinished' for these classes of summary `s` ('–': none)."""
    out = []
    for name in names:
        c = s["classes"][name]
        for key, word in (("rejected", _("rejected")), ("unfinished", _("unfinished"))):
            if c[key]:
                out.append(_("{cls}: {k} of {n} {what}").format(cls=plain(name), k=c[key], n=c["n"], what=word))
    return "; ".join(out) or "–"


def _row(r: sizing.Sizing | None, what: str, unit: str, top: str) -> dict:
    """One knob's row: the answer, the top class's P99 there and without (over the seeds), the
    costs; when nothing meets, why the closest setting does not count, in the same row."""
    answer, there = _("Smallest that meets the SLO"), _("{top} P99 TTFT there").format(top=top)
    if r is None or not r.tried:
        return {_("Reserve"): what, answer: "–"}
    without = _("{top} P99 TTFT without").format(top=top)
    row = {_("Reserve"): what}
    if r.value is None:
        row[answer] = _("none up to {v:,.0f} {unit}").format(v=max(r.tried), unit=unit)
        w = r.why_not()
        if w is None:  # the P99 never got within the SLO: the lowest there was, above it
            best = min(r.tried, key=lambda v: r.tried[v]["classes"][top]["ttft_p99"] or float("inf"))
            row[there] = _("lowest {p} at {v:,.0f}, above the SLO").format(
                p=seconds(r.tried[best]["classes"][top]["ttft_p99"]), v=best)
        else:
            why = []
            if w["lost"]:
                why.append(_lost(r.tried[w["value"]], w["lost"]))
            if w["misses_again_at"] is not None:
                why.append(_("misses again at {v:,.0f}").format(v=w["misses_again_at"]))
            if w["seeds_missed"]:
                why.append(_("misses on seed {s}").format(s=", ".join(map(str, w["seeds_missed"]))))
            row[there] = _("from {v:,.0f}: {p}, but {why}").format(v=w["value"], p=seconds(w["p99"]),
                                                                   why="; ".join(why) or "–")
        row[without] = seconds(r.base["classes"][top]["ttft_p99"])
        return row
    c = r.costs()
    row |= {answer: f"{r.value:,.0f} {unit}", there: _spread(r.p99(r.value)),
            without: _spread(r.p99(0.0)) if 0.0 in r.seeded else seconds(r.base["classes"][top]["ttft_p99"]),
            _("Batch fill change"): _("{d:+.0f} pts").format(d=c["batch_fill"] * 100),
            _("Idle reserve"): f"{c['reserve_idle']:.1%}"}
    for k, v in c.items():
        if k.endswith(".ttft_p99"):
            row[_("{cls} P99 TTFT ×").format(cls=k.split(".")[0])] = f"{v:.2f}" if v is not None else "–"
    row[_("Not served there")] = _lost(r.at, sizing.lost(r.at))
    return row


def panel(lab: Lab) -> None:
    """The aid for the sidebar's scenario (results kept per scenario for this session)."""
    sc = lab.scenario
    top, slo = sizing.top_of(sc)
    with st.container(border=True):
        st.markdown(_("**Size a P0 reserve for this traffic** (the sidebar's scenario: {name})").format(
            name=plain(_(sc.title) or sc.name)))
        if slo is None:
            st.caption(_("{top} has no TTFT SLO in this scenario, so there is nothing to size against.").format(
                top=top))
            return
        st.caption(_("Finds the smallest token reserve and the smallest KV reserve at which {top}'s P99 TTFT stays "
                     "within its {slo} s SLO for this traffic on {n} seeds — each on its own, with the sidebar's "
                     "other settings — and what each costs against no reserve: a coarse grid up to half the budget "
                     "(half the KV cache) and a finer one on the first seed, then the answer on the others; about "
                     "14 runs each, in parallel.").format(top=top, slo=f"{slo:g}", n=sizing.SEEDS))
        store = st.session_state.setdefault(STORE, {})
        key = sc.key()
        if st.button(_("Size the reserves"), icon=":material/straighten:", key="sizing_run"):
            try:
                with st.spinner(_("Running the reserve grid…")):
                    store[key] = (sizing.size(sc, "reserve", lab.kv_blocks, _summarize, why_not),
                                  sizing.size(sc, "kvres", lab.kv_blocks, _summarize, why_not))
            except RuntimeError as err:
                st.warning(_("The sizing runs failed: {err}").format(err=plain(err)), icon=":material/error:")
        if key in store:
            tok, kv = store[key]
            table = pd.DataFrame([_row(tok, _("Token reserve"), _("tokens"), top),
                                  _row(kv, _("KV reserve"), _("blocks"), top)])
            st.dataframe(table, hide_index=True, width="stretch")
            st.caption(_("“Meets”: on every seed {top}'s P99 TTFT (and TPOT, if it has an SLO for it) is within the "
                         "SLO, none of its requests is turned away, no class loses more requests than without a "
                         "reserve, and every larger setting on the grid keeps the P99 within the SLO too. A P99 of "
                         "fewer than 100 requests a seed is about their maximum.").format(top=top))
