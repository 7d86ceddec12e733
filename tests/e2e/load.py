"""Load: several browser sessions at once, each changing controls and pages for a while.

    python tests/e2e/load.py [--sessions 8] [--seconds 120] [--seed 0] [--runs 1] [--nice-browser]
                             [--processes N] [--cold] [--capacity]

Starts `streamlit run app.py` (or, with `--processes N`, `python3 tasks.py serve`'s N Streamlit
processes behind nginx, deploy/serve.py), warms each process with one page (unless `--cold`),
opens N sessions (separate browser contexts, so separate Streamlit sessions, and with a proxy
separate route cookies) and lets each make random interactions — move the reserve slider, change
the policy, change P1's rate, switch page — measuring the time from each interaction until the
app is idle again (Streamlit's own idle check), and each session's first page (from the request
until idle). Prints p50/p90/p99/max time-to-idle, interactions that timed out, exception
elements seen, whether any session ever showed another session's values (each session uses its
own P1 rate, and checks its card after every change), the CPU seconds of each group of
processes, the server's and the workers' CPU per interaction in the steady state (after every
first page), and with `--capacity` the participants per core that CPU implies (`capacity()`).
`--runs N` repeats it N times (a fresh server each, seeds seed…seed+N−1) and adds the figures
over all runs' interactions together: a p99 of one run is about its fourth-slowest interaction.
Not a test: the numbers depend on the machine and its load; `test_browser_load.py` runs a small
version.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import re
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

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
        name = rng.choice(PAGES)
        link = page.get_by_role("link", name=name, exact=True)
        if await link.count():
            await link.click()
        else:  # in the navigation's overflow at this width ("2 more"): open it, pick the page
            await page.get_by_text(re.compile(r"^\d+ more$")).click()
            await page.get_by_text(name, exact=True).last.click()
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
    t0 = time.monotonic()
    await page.goto(f"{url}/?p1_rate={rate:g}")
    await wait_idle(page, 120_000)
    out["first"].append(time.monotonic() - t0)
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
            out["starts"].append(t0)
            out["by"].setdefault(f"{kind}@{where}", []).append(time.monotonic() - t0)
        except Exception:  # noqa: BLE001 — a timeout is the measurement
            out["timeouts"].append(f"{kind}@{where}")
            out["starts"].append(t0)
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


@contextmanager
def app_server(processes: int):
    """(the app's URL, each Streamlit process's own URL): `streamlit run` (0), or `processes`
    Streamlit processes behind nginx."""
    if not processes:
        with streamlit_server() as url:
            yield url, [url]
        return
    from deploy.serve import Room, free_port

    with Room(processes=processes, port=free_port(), address="127.0.0.1") as room:
        yield room.url, [b.url for b in room.backends]


async def warm_up(browser, urls: list[str]) -> None:
    """One page on each Streamlit process, straight to its port, before the sessions start: its
    imports done, its workers started, the default scenario's run in its cache (a warm server)."""
    for url in urls:
        ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await ctx.new_page()
        await page.goto(url)
        await wait_idle(page, 120_000)
        await ctx.close()


async def main_async(sessions: int, seconds: float, seed: int, nice_browser: bool = False,
                     processes: int = 0, warm: bool = False) -> dict:
    import tempfile

    from playwright.async_api import async_playwright

    out = {"idle": [], "first": [], "starts": [], "timeouts": [], "failed": [], "exceptions": 0, "crosstalk": [],
           "by": {}, "cpu": {}, "steady_cpu": {}, "steady_n": 0}
    usage = CpuUsage()
    with app_server(processes) as (url, backends), tempfile.TemporaryDirectory() as tmp:
        exe = niced_chromium(tmp) if nice_browser else CHROMIUM
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
            if warm:
                await warm_up(browser, backends)
            runs = asyncio.gather(*(session(browser, url, k, seconds, seed, out) for k in range(sessions)))
            while not runs.done():  # (sampled until the sessions close their pages)
                usage.sample()
                if "warm" not in out and len(out["first"]) == sessions:  # every first page done: the
                    out["warm"] = (time.monotonic(), usage.by_group())  # steady state starts here
                await asyncio.wait([runs], timeout=1.0)
            await runs
            await browser.close()
    out["cpu"] = usage.by_group()
    if "warm" in out:  # CPU and interactions after every session's first page: the per-interaction cost
        t_warm, cpu_warm = out.pop("warm")
        out["steady_cpu"] = {g: out["cpu"][g] - cpu_warm.get(g, 0.0) for g in out["cpu"]}
        out["steady_n"] = sum(1 for t in out["starts"] if t >= t_warm)
    return out


class CpuUsage:
    """CPU seconds of the processes this run started (browser, server, workers), by group, from
    /proc: where the machine's time went. Processes that existed before are left out."""

    GROUPS = (("chromium", b"chrom"), ("page workers", b"ui.runtime.worker result"),
              ("sweep workers", b"ui.runtime.worker summary"),
              ("server", b"streamlit"), ("nginx", b"nginx"), ("playwright", b"playwright"))

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


