"""A run history that tells the truth in the Prefect UI (docs/lifecycle.md §7).

A round that did not pass is a Failed task run while the flow goes on to the repair plan; an
orderly failed / needs_attention / cancelled end leaves no ERROR traceback in the flow-run log;
the log has one line per check; and the UI itself (headless Debian Chromium through Playwright)
shows it — screenshots are kept under ``test-artifacts/ui/`` (``TIANSHU_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import (add_scripted_profile, flow_run_logs, mcp_client, meta_of, prefect_ui_login, run_to_stop, task_runs,
                      text_of)
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon")]

CHROMIUM = "/usr/lib/chromium/chromium"
ARTIFACTS = Path(os.environ.get("TIANSHU_TEST_ARTIFACTS") or Path(__file__).resolve().parent.parent / "test-artifacts")


def _assert_no_traceback(api: Any, flow_run_id: str, *, final: bool = True) -> list[dict[str, Any]]:
    """The flow run's log has no traceback and no ERROR line but a failed task run's final line."""
    logs = flow_run_logs(api, flow_run_id, final=final)
    assert logs, "the flow run has no log"
    for entry in logs:
        assert "Traceback" not in entry["message"] and "unexpected exception" not in entry["message"], entry
        if entry["level"] >= 40:
            assert entry["task_run_id"] and entry["message"].startswith("Finished in state Failed("), entry
    return logs


async def test_a_failed_round_is_a_failed_task_run_and_the_flow_goes_on(ts_home: Path, calc_repo: Path,
                                                                        prefect_api: Any) -> None:
    _, meta = await run_to_stop(ts_home, {"projectPath": str(calc_repo), "task": "Fix add", "agentId": "scripted",
                                          "autoFixRounds": 1})
    assert meta["status"] == "succeeded", meta
    states = {tr["name"]: (tr["state"]["type"], tr["state"]["message"]) for tr in task_runs(prefect_api, meta["flowRunId"])}
    assert states["verify-round-0"] == ("FAILED", "round 0 did not pass: pytest"), states
    assert states["repair-plan-0"][0] == "COMPLETED" and states["verify-round-1"][0] == "COMPLETED", states
    logs = _assert_no_traceback(prefect_api, meta["flowRunId"])
    lines = [e["message"] for e in logs]
    assert any(m.startswith("check pytest: FAIL (exit code 1, tests 1 passed / 1 failed / 0 skipped)") for m in lines), lines
    # what failed is a WARNING in the UI's log (a newcomer filtering for warnings saw nothing), the rest INFO
    levels = {e["message"].split(" (", 1)[0]: e["level"] for e in logs if e["message"].startswith(("check ", "round 0 ver"))}
    assert levels["check pytest: FAIL"] == levels["round 0 verification failed"] == 30, levels
    assert levels["check pytest: PASS"] == levels["check git-diff-check: PASS"] == 20, levels
    assert any(m.startswith("check pytest: PASS (exit code 0, tests 2 passed / 0 failed / 0 skipped)") for m in lines), lines
    assert any(m.startswith("check git-diff-check: PASS") for m in lines), lines


@pytest.mark.parametrize("end", ["failed", "needs_attention", "cancelled"])
async def test_an_orderly_end_leaves_no_error_traceback(ts_home: Path, tmp_path: Path, prefect_api: Any,
                                                        end: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    if end == "failed":  # the zero-change gate, no rework
        _, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted-noop"})
    elif end == "needs_attention":  # rework rounds used up
        _, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted-noop",
                                              "autoFixRounds": 1})
    else:
        add_scripted_profile(ts_home, "history-hang", "hang")
        async with mcp_client(ts_home) as client:
            tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                              "agentId": "history-hang"}))["taskId"]
            deadline = time.monotonic() + 120
            while meta_of(await client.call_tool("query_task", {"taskId": tid}))["status"] != "running":
                assert time.monotonic() < deadline, "the task never ran"
                await anyio.sleep(0.2)
            r = await client.call_tool("manage_task", {"taskId": tid, "action": "cancel", "reason": "enough"})
            assert not r.is_error, text_of(r)
            meta = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 120000}))
    assert meta["status"] == end, meta
    # the flow-run process writes its last lines as it exits: wait for its final one
    _assert_no_traceback(prefect_api, meta["flowRunId"], final=end != "cancelled")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
async def test_the_prefect_ui_shows_the_failed_round_the_tags_and_the_check_lines(
        ts_daemon: dict[str, Any], calc_repo: Path) -> None:
    from playwright.async_api import async_playwright

    home = ts_daemon["home"]
    sub, meta = await run_to_stop(home, {"projectPath": str(calc_repo), "task": "Fix the bug in add()",
                                         "agentId": "scripted", "autoFixRounds": 1})
    assert meta["status"] == "succeeded", meta
    ui = ts_daemon["api"][: -len("/api")]
    credentials = (home / "prefect" / "credentials").read_text().strip()
    shots = ARTIFACTS / "ui"
    shots.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            # the link a tool gives, opened by a browser that has not logged in: the login page,
            # then the run (a tester's deep link only said "Authentication failed")
            fresh = await browser.new_page(viewport={"width": 1400, "height": 1000})
            await fresh.goto(meta["flowRunUrl"], wait_until="networkidle", timeout=120000)
            # the UI's router sends it to the login once it has asked the server whether auth is
            # on (after the page's first load: waited for, not assumed done at "networkidle")
            await fresh.wait_for_url("**/login**", timeout=60000)
            await fresh.locator("input").first.fill(credentials)
            await fresh.keyboard.press("Enter")
            await fresh.get_by_text(sub["taskId"]).first.wait_for(timeout=60000)
            assert f"/runs/flow-run/{meta['flowRunId']}" in fresh.url, fresh.url
            await fresh.screenshot(path=str(shots / "flow-run-link-after-login.png"))
            await fresh.close()
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            await prefect_ui_login(page, ui, credentials)
            await page.goto(f"{ui}/runs/flow-run/{meta['flowRunId']}", wait_until="networkidle", timeout=120000)
            for text in ("verify-round-0", "repair-plan-0", "verify-round-1", "Succeeded",
                         f"project-name:{calc_repo.name}", "check pytest: FAIL", "round 0 verification failed"):
                await page.get_by_text(text).first.wait_for(timeout=60000)
            await page.screenshot(path=str(shots / "flow-run-with-a-failed-round.png"), full_page=True)
            await page.get_by_text("Artifacts", exact=True).first.click()
            await page.get_by_text(f"{sub['taskId'].replace('_', '-')}-brief").first.wait_for(timeout=60000)
            await page.screenshot(path=str(shots / "flow-run-artifacts-with-the-brief.png"), full_page=True)
            # the failed round is drawn as a failed task run: Prefect marks it with its state class
            body = await page.inner_text("body")
            assert "Engine execution exited" not in body and "Traceback" not in body
            await page.goto(f"{ui}/runs/task-run/{_task_run_id(ts_daemon, meta['flowRunId'], 'verify-round-0')}",
                            wait_until="networkidle", timeout=120000)
            await page.get_by_text("round 0 did not pass: pytest").first.wait_for(timeout=60000)
            await page.get_by_text("Failed").first.wait_for(timeout=60000)
            await page.screenshot(path=str(shots / "failed-verify-round-task-run.png"), full_page=True)
        finally:
            await browser.close()
    assert (shots / "flow-run-with-a-failed-round.png").stat().st_size > 10000


def _task_run_id(daemon: dict[str, Any], flow_run_id: str, name: str) -> str:
    import httpx

    from conftest import auth_headers

    runs = httpx.post(f"{daemon['api']}/task_runs/filter", headers=auth_headers(daemon["home"]), timeout=30,
                      json={"flow_runs": {"id": {"any_": [flow_run_id]}}}).json()
    return next(tr["id"] for tr in runs if tr["name"] == name)


@pytest.mark.extended
@pytest.mark.own_services
def test_an_interrupted_end_leaves_no_error_traceback(tmp_path: Path) -> None:
    """``tianshu-mcp service stop`` with a task running: the task ends ``interrupted`` and its
    flow-run log (read after the next start) has no ERROR traceback either."""
    import httpx

    from conftest import auth_headers
    from test_service import cli, kill_services, new_home, service_info
    from test_stdio_host import RawClient, _init, _wait_pids, meta

    home = new_home(tmp_path, "interrupt", 4520)
    repo = make_calc_repo(tmp_path / "calc")
    try:
        raw = RawClient(home)
        _init(raw)
        task = meta(raw.call("run_task", {"projectPath": str(repo), "task": "hang", "agentId": "scripted-hang"}, timeout=30))
        _wait_pids(home / "hang-pids.txt", 2, timeout=180)
        raw.close()
        assert cli(home, "service", "stop").returncode == 0
        raw = RawClient(home)  # the next start: the API is back, the run's log can be read
        _init(raw)
        deadline = time.monotonic() + 300  # a loaded machine's restart can outlast one wait_task
        while True:
            done = meta(raw.call("wait_task", {"taskId": task["taskId"], "timeoutMs": 60000}, timeout=90))
            if (done.get("error") or {}).get("code") != "PREFECT_UNAVAILABLE" or time.monotonic() > deadline:
                break
        raw.close()
        assert done.get("status") == "interrupted", done
        info = service_info(home)
        assert info is not None
        api = httpx.Client(base_url=info["apiUrl"], headers=auth_headers(home), timeout=30)
        _assert_no_traceback(api, done["flowRunId"], final=False)
    finally:
        cli(home, "service", "stop")
        kill_services(home)
