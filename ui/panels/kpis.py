"""The pages' numbers over seeds: the Playground's cards, its table and its "what happened"
paragraph, Compare's table, the timeline's summary line.

Each takes an `Over` — one configuration's runs of its N seeds (or, while the others run, the shown
run alone) — and, for deltas, the same seeds of the configuration it is compared with. Numbers
that are conclusions are over the seeds (`ui.panels.spread` says how); sentences about the mechanism
(reasons, holders) name the shown run they come from. Pure: no streamlit import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from engine.sweeps.evidence import Estimate, RunSamples, class_figures, mean_of, run_figure

from ..frame.i18n import _, ngettext
from ..frame.seeds import Gathered
from ..frame.untrusted import plain
from . import spread
from .text import KPI_FIELDS, Kpi, _delta, _pts, how_it_waited, percent, seconds


def count(x: float) -> str:
    """A count per run: whole when it is (4), else one decimal (3.4)."""
    return f"{x:,.0f}" if abs(x - round(x)) < 0.05 else f"{x:,.1f}"


def _secs(x: float) -> str:
    return f"{x:.1f} s"


@dataclass
class Over:
    """One configuration's figures over its seeds. `runs` in seed order; `running`: seeds still
    running — until they are in, every figure is the shown run's (`runs` = [it])."""

    runs: list[RunSamples]
    seeds: tuple[int, ...]
    running: int = 0
    failed: dict[int, str] = field(default_factory=dict)
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, g: Gathered) -> Over:
        runs = g.usable()
        running = 0 if g.settled else len(g.seeds) - g.done - len(g.failed)  # seeds not back yet
        return cls(runs, tuple(r.seed for r in runs), max(running, 0), dict(g.failed))

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def partial(self) -> bool:
        return self.running > 0

    @property
    def class_names(self) -> list[str]:
        return self.runs[0].class_names if self.runs else []

    def cls(self, name: str) -> dict[str, Estimate | None]:
        if ("cls", name) not in self._memo:
            self._memo[("cls", name)] = class_figures(self.runs, name)
        return self._memo[("cls", name)]

    def counts(self, name: str, key: str) -> list[int]:
        return [int(r.classes[name].counts[key]) if name in r.classes else 0 for r in self.runs]

    def not_served(self, name: str) -> Estimate:
        return mean_of([a + b for a, b in zip(self.counts(name, "rejected"), self.counts(name, "unfinished"))])

    def run(self, key: str) -> Estimate:
        return run_figure(self.runs, key)

    def priority(self, name: str) -> int:
        return self.runs[0].classes[name].priority


def comparable(cur: Over, base: Over | None) -> Over | None:
    """`base` if its figures pair seed by seed with `cur`'s (both complete, the same seeds), else None."""
    if base is None or cur.partial or base.partial or not base.runs or base.seeds != cur.seeds:
        return None
    return base


def _over_seeds(n: int) -> str:
    return ngettext(" over {n} seed", " over {n} seeds", n).format(n=n) if n > 1 else ""


def turned_away(cur: Over, base: Over | None, name: str, over: bool = True) -> str | None:
    """"20 of 20 rejected over 5 seeds" when more of the class's requests were rejected or left
    unfinished than without the remedies: its latencies are then over fewer requests, and no
    delta may look like a gain."""
    if base is None:
        return None
    tot = {k: sum(cur.counts(name, k)) for k in ("n", "rejected", "unfinished")}
    btot = {k: sum(base.counts(name, k)) for k in ("rejected", "unfinished")}
    if tot["rejected"] + tot["unfinished"] <= btot["rejected"] + btot["unfinished"]:
        return None
    parts = []
    if tot["rejected"] > btot["rejected"]:
        parts.append(_("{k:,} of {n:,} rejected").format(k=tot["rejected"], n=tot["n"]))
    if tot["unfinished"] > btot["unfinished"]:
        parts.append(_("{k:,} of {n:,} unfinished").format(k=tot["unfinished"], n=tot["n"]))
    return _(", ").join(parts) + (_over_seeds(cur.n) if over else "")


def _card_delta(e: Estimate | None, b: Estimate | None, fmt, rule: str, pts: bool = False
                ) -> tuple[str | None, str | None, str]:
    """(delta text, "better on k of N seeds", colour) of a figure against the same seeds without remedies."""
    if e is None or b is None or e.value is None or b.value is None:
        return None, None, rule
    d = _pts(e.value, b.value) if pts else _delta(e.value, b.value, fmt)
    counts = spread.compare(e, b, "lower" if rule == "inverse" else "higher")
    if d is None or counts is None:
        return d, None, rule
    return d, spread.better_on(counts[0], counts[2]), spread.colour(counts, rule)


