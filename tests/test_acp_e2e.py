"""An ACP agent end to end through a real MCP client (docs/agent-adapters.md §3): the fake ACP agent fixes the
fixture project over two rounds of one session, asks a permission that the user answers through
manage_task(continue), and is cancelled mid-turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import mcp_client, meta_of, text_of, pid_running
from fixture_project import RIGHT_FIX, acp_profile, make_calc_repo

pytestmark = [pytest.mark.anyio]


def _register(home: Path, agent_id: str, raw: dict[str, Any]) -> None:
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"][agent_id] = raw
    (home / "agent-profiles.json").write_text(json.dumps(profiles))


def _trace(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "trace.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _events(home: Path, task_id: str) -> list[str]:
    return [json.loads(line)["event"] for line in (home / "tasks" / task_id / "task.jsonl").read_text().splitlines()]


async def test_an_acp_agent_is_verified_and_reworked_in_the_same_session(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    _register(home, "fake-acp", acp_profile(tmp_path))
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        info = meta_of(await client.call_tool("query_info", {"type": "profiles"}))
        row = next(p for p in info["profiles"] if p["id"] == "fake-acp")
        # python + a script: never started with --version (it could take it for a brief)
        assert row["driver"] == "acp" and row["ok"] and row["source"] == "explicit" and row["version"] is None
        assert row["versionStatus"] == "not probed" and not row["probed"]
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add() in calc.py",
                                                          "agentId": "fake-acp", "autoFixRounds": 1, "model": "big-1"}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}))
    assert done["status"] == "succeeded" and done["roundsUsed"] == 2, done
    assert (repo / "calc.py").read_text() == RIGHT_FIX
    rows = _trace(tmp_path)
    prompts = [r for r in rows if r["event"] == "prompt"]
    assert [r["event"] for r in rows].count("new") == 1 and len({r["pid"] for r in rows}) == 1
    assert len(prompts) == 2 and prompts[0]["session"] == prompts[1]["session"]
    assert "test_add_negative" in prompts[1]["text"]  # the repair plan, as a new prompt of that session
    events = _events(home, sub["taskId"])
    assert "file_modification_started" in events and "note" in events and "rework_triggered" in events
    # one task_dispatched per round, as for CLI tasks (tests/test_e2e_run_task.py)
    rows = [json.loads(line) for line in (home / "tasks" / sub["taskId"] / "task.jsonl").read_text().splitlines()]
    dispatched = [r["data"] for r in rows if r["event"] == "task_dispatched"]
    assert [d["round"] for d in dispatched] == [0, 1] and {d["agentId"] for d in dispatched} == {"fake-acp"}, dispatched
    at = [i for i, n in enumerate(events) if n == "task_dispatched"]
    assert at[0] < events.index("rework_triggered") < at[1], events  # the rework round is dispatched anew
    notes = [json.loads(line).get("detail", "") for line in
             (home / "tasks" / sub["taskId"] / "task.jsonl").read_text().splitlines()]
    assert any("model hint 'big-1' is not used" in n for n in notes)  # said, not silently dropped
    log0 = (home / "tasks" / sub["taskId"] / "agent-0.log").read_text()
    assert "[permission] Edit calc.py" in log0 and "[agent] Done" in log0


async def test_a_permission_left_to_the_user_is_needs_user_then_continue_allows_it(ts_daemon: dict[str, Any],
                                                                                   tmp_path: Path) -> None:
    home = ts_daemon["home"]
    _register(home, "fake-acp-ask", acp_profile(tmp_path, acp={"permissions": {"insideProject": "ask"}}))
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add() in calc.py",
                                                          "agentId": "fake-acp-ask", "autoVerify": False}))
        asked = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}))
        assert asked["status"] == "needs_user" and asked["needsUserKind"] == "user_confirmation", asked
        assert "Edit calc.py" in asked["pendingQuestion"]
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "continue", "message": "yes"})
        assert not r.is_error, text_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}))
    assert done["status"] == "succeeded", done
    events = [r["event"] for r in _trace(tmp_path)]
    assert events.count("new") == 1 and "load" in events  # the session carried over the suspension
    assert "confirmation_dialog_detected" in _events(home, sub["taskId"])


async def test_cancelling_an_acp_task_cancels_the_turn_and_kills_the_agent(ts_daemon: dict[str, Any], tmp_path: Path) -> None:

    home = ts_daemon["home"]
    _register(home, "fake-acp-hang", acp_profile(tmp_path, "hang"))
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": "fake-acp-hang"}))
        with anyio.fail_after(180):
            while not any(r["event"] == "prompt" for r in _trace(tmp_path)):
                await anyio.sleep(0.2)
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "cancel"})
        assert not r.is_error, text_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}))
    assert done["status"] == "cancelled", done
    pid = next(r["pid"] for r in _trace(tmp_path) if r["event"] == "prompt")
    with anyio.fail_after(30):
        while pid_running(pid):
            await anyio.sleep(0.1)
