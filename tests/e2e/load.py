"""Load: several browser sessions at once, each changing controls and pages for a while.

    python tests/e2e/load.py [--sessions 8] [--seconds 120] [--seed 0] [--runs 1] [--nice-browser]

Starts `streamlit run app.py`, opens N sessions (separate browser contexts, so separate
Streamlit sessions) and lets each make random interactions — move the reserve slider, change the
policy, change P1's rate, switch page — measuring the time from each interaction until the app is
idle again (Streamlit's own idle check). Prints p50/p90/p99/max time-to-idle, interactions that
timed out, exception elements seen, and whether any session ever showed another session's
values (each session uses its own P1 rate, and checks its card after every change). `--runs N`
repeats it N times (a fresh server each, seeds seed…seed+N−1) and adds the figures over all runs'
interactions together: a p99 of one run is about its fourth-slowest interaction. Not a test:
the numbers depend on the machine and its load; `test_browser_load.py` runs a small version.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conftest import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
PAGES = ["Playground", "Timeline", "P99 curves", "Compare", "GPU & memory"]  # the top navigation
POLICIES = ["fcfs", "priority", "backfill", "preempt"]


async def wait_idle(page, timeout_ms: int) -> None:
    await page.wait_for_timeout(150)
    await page.locator(IDLE).wait_for(state="attached", timeout=timeout_ms)
    await page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')",
                                 timeout=timeout_ms, polling=50)


async def act(page, rng: random.Random, url: str, rate: float) -> str:
    """One random interaction; returns its name."""
    kind = rng.choice(["reserve", "policy", "page", "rate"])
    if kind == "page":  # as a person does: the top navigation (no reload, the same session)
        await page.get_by_role("link", name=rng.choice(PAGES), exact=True).click()
    elif kind == "reserve":
        thumb = page.locator(".st-key-reserve").get_by_role("slider")
        await thumb.focus()
        await thumb.press(rng.choice(["ArrowRight", "ArrowLeft"]))
    elif kind == "policy":
        choice = rng.choice(POLICIES)
        for attempt in range(2):  # a rerun that redraws the sidebar closes an open list: open it again
            await page.locator(".st-key-policy").click()
            try:
                await page.get_by_role("option", name=choice, exact=True).click(timeout=5_000)
                break
            except Exception:  # noqa: BLE001
                await page.keyboard.press("Escape")
                if attempt:
                    raise
    else:
        box = page.locator(".st-key-p1_rate input")
        if not await box.is_visible():  # the class's controls sit in a collapsed expander
            await page.get_by_test_id("stSidebar").get_by_text("P1 · priority 1").click()  # (the page may say it too)
        await box.fill(f"{rate * rng.choice([1, 1.5]):g}")
        await box.press("Enter")
    return kind


async def session(browser, url: str, k: int, seconds: float, seed: int, out: dict) -> None:
    rng = random.Random(seed * 1000 + k)
    rate = 2.0 + 0.25 * k  # this session's own P1 rate: another session's value would show
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    page.set_default_timeout(20_000)
    await page.goto(f"{url}/?p1_rate={rate:g}")
    await wait_idle(page, 120_000)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            kind = await act(page, rng, url, rate)
        except Exception as err:  # noqa: BLE001 — a control that never became usable is a finding
            lines = str(err).splitlines()
            out["failed"].append(" | ".join(x.strip() for x in lines[:3])[:200])
            continue
        t0 = time.monotonic()
        where = page.url.split("?")[0].rsplit("/", 1)[-1] or "playground"
        try:
            await wait_idle(page, 60_000)
            out["idle"].append(time.monotonic() - t0)
            out["by"].setdefault(f"{kind}@{where}", []).append(time.monotonic() - t0)
        except Exception:  # noqa: BLE001 — a timeout is the measurement
            out["timeouts"].append(f"{kind}@{where}")
        out["exceptions"] += await page.get_by_test_id("stException").count()
        try:
            shown = await page.locator(".st-key-p1_rate input").input_value(timeout=5_000)
        except Exception as err:  # noqa: BLE001 — e.g. still rerunning after a timeout: a finding, not a crash
            out["failed"].append(f"reading the rate after {kind}: " + str(err).splitlines()[0][:150])
            continue
        if shown and not any(abs(float(shown) - r) < 1e-9 for r in (rate, rate * 1.5)):
            out["crosstalk"].append((k, shown))
        await page.wait_for_timeout(rng.randint(200, 1500))  # a person reads before acting again
    await ctx.close()


def niced_chromium(folder: str) -> str:
    """A wrapper that starts chromium at nice 19: the browsers (in a workshop, on the
    participants' laptops) then get only the CPU the server leaves."""
    path = Path(folder) / "chromium-nice"
    path.write_text(f'#!/bin/sh\nexec nice -n 19 {CHROMIUM} "$@"\n')
    path.chmod(0o755)
    return str(path)


async def main_async(sessions: int, seconds: float, seed: int, nice_browser: bool = False) -> dict:
    import tempfile

    from playwright.async_api import async_playwright

    out = {"idle": [], "timeouts": [], "failed": [], "exceptions": 0, "crosstalk": [], "by": {}, "cpu": {}}
    usage = CpuUsage()
    with streamlit_server() as url, tempfile.TemporaryDirectory() as tmp:
        exe = niced_chromium(tmp) if nice_browser else CHROMIUM
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
            runs = asyncio.gather(*(session(browser, url, k, seconds, seed, out) for k in range(sessions)))
            while not runs.done():  # (sampled until the sessions close their pages)
                usage.sample()
                await asyncio.wait([runs], timeout=1.0)
            await runs
            await browser.close()
    out["cpu"] = usage.by_group()
    return out


class CpuUsage:
    """CPU seconds of the processes this run started (browser, server, workers), by group, from
    /proc: where the machine's time went. Processes that existed before are left out."""

    GROUPS = (("chromium", b"chrom"), ("page workers", b"ui.worker result"), ("sweep workers", b"ui.worker summary"),
              ("server", b"streamlit"), ("playwright", b"playwright"))

    def __init__(self) -> None:
        self.before = set(self._pids())
        self.last: dict[str, tuple[str, float]] = {}

    @staticmethod
    def _pids() -> list[str]:
        return [p for p in os.listdir("/proc") if p.isdigit()]

    def sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        for pid in self._pids():
            if pid in self.before:
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            group = next((g for g, mark in self.GROUPS if mark in cmd), None)
            if group is not None:
                self.last[pid] = (group, (int(fields[11]) + int(fields[12])) / tick)

    def by_group(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for group, cpu in self.last.values():
            out[group] = out.get(group, 0.0) + cpu
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def report(out: dict) -> str:
    t = sorted(out["idle"])
    q = (lambda p: t[min(len(t) - 1, int(p * len(t)))]) if t else (lambda p: float("nan"))
    return (f"{len(t)} interactions: time to idle p50 {statistics.median(t) if t else float('nan'):.2f} s, "
            f"p90 {q(0.9):.2f} s, p99 {q(0.99):.2f} s, max {max(t) if t else float('nan'):.2f} s; "
            f"{len(out['timeouts'])} timed out {out['timeouts'][:6]}; {out['exceptions']} exception elements; "
            f"{len(out['crosstalk'])} cross-talk; {len(out['failed'])} actions failed "
            f"{sorted(set(out['failed']))[:6]}\n"
            "CPU seconds: " + ", ".join(f"{g} {s:.0f}" for g, s in out["cpu"].items()))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nice-browser", action="store_true", help="run chromium at nice 19 (the server's CPU first)")
    ap.add_argument("--runs", type=int, default=1, help="repeat, then report all runs' interactions together")
    a = ap.parse_args()
    results = []
    for r in range(a.runs):
        result = asyncio.run(main_async(a.sessions, a.seconds, a.seed + r, a.nice_browser))
        results.append(result)
        print((f"run {r + 1}: " if a.runs > 1 else "") + report(result), flush=True)
        for key, ts in sorted(result["by"].items(), key=lambda kv: -max(kv[1])):
            print(f"  {key:<22} n={len(ts):3d} median {statistics.median(ts):5.2f} s  max {max(ts):5.2f} s")
    if a.runs > 1:
        pooled = {k: [x for r in results for x in r[k]] for k in ("idle", "timeouts", "failed", "crosstalk")}
        pooled["exceptions"] = sum(r["exceptions"] for r in results)
        groups = dict.fromkeys(g for r in results for g in r["cpu"])
        pooled["cpu"] = {g: sum(r["cpu"].get(g, 0.0) for r in results) for g in groups}
        print(f"all {a.runs} runs together: " + report(pooled))
