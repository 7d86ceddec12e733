"""Command line: `python -m engine run|list|validate|bench|sweep|plan|story` (sweep and plan:
engine.sweep_cli; story: engine.story_cli).

Errors in scenarios, overrides or traces print one line to stderr and exit with code 2; so does a
scenario whose estimated work is over the default cap (`--no-work-limit` lifts it). Anything else
that goes wrong is a bug: one `error: internal error …` line and exit code 1
(INVERSION_LAB_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .limits import BATCH, Stop, WorkLimitError
from .literal import clip
from .metrics import clean
from .preflight import preflight
from .scenario import ScenarioError, bench_names, load, parse_assignment, scenario_names
from .story_cli import COMMANDS as STORY_COMMANDS
from .story_cli import add_parser as add_story_parser
from .sweep_cli import COMMANDS as SWEEP_COMMANDS
from .sweep_cli import add_parsers as add_sweep_parsers
from .traces import TraceError

NO_LIMIT_HINT = " (--no-work-limit runs it anyway)"


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
    val = sub.add_parser("validate", help="check a scenario file: keys, files it names, and the work it implies")
    val.add_argument("file")
    for cmd in (run, val):
        cmd.add_argument("--allow-dir", dest="allow", action="append", default=[], type=Path, metavar="DIR",
                         help="a folder (besides the scenario file's own) whose files the scenario may name: "
                              "trace.path, empirical length paths, base (repeatable)")
        cmd.add_argument("--no-work-limit", action="store_true",
                         help=f"accept a scenario whose estimated work is over the default cap ({BATCH.describe()})")
    bench = sub.add_parser("bench", help="print wall time, steps/s and requests/s")
    bench.add_argument("--quick", action="store_true", help="skip the 100k-request run")
    add_sweep_parsers(sub)
    add_story_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        commands = {"run": _run, "list": _list, "validate": _validate, "bench": _bench, **SWEEP_COMMANDS,
                    **STORY_COMMANDS}
        return commands[args.cmd](args)
    except WorkLimitError as err:
        return _fail(f"{err}{NO_LIMIT_HINT}", 2)
    except (ScenarioError, TraceError) as err:
        return _fail(str(err), 2)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a bug, not bad input: still one line, unless debugging
        if os.environ.get("INVERSION_LAB_DEBUG"):
            raise
        what = "out of memory" if isinstance(err, MemoryError) else f"{type(err).__name__}: {err}"
        return _fail(f"internal error ({what}); please report it (INVERSION_LAB_DEBUG=1 shows the traceback)", 1)


def _fail(message: str, code: int) -> int:
    print(f"error: {clip(' '.join(message.split()), 2000)}", file=sys.stderr)
    return code


def scenario_from_args(name: str, sets: list[str], seed: int | None, allow: list[Path] = ()):
    overrides = dict(parse_assignment(s) for s in sets)
    if seed is not None:
        overrides["seed"] = seed
    return load(name, overrides, allow_dirs=tuple(allow))


def _run(args) -> int:
    from .simulation import simulate

    sc = scenario_from_args(args.scenario, args.sets, args.seed, args.allow)
    work = preflight(sc, None if args.no_work_limit else BATCH)
    if args.out:
        _writable(args.out, lambda: args.out.mkdir(parents=True, exist_ok=True))  # before a long run, not after
    res = simulate(sc, stop=None if args.no_work_limit else Stop(seconds=BATCH.seconds, key=work.key_steps))
    if args.out:
        for name in ("requests", "steps", "waits", "holders", "admissions", "episodes", "alerts"):
            _writable(args.out, lambda name=name: getattr(res, name).to_csv(args.out / f"{name}.csv", index=False))
    if args.json:
        print(json.dumps(clean(res.summary)))
    else:
        print(format_summary(res.summary))
    return 0


def _writable(folder: Path, write) -> None:
    try:
        write()
    except OSError as err:
        raise ScenarioError(f"--out {clip(folder)}: cannot write ({err.strerror or type(err).__name__})") from None


def format_summary(s: dict) -> str:
    def f(x, unit="s"):
        return "-" if x is None else f"{x:.3f}{unit}"

    lines = [
        f"{clip(s['scenario'], 200)} (seed {s['seed']}): {s['steps']} steps, {s['sim_time_s']:.1f} s simulated "
        f"in {s['wall_time_s']:.2f} s; KV {s['kv_blocks']} blocks, mean use {s['kv_util_mean']:.0%}; "
        f"{s['throughput_tok_s']:.0f} output tok/s; batch fill {s['batch_fill']:.0%}; "
        f"{s['preemptions']} preemptions; {s['rejected']} rejected",
        f"{'class':<12}{'prio':>5}{'n':>7}{'done':>7}{'TTFT p50':>11}{'TTFT p99':>11}{'TPOT p99':>11}"
        f"{'blocked':>10}{'inversion':>11}{'SLO':>7}",
    ]
    gateway = "gateway_inversions" in s  # behind a gateway: its queue time too
    if gateway:
        lines[-1] += f"{'gateway p99':>13}"
    for name, c in s["classes"].items():
        slo = "-" if c["slo_attainment"] is None else f"{c['slo_attainment']:.0%}"
        lines.append(
            f"{name:<12}{c['priority']:>5}{c['n']:>7}{c['completed']:>7}{f(c['ttft_p50']):>11}"
            f"{f(c['ttft_p99']):>11}{f(c['tpot_p99']):>11}{c['blocked_s']:>9.1f}s{c['inversion_s']:>10.2f}s{slo:>7}"
            + (f"{f(c['gateway_queue_p99']):>13}" if gateway else "")
        )
    if gateway:
        lines.append(f"gateway: {s['shed']} shed; {s['gateway_inversions']} dispatches past a more important "
                     "waiting request (blocked and inversion above: inside the engines)")
    return "\n".join(lines)


def _list(args) -> int:
    for name in scenario_names():
        print(f"{name:<22} {load(name).title}")
    for name in bench_names():
        print(f"{name:<22} {load(name).title} (CLI only)")
    return 0


def _validate(args) -> int:
    sc = load(args.file, allow_dirs=tuple(args.allow))
    w = preflight(sc, None if args.no_work_limit else BATCH)
    print(f"ok: {clip(sc.name)} ({len(sc.class_names)} classes, policy {sc.scheduler.policy}; about "
          f"{w.requests:,.0f} requests, {w.steps:,.0f} steps, an estimated {w.seconds:.1f} s and "
          f"{w.memory_mib:,.0f} MiB)")
    return 0


def _bench(args) -> int:
    from .bench import run_bench

    run_bench(quick=args.quick)
    return 0
