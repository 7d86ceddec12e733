"""`python -m engine story`: does a scenario's (or a lesson's) story hold across seeds and load?

    python -m engine story classic-inversion                    # 20 seeds × load ×0.9, ×1, ×1.1
    python -m engine story classic-inversion --seeds 5 --rates 1
    python -m engine story --all --markdown                     # every shipped story: the README's table
    python -m engine story lessons/05-inheritance-disappoints.md

Exit code 0 when every claim is robust (`engine.sweeps.story.required`) at every scale, 1 when some claim
is not, 2 for bad input (as every other subcommand).
"""

from __future__ import annotations

import json
import sys

from ..config.scale import DEFAULT_SCALES
from ..config.scenario import ScenarioError


def add_parser(sub) -> None:
    what = "check a scenario's story (or a lesson's claims) over seeds and ±load: holds on k of N seeds"
    p = sub.add_parser("story", help=what, description=what)
    p.add_argument("names", nargs="*", metavar="SCENARIO|LESSON.md",
                   help="shipped scenario names, scenario YAML paths with a story: section, or lesson files")
    p.add_argument("--all", action="store_true", help="every shipped scenario that tells a story")
    p.add_argument("--seeds", type=int, default=20, metavar="N",
                   help="the scenario's seed and the next N-1 (default 20)")
    p.add_argument("--rates", default=",".join(f"{x:g}" for x in DEFAULT_SCALES), metavar="S,S,...",
                   help="load scales: every class's rate × s, a trace packed s times closer (default 0.9,1,1.1)")
    p.add_argument("--workers", type=int, help="parallel runs (default: all cores)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per story, one per line")
    out.add_argument("--markdown", action="store_true", help="one table row per claim (the README's audit table)")


def _scales(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ScenarioError(f"--rates {text!r}: expected numbers separated by commas, e.g. 0.9,1,1.1") from None
    if not vals:
        raise ScenarioError("--rates: give at least one scale")
    return vals


def cmd_story(args) -> int:
    from . import story as stories  # here, not at the top: `python -m engine run` need not load it

    if args.all == bool(args.names):
        raise ScenarioError("name scenarios or lessons, or give --all (not both)")
    picked = stories.shipped() if args.all else [stories.load_story(n) for n in args.names]
    scales = _scales(args.rates)
    bar = None
    if not args.json:
        from .sweep_runner import Bar

        bar = Bar(0, 0, "story")
    try:
        audits = stories.audit(picked, args.seeds, scales, workers=args.workers, progress=bar)
    finally:
        if bar:
            bar.close()
    if args.json:
        for a in audits:
            print(json.dumps(stories.to_json(a)))
    elif args.markdown:
        print(stories.markdown(audits))
    else:
        print("\n\n".join(stories.format_audit(a) for a in audits))
    weak = [a.story.name for a in audits if not a.robust]
    if weak and not args.json:
        print(f"\nnot robust: {', '.join(weak)}", file=sys.stderr)
    return 1 if weak else 0


COMMANDS = {"story": cmd_story}
