"""How long the P99 page takes to draw a fresh sweep in a real browser, compiled engine and pure.

    python tests/e2e/p99_bench.py [--rounds 7] [--change dur|seed] [--engine both|compiled|pure]

For each engine: `streamlit run app.py` (INVERSION_LAB_PURE=1 for the pure one, which its workers
inherit), Debian's chromium at 1280 px on `/p99?seeds=3` (the default scenario, the default
sweep: 9 token-reserve settings × 3 seeds = 27 runs; `--seeds`, `--points` change them). After
the first sweep of the fresh server (workers starting), each round waits until the page is idle
and its capacity search is done, then makes one sidebar change that no earlier round made:
*Arrivals for (s)* 90 → 89, 91, 88, 92, … (the default scenario's seeds 1–3, its traffic a
second or more shorter or longer), or with `--change seed` the seed 1 → 4, 7, 10, … (runs of
other seeds cost 0.7–1.5× as much). The script builds each round's plan itself and checks that
none of its runs was made before (in an earlier round, by the first sweep, or — on other
traffic — by a capacity search) and that it is the plan the page drew.

Timed in the page, from the Enter that commits the change (the key event's time stamp) to the
first frame after the chart drew the new sweep with all its runs (`layout.meta`, set by
`ui/runtime/live.py`, unseen) — and to its first curve. Also prints the CPU seconds each group
of processes spent in that interval. Not a test: the numbers depend on the machine and its load
(take the exclusive CPU lock).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from load import CpuUsage  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, open_app, streamlit_server, wait_idle  # noqa: E402

# Installed before each change: the time of the Enter that commits it, and the first frames in which a chart
# shows a sweep other than `old` with some of its runs and with all of them (Plotly keeps the figure's layout,
# its `meta` included, on the chart's element; a figure counts as drawn once every trace of it is in the page).
WATCH = """(old) => {
  const b = window.__bench = {t0: null, first: null, full: null, sweep: null, runs: null};
  document.addEventListener('keydown', e => { if (e.key === 'Enter' && b.t0 === null) b.t0 = e.timeStamp; },
                            {capture: true});
  let seen = false, done = false;
  const check = () => {
    if (done || b.t0 === null) return;
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      const m = gd._fullLayout && gd._fullLayout.meta;
      if (!m || !m.sweep || m.sweep === old) continue;
      const traces = (gd._fullData || []).filter(t => t.visible === true).length;
      if (!traces || gd.querySelectorAll('.scatterlayer .trace').length < traces) continue;
      if (!seen && m.runs > 0) { seen = true; requestAnimationFrame(() => { b.first = performance.now(); }); }
      if (m.runs === m.of) {
        done = true;
        obs.disconnect();
        requestAnimationFrame(() => { b.full = performance.now(); b.sweep = m.sweep; b.runs = m.runs; });
      }
    }
  };
  const obs = new MutationObserver(check);
  obs.observe(document.body, {subtree: true, childList: true, attributes: true});
  const tick = setInterval(() => { check(); if (done) clearInterval(tick); }, 10);
}"""
SHOWN = """() => { for (const gd of document.querySelectorAll('.js-plotly-plot')) {
  const m = gd._fullLayout && gd._fullLayout.meta; if (m && m.sweep && m.runs === m.of) return m.sweep; }
  return null; }"""
CAPACITY_DONE = "[class*='st-key-p99_capacity_done']"


def sweep_plan(change: dict, seeds: int, points: int):
    """The plan the page makes for the default scenario changed by `change` (a dotted override)
    (ui/runtime/runs.py::sweep_plan)."""
    from engine import load
    from engine.config.memory import breakdown
    from engine.sweeps.evidence import default_seeds
    from ui.frame.limits import why_not
    from ui.runtime.sweeps import KNOBS, plan, values_for

    sc = load("default", change)
    knob = KNOBS["reserve"]
    lo, hi = knob.default_range(sc, None, breakdown(sc).blocks)
    return plan(sc, knob.name, values_for(knob, lo, hi, points), default_seeds(sc.seed, seeds), None,
                why_not=why_not)


def change_of(kind: str, r: int) -> tuple[str, str, dict]:
    """Round r's change: (the sidebar control's key, the value typed, the scenario override)."""
    if kind == "seed":
        seed = 1 + 3 * r  # scenarios/default.yaml's seed, then past every seed of the rounds before
        return "seed", str(seed), {"seed": seed}
    dur = 90 + (r + 1) // 2 * (1 if r % 2 == 0 else -1)  # scenarios/default.yaml's 90 s: 89, 91, 88, 92, …
    return "dur", str(dur), {"duration_s": float(dur)}


def settle(page, timeout_ms: int = 300_000) -> str:
    """Wait until the page shows a complete sweep, its capacity search is done and it is idle; the sweep's id."""
    page.wait_for_function(SHOWN, timeout=timeout_ms, polling=50)
    page.wait_for_selector(CAPACITY_DONE, state="attached", timeout=timeout_ms)
    wait_idle(page, timeout_ms)
    page.wait_for_timeout(500)  # the fragments' last poll and rerun
    wait_idle(page, timeout_ms)
    return page.evaluate(SHOWN)


