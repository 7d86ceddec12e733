"""Command line: `python -m engine run|list|validate|bench|sweep|plan` (sweep and plan: engine.sweep_cli).

Errors in scenarios, overrides or traces print one line to stderr and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .metrics import clean
from .scenario import ScenarioError, bench_names, load, parse_assignment, scenario_names
from .sweep_cli import COMMANDS as SWEEP_COMMANDS
from .sweep_cli import add_parsers as add_sweep_parsers
from .traces import TraceError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's own convention)
        self.exit(2, f"error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m engine", description="Inversion Lab scheduler simulation")
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="simulate a scenario (a shipped name or a YAML path)")
    run.add_argument("scenario")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="override a dotted key, e.g. scheduler.policy=backfill (repeatable)")
    run.add_argument("--seed", type=int, help="shorthand for --set seed=N")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    run.add_argument("--out", type=Path, help="write requests/steps/waits/holders/admissions/episodes/alerts CSVs here")
    sub.add_parser("list", help="list the shipped scenarios")
    val = sub.add_parser("validate", help="check a scenario file")
    val.add_argument("file")
    bench = sub.add_parser("bench", help="print wall time, steps/s and requests/s")
    bench.add_argument("--quick", action="store_true", help="skip the 100k-request run")
    add_sweep_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"run": _run, "list": _list, "validate": _validate, "bench": _bench, **SWEEP_COMMANDS}[args.cmd](args)
    except (ScenarioError, TraceError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def scenario_from_args(name: str, sets: list[str], seed: int | None):
    overrides = dict(parse_assignment(s) for s in sets)
    if seed is not None:
        overrides["seed"] = seed
    return load(name, overrides)


def _run(args) -> int:
    from .simulation import simulate

    sc = scenario_from_args(args.scenario, args.sets, args.seed)
    res = simulate(sc)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name in ("requests", "steps", "waits", "holders", "admissions", "episodes", "alerts"):
            getattr(res, name).to_csv(args.out / f"{name}.csv", index=False)
    if args.json:
        print(json.dumps(clean(res.summary)))
    else:
        print(format_summary(res.summary))
    return 0


def format_summary(s: dict) -> str:
    def f(x, unit="s"):
        return "-" if x is None else f"{x:.3f}{unit}"

    lines = [
        f"{s['scenario']} (seed {s['seed']}): {s['steps']} steps, {s['sim_time_s']:.1f} s simulated "
        f"in {s['wall_time_s']:.2f} s; KV {s['kv_blocks']} blocks, mean use {s['kv_util_mean']:.0%}; "
        f"{s['throughput_tok_s']:.0f} output tok/s; batch fill {s['batch_fill']:.0%}; "
        f"{s['preemptions']} preemptions; {s['rejected']} rejected",
        f"{'class':<12}{'prio':>5}{'n':>7}{'done':>7}{'TTFT p50':>11}{'TTFT p99':>11}{'TPOT p99':>11}"
        f"{'blocked':>10}{'inversion':>11}{'SLO':>7}",
    ]
    for name, c in s["classes"].items():
        slo = "-" if c["slo_attainment"] is None else f"{c['slo_attainment']:.0%}"
        lines.append(
            f"{name:<12}{c['priority']:>5}{c['n']:>7}{c['completed']:>7}{f(c['ttft_p50']):>11}"
            f"{f(c['ttft_p99']):>11}{f(c['tpot_p99']):>11}{c['blocked_s']:>9.1f}s{c['inversion_s']:>10.2f}s{slo:>7}"
        )
    return "\n".join(lines)


def _list(args) -> int:
    for name in scenario_names():
        print(f"{name:<22} {load(name).title}")
    for name in bench_names():
        print(f"{name:<22} {load(name).title} (CLI only)")
    return 0


def _validate(args) -> int:
    sc = load(args.file)
    print(f"ok: {sc.name} ({len(sc.class_names)} classes, policy {sc.scheduler.policy})")
    return 0


def _bench(args) -> int:
    from .bench import run_bench

    run_bench(quick=args.quick)
    return 0
