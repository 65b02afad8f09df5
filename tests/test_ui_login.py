"""The locked-down API's UI still works in a real browser (docs/hosting.md §4): headless Debian
Chromium through Playwright, the login page takes the whole line of ``<home>/prefect/credentials``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/lib/chromium/chromium"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
def test_ui_refuses_without_login_and_shows_the_deployments_after_it(ts_daemon: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    ui = ts_daemon["api"][: -len("/api")]
    credentials = (ts_daemon["home"] / "prefect" / "credentials").read_text().strip()
    statuses: list[int] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.on("response", lambda r: statuses.append(r.status) if "/api/" in r.url else None)
            # the UI's first API call is answered 401: awaited (network idle alone can come before the
            # UI's script has run on a loaded machine)
            with page.expect_response(lambda r: "/api/" in r.url and r.status == 401, timeout=120000):
                page.goto(f"{ui}/deployments", wait_until="networkidle", timeout=120000)
            assert 401 in statuses  # the API refuses the UI until it logs in
            page.locator("input").first.fill(credentials)
            page.keyboard.press("Enter")
            page.wait_for_load_state("networkidle")
            statuses.clear()
            page.goto(f"{ui}/deployments", wait_until="networkidle", timeout=120000)
            page.get_by_text("run-task").first.wait_for(timeout=60000)
            assert statuses and 401 not in statuses
        finally:
            browser.close()
