"""Numbers → words: KPI formatting, the "what happened" paragraph, a request's story.

Pure functions over the summary dict and result frames. Anything that came from a user (names,
descriptions) goes through `plain()` so markdown cannot inject links, images or formatting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from .vocab import look

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=\"'])")


def plain(text: str) -> str:
    """User text made inert for st.markdown (every markdown/HTML character escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def quoted(text: str, limit: int = 80) -> str:
    """User text (a link value, a file name) for a message: shortened, escaped, in quotes."""
    s = str(text)
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    if len(s) > limit:
        s = s[:limit] + "…"
    return f"“{plain(s)}”"


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
    ("ttft_p99", "P99 TTFT", seconds, "inverse", True),
    ("ttft_p50", "P50 TTFT", seconds, "inverse", True),
    ("slo_attainment", "SLO met", percent, "normal", True),
    ("inversion_s", "Inversion", _secs, "inverse", True),
    ("tpot_p99", "P99 TPOT", millis, "inverse", False),
    ("blocked_s", "Blocked time", _secs, "inverse", False),
    ("e2e_p99", "P99 end to end", seconds, "inverse", False),
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
        parts.append(f"{cur['rejected']:,} of {cur['n']:,} rejected")
    if cur.get("unfinished", 0) > base.get("unfinished", 0):
        parts.append(f"{cur['unfinished']:,} of {cur['n']:,} unfinished")
    return ", ".join(parts)


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
            out.append(Kpi(f"{name} · {label}", shown, warn, "orange", "off",
                           "Compared with the baseline, fewer of this class's requests were served, so this "
                           "number is over fewer requests: it is not an improvement."))
            continue
        d = _delta(v, base.get(key), fmt) if base is not None else None
        if key == "slo_attainment" and d is not None:
            d = _pts(v, base[key])
        out.append(Kpi(f"{name} · {label}", shown, d, color))
    n = not_served(cur)
    d = None
    if base is not None and n != not_served(base):
        d = f"{n - not_served(base):+,}"
    out.append(Kpi(f"{name} · Not served", f"{n:,}", d, "inverse",
                   help=f"Of {cur['n']:,} measured requests: {cur.get('rejected', 0):,} rejected by a cap, "
                        f"{cur.get('unfinished', 0):,} unfinished when the run ended."))
    return out


def system_kpis(cur: dict, base: dict | None) -> list[Kpi]:
    rows = [("throughput_tok_s", "Throughput (tok/s)", lambda x: f"{x:,.0f}", "normal"),
            ("batch_fill", "Batch fill", percent, "normal"),
            ("kv_util_mean", "Mean KV use", percent, "normal"),
            ("preemptions", "Preemptions", lambda x: f"{x:,}", "inverse"),
            ("rejected", "Rejected", lambda x: f"{x:,}", "inverse")]
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
        for key, label, fmt, _, _ in KPI_FIELDS:
            row = {"class": name, "metric": label, "value": fmt(c[key]) if c.get(key) is not None else "–"}
            if base is not None:
                row["without remedies"] = fmt(b[key]) if b and b.get(key) is not None else "–"
            rows.append(row)
        row = {"class": name, "metric": "Rejected · unfinished", "value": f"{c['rejected']:,} · {c['unfinished']:,}"}
        if base is not None:
            row["without remedies"] = f"{b['rejected']:,} · {b['unfinished']:,}" if b else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def top_reasons(waits: pd.DataFrame, priority: int, n: int = 3) -> list[tuple[str, float]]:
    """(reason, seconds) for the top-priority class, most time first."""
    w = waits[waits["priority"] == priority]
    if not len(w):
        return []
    s = w.groupby("reason", observed=True)["duration_s"].sum().sort_values(ascending=False)
    return [(str(k), float(v)) for k, v in s.head(n).items() if v > 0]


def top_holder_classes(waits: pd.DataFrame, holders: pd.DataFrame, priority: int) -> list[tuple[str, float]]:
    """Classes of the biggest KV holder the top-priority class waited on, weighted by wait seconds."""
    first = holders[(holders["rank"] == 0) & ~holders["alert"]]
    w = waits[waits["priority"] == priority].merge(first[["wait", "class"]], left_on="id", right_on="wait",
                                                   suffixes=("", "_holder"))
    if not len(w):
        return []
    s = w.groupby(w["class_holder"].astype(str))["duration_s"].sum().sort_values(ascending=False, kind="stable")
    return [(str(k), float(v)) for k, v in s.items()]


def holders_of(holders: pd.DataFrame, wait_id: int) -> list[tuple[int, str, int]]:
    """(request, class, blocks) of the holders a wait segment saw when it opened, biggest first."""
    h = holders[(holders["wait"] == wait_id) & ~holders["alert"]]
    return list(zip(h["request"].tolist(), h["class"].astype(str).tolist(), h["blocks"].tolist()))


def what_happened(summary: dict, waits: pd.DataFrame, holders: pd.DataFrame, base: dict | None = None) -> str:
    """A short markdown paragraph: who waited, why, and on whom."""
    classes = summary["classes"]
    if not classes:
        return "No requests were simulated."
    top, c = next(iter(classes.items()))
    parts = [f"**{plain(top)}** (the most important class, priority {c['priority']}) sent {c['n']} requests; "
             f"P99 time to first token was **{seconds(c['ttft_p99'])}**"]
    if c["slo_attainment"] is not None:
        parts[-1] += f" and {percent(c['slo_attainment'])} met their SLO"
    parts[-1] += "."
    if base is not None and base["classes"].get(top, {}).get("ttft_p99") is not None and c["ttft_p99"] is not None:
        b = base["classes"][top]["ttft_p99"]
        verb = "down from" if c["ttft_p99"] < b else "up from" if c["ttft_p99"] > b else "the same as"
        parts.append(f"That is {verb} {seconds(b)} without the remedies.")
        if warn := turned_away(c, base["classes"][top]):
            parts[-1] = parts[-1][:-1] + f", but {warn} (not an improvement)."
    if c["blocked_s"] > 0:
        reasons = top_reasons(waits, c["priority"])
        if reasons:
            why = "; ".join(f"{look(r).short} ({s:.1f} s)" for r, s in reasons)
            parts.append(f"Its requests spent {c['blocked_s']:.1f} s blocked in total. Top reasons: {why}.")
        by_class = top_holder_classes(waits, holders, c["priority"])
        if by_class:
            share = sum(s for _, s in by_class)
            who = ", ".join(f"{plain(k)} ({s / share:.0%})" for k, s in by_class[:3])
            parts.append(f"When short of KV, the biggest holder belonged to: {who}.")
        if c["inversion_s"] > 0:
            parts.append(f"{c['inverted_requests']} of its requests saw lower-priority requests admitted while "
                         f"they waited (priority inversion, {c['inversion_s']:.1f} s in total).")
        else:
            parts.append("No lower-priority request was admitted while it waited (no inversion).")
    else:
        parts.append("Its requests never waited.")
    for name, k in classes.items():
        if k.get("rejected"):
            parts.append(f"{k['rejected']:,} of {plain(name)}'s {k['n']:,} requests were rejected by a cap "
                         "(they are not in its latencies).")
    if summary["reserve_idle_token_frac"] > 0.001:
        parts.append(f"The strict reserve left {percent(summary['reserve_idle_token_frac'])} of the token budget idle.")
    return " ".join(parts)


def _ahead_text(g: pd.DataFrame, limit: int = 5) -> str:
    """"#25 P1 at 9.21 s (needed 13 blocks; this one needed 375), …" for admissions ahead."""
    named = [f"#{o} {plain(c)} at {t:.2f} s (needed {n:,} blocks" + (f"; this one needed {m:,})" if m >= 0 else ")")
             for o, c, t, n, m in zip(g["overtaker"], g["overtaker_class"], g["t_s"], g["overtaker_need_blocks"],
                                      g["need_blocks"])]
    more = len(named) - limit
    return ", ".join(named[:limit]) + (f" and {more} more (table below)" if more > 0 else "")


def request_story(req: pd.Series, waits: pd.DataFrame, holders: pd.DataFrame,
                  got_ahead: pd.DataFrame | None = None) -> list[str]:
    """One sentence per step of a request's life, in time order (markdown); `got_ahead` (from
    `ui.inversions.ahead`) names the lower-priority requests admitted while it waited."""
    rid = int(req["id"])
    lines = [f"t = {req['arrival_s']:.2f} s: request #{rid} ({plain(req['class'])}, priority {req['priority']}) "
             f"arrives with {req['prompt_tokens']:,} prompt tokens and will write {req['output_tokens']:,}."]
    if req["status"] == "rejected":
        lines.append(f"It is rejected: {plain(req['reason'] or 'over a cap')}.")
        return lines
    for w in waits[waits["request"] == rid].sort_values("start_s").itertuples(index=False):
        s = f"t = {w.start_s:.2f}–{w.end_s:.2f} s ({w.duration_s:.2f} s): waits — {look(w.reason).explain}"
        if w.need_blocks >= 0:
            s += f"; needs {w.need_blocks} blocks, {w.free_blocks} free"
        top = holders_of(holders, w.id)
        if top:
            s += "; biggest holders " + ", ".join(f"#{r} {plain(c)} ({b} blocks)" for r, c, b in top)
        if w.eta_s == w.eta_s:
            s += f"; enough blocks expected in ~{w.eta_s:.1f} s"
        if got_ahead is not None:
            g = got_ahead[(got_ahead["request"] == rid) & (got_ahead["t_s"] >= w.start_s)
                          & (got_ahead["t_s"] <= w.end_s)]
            if len(g):
                s += (f". **Meanwhile {len(g)} lower-priority request{'s were' if len(g) > 1 else ' was'} admitted "
                      f"ahead of it**: {_ahead_text(g)}")
        lines.append(s + ".")
    if pd.notna(req["first_token_s"]):
        lines.append(f"t = {req['first_token_s']:.2f} s: first token (TTFT {req['ttft_s']:.3f} s).")
    if req["preemptions"]:
        lines.append(f"It was preempted {req['preemptions']} time(s), recomputing {req['recomputed_tokens']:,} tokens.")
    if pd.notna(req["finish_s"]):
        lines.append(f"t = {req['finish_s']:.2f} s: finished (end to end {req['e2e_s']:.2f} s).")
    else:
        lines.append("It did not finish before the run ended.")
    if req["inversion_s"] > 0:
        lines.append(f"Inversion: {req['inversion_s']:.2f} s in {req['inversion_episodes']} episode(s) while "
                     "lower-priority requests were admitted.")
    return lines


def summary_table(summaries: dict[str, dict]) -> pd.DataFrame:
    """Side-by-side KPI table: rows = metric, columns = configuration."""
    rows: dict[str, dict[str, str]] = {}
    for label, s in summaries.items():
        for name, c in s["classes"].items():
            for key, title, fmt, _, _ in KPI_FIELDS:
                v = c.get(key)
                rows.setdefault(f"{name} {title}", {})[label] = fmt(v) if v is not None else "–"
        rows.setdefault("Throughput", {})[label] = f"{s['throughput_tok_s']:,.0f} tok/s"
        rows.setdefault("Batch fill", {})[label] = percent(s["batch_fill"])
        for name, c in s["classes"].items():
            rows.setdefault(f"{name} rejected · unfinished", {})[label] = f"{c['rejected']:,} · {c['unfinished']:,}"
    return pd.DataFrame(rows).T