def class_cards(name: str, cur: Over, base: Over | None, cards_only: bool = True) -> list[Kpi]:
    """The cards of one class over the seeds; deltas (with "better on k of N seeds") against the
    same seeds without the remedies once every seed of both is in."""
    base = comparable(cur, base)
    figs = cur.cls(name)
    bfigs = base.cls(name) if base is not None else None
    warn = turned_away(cur, base, name, over=False)  # a card's delta: the seeds are in the note under it
    out = []
    for key, label, fmt, rule, card in KPI_FIELDS:
        if cards_only and not card:
            continue
        e = figs.get(key)
        title = f"{name} · {_(label)}"
        note = spread.basis(e, fmt, cur.seeds, cur.running)
        if warn:
            out.append(Kpi(title, spread.value(e, fmt), warn, "orange", "off",
                           _("Compared with the baseline, fewer of this class's requests were served, so this "
                             "number is over fewer requests: it is not an improvement."), note=note))
            continue
        d, desc, colour = _card_delta(e, bfigs.get(key) if bfigs else None, fmt, rule, key == "slo_attainment")
        out.append(Kpi(title, spread.value(e, fmt), d, colour, description=desc, note=note))
    ns = cur.not_served(name)
    d, desc, colour = _card_delta(ns, base.not_served(name) if base is not None else None, count, "inverse")
    if d is not None:
        d = d if d.startswith("-") else "+" + d.lstrip("+")
    n, r, u = (sum(cur.counts(name, k)) for k in ("n", "rejected", "unfinished"))
    out.append(Kpi(f"{name} · {_('Not served')}", count(ns.value or 0.0), d, colour, description=desc,
                   help=_("A run's mean. Of {n:,} measured requests{over}: {r:,} rejected by a cap, {u:,} unfinished "
                          "when the run ended.").format(n=n, over=_over_seeds(cur.n), r=r, u=u),
                   note=spread.basis(ns, count, cur.seeds, cur.running)))
    return out


SYSTEM = [  # (RUN_FIGURES key, label, format, delta rule or None for no delta, help)
    # no help icon: with one, the label did not fit a fifth of the row at 1280 px. What the served rate
    # is not (a capacity) is on the P99 page and Compare, beside the capacity
    ("served_tok_s", "Served rate (tok/s)", lambda x: f"{x:,.0f}", None, None),
    ("batch_fill", "Batch fill", percent, "normal", "Scheduled tokens / the step's budget, a run's mean."),
    ("kv_util_mean", "Mean KV use", percent, "normal", None),
    ("preemptions", "Preemptions", count, "inverse", None),
    ("rejected", "Rejected", count, "inverse", None),
]


def system_cards(cur: Over, base: Over | None) -> list[Kpi]:
    """The run-level cards (means per run over the seeds); batch fill and KV use against the same
    load without remedies say "higher/lower on k of N seeds"; the served rate has no delta."""
    base = comparable(cur, base)
    out = []
    for key, label, fmt, rule, help_ in SYSTEM:
        e = cur.run(key)
        d = desc = None
        colour = rule or "off"
        if base is not None and rule is not None and e.value is not None:
            b = base.run(key)
            if b.value is not None:
                share = fmt is percent
                d = _pts(e.value, b.value) if share else _delta(e.value, b.value, fmt)
                if d is not None and rule == "normal":  # neither way is better: say which way, on how many
                    direction = "higher" if e.value > b.value else "lower"
                    k = spread.compare(e, b, direction)
                    desc, colour = spread.moved_on(direction, k[0], k[2]), spread.colour(k, rule)
                elif d is not None:
                    k = spread.compare(e, b, "lower")
                    desc, colour = spread.better_on(k[0], k[2]), spread.colour(k, rule)
        out.append(Kpi(_(label), fmt(e.value) if e.value is not None else "–", d, colour,
                       help=_(help_) if help_ else None, description=desc,
                       note=spread.basis(e, fmt, cur.seeds, cur.running)))
    return out


def legend(cur: Over, *others: Over) -> str:
    """The caption above the cards: N, which seeds, what the interval is, what † means; while some
    configuration's seeds are still running, that the figures are the shown run's."""
    running = sum(o.running for o in (cur, *others))
    if running:
        n = cur.n + cur.running
        return ngettext(
            "Seed {seed} shown; {k} more run is going — the figures switch to all {n} seeds when the runs are in.",
            "Seed {seed} shown; {k} more runs are going — the figures switch to all {n} seeds when the runs are in.",
            running).format(seed=cur.seeds[0] if cur.seeds else "?", k=running, n=n)
    text = (_("Every figure is from seed {seeds}.") if cur.n == 1 else _(
        "Every figure is over {n} seeds ({seeds}): a percentile pools every seed's requests, a run's figure is their "
        "mean, and the range under it is the seeds' min–max.")).format(
        n=cur.n, seeds=spread.seed_list(cur.seeds))
    return text + " " + _("“n < 100”: some seed's percentile rests on fewer than 100 requests, so its P99 is about "
                          "their maximum.")


