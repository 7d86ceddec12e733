"""Command line of capacity: `python -m engine capacity SCENARIO [--set K=V ...] [--seeds N] [--json]`
and `python -m engine capacity --table` (engine.sweeps.capacity says what is measured and how).

Exit codes: 0 done, 2 a bad scenario, override or output directory (one line `error: …`), 130
interrupted (the output directory keeps every finished run; the same command resumes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEFAULT_SEEDS = 5


def add_parser(sub) -> None:
    what = "the most offered load a scenario carries within its SLOs (and what its remedies cost)"
    p = sub.add_parser("capacity", help=what, description=what)
    p.add_argument("scenario", nargs="?", help="a shipped scenario name or a YAML path (not with --table)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a dotted key (repeatable)")
    p.add_argument("--seed", type=int, help="the first seed (default: the scenario's)")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, metavar="N",
                   help=f"seeds per tested load: the seed and the next N-1 (default {DEFAULT_SEEDS})")
    p.add_argument("--table", action="store_true",
                   help="default, classic-inversion and budget-bound with and without each remedy")
    p.add_argument("--json", action="store_true", help="print the findings as one JSON object")
    p.add_argument("--out", type=Path, help="output directory of the runs (default runs/capacity-NAME); rerun to "
                                            "reuse them")
    p.add_argument("--workers", type=int, help="parallel runs (default: all cores)")
    p.add_argument("--fresh", action="store_true", help="discard the runs already in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--allow-dir", dest="allow", action="append", default=[], type=Path, metavar="DIR",
                   help="a folder whose files the scenario may name (repeatable)")


def cmd_capacity(args) -> int:
    from ..config.baseline import baseline
    from ..config.scenario import ScenarioError, load_with_sets
    from . import capacity
    from .sweep_cli import _sigterm_as_interrupt
    from .sweep_exec import make_backend

    if not 1 <= args.seeds <= 100:
        raise ScenarioError(f"--seeds {args.seeds}: expected 1..100")
    if args.table == bool(args.scenario):
        raise ScenarioError("capacity: name a scenario, or --table (not both)")
    if args.table and (args.sets or args.seed is not None):
        raise ScenarioError("capacity --table runs the shipped scenarios: --set and --seed are for one scenario")
    spec = {"capacity": args.scenario or "table", "sets": args.sets, "seed": args.seed, "seeds": args.seeds}
    if args.table:  # each block on its scenario's own seeds, in its own folder
        blocks = [(g.title, capacity.group_configs(g)) for g in (args.groups or capacity.TABLE)]
        out = args.out or Path("runs") / "capacity-table"
    else:
        sc = load_with_sets(args.scenario, args.sets, args.seed, args.allow)
        configs = [capacity.config("as given", sc)]
        base = baseline(sc)
        if base.key() != sc.key():
            configs.append(capacity.config("without remedies (vLLM defaults)", base))
            configs[0].against = configs[1].label
        blocks = [(sc.name, configs)]
        out = args.out or Path("runs") / f"capacity-{sc.name}"
    _sigterm_as_interrupt()
    backend = make_backend("local", None, args.workers)
    outcomes = []
    try:
        for title, configs in blocks:
            seed = configs[0].scenario.seed
            where = out / _slug(title) if args.table else out
            outcomes.append(capacity.search(configs, [seed + k for k in range(args.seeds)], backend, out=where,
                                            fresh=args.fresh, progress=not args.quiet, spec={**spec, "block": title}))
            if outcomes[-1].status != "complete":
                break
    finally:
        backend.close()
    complete = len(outcomes) == len(blocks) and all(o.status == "complete" for o in outcomes)
    reports = {title: capacity.report(o, title) for (title, _), o in zip(blocks, outcomes)}
    if args.table:
        rep = {"blocks": reports, "runs": sum(o.runs for o in outcomes), "reused": sum(o.reused for o in outcomes),
               "status": "complete" if complete else "interrupted"}
    else:
        rep = next(iter(reports.values()))
    if args.json:
        print(json.dumps(rep, default=float))
    else:
        print(format_table(rep) if args.table else format_report(rep))
    if not complete:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    return 0


def _slug(title: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in title.lower()).strip("-")


def _scale(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}×"


def _answer(f: dict) -> str:
    if f["below_min"]:
        return "< 1/8×"
    if f["at_least_max"]:
        return f"≥ {f['capacity']:g}×"
    return _scale(f["capacity"])


def _sat(f: dict) -> str:
    s = f["saturated"]
    if s["scale"] is None or s["output_tok_s"]["value"] is None:
        return "-"
    o, p = s["output_tok_s"], s["processed_tok_s"]
    text = f"{o['value']:,.0f} [{o['lo']:,.0f}–{o['hi']:,.0f}] out, {p['value']:,.0f} processed tok/s"
    return text + ("" if s["saturated"] else f" (queue emptied even at {s['scale']:g}×)")


def format_report(rep: dict) -> str:
    seeds = rep["seeds"]
    lines = [f"capacity of {rep['scenario']}: the largest scale of the offered load (every rate × s) at which "
             f"{rep['criterion']}; seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} per tested load), bisection to "
             f"{rep['tolerance']:.0%}; {rep['runs']} runs ({rep['reused']} reused)"]
    for f in rep["configurations"]:
        lines.append(f"  {f['label']}: capacity {_answer(f)} of the offered load on {f['gpus']} GPU(s) "
                     f"(bracket {_scale(f['bracket'][0])}–{_scale(f['bracket'][1])}; tested "
                     f"{', '.join(f'{s}{chr(10003) if ok else chr(10007)}' for s, ok in f['tested'].items())}; "
                     f"{f['runs']} runs)")
        if f["fails_at_bracket_top"]:
            where = "at 1/8×, the least load tried" if f["below_min"] else f"at {_scale(f['bracket'][1])}"
            lines.append(f"    {where}: {f['fails_at_bracket_top']}")
        if f["top_class_requests_per_seed"]:
            n = f["top_class_requests_per_seed"]
            lines.append(f"    {f['top_class']}'s P99 at the capacity rests on {min(n)}–{max(n)} requests a seed"
                         + (" (fewer than 100: about their maximum)" if min(n) < 100 else ""))
        if f["gpus_for_offered_load"] is not None:
            lines.append(f"    GPUs for the offered load within the SLOs: {f['gpus_for_offered_load']} "
                         f"(replicas tested {f['replicas_tested'] or 'none: capacity ≥ 1'})")
        lines.append(f"    saturated throughput: {_sat(f)} at {_scale(f['saturated']['scale'])} the load")
        if f["change_pct"] is not None:
            lines.append(f"    capacity per GPU {f['change_pct']:+.1f} % against {f['against']}")
    return "\n".join(lines)


def format_table(rep: dict) -> str:
    lines = [f"capacity = largest scale of the offered load (every rate × s) at which every class with an SLO "
             "meets it in every seed; top n = the top class's requests behind its P99 there (fewest in a seed; "
             "under 100 it is about their maximum); change = capacity per GPU against the row named (negative: "
             f"the remedy's cost); GPUs @1× = GPUs that carry the offered load within the SLOs; saturated = at "
             f"2× the load or more, the queue never empty; {rep['runs']} runs ({rep['reused']} reused)"]
    head = ["configuration", "GPUs", "capacity", "bracket", "top n", "runs", "change", "against", "GPUs @1×",
            "saturated out / processed tok/s", "what fails at the bracket's top"]
    for sname, r in rep["blocks"].items():
        seeds = r["seeds"]
        lines.append("")
        lines.append(f"{sname} (seeds {seeds[0]}–{seeds[-1]}, {len(seeds)} per tested load)")
        rows = [head]
        for f in r["configurations"]:
            label = f["label"].split(": ", 1)[1]
            against = (f["against"] or "").split(": ", 1)[-1]
            s = f["saturated"]
            sat = "-" if s["output_tok_s"]["value"] is None else \
                f"{s['output_tok_s']['value']:,.0f} / {s['processed_tok_s']['value']:,.0f}" + \
                ("" if s["saturated"] else " (not saturated)")
            n = f["top_class_requests_per_seed"]
            rows.append([label, str(f["gpus"]), _answer(f),
                         f"{_scale(f['bracket'][0])}–{_scale(f['bracket'][1])}", str(min(n)) if n else "-",
                         str(f["runs"]),
                         "-" if f["change_pct"] is None else f"{f['change_pct']:+.0f} %", against,
                         "-" if f["gpus_for_offered_load"] is None else str(f["gpus_for_offered_load"]), sat,
                         (f["fails_at_bracket_top"] or "-")[:60]])
        width = [max(len(x[i]) for x in rows) for i in range(len(head))]
        for x in rows:
            lines.append("  ".join(v.ljust(w) if i in (0, 7, 10) else v.rjust(w)
                                   for i, (v, w) in enumerate(zip(x, width))).rstrip())
    return "\n".join(lines)


COMMANDS = {"capacity": cmd_capacity}
