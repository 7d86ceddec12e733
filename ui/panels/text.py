"""Numbers → words: KPI formatting, the "what happened" paragraph, a request's story.

Pure functions over the summary dict and result frames. Anything that came from a user (names,
descriptions) goes through `ui.frame.untrusted.plain` so markdown cannot inject links, images or formatting.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from engine.sim.derived import top_holder_classes, top_reasons

from ..frame.i18n import N_, _, ngettext
from ..frame.untrusted import plain
from .vocab import look


def _sig3(x: float) -> str:
    """Three significant digits without exponent: 0.153, 1.68, 15.9, 124."""
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def seconds(x: float | None) -> str:
    """Latency in seconds, 3 significant digits (the precision the share-link test compares)."""
    return "–" if x is None else f"{_sig3(x)} s"


def millis(x: float | None) -> str:
    return "–" if x is None else f"{_sig3(x * 1000)} ms"


def percent(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


@dataclass(frozen=True)
class Kpi:
    """One metric card: label, shown value, delta text vs baseline (None = no delta), colour rule."""

    label: str
    value: str
    delta: str | None
    delta_color: str  # "inverse" when lower is better; "orange" for a warning instead of a delta
    arrow: str = "auto"  # "off" when the delta is a warning, not a change
    help: str | None = None
    description: str | None = None  # beside the delta: on how many seeds it holds
    note: str | None = None  # the line under the card: what the figure rests on (seeds, range, requests)


def _delta(cur: float | None, base: float | None, fmt) -> str | None:
    if cur is None or base is None:
        return None
    d = cur - base
    shown = fmt(abs(d))
    if fmt(0.0) == shown:
        return None  # no visible change
    return f"{'+' if d > 0 else '-'}{shown}"  # ASCII sign: st.metric picks the arrow from it


def _pts(cur: float, base: float) -> str | None:
    d = round((cur - base) * 100)
    return None if d == 0 else f"{d:+d} pts"


def _secs(x: float) -> str:
    return f"{x:.1f} s"


KPI_FIELDS = [  # (summary key, label, format, colour rule, shown as a card)
    ("ttft_p99", N_("P99 TTFT"), seconds, "inverse", True),
    ("ttft_p50", N_("P50 TTFT"), seconds, "inverse", True),
    ("slo_attainment", N_("SLO met"), percent, "normal", True),
    ("inversion_s", N_("Inversion"), _secs, "inverse", True),
    ("tpot_p99", N_("P99 TPOT"), millis, "inverse", False),
    ("blocked_s", N_("Blocked time"), _secs, "inverse", False),
    ("e2e_p99", N_("P99 end to end"), seconds, "inverse", False),
]


def not_served(c: dict) -> int:
    return int(c.get("rejected", 0)) + int(c.get("unfinished", 0))


def turned_away(cur: dict, base: dict | None) -> str | None:
    """"3 of 3 rejected" when more of the class's requests were rejected or left unfinished than in
    the baseline: then its latencies are over fewer requests and no delta may look like a gain."""
    if base is None or not_served(cur) <= not_served(base):
        return None
    parts = []
    if cur.get("rejected", 0) > base.get("rejected", 0):
        parts.append(_("{k:,} of {n:,} rejected").format(k=cur["rejected"], n=cur["n"]))
    if cur.get("unfinished", 0) > base.get("unfinished", 0):
        parts.append(_("{k:,} of {n:,} unfinished").format(k=cur["unfinished"], n=cur["n"]))
    return _(", ").join(parts)


def class_kpis(name: str, cur: dict, base: dict | None, cards_only: bool = True) -> list[Kpi]:
    """The metric cards of one class; `base` is the baseline's class summary (or None).

    A class that lost requests to a cap (rejected) or to the run's end (unfinished) against the
    baseline shows that, in orange, in place of every latency delta — never a green "improvement".
    """
    warn = turned_away(cur, base)
    out = []
    for key, label, fmt, color, card in KPI_FIELDS:
        if cards_only and not card:
            continue
        v = cur.get(key)
        shown = fmt(v) if v is not None else "–"
        if warn:
            out.append(Kpi(f"{name} · {_(label)}", shown, warn, "orange", "off",
                           _("Compared with the baseline, fewer of this class's requests were served, so this "
                             "number is over fewer requests: it is not an improvement.")))
            continue
        d = _delta(v, base.get(key), fmt) if base is not None else None
        if key == "slo_attainment" and d is not None:
            d = _pts(v, base[key])
        out.append(Kpi(f"{name} · {_(label)}", shown, d, color))
    n = not_served(cur)
    d = None
    if base is not None and n != not_served(base):
        d = f"{n - not_served(base):+,}"
    not_served_label = _("Not served")
    out.append(Kpi(f"{name} · {not_served_label}", f"{n:,}", d, "inverse",
                   help=_("Of {n:,} measured requests: {r:,} rejected by a cap, {u:,} unfinished when the run "
                          "ended.").format(n=cur["n"], r=cur.get("rejected", 0), u=cur.get("unfinished", 0))))
    return out


def system_kpis(cur: dict, base: dict | None) -> list[Kpi]:
    rows = [("served_tok_s", _("Served rate (tok/s)"), lambda x: f"{x:,.0f}", "normal"),
            ("batch_fill", _("Batch fill"), percent, "normal"),
            ("kv_util_mean", _("Mean KV use"), percent, "normal"),
            ("preemptions", _("Preemptions"), lambda x: f"{x:,}", "inverse"),
            ("rejected", _("Rejected"), lambda x: f"{x:,}", "inverse")]
    out = []
    for key, label, fmt, color in rows:
        v = cur[key]
        d = None
        if base is not None:
            d = _pts(v, base[key]) if fmt is percent else _delta(v, base[key], fmt)
        out.append(Kpi(label, fmt(v), d, color))
    return out


def details_table(summary: dict, base: dict | None) -> pd.DataFrame:
    """Every per-class number (cards and the rest), with the baseline's beside it."""
    rows = []
    for name, c in summary["classes"].items():
        b = base["classes"].get(name) if base else None
        for key, label, fmt, _c, _s in KPI_FIELDS:
            row = {_("class"): name, _("metric"): _(label), _("value"): fmt(c[key]) if c.get(key) is not None else "–"}
            if base is not None:
                row[_("without remedies")] = fmt(b[key]) if b and b.get(key) is not None else "–"
            rows.append(row)
        row = {_("class"): name, _("metric"): _("Rejected · unfinished"),
               _("value"): f"{c['rejected']:,} · {c['unfinished']:,}"}
        if base is not None:
            row[_("without remedies")] = f"{b['rejected']:,} · {b['unfinished']:,}" if b else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def holders_of(holders: pd.DataFrame, wait_id: int) -> list[tuple[int, str, int]]:
    """(request, class, blocks) of the holders a wait segment saw when it opened, biggest first."""
    h = holders[(holders["wait"] == wait_id) & ~holders["alert"]]
    return list(zip(h["request"].tolist(), h["class"].astype(str).tolist(), h["blocks"].tolist()))


