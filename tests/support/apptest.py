"""AppTest sessions the app tests share: a fresh session opened on a page with a link's query."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_page(page: str | None = None, *, timeout: float = 60, run: bool = True, **query) -> AppTest:
    """A fresh session whose first request is `page` (None: the app's first page) with the link
    `query`; run once unless `run` is False."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    if page:
        at.switch_page(page)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run() if run else at