def details(cur: Over, base: Over | None) -> pd.DataFrame:
    """Every per-class number over the seeds, with the range, the requests and the baseline beside it."""
    base = comparable(cur, base)
    rows = []
    for name in cur.class_names:
        figs = cur.cls(name)
        bfigs = base.cls(name) if base is not None else None
        for key, label, fmt, rule, _card in KPI_FIELDS:
            e = figs.get(key)
            row = {_("class"): name, _("metric"): _(label), _("value"): spread.value(e, fmt),
                   _("seeds' range"): spread.span(e.lo, e.hi, fmt) if e is not None else "–",
                   _("requests"): f"{e.n:,}" if e is not None and e.method == "pooled" else ""}
            if base is not None:
                b = bfigs.get(key)
                row[_("without remedies")] = spread.value(b, fmt)
                k = spread.compare(e, b, "lower" if rule == "inverse" else "higher")
                row[_("better on")] = f"{k[0]} / {k[2]}" if k else "–"
            rows.append(row)
        row = {_("class"): name, _("metric"): _("Rejected · unfinished"),
               _("value"): f"{sum(cur.counts(name, 'rejected')):,} · {sum(cur.counts(name, 'unfinished')):,}",
               _("seeds' range"): "", _("requests"): f"{sum(cur.counts(name, 'n')):,}"}
        if base is not None:
            row[_("without remedies")] = (f"{sum(base.counts(name, 'rejected')):,} · "
                                          f"{sum(base.counts(name, 'unfinished')):,}")
            row[_("better on")] = ""
        rows.append(row)
    return pd.DataFrame(rows)


def compare_table(overs: dict[str, Over], first: str) -> pd.DataFrame:
    """Side by side (rows = figures, columns = configurations): each cell the value over the seeds
    with the seeds' range; in the other columns, on how many seeds it is better than `first`'s."""
    rows: dict[str, dict[str, str]] = {}
    ref = overs[first]

    def put(row: str, label: str, e: Estimate | None, fmt, b: Estimate | None, better: str | None) -> None:
        text = spread.cell(e, fmt)
        if better is not None and label != first:
            k = spread.compare(e, b, better)
            if k is not None and e is not None and e.value is not None:
                text += " · " + spread.better_on(k[0], k[2])
        rows.setdefault(row, {})[label] = text

    for label, o in overs.items():
        paired = comparable(o, ref) if label != first else None
        for name in o.class_names:
            figs = o.cls(name)
            rfigs = paired.cls(name) if paired is not None else {}
            for key, title, fmt, rule, _c in KPI_FIELDS:
                put(f"{name} {_(title)}", label, figs.get(key), fmt, rfigs.get(key),
                    ("lower" if rule == "inverse" else "higher") if paired is not None else None)
        put(_("Batch fill"), label, o.run("batch_fill"), percent, None, None)
        put(_("Mean KV use"), label, o.run("kv_util_mean"), percent, None, None)
        put(_("Served rate (the offered load)"), label, o.run("served_tok_s"), lambda x: f"{x:,.0f} tok/s", None, None)
        for name in o.class_names:
            rows.setdefault(_("{cls} rejected · unfinished").format(cls=name), {})[label] = \
                f"{sum(o.counts(name, 'rejected')):,} · {sum(o.counts(name, 'unfinished')):,}"
    return pd.DataFrame(rows).T


def what_happened(cur: Over, base: Over | None, shown: dict, waits: pd.DataFrame, holders: pd.DataFrame) -> str:
    """A short markdown paragraph: the top class's P99 and SLO over the seeds (and against the same
    seeds without the remedies), then who waited, why and on whom in the shown run, named as such.
    `shown` is the shown run's summary."""
    names = cur.class_names
    if not names:
        return _("No requests were simulated.")
    top = names[0]
    figs = cur.cls(top)
    p99, att = figs["ttft_p99"], figs["slo_attainment"]
    n_req = sum(cur.counts(top, "n"))
    prio = cur.priority(top)
    seed = cur.seeds[0] if cur.seeds else shown.get("seed")
    parts = []
    if cur.n > 1:
        few = (" (" + spread.few_note(p99) + ")") if p99 is not None and p99.few else ""
        if att is not None and att.value is not None:
            first = _("Over {n} seeds ({seeds}), **{cls}** (the most important class, priority {prio}) sent {req:,} "
                      "requests; P99 time to first token was **{p99}** (the seeds' range {range}){few} and {slo} met "
                      "their SLO ({slo_range}).")
        else:
            first = _("Over {n} seeds ({seeds}), **{cls}** (the most important class, priority {prio}) sent {req:,} "
                      "requests; P99 time to first token was **{p99}** (the seeds' range {range}){few}.")
        parts.append(first.format(n=cur.n, seeds=spread.seed_list(cur.seeds), cls=plain(top), prio=prio, req=n_req,
                                  p99=seconds(p99.value if p99 else None),
                                  range=spread.span(p99.lo, p99.hi, seconds) if p99 else "–", few=few,
                                  slo=percent(att.value if att else None),
                                  slo_range=spread.span(att.lo, att.hi, percent) if att else "–"))
    else:
        if att is not None and att.value is not None:
            first = _("In the shown run (seed {seed}), **{cls}** (the most important class, priority {prio}) sent "
                      "{req:,} requests; P99 time to first token was **{p99}** and {slo} met their SLO.")
        else:
            first = _("In the shown run (seed {seed}), **{cls}** (the most important class, priority {prio}) sent "
                      "{req:,} requests; P99 time to first token was **{p99}**.")
        parts.append(first.format(seed=seed, cls=plain(top), prio=prio, req=n_req,
                                  p99=seconds(p99.value if p99 else None), slo=percent(att.value if att else None)))
        if cur.running:
            parts.append(ngettext("The other {k} seed is still running.", "The other {k} seeds are still running.",
                                  cur.running).format(k=cur.running))
    paired = comparable(cur, base)
    if paired is not None and p99 is not None and p99.value is not None:
        b = paired.cls(top)["ttft_p99"]
        if b is not None and b.value is not None:
            warn = turned_away(cur, paired, top)
            k = spread.compare(p99, b, "lower")
            if p99.value < b.value:
                text = _("Without the remedies it was {b}: lower now on {k} of {n} seeds.")
            elif p99.value > b.value:
                text = _("Without the remedies it was {b}: higher now on {w} of {n} seeds.")
            else:
                text = _("Without the remedies it was the same, {b}.")
            text = text.format(b=seconds(b.value), k=k[0], w=k[1], n=k[2])
            if warn:
                text += " " + _("But {warn}: not an improvement.").format(warn=warn)
            parts.append(text)
    c = shown["classes"].get(top)
    if c is not None:
        run = how_it_waited(c, waits, holders)
        if cur.n > 1:
            parts.append(_("In the shown run (seed {seed}):").format(seed=seed) + " " + _(" ").join(run))
        else:
            parts.extend(run)
    for name in names:
        r, n = sum(cur.counts(name, "rejected")), sum(cur.counts(name, "n"))
        if r:
            parts.append(_("{r:,} of {cls}'s {n:,} requests were rejected by a cap (they are not in its "
                           "latencies).").format(r=r, cls=plain(name), n=n))
    idle = cur.run("reserve_idle_token_frac")
    if idle.value is not None and idle.value > 0.001:
        parts.append(_("The strict reserve left {p} of the token budget idle.").format(
            p=percent(idle.value) + (f" ({spread.span(idle.lo, idle.hi, percent)})" if cur.n > 1 else "")))
    return _(" ").join(parts)


def strip(cur: Over) -> str:
    """The timeline's summary line: which seed the chart draws, then each class's P99 TTFT and
    inversion over the seeds."""
    if not cur.runs:
        return ""
    seeds = cur.seeds
    if cur.partial:
        head = _("The timeline draws seed {seed}; the other {k} seeds are running.").format(seed=seeds[0],
                                                                                          k=cur.running)
        return head
    if cur.n == 1:
        head = _("The timeline draws seed {seed}.").format(seed=seeds[0])
    else:
        head = _("The timeline draws seed {seed}, the first of {n}. Over the {n} seeds:").format(seed=seeds[0], n=cur.n)
    per = []
    for name in cur.class_names:
        figs = cur.cls(name)
        inv = figs["inversion_s"]
        per.append(_("{cls}: {p99}; inversion {inv} a run").format(
            cls=plain(name), p99=spread.sentence(_("P99 TTFT"), figs["ttft_p99"], seconds, seeds),
            inv=spread.cell(inv, _secs) if inv is not None else "–"))
    return head + " " + _(" · ").join(per)

