"""A real browser against `streamlit run app.py`: Debian chromium driven by Playwright.

The server is started once per session on a free localhost port and stopped by its PID.
Without chromium the tests skip locally and fail on CI (CI=true).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, SHOTS, streamlit_server


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing on CI (apt-get install -y chromium)")
        pytest.skip(f"{CHROMIUM} not installed")
    return CHROMIUM


@pytest.fixture(scope="session")
def app_url(chromium_path):
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    p = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="session")
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS
