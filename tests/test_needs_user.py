"""needs_user end to end with a CLI agent (docs/lifecycle.md §1): the agent asks through
``$TIANSHU_MCP_QUESTION_FILE``, the flow run is Suspended with a long explicit timeout and frees
the project's slot, ``manage_task(action="continue")`` resumes it with the answer as run input,
and a needs_user task can be cancelled."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import add_scripted_profile, auth_headers, meta_of, mcp_client, text_of
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio]


def _profiles(home: Path) -> None:
    add_scripted_profile(home, "asker", "ask")


async def _ask(client: Any, repo: Path) -> tuple[str, dict[str, Any]]:
    """Submit a task to the asking agent and wait until it is needs_user; ``(taskId, meta)``."""
    tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                      "agentId": "asker"}))["taskId"]
    asked = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert asked["status"] == "needs_user", asked
    return tid, asked


def _flow_run(api: str, home: Path, flow_run_id: str) -> dict[str, Any]:
    r = httpx.get(f"{api}/flow_runs/{flow_run_id}", headers=auth_headers(home), timeout=30)
    r.raise_for_status()
    return r.json()


async def test_an_agent_asks_the_task_waits_suspended_and_continue_answers(ts_daemon: dict[str, Any],
                                                                            tmp_path: Path) -> None:
    home, api = ts_daemon["home"], ts_daemon["api"]
    _profiles(home)
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": "asker", "autoFixRounds": 0}))
        tid = sub["taskId"]
        asked = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
        assert asked["status"] == "needs_user", asked
        assert asked["needsUserKind"] == "agent_question" and "negative numbers" in asked["pendingQuestion"]
        run = _flow_run(api, home, asked["flowRunId"])
        assert run["state"]["type"] == "PAUSED" and run["state"]["name"] == "Suspended"
        expires = datetime.fromisoformat(run["state"]["state_details"]["pause_timeout"].replace("Z", "+00:00"))
        assert (expires - datetime.now(timezone.utc)).days >= 29  # never Prefect's 1 h default

        # the project's slot is free while the task waits: another task on it runs to the end
        other = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                            "agentId": "scripted-noop"}))
        done_other = meta_of(await client.call_tool("wait_task", {"taskId": other["taskId"], "timeoutMs": 180000}))
        assert done_other["status"] in ("failed", "needs_attention"), done_other  # it ran (and changed nothing)

        # bad continues are coded
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "continue", "message": "   "})
        assert r.is_error and "[INVALID_ARGUMENT]" in text_of(r)
        r = await client.call_tool("manage_task", {"taskId": other["taskId"], "action": "continue", "message": "yes"})
        assert r.is_error and "[INVALID_STATE]" in text_of(r) and "only a needs_user task" in text_of(r)

        r = await client.call_tool("manage_task", {"taskId": tid, "action": "continue", "message": "Yes, please."})
        assert not r.is_error, text_of(r)
        assert meta_of(r)["status"] == "queued"
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert done["status"] == "succeeded", done
    assert done["roundsUsed"] == 1 and "pendingQuestion" not in done  # asking is no round
    prompt = (home / "tasks" / tid / "prompt-0.txt").read_text()
    assert "## You asked the user" in prompt and "Yes, please." in prompt
    events = [json.loads(line)["event"] for line in (home / "tasks" / tid / "task.jsonl").read_text().splitlines()]
    assert events.index("needs_user") < events.index("continued")


async def test_a_task_waiting_for_the_user_can_be_cancelled(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    _profiles(home)
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": "asker"}))
        asked = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
        assert asked["status"] == "needs_user", asked
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "cancel", "reason": "not now"})
        assert not r.is_error and meta_of(r)["status"] == "cancelled", text_of(r)
        assert "pendingQuestion" not in meta_of(r)
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "continue", "message": "yes"})
        assert r.is_error and "[INVALID_STATE]" in text_of(r)


async def test_a_continued_task_waits_behind_a_running_task_of_its_project(ts_daemon: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    """continue re-queues the task on its project's queue: while another task of the project
    runs, the answered one stays queued, and the two agents never overlap."""
    import time

    import anyio

    home = ts_daemon["home"]
    _profiles(home)
    trace = tmp_path / "trace.txt"
    # long enough that the continued task is seen queued behind it on a loaded machine (6 s was not)
    add_scripted_profile(home, "slow-sleeper", "sleep", {"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": "20"})
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        tid, asked = await _ask(client, repo)
        other = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                            "agentId": "slow-sleeper", "autoVerify": False}))["taskId"]
        deadline = time.monotonic() + 120
        while not trace.exists() or "start" not in trace.read_text():
            assert time.monotonic() < deadline, "the other task never started its agent"
            await anyio.sleep(0.1)
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "continue", "message": "Yes, please."})
        assert not r.is_error and meta_of(r)["status"] == "queued", text_of(r)
        saw_queued_while_other_runs = False
        while True:
            a = meta_of(await client.call_tool("query_task", {"taskId": tid}))["status"]
            b = meta_of(await client.call_tool("query_task", {"taskId": other}))["status"]
            if b == "running" and a == "queued":
                saw_queued_while_other_runs = True
            if b not in ("queued", "running"):
                break
            assert time.monotonic() < deadline + 60, (a, b)
            await anyio.sleep(0.2)
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert saw_queued_while_other_runs and done["status"] == "succeeded", done
    ended = float(trace.read_text().split("end ", 1)[1].split()[1])  # "end <cwd> <epoch s>"
    events = [json.loads(line) for line in (home / "tasks" / tid / "task.jsonl").read_text().splitlines()]
    after = events[[e["event"] for e in events].index("continued"):]
    resumed = next(e for e in after if e["event"] == "task_dispatched")
    assert datetime.fromisoformat(resumed["ts"].replace("Z", "+00:00")).timestamp() >= ended  # never overlapped


async def test_an_unanswered_question_times_out_failed_and_the_task_can_be_reworked(ts_daemon: dict[str, Any],
                                                                                      tmp_path: Path) -> None:
    """Breaker round: when the wait ran out, Prefect fails the paused run ("paused and never
    resumed", set here through the API as Prefect's pause timeout does); the task must read
    failed/timeout with the question cleared and its webhook event written, and a rework must
    run the round again instead of crashing on the missing answer."""
    home, api = ts_daemon["home"], ts_daemon["api"]
    _profiles(home)
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        tid, asked = await _ask(client, repo)
        r = httpx.post(f"{api}/flow_runs/{asked['flowRunId']}/set_state", headers=auth_headers(home), timeout=30,
                       json={"state": {"type": "FAILED", "message": "The flow was paused and never resumed."},
                             "force": True})
        r.raise_for_status()
        ended = meta_of(await client.call_tool("query_task", {"taskId": tid}))
        assert ended["status"] == "failed" and ended["errorType"] == "timeout", ended
        assert "no answer to the agent's question" in ended["message"] and "pendingQuestion" not in ended
        events = [json.loads(line)["event"] for line in (home / "tasks" / tid / "task.jsonl").read_text().splitlines()]
        assert events[-1] == "failed"
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "rework",
                                                   "feedback": "The user's answer: yes, handle negative numbers"})
        assert not r.is_error, text_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert done["status"] == "succeeded", done


@pytest.mark.parametrize("kept", ["no, keep it as it is", None])
def test_an_answer_prefect_cannot_hand_back_is_taken_from_the_task_record(tmp_path: Path, monkeypatch: Any,
                                                                         kept: str | None) -> None:
    # continue keeps the answer in task.json before it resumes the run; when the resumed run cannot
    # read its run input (here: take_answer runs outside a flow run, so suspend_flow_run raises),
    # the kept answer re-runs the round — and the task's events say so either way
    from tianshu_mcp.core.taskstore import TaskStore
    from tianshu_mcp.flows.needs_user import take_answer

    monkeypatch.setenv("TIANSHU_MCP_HOME", str(tmp_path))
    store = TaskStore(tmp_path)
    tid = "tsk_20261201000000_abcdef"
    store.create(tid, {"taskId": tid, "needsUserKey": "needs-user-1", "needsUserRound": 2,
                       "needsUserQuestion": "Allow the edit?", "needsUserFeedback": "fix the sign",
                       "continueMessage": kept, "continueKey": "needs-user-1" if kept else None})
    got = take_answer(tid)
    events = [json.loads(line) for line in (store.dir(tid) / "task.jsonl").read_text().splitlines()]
    notes = [e["detail"] for e in events if e["event"] == "note"]
    assert len(notes) == 1 and "could not be read from Prefect" in notes[0], events
    left = store.read(tid) or {}
    assert not any(left.get(k) for k in ("needsUserKey", "continueMessage", "continueKey")), left
    if kept is None:
        assert got is None and "re-runs without one" in notes[0]
        return
    assert got is not None and "answer kept in task.json" in notes[0]
    rnd, feedback, answer = got
    assert (rnd, answer) == (2, kept)
    assert feedback.startswith("fix the sign") and "## You asked the user\nAllow the edit?" in feedback
    assert feedback.endswith("## The user's answer\n" + kept)
