"""A room opens the link at once: a fresh server whose first sessions open every page at the same
moment. Each page must render without an exception, the server must log no traceback (Streamlit
imports each session's page in its own thread; an import cycle then hands one of them a
half-initialised module, `tests/test_imports.py`), and every session must then take a control
change. Before the cycles went, 5 of 6 pages showed "cannot import name 'Hardware' from partially
initialized module 'engine.config.scenario'" on a quiet machine."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from load import wait_idle

from tests.support.browser import CHROMIUM_ARGS, server_log, streamlit_server

pytestmark = pytest.mark.browser
PATHS = ["/", "/timeline", "/p99", "/compare", "/memory", "/workshop"]


async def _one(browser, url: str, path: str, go: asyncio.Event) -> dict:
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    await go.wait()
    await page.goto(url + path)
    await wait_idle(page, 120_000)
    out = {"path": path, "exceptions": await page.get_by_test_id("stException").count()}
    await page.locator(".st-key-policy").click()  # a control move: the session is usable
    await page.get_by_role("option", name="priority", exact=True).click()
    await wait_idle(page, 120_000)
    out["policy"] = await page.locator(".st-key-policy input").input_value()
    out["exceptions"] += await page.get_by_test_id("stException").count()
    await ctx.close()
    return out


async def _room(chromium: str, url: str) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        go = asyncio.Event()
        tasks = [asyncio.create_task(_one(browser, url, p, go)) for p in PATHS]
        await asyncio.sleep(1.0)  # every context ready, then all requests at once
        go.set()
        out = await asyncio.gather(*tasks)
        await browser.close()
    return out


def test_every_page_at_once_on_a_cold_server(chromium_path):
    with streamlit_server() as url:
        with ThreadPoolExecutor(1) as pool:  # its own event loop (the sync fixtures keep one in this thread)
            got = pool.submit(asyncio.run, _room(chromium_path, url)).result()
        log = server_log(url).read_text()
    assert [g["exceptions"] for g in got] == [0] * len(PATHS), got
    assert [g["policy"] for g in got] == ["priority"] * len(PATHS), got
    assert "Traceback" not in log and "Error" not in log, log[-3000:]