def how_it_waited(c: dict, waits: pd.DataFrame, holders: pd.DataFrame) -> list[str]:
    """Sentences on how a class's requests waited in one run (`c`: its summary): blocked time and
    top reasons, the biggest KV holders, inversion — or that they never waited. The Playground's
    "What happened" says this of the shown run, over seeds or not (`ui.panels.kpis`)."""
    if c["blocked_s"] <= 0:
        return [_("Its requests never waited.")]
    out = []
    reasons = top_reasons(waits, c["priority"])
    if reasons:
        why = _("; ").join(_("{reason} ({s:.1f} s)").format(reason=look(r).short, s=s) for r, s in reasons)
        out.append(_("Its requests spent {b:.1f} s blocked in total. Top reasons: {why}.").format(
            b=c["blocked_s"], why=why))
    by_class = top_holder_classes(waits, holders, c["priority"])
    if by_class:
        share = sum(s for _k, s in by_class)
        who = _(", ").join(f"{plain(k)} ({s / share:.0%})" for k, s in by_class[:3])
        out.append(_("When short of KV, the biggest holder belonged to: {who}.").format(who=who))
    if c["inversion_s"] > 0:
        out.append(_("{k} of its requests saw lower-priority requests admitted while they waited (priority "
                     "inversion, {s:.1f} s in total).").format(k=c["inverted_requests"], s=c["inversion_s"]))
    else:
        out.append(_("No lower-priority request was admitted while it waited (no inversion)."))
    return out


