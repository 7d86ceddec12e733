"""`python3 tasks.py serve`: two Streamlit processes behind nginx (deploy/serve.py), in Chromium.

Each browser sticks to one process by nginx's cookie (every test browser comes from 127.0.0.1, so
the client address could not tell them apart): its page, WebSocket and upload all reach the
process that holds its session. Browsers are spread over both processes, never see each other's
values, and a browser whose process stops reconnects to the other and reopens the same view from
its URL. Without nginx the tests skip locally and fail on CI (CI=true), as for chromium.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from deploy.serve import NGINX, Room, free_port, render, worker_counts
from tests.support.browser import ROOT, open_app, wait_idle

pytestmark = pytest.mark.browser
ROUTE = re.compile(r"route=(\S+) upstream=(\S+) status=(\d+) \"(\S+) (\S+)")


def test_the_template_is_filled_completely():
    text = (ROOT / "deploy" / "nginx.conf.template").read_text()
    with pytest.raises(ValueError):
        render(text, {"WORKDIR": "/w", "SERVERS": "", "ADDRESS": "127.0.0.1", "PORT": "1"})  # MAX_BODY missing
    conf = render(text, {"WORKDIR": "/w", "SERVERS": "server 127.0.0.1:2;", "ADDRESS": "127.0.0.1", "PORT": "1",
                         "MAX_BODY": "21m"})
    assert "hash $lab_route consistent;" in conf and "proxy_set_header Upgrade $http_upgrade;" in conf


def test_workers_are_divided_between_processes():
    assert worker_counts(1, 2) == {"INVERSION_LAB_PAGE_WORKERS": "2", "INVERSION_LAB_SWEEP_WORKERS": "2"}
    assert worker_counts(2, 2) == {"INVERSION_LAB_PAGE_WORKERS": "1", "INVERSION_LAB_SWEEP_WORKERS": "1"}
    assert worker_counts(4, 16) == {"INVERSION_LAB_PAGE_WORKERS": "1", "INVERSION_LAB_SWEEP_WORKERS": "1"}
    assert worker_counts(1, 16) == {"INVERSION_LAB_PAGE_WORKERS": "2", "INVERSION_LAB_SWEEP_WORKERS": "4"}


@pytest.fixture(scope="module")
def room(chromium_path):
    if not Path(NGINX).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{NGINX} is missing on CI (tasks.py test installs it)")
        pytest.skip("nginx not installed (python3 tasks.py test installs it as root)")
    with Room(processes=2, port=free_port(), address="127.0.0.1") as r:
        yield r


def routes(room: Room) -> list[tuple[str, str, str, str]]:
    """(route cookie, upstream, status, path) of every request nginx passed on so far."""
    return [(m[1], m[2], m[3], m[5]) for m in ROUTE.finditer(room.access_log.read_text())]


def routes_after_close(room: Room, wait_s: float = 1.0) -> list[tuple[str, str, str, str]]:
    time.sleep(wait_s)
    return routes(room)


def cookie_per_process(room: Room, prefix: str) -> dict[str, str]:
    """A route cookie (new, starting with `prefix`) for each process: ask with a few cookies and
    read where nginx sent them."""
    for i in range(40):
        req = urllib.request.Request(f"{room.url}/_stcore/health", headers={"Cookie": f"lab_route={prefix}{i}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.read() == b"ok"
    found: dict[str, str] = {}
    for route, upstream, _, _ in routes(room):
        if route.startswith(prefix):
            found.setdefault(upstream, route)
    return found


def browser_on(browser, room: Room, cookie: str):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.add_cookies([{"name": "lab_route", "value": cookie, "url": room.url}])
    return ctx, ctx.new_page()


def test_browsers_spread_over_processes_and_each_sticks_to_its_own(browser, room, tmp_path):
    per = cookie_per_process(room, "spread")
    assert sorted(per) == sorted(f"127.0.0.1:{b.port}" for b in room.backends)  # both processes take browsers
    sessions = []
    for k, (upstream, cookie) in enumerate(sorted(per.items())):
        ctx, page = browser_on(browser, room, cookie)
        rate = f"{2.5 + k:g}"
        open_app(page, f"{room.url}/?p1_rate={rate}")
        sessions.append((upstream, cookie, ctx, page, rate))
    for _, cookie, _, page, rate in sessions:  # a control each, then an upload each
        page.locator(".st-key-policy").click()
        page.get_by_role("option", name="priority", exact=True).click()
        wait_idle(page)
        expect(page).to_have_url(re.compile(r"policy=priority"))
        page.get_by_test_id("stSidebar").get_by_text("P1 · priority 1").click()
        expect(page.locator(".st-key-p1_rate input")).to_have_value(rate)  # its own value, not the other's
        upload = tmp_path / f"room-{cookie}.yaml"
        upload.write_text((ROOT / "scenarios" / "default.yaml").read_text().replace("name: default",
                                                                                     f"name: room-{cookie}"))
        page.get_by_test_id("stSidebar").get_by_text("Import and export").click()
        page.locator(".st-key-_up_yaml input[type=file]").set_input_files(str(upload))
        # the server took it (the uploader lists the file's name as soon as it is picked, before its PUT)
        expect(page.get_by_test_id("stSidebar").get_by_text(f"Using the uploaded scenario room-{cookie}")) \
            .to_have_count(1, timeout=60_000)
        expect(page.get_by_test_id("stException")).to_have_count(0)
    for *_, ctx, _, _ in sessions:
        ctx.close()  # nginx logs a WebSocket when it closes
    log = routes_after_close(room)
    for upstream, cookie, *_ in sessions:
        mine = [(u, s, p) for r, u, s, p in log if r == cookie]
        assert {u for u, _, _ in mine} == {upstream}, mine  # every request of this browser: one process
        paths = [p for _, _, p in mine]
        assert any(p.startswith("/_stcore/stream") for p in paths)  # its WebSocket
        assert any(p.startswith("/_stcore/upload_file") for p in paths)  # its upload
        assert all(s != "502" for _, s, _ in mine)


def test_a_browser_whose_process_stops_reopens_its_view_on_the_other(browser, room):
    per = cookie_per_process(room, "failover")
    upstream, cookie = sorted(per.items())[0]
    ctx, page = browser_on(browser, room, cookie)
    open_app(page, f"{room.url}/timeline?policy=priority&p1_rate=3.5")
    victim = next(b for b in room.backends if f"127.0.0.1:{b.port}" == upstream)
    victim.proc.terminate()  # its process stops (by PID)
    victim.proc.wait(timeout=20)
    try:
        # the page reconnects through nginx to the other process, which reruns it from the URL
        page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=90_000)
        page.wait_for_timeout(3000)
        wait_idle(page, 90_000)
        expect(page).to_have_url(re.compile(r"/timeline\?.*policy=priority"))
        expect(page.locator(".st-key-policy input")).to_have_value("priority")
        expect(page.get_by_test_id("stException")).to_have_count(0)
        expect(page.get_by_test_id("stHeading").filter(has_text="Inversion timeline")).to_have_count(1)
    finally:
        ctx.close()
        room.start_backend(victim)  # as `serve` itself does (Room.watch)
    streams = [u for r, u, s, p in routes_after_close(room) if r == cookie and p.startswith("/_stcore/stream")
               and s == "101"]
    assert streams[0] == upstream and streams[-1] != upstream, streams  # the first WebSocket, then the other process
