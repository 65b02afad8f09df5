"""A desktop agent end to end (docs/agent-adapters.md §4–§6): the MCP client submits tasks to a user
profile of driver ``gui`` whose ``command`` launches the fake desktop app (real Chromium on the
fake's chat page); the session's service runs them as Prefect flow runs.

* dispatch → verification fails → the rework round types into the same chat → succeeded;
* the app shows its login screen → needs_user(login_required) → the user logs in to the app →
  ``manage_task(continue)`` → the driver adopts that instance (ownership proven) → succeeded;
* cancel while the app works → cancelled, and the app's tree is gone.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import mcp_client, meta_of, text_of
from fake_desktop import LAUNCHER, app_pids, free_port, gui_profile
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon"),
              pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="needs the system Chromium")]

RIGHT = "def add(a, b):\n    return a + b\n"


def add_profile(home: Path, udd: Path, mode: str, **gui: Any) -> tuple[str, int]:
    """Register the fake desktop app as a new agent id in ``home``; ``(agentId, cdpPort)``."""
    agent_id = f"fake-desktop-{uuid.uuid4().hex[:6]}"
    port = free_port()
    path = home / "agent-profiles.json"
    profiles = json.loads(path.read_text())
    profiles["profiles"][agent_id] = gui_profile(udd, port, mode, **gui)
    path.write_text(json.dumps(profiles))
    return agent_id, port


def kill_app(udd: Path) -> None:
    for pid in app_pids(udd):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


async def until(cond: Any, timeout_s: float, what: str) -> Any:
    """Poll ``cond()`` (a plain or an async callable) until it is truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.1)


def events(home: Path, tid: str) -> list[dict[str, Any]]:
    path = home / "tasks" / tid / "task.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_dispatch_verify_fails_rework_in_the_same_chat_succeeds(ts_home: Path, tmp_path: Path) -> None:
    udd = tmp_path / "app" / "user-data"
    agent, _port = add_profile(ts_home, udd, "normal")
    repo = make_calc_repo(tmp_path / "calc")
    try:
        async with mcp_client(ts_home) as client:
            sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add() in calc.py",
                                                              "agentId": agent, "autoFixRounds": 1,
                                                              "model": "fake-model-small"}))
            done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}))
        tid = sub["taskId"]
        # the task's model hint wins over the profile's gui.model (fake-model-large)
        assert "model fake-model-small: " in (ts_home / "tasks" / tid / "agent-0.log").read_text()
        tdir = ts_home / "tasks" / tid
        assert done["status"] == "succeeded" and done["roundsUsed"] == 2, (done, (tdir / "agent-0.log").read_text())
        assert (repo / "calc.py").read_text() == RIGHT
        assert (tdir / "prompt-0.txt").read_text().startswith(f"【tianshu:{tid}:r0:initial】")
        rework = (tdir / "prompt-1.txt").read_text()
        assert rework.startswith(f"【tianshu:{tid}:r1:rework】") and "test_add_negative" in rework
        assert "typing into the task's chat (same session)" in (tdir / "agent-1.log").read_text()
        names = [e["event"] for e in events(ts_home, tid)]
        assert "file_modification_started" in names and "rework_triggered" in names
        # one task_dispatched per round, as for CLI tasks (tests/test_e2e_run_task.py)
        dispatched = [e["data"] for e in events(ts_home, tid) if e["event"] == "task_dispatched"]
        assert [d["round"] for d in dispatched] == [0, 1] and {d["agentId"] for d in dispatched} == {agent}, dispatched
        at = [i for i, n in enumerate(names) if n == "task_dispatched"]
        assert at[0] < names.index("rework_triggered") < at[1], names  # the rework round is dispatched anew
        await until(lambda: not app_pids(udd), 30, "the app to end with the task")
    finally:
        kill_app(udd)


async def test_login_required_then_continue_succeeds(ts_home: Path, tmp_path: Path) -> None:
    udd = tmp_path / "app" / "user-data"
    agent, port = add_profile(ts_home, udd, "login")
    repo = make_calc_repo(tmp_path / "calc")
    user_app = None
    try:
        async with mcp_client(ts_home) as client:
            sub = meta_of(await client.call_tool("run_task", {
                "projectPath": str(repo), "agentId": agent, "autoFixRounds": 0,
                "task": "Fix add() in calc.py so that tests/test_calc.py::test_add_negative passes"}))
            tid = sub["taskId"]
            asked = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 240000}))
            assert asked["status"] == "needs_user" and asked["needsUserKind"] == "login_required", asked
            assert "login" in asked["pendingQuestion"].lower() and f"--remote-debugging-port={port}" in asked["pendingQuestion"]
            assert f"--user-data-dir={udd}" in asked["pendingQuestion"]
            assert "awaiting_user_authorization" in [e["event"] for e in events(ts_home, tid)]
            await until(lambda: not app_pids(udd), 30, "the app to end while the task waits")

            # the user opens the app (same profile dir and port, as the profile says) and logs in
            env = {**os.environ, "FAKE_DESKTOP_MODE": "login", "FAKE_DESKTOP_RUN_MS": "1200"}
            user_app = subprocess.Popen([sys.executable, str(LAUNCHER), f"--remote-debugging-port={port}",
                                         f"--user-data-dir={udd}"], env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            await until(lambda: b"fake-desktop-app" in _json_list(port), 60, "the user's app window")
            await anyio.to_thread.run_sync(_click_login, port)

            r = await client.call_tool("manage_task", {"taskId": tid, "action": "continue", "message": "I logged in"})
            assert not r.is_error, text_of(r)
            done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 240000}))
        tdir = ts_home / "tasks" / tid
        assert done["status"] == "succeeded", (done, (tdir / "agent-0.log").read_text())
        assert (repo / "calc.py").read_text() == RIGHT
        log = (tdir / "agent-0.log").read_text()
        assert "adopting our running instance" in log  # the ownership proof accepted the user's window
        assert (tdir / "prompt-0.txt").read_text().startswith(f"【tianshu:{tid}:r0:continue:")
        await until(lambda: user_app.poll() is not None, 30, "the adopted app to end with the task")
    finally:
        if user_app is not None and user_app.poll() is None:
            os.killpg(user_app.pid, signal.SIGKILL)
        kill_app(udd)