def what_happened(summary: dict, waits: pd.DataFrame, holders: pd.DataFrame, base: dict | None = None) -> str:
    """A short markdown paragraph: who waited, why, and on whom."""
    classes = summary["classes"]
    if not classes:
        return _("No requests were simulated.")
    top, c = next(iter(classes.items()))
    if c["slo_attainment"] is not None:
        first = _("**{cls}** (the most important class, priority {prio}) sent {n} requests; P99 time to first token "
                  "was **{p99}** and {slo} met their SLO.")
    else:
        first = _("**{cls}** (the most important class, priority {prio}) sent {n} requests; P99 time to first token "
                  "was **{p99}**.")
    parts = [first.format(cls=plain(top), prio=c["priority"], n=c["n"], p99=seconds(c["ttft_p99"]),
                          slo=percent(c["slo_attainment"]))]
    if base is not None and base["classes"].get(top, {}).get("ttft_p99") is not None and c["ttft_p99"] is not None:
        b = base["classes"][top]["ttft_p99"]
        warn = turned_away(c, base["classes"][top])
        if c["ttft_p99"] < b:
            text = _("That is down from {b} without the remedies.") if not warn else _(
                "That is down from {b} without the remedies, but {warn} (not an improvement).")
        elif c["ttft_p99"] > b:
            text = _("That is up from {b} without the remedies.") if not warn else _(
                "That is up from {b} without the remedies, but {warn} (not an improvement).")
        else:
            text = _("That is the same as {b} without the remedies.") if not warn else _(
                "That is the same as {b} without the remedies, but {warn} (not an improvement).")
        parts.append(text.format(b=seconds(b), warn=warn))
    parts += how_it_waited(c, waits, holders)
    for name, k in classes.items():
        if k.get("rejected"):
            parts.append(_("{r:,} of {cls}'s {n:,} requests were rejected by a cap (they are not in its "
                           "latencies).").format(r=k["rejected"], cls=plain(name), n=k["n"]))
    if summary["reserve_idle_token_frac"] > 0.001:
        parts.append(_("The strict reserve left {p} of the token budget idle.").format(
            p=percent(summary["reserve_idle_token_frac"])))
    return _(" ").join(parts)


def _ahead_text(g: pd.DataFrame, limit: int = 5) -> str:
    """"#25 P1 at 9.21 s (needed 13 blocks; this one needed 375), …" for admissions ahead."""
    named = [(_("#{o} {cls} at {t:.2f} s (needed {n:,} blocks; this one needed {m:,})") if m >= 0 else
              _("#{o} {cls} at {t:.2f} s (needed {n:,} blocks)")).format(o=o, cls=plain(c), t=t, n=n, m=m)
             for o, c, t, n, m in zip(g["overtaker"], g["overtaker_class"], g["t_s"], g["overtaker_need_blocks"],
                                      g["need_blocks"])]
    more = len(named) - limit
    return _(", ").join(named[:limit]) + (_(" and {k} more (table below)").format(k=more) if more > 0 else "")


