"""Command line: `python -m engine run|list|validate|bench|sweep|plan|capacity|story` (sweep and
plan: engine.sweeps.sweep_cli; capacity: engine.sweeps.capacity_cli; story: engine.sweeps.story_cli).

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

from .config.literal import clip
from .config.scenario import ScenarioError, bench_names, load, load_with_sets, scenario_names
from .config.traces import TraceError
from .sim.limits import BATCH, Stop, WorkLimitError, WorkLimits
from .sim.metrics import clean
from .sim.preflight import preflight
from .sweeps.capacity_cli import COMMANDS as CAPACITY_COMMANDS
from .sweeps.capacity_cli import add_parser as add_capacity_parser
from .sweeps.story_cli import COMMANDS as STORY_COMMANDS
from .sweeps.story_cli import add_parser as add_story_parser
from .sweeps.sweep_cli import COMMANDS as SWEEP_COMMANDS
from .sweeps.sweep_cli import add_parsers as add_sweep_parsers

NO_LIMIT_HINT = " (--no-work-limit runs it anyway)"
MAX_SEEDS = 100


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
    run.add_argument("--seeds", type=int, default=1, metavar="N",
                     help="run the seed and the next N-1; report each figure as the value over all seeds "
                          "(percentiles pooled over their requests) with the seeds' min-max and the requests "
                          "behind it")
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
    add_capacity_parser(sub)
    add_story_parser(sub)
    return p


def main(argv: list[str] | None = None, *, limits: WorkLimits = BATCH, table=None, simulate=None) -> int:
    """The command line. `limits`: the work cap a run must stay under (`--no-work-limit` lifts it);
    `table`: the groups `capacity --table` runs (the shipped `capacity.TABLE`); `simulate`: what
    `run` calls (the engine's); tests hand in small or failing ones instead of patching modules."""
    args = _parser().parse_args(argv)
    args.limits, args.groups, args.simulate = limits, table, simulate
    try:
        commands = {"run": _run, "list": _list, "validate": _validate, "bench": _bench, **SWEEP_COMMANDS,
                    **CAPACITY_COMMANDS, **STORY_COMMANDS}
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


def _run(args) -> int:
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise ScenarioError(f"--seeds {args.seeds}: expected 1..{MAX_SEEDS}")
    if args.seeds > 1 and args.out:
        raise ScenarioError("--out writes one run's frames: use it without --seeds (or with --seeds 1)")
    sc = load_with_sets(args.scenario, args.sets, args.seed, args.allow)
    work = preflight(sc, None if args.no_work_limit else args.limits)
    stop = None if args.no_work_limit else Stop(seconds=args.limits.seconds, key=work.key_steps)
    if args.seeds > 1:
        from .sweeps.evidence import default_seeds, over_seeds, report

        rep = report(over_seeds(sc, default_seeds(sc.seed, args.seeds), stop=stop))
        print(json.dumps(clean(rep)) if args.json else format_seeds(rep))
        return 0
    if args.out:
        _writable(args.out, lambda: args.out.mkdir(parents=True, exist_ok=True))  # before a long run, not after
    if args.simulate is None:
        from .sim.simulation import simulate
    res = (args.simulate or simulate)(sc, stop=stop)
    if args.out:
        for name in ("requests", "steps", "waits", "holders", "admissions", "episodes", "alerts"):
            _writable(args.out, lambda name=name: getattr(res, name).to_csv(args.out / f"{name}.csv", index=False))
    if args.json:
        print(json.dumps(clean(res.summary) | {"loop_turns": res.loop_turns}))  # (turns: what the bench divides by)
    else:
        from .sweeps.evidence import RunSamples  # (the figures over seeds: not needed for --json)

        print(format_summary(res.summary, few=few_marks(RunSamples.of(res))))
    return 0


def _writable(folder: Path, write) -> None:
    try:
        write()
    except OSError as err:
        raise ScenarioError(f"--out {clip(folder)}: cannot write ({err.strerror or type(err).__name__})") from None


FEW_NOTE = ("† a percentile of fewer than 100 requests (in some seed): a P99 of 40 requests is about their "
            "maximum")
SERVED_NOTE = "served = output tokens / run length: the offered load when everything finishes, not capacity"


def few_marks(run) -> set[tuple[str, str]]:
    """(class, metric) pairs of a run whose percentiles rest on fewer than FEW requests."""
    from .sweeps.evidence import FEW

    return {(name, m) for name, c in run.classes.items() for m, v in c.values.items() if len(v) < FEW}


def format_summary(s: dict, few: set[tuple[str, str]] = frozenset()) -> str:
    """The one-run table; `few` marks (class, metric) percentiles of fewer than 100 requests with †."""
    def f(x, unit="s", mark=False):
        return "-" if x is None else f"{x:.3f}{unit}" + ("†" if mark else "")

    lines = [
        f"{clip(s['scenario'], 200)} (seed {s['seed']}): {s['steps']} steps, {s['sim_time_s']:.1f} s simulated "
        f"in {s['wall_time_s']:.2f} s; KV {s['kv_blocks']} blocks, mean use {s['kv_util_mean']:.0%}; "
        f"served {s['served_tok_s']:.0f} output tok/s; batch fill {s['batch_fill']:.0%}; "
        f"{s['preemptions']} preemptions; {s['rejected']} rejected",
        f"{'class':<12}{'prio':>5}{'n':>7}{'done':>7}{'TTFT p50':>11}{'TTFT p99':>11}{'TPOT p99':>11}"
        f"{'blocked':>10}{'inversion':>11}{'SLO':>7}",
    ]
    gateway = "gateway_inversions" in s  # behind a gateway: its queue time too
    if gateway:
        lines[-1] += f"{'gateway p99':>13}"
    for name, c in s["classes"].items():
        slo = "-" if c["slo_attainment"] is None else f"{c['slo_attainment']:.0%}"
        ttft, tpot = (name, "ttft_s") in few, (name, "tpot_s") in few
        lines.append(
            f"{name:<12}{c['priority']:>5}{c['n']:>7}{c['completed']:>7}{f(c['ttft_p50'], mark=ttft):>11}"
            f"{f(c['ttft_p99'], mark=ttft):>11}{f(c['tpot_p99'], mark=tpot):>11}{c['blocked_s']:>9.1f}s"
            f"{c['inversion_s']:>10.2f}s{slo:>7}"
            + (f"{f(c['gateway_queue_p99']):>13}" if gateway else "")
        )
    lines.append(SERVED_NOTE)
    if few:
        lines.append(FEW_NOTE)
    if gateway:
        lines.append(f"gateway: {s['shed']} shed; {s['gateway_inversions']} dispatches past a more important "
                     "waiting request (blocked and inversion above: inside the engines)")
    return "\n".join(lines)


def format_seeds(rep: dict) -> str:
    """The `--seeds N` table: each figure as value [lo–hi] over the seeds (engine.sweeps.evidence.report)."""
    def est(e: dict | None, fmt: str = "{:.3f}", unit: str = " s") -> str:
        if e is None or e["value"] is None:
            return "-"
        rng = "" if e["lo"] is None else f" [{fmt.format(e['lo'])}–{fmt.format(e['hi'])}]"
        return f"{fmt.format(e['value'])}{unit}{rng}" + ("†" if e.get("few") else "")

    seeds = rep["seeds"]
    pct = "{:.0%}"
    lines = [
        f"{clip(rep['scenario'], 200)}, seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} runs): value = over all seeds "
        "(percentiles pooled over their requests, SLO met = Σ within / Σ n, run figures the mean), "
        "[min–max] of the seeds' own values",
        f"served {est(rep['served_tok_s'], '{:.0f}', ' output tok/s')}; batch fill {est(rep['batch_fill'], pct, '')}; "
        f"KV use {est(rep['kv_util_mean'], pct, '')}; preemptions {est(rep['preemptions'], '{:.0f}', '')}; "
        f"rejected {rep['rejected']['total']}, unfinished {rep['unfinished']['total']} in all",
    ]
    head = ["class", "prio", "n (fewest)", "TTFT p50", "TTFT p99", "TPOT p99", "SLO met", "inversion/run"]
    rows = [head]
    for name, c in rep["classes"].items():
        rows.append([clip(name, 40), str(c["priority"]), f"{c['n']['total']} ({min(c['n']['per_seed'])})",
                     est(c["ttft_p50"]), est(c["ttft_p99"]), est(c["tpot_p99"]),
                     est(c["slo_attainment"], pct, ""), est(c["inversion_s"], "{:.2f}")])
    width = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, width))))
    lines.append(SERVED_NOTE)
    if any(c[k] and c[k].get("few") for c in rep["classes"].values() for k in ("ttft_p50", "ttft_p99", "tpot_p99")):
        lines.append(FEW_NOTE)
    return "\n".join(lines)


def _list(args) -> int:
    for name in scenario_names():
        print(f"{name:<22} {load(name).title}")
    for name in bench_names():
        print(f"{name:<22} {load(name).title} (CLI only)")
    return 0


def _validate(args) -> int:
    sc = load(args.file, allow_dirs=tuple(args.allow))
    w = preflight(sc, None if args.no_work_limit else args.limits)
    print(f"ok: {clip(sc.name)} ({len(sc.class_names)} classes, policy {sc.scheduler.policy}; about "
          f"{w.requests:,.0f} requests, {w.steps:,.0f} steps, an estimated {w.seconds:.1f} s and "
          f"{w.memory_mib:,.0f} MiB)")
    return 0


def _bench(args) -> int:
    from .bench import run_bench

    run_bench(quick=args.quick)
    return 0