def per_interaction(out: dict) -> dict[str, float]:
    """CPU seconds per interaction of the server processes, the workers and nginx, in the steady
    state: the CPU spent after every session's first page was idle, over the interactions started
    after it (finished or timed out). Startup and first pages are left out, as on a warm server."""
    n = max(1, out["steady_n"])
    cpu = out["steady_cpu"]
    return {"server": cpu.get("server", 0.0) / n,
            "workers": (cpu.get("page workers", 0.0) + cpu.get("sweep workers", 0.0)) / n,
            "nginx": cpu.get("nginx", 0.0) / n}


def capacity(cpu_per_interaction: float, think_s: float = 10.0, p99_s: float = 2.0) -> float:
    """Participants one core carries with a p99 time-to-idle of at most `p99_s`, each acting every
    `think_s` seconds, when each interaction costs `cpu_per_interaction` CPU-seconds of server and
    workers: each core an M/M/1 queue (one Streamlit process per core; its interpreter runs one
    script at a time), whose response time is exponential with rate μ − λ, so its p99 is
    ln(100) / (μ − λ). Browsers are on the participants' own machines and not counted."""
    mu = 1.0 / cpu_per_interaction
    lam = max(0.0, mu - math.log(100) / p99_s)
    return lam * think_s


def report(out: dict) -> str:
    t = sorted(out["idle"])
    q = (lambda p: t[min(len(t) - 1, int(p * len(t)))]) if t else (lambda p: float("nan"))
    first = sorted(out.get("first", []))
    per = per_interaction(out)
    return (f"{len(t)} interactions: time to idle p50 {statistics.median(t) if t else float('nan'):.2f} s, "
            f"p90 {q(0.9):.2f} s, p99 {q(0.99):.2f} s, max {max(t) if t else float('nan'):.2f} s; "
            f"{len(out['timeouts'])} timed out {out['timeouts'][:6]}; {out['exceptions']} exception elements; "
            f"{len(out['crosstalk'])} cross-talk; {len(out['failed'])} actions failed "
            f"{sorted(set(out['failed']))[:6]}\n"
            + (f"first page: median {statistics.median(first):.1f} s, max {max(first):.1f} s ({len(first)} sessions)\n"
               if first else "")
            + "CPU seconds: " + ", ".join(f"{g} {s:.0f}" for g, s in out["cpu"].items()) + "\n"
            + f"CPU-s per interaction (steady state, {out['steady_n']} interactions): server {per['server']:.3f}, "
              f"workers {per['workers']:.3f}"
            + (f", nginx {per['nginx']:.4f}" if per["nginx"] else ""))


def pool(results: list[dict]) -> dict:
    """Several runs' figures as one run's: interactions, first pages and CPU added together."""
    out = {k: [x for r in results for x in r[k]] for k in ("idle", "first", "starts", "timeouts", "failed",
                                                              "crosstalk")}
    out["exceptions"] = sum(r["exceptions"] for r in results)
    out["steady_n"] = sum(r["steady_n"] for r in results)
    for key in ("cpu", "steady_cpu"):
        groups = dict.fromkeys(g for r in results for g in r[key])
        out[key] = {g: sum(r[key].get(g, 0.0) for r in results) for g in groups}
    return out


def capacity_table(per: dict[str, float]) -> str:
    """Participants per core, and for a few hosts, from the measured CPU per interaction."""
    c = per["server"] + per["workers"] + per["nginx"]
    lines = [f"capacity at p99 ≤ 2 s from {c:.3f} CPU-s per interaction (server + workers + nginx), "
             "one Streamlit process per core:",
             "| an action every | participants per core | 4 cores | 8 cores | 16 cores |", "|---|---|---|---|---|"]
    for think in (5.0, 10.0, 20.0):
        k = capacity(c, think)
        lines.append(f"| {think:g} s | {k:.0f} | {4 * k:.0f} | {8 * k:.0f} | {16 * k:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nice-browser", action="store_true", help="run chromium at nice 19 (the server's CPU first)")
    ap.add_argument("--runs", type=int, default=1, help="repeat, then report all runs' interactions together")
    ap.add_argument("--processes", type=int, default=0,
                    help="N Streamlit processes behind nginx (tasks.py serve); 0: one `streamlit run`, no proxy")
    ap.add_argument("--cold", action="store_true", help="no warm-up: the sessions' first pages start the server's "
                    "imports and workers")
    ap.add_argument("--capacity", action="store_true", help="add the participants-per-core table (README)")
    a = ap.parse_args()
    results = []
    for r in range(a.runs):
        result = asyncio.run(main_async(a.sessions, a.seconds, a.seed + r, a.nice_browser, a.processes, not a.cold))
        results.append(result)
        print((f"run {r + 1}: " if a.runs > 1 else "") + report(result), flush=True)
        for key, ts in sorted(result["by"].items(), key=lambda kv: -max(kv[1])):
            print(f"  {key:<22} n={len(ts):3d} median {statistics.median(ts):5.2f} s  max {max(ts):5.2f} s")
    pooled = pool(results)
    if a.runs > 1:
        print(f"all {a.runs} runs together: " + report(pooled))
    if a.capacity:
        print(capacity_table(per_interaction(pooled)))