async def test_cancel_while_the_app_works_clicks_stop_and_the_app_ends(ts_home: Path, tmp_path: Path) -> None:
    udd = tmp_path / "app" / "user-data"
    agent, _port = add_profile(ts_home, udd, "hang")
    repo = make_calc_repo(tmp_path / "calc")
    try:
        async with mcp_client(ts_home) as client:
            tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                              "agentId": agent}))["taskId"]
            await until(lambda: "file_modification_started" in [e["event"] for e in events(ts_home, tid)], 180,
                        "the app to start working")
            r = await client.call_tool("manage_task", {"taskId": tid, "action": "cancel", "reason": "enough"})
            assert not r.is_error, text_of(r)
            done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 120000}))
        assert done["status"] == "cancelled", done
        assert done.get("guiStop") == {"clicked": True, "idle": True}, done  # stopped its own way first
        await until(lambda: not app_pids(udd), 30, "the app to end with the task")
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    finally:
        kill_app(udd)


def _json_list(port: int) -> bytes:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1) as resp:
            return resp.read()
    except OSError:
        return b""


def _click_login(port: int) -> None:
    """The user's hand: click "Log in" in the app's window."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
        try:
            page = next(p for c in browser.contexts for p in c.pages if p.url.endswith("/fake-desktop-app"))
            page.locator('[aria-label="Log in"]').click()
            page.wait_for_function("() => localStorage.getItem('fake.loggedIn') === 'true'")
        finally:
            browser.close()


@pytest.mark.parametrize("mode, error_type, status", [("drift", "idle_timeout", "failed"),
                                                      ("close", "cdp_disconnected", "failed")])
async def test_drift_and_a_closing_app_fail_coded_and_spend_no_verification(ts_home: Path, tmp_path: Path, mode: str,
                                                                             error_type: str, status: str) -> None:
    # a changed selector must never pass as a success; the app closing mid-run is a hard failure:
    # neither burns a verification round (autoFixRounds would otherwise rework)
    udd = tmp_path / "app" / "user-data"
    # drift: nothing ever matches, so a short idle window cannot be raced; close: the default
    # (long) one, so the round ends because the app went away, however slow the machine is
    agent, _port = add_profile(ts_home, udd, mode, **({"idleTimeoutMs": 2000} if mode == "drift" else {}))
    repo = make_calc_repo(tmp_path / "calc")
    try:
        async with mcp_client(ts_home) as client:
            sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                              "agentId": agent, "autoFixRounds": 2}))
            done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}))
        assert (done["status"], done["errorType"]) == (status, error_type), done
        assert not list((ts_home / "tasks" / sub["taskId"]).glob("report-*")), "a verification round ran"
    finally:
        kill_app(udd)


@pytest.mark.parametrize("answer", [pytest.param("no", marks=pytest.mark.extended), "yes"])
async def test_a_confirmation_card_answered_is_clicked_not_asked_again(ts_home: Path, tmp_path: Path, answer: str) -> None:
    # "no": the card is denied (its Deny button), the app changes nothing and the task ends —
    # never the same question again; "yes": the rework round's card is allowed without asking
    udd = tmp_path / "app" / "user-data"
    agent, _port = add_profile(ts_home, udd, "confirm")
    repo = make_calc_repo(tmp_path / "calc")
    try:
        async with mcp_client(ts_home) as client:
            tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add() in calc.py",
                                                              "agentId": agent, "autoFixRounds": 1}))["taskId"]
            asked = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 240000}))
            assert asked["status"] == "needs_user" and asked["needsUserKind"] == "user_confirmation", asked
            r = await client.call_tool("manage_task", {"taskId": tid, "action": "continue", "message": answer})
            assert not r.is_error, text_of(r)
            done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 240000}))
        logs = "".join(p.read_text() for p in sorted((ts_home / "tasks" / tid).glob("agent-*.log")))
        trail = (ts_home / "tasks" / tid / "task.jsonl").read_text()[-4000:]  # what happened, on a failure
        if answer == "no":
            assert done["status"] in ("failed", "needs_attention") and done.get("errorType") != "timeout", (done, trail, logs)
            assert "→ denied (the user's answer)" in logs
            assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        else:
            assert done["status"] == "succeeded" and done["roundsUsed"] == 2, (done, trail, logs)
            assert "→ allowed (the user's answer)" in logs and (repo / "calc.py").read_text() == RIGHT
    finally:
        kill_app(udd)