def bench(engine: str, rounds: int, kind: str, seeds: int, points: int) -> list[tuple[float, float, dict]]:
    from playwright.sync_api import sync_playwright

    from ui.runtime.live import fingerprint

    env = {"INVERSION_LAB_PURE": "1"} if engine == "pure" else {}
    os.environ.pop("INVERSION_LAB_PURE", None)
    if engine == "compiled":
        from engine.native import why_pure

        if (why := why_pure()) is not None:
            sys.exit(f"no compiled engine: {why}")
    used = set(sweep_plan({}, seeds, points).keys)
    out = []
    usage = CpuUsage()
    with sync_playwright() as pw, streamlit_server(env) as url:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        t0 = time.monotonic()
        open_app(page, f"{url}/p99?seeds={seeds}&sw_pts={points}")
        old = settle(page)
        print(f"{engine}: first sweep of a fresh server (workers starting) and its capacity search settled "
              f"{time.monotonic() - t0:.1f} s after opening", flush=True)
        page.get_by_test_id("stSidebar").get_by_text("Run", exact=True).click()
        for r in range(1, rounds + 1):
            key, typed, override = change_of(kind, r)
            p = sweep_plan(override, seeds, points)
            assert not used & set(p.keys), "a run of this round was made before"
            used |= set(p.keys)
            box = page.locator(f".st-key-{key} input")
            page.evaluate(WATCH, old)
            box.fill(typed)
            usage.sample()
            cpu0 = usage.by_group()
            box.press("Enter")
            page.wait_for_function("window.__bench.full !== null", timeout=300_000, polling=50)
            usage.sample()
            cpu = {g: c - cpu0.get(g, 0.0) for g, c in usage.by_group().items()}
            got = page.evaluate("window.__bench")
            assert got["sweep"] == fingerprint(p) and got["runs"] == len(p.keys), (got, fingerprint(p))
            first, full = (got["first"] - got["t0"]) / 1000, (got["full"] - got["t0"]) / 1000
            out.append((first, full, cpu))
            print(f"{engine} {key}={typed}: first curve {first:.2f} s, all {len(p.keys)} runs drawn {full:.2f} s "
                  "(CPU-s to then: " + ", ".join(f"{g} {c:.2f}" for g, c in cpu.items() if c >= 0.005) + ")",
                  flush=True)
            old = settle(page)
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--change", choices=("dur", "seed"), default="dur", help="the sidebar control each round changes")
    ap.add_argument("--seeds", type=int, default=3, help="the sidebar's seeds per figure")
    ap.add_argument("--points", type=int, default=9, help="the sweep's points")
    ap.add_argument("--engine", choices=("both", "compiled", "pure"), default="both")
    args = ap.parse_args()
    results = {}
    for engine in (("compiled", "pure") if args.engine == "both" else (args.engine,)):
        results[engine] = bench(engine, args.rounds, args.change, args.seeds, args.points)
    for engine, rows in results.items():
        fulls, firsts = [f for _, f, _ in rows], [f for f, _, _ in rows]
        cpu: dict[str, float] = {}
        for _, _, c in rows:
            for g, v in c.items():
                cpu[g] = cpu.get(g, 0.0) + v / len(rows)
        print(f"{engine}: {args.points} × {args.seeds} runs drawn in median {statistics.median(fulls):.2f} s "
              f"(min {min(fulls):.2f}, max {max(fulls):.2f}, {len(rows)} rounds); first curve median "
              f"{statistics.median(firsts):.2f} s; mean CPU-s: "
              + ", ".join(f"{g} {v:.2f}" for g, v in cpu.items() if v >= 0.005))


if __name__ == "__main__":
    main()
