"""Command line of sweeps and plans: `python -m engine sweep|plan SPEC.yaml [...]`.

Exit codes: 0 done, 1 a plan found no setting that meets the SLOs, 2 a bad spec, output
directory or backend (one line `error: …`), 130 interrupted (Ctrl-C or SIGTERM: the output holds
every finished run and the same command resumes).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    """The `sweep` and `plan` subcommands (engine.cli calls this)."""
    for name, what in (("sweep", "run a sweep spec: base scenario × grid/sample × seeds → tidy table"),
                       ("plan", "fewest GPUs (replicas × TP) and remedy settings that meet every class's SLO")):
        p = sub.add_parser(name, help=what, description=what)
        p.add_argument("spec", type=Path, help="the spec YAML file (README: Sweeps and capacity planning)")
        p.add_argument("--out", type=Path, help="output directory (default runs/SPEC-NAME); rerun to resume")
        p.add_argument("--backend", choices=("local", "ray"), default="local",
                       help="local processes (default) or a Ray cluster")
        p.add_argument("--address", help="Ray cluster address (ray start --head prints it); default: a local Ray")
        p.add_argument("--workers", type=int, help="parallel runs (default: all cores / all cluster CPUs)")
        p.add_argument("--fresh", action="store_true", help="discard the runs already in --out and start over")
        p.add_argument("--checkpoint-s", type=float, default=5.0, metavar="S",
                       help="write finished runs to --out at least this often (default 5 s)")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--dry-run", action="store_true", help="validate the spec, print how many runs, run nothing")
        if name == "sweep":
            p.add_argument("--batch", type=int, help="runs per task (default: automatic, at most 32)")


def _sigterm_as_interrupt() -> None:
    """`kill PID` saves like Ctrl-C does (cluster schedulers stop jobs with SIGTERM)."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. called from a test harness thread)
        pass


def _backend(args):
    from .sweep_exec import make_backend

    if args.workers is not None and args.workers < 1:
        from .sweep import SweepError

        raise SweepError(f"--workers {args.workers}: need at least 1")
    return make_backend(args.backend, args.address, args.workers)


def _run(args, spec, runner, **extra):
    """`runner` (run_sweep or run_plan) on the spec, into --out (default runs/SPEC-NAME), on the
    backend the arguments name (closed after); SIGTERM saves like Ctrl-C. Returns the backend
    (its name and workers, for the summary line) and the runner's outcome."""
    out = args.out or Path("runs") / args.spec.stem
    _sigterm_as_interrupt()
    with _backend(args) as backend:
        return backend, runner(spec, out, backend, spec_path=str(args.spec), fresh=args.fresh,
                               progress=not args.quiet, checkpoint_s=args.checkpoint_s, **extra)


def cmd_sweep(args) -> int:
    from .sweep import expand, load_spec, run_sweep
    from .sweep_store import CSV, TABLE

    spec = load_spec(args.spec)
    if args.dry_run:
        runs = expand(spec)
        knobs = ", ".join(spec.knobs) or "no knobs"
        print(f"sweep {spec.name}: {len(runs)} runs ({len(spec.points())} settings × {len(spec.seeds)} seeds); "
              f"knobs: {knobs}")
        return 0
    backend, o = _run(args, spec, run_sweep, batch=args.batch)
    done = o.skipped + o.ran
    if o.status != "complete":
        print(f"interrupted: {done} of {o.total} runs saved in {o.out}; rerun the same command to resume",
              file=sys.stderr)
        return 130
    print(f"sweep {spec.name}: {o.total} runs ({o.skipped} already done, {o.ran} run now, {o.wall_s:.1f} s on "
          f"{backend.name} × {backend.workers}) → {o.out / TABLE}, {o.out / CSV}")
    return 0


def cmd_plan(args) -> int:
    from .plan import format_plan, max_runs, parse_plan, run_plan
    from .sweep import load_spec

    spec = load_spec(args.spec)
    if args.dry_run:
        ps = parse_plan(spec, args.spec.name)
        print(f"plan {spec.name}: TP {list(ps.tensor_parallel)} × {len(spec.points())} settings × replicas "
              f"{ps.lo}..{ps.hi} (bisection) × {len(spec.seeds)} seeds: at most {max_runs(spec, ps)} runs")
        return 0
    _, o = _run(args, spec, run_plan)
    print(format_plan(o, spec))
    print(f"table of every run: {o.out / 'runs.parquet'}; plan: {o.out / 'plan.json'}")
    if o.status != "complete":
        return 130
    return 0 if o.cheapest is not None else 1


def _interruptible(cmd):
    """Ctrl-C before the runs start (reading, validating, starting Ray) exits 130 without a traceback;
    once runs started, run_sweep/run_plan save what finished themselves."""
    def wrapped(args) -> int:
        try:
            return cmd(args)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130

    return wrapped


COMMANDS = {"sweep": _interruptible(cmd_sweep), "plan": _interruptible(cmd_plan)}

