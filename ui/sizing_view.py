"""The reserve-sizing aid on a page: a button, then the smallest token and KV reserve that keep the
top class inside its SLO on the sidebar's traffic, and what each costs (`ui.sizing`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from . import runs, sizing
from .i18n import _
from .lab import Lab
from .limits import why_not
from .text import plain, seconds

STORE = "_sizing"


def _summarize(keys: list[str]) -> list[dict]:
    done, failed = runs.summaries(keys, purpose="sizing")
    missing = [k for k in keys if k not in done]
    if missing:
        raise RuntimeError(failed.get(missing[0], _("timed out")))
    return [done[k] for k in keys]


def _row(r: sizing.Sizing | None, what: str, unit: str, top: str) -> dict:
    if r is None or not r.tried:
        return {_("Reserve"): what, _("Smallest that meets the SLO"): "–"}
    if r.value is None:
        best = min(r.tried, key=lambda v: r.tried[v]["classes"][top]["ttft_p99"] or float("inf"))
        p99 = r.tried[best]["classes"][top]["ttft_p99"]
        return {_("Reserve"): what,
                _("Smallest that meets the SLO"): _("none up to {v:,.0f} {unit}").format(v=max(r.tried), unit=unit),
                _("{top} P99 TTFT there").format(top=top): _("best {p} at {v:,.0f}").format(p=seconds(p99), v=best)}
    c = r.costs()
    row = {_("Reserve"): what, _("Smallest that meets the SLO"): f"{r.value:,.0f} {unit}",
           _("{top} P99 TTFT there").format(top=top): seconds(r.at["classes"][top]["ttft_p99"]),
           _("{top} P99 TTFT without").format(top=top): seconds(r.base["classes"][top]["ttft_p99"]),
           _("Throughput change"): f"{c['throughput']:+.1%}" if c.get("throughput") is not None else "–",
           _("Batch fill change"): _("{d:+.0f} pts").format(d=c["batch_fill"] * 100),
           _("Idle reserve"): f"{c['reserve_idle']:.1%}"}
    for k, v in c.items():
        if k.endswith(".ttft_p99"):
            row[_("{cls} P99 TTFT ×").format(cls=k.split(".")[0])] = f"{v:.2f}" if v is not None else "–"
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
                     "within its {slo} s SLO for this traffic and seed — each on its own, with the sidebar's other "
                     "settings — and what each costs against no reserve: a coarse grid up to half the budget (half "
                     "the KV cache), then a finer one; about 10 runs each, in parallel.").format(top=top,
                                                                                                  slo=f"{slo:g}"))
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
            st.caption(_("“Meets” means that setting and every larger one on the grid keep the P99 within the SLO "
                         "with no more requests turned away than without a reserve. One seed: check the knee on the "
                         "P99 curves page with several seeds before relying on it."))