def request_story(req: pd.Series, waits: pd.DataFrame, holders: pd.DataFrame,
                  got_ahead: pd.DataFrame | None = None) -> list[str]:
    """One sentence per step of a request's life, in time order (markdown); `got_ahead` (from
    `ui.panels.inversions.ahead`) names the lower-priority requests admitted while it waited."""
    rid = int(req["id"])
    lines = [_("t = {t:.2f} s: request #{rid} ({cls}, priority {prio}) arrives with {p:,} prompt tokens and will "
               "write {o:,}.").format(t=req["arrival_s"], rid=rid, cls=plain(req["class"]), prio=req["priority"],
                                      p=req["prompt_tokens"], o=req["output_tokens"])]
    if req["status"] == "rejected":
        lines.append(_("It is rejected: {why}.").format(why=plain(req["reason"] or _("over a cap"))))
        return lines
    for w in waits[waits["request"] == rid].sort_values("start_s").itertuples(index=False):
        s = _("t = {a:.2f}–{b:.2f} s ({d:.2f} s): waits — {why}").format(a=w.start_s, b=w.end_s, d=w.duration_s,
                                                                         why=look(w.reason).explain)
        if w.need_blocks >= 0:
            s += _("; needs {n} blocks, {f} free").format(n=w.need_blocks, f=w.free_blocks)
        top = holders_of(holders, w.id)
        if top:
            s += _("; biggest holders {who}").format(
                who=_(", ").join(_("#{r} {cls} ({b} blocks)").format(r=r, cls=plain(c), b=b) for r, c, b in top))
        if w.eta_s == w.eta_s:
            s += _("; enough blocks expected in ~{eta:.1f} s").format(eta=w.eta_s)
        if got_ahead is not None:
            g = got_ahead[(got_ahead["request"] == rid) & (got_ahead["t_s"] >= w.start_s)
                          & (got_ahead["t_s"] <= w.end_s)]
            if len(g):
                s += ngettext(". **Meanwhile {k} lower-priority request was admitted ahead of it**: {who}",
                              ". **Meanwhile {k} lower-priority requests were admitted ahead of it**: {who}",
                              len(g)).format(k=len(g), who=_ahead_text(g))
        lines.append(s + _("."))
    if pd.notna(req["first_token_s"]):
        lines.append(_("t = {t:.2f} s: first token (TTFT {ttft:.3f} s).").format(t=req["first_token_s"],
                                                                                 ttft=req["ttft_s"]))
    if req["preemptions"]:
        lines.append(_("It was preempted {k} time(s), recomputing {n:,} tokens.").format(
            k=req["preemptions"], n=req["recomputed_tokens"]))
    if pd.notna(req["finish_s"]):
        lines.append(_("t = {t:.2f} s: finished (end to end {e:.2f} s).").format(t=req["finish_s"], e=req["e2e_s"]))
    else:
        lines.append(_("It did not finish before the run ended."))
    if req["inversion_s"] > 0:
        lines.append(_("Inversion: {s:.2f} s in {k} episode(s) while lower-priority requests were admitted.").format(
            s=req["inversion_s"], k=req["inversion_episodes"]))
    return lines


def summary_table(summaries: dict[str, dict]) -> pd.DataFrame:
    """Side-by-side KPI table: rows = metric, columns = configuration."""
    rows: dict[str, dict[str, str]] = {}
    for label, s in summaries.items():
        for name, c in s["classes"].items():
            for key, title, fmt, _c, _s in KPI_FIELDS:
                v = c.get(key)
                rows.setdefault(f"{name} {_(title)}", {})[label] = fmt(v) if v is not None else "–"
        rows.setdefault(_("Served rate"), {})[label] = f"{s['served_tok_s']:,.0f} tok/s"
        rows.setdefault(_("Batch fill"), {})[label] = percent(s["batch_fill"])
        for name, c in s["classes"].items():
            rows.setdefault(_("{cls} rejected · unfinished").format(cls=name), {})[label] = \
                f"{c['rejected']:,} · {c['unfinished']:,}"
    return pd.DataFrame(rows).T
