"""What a queued task waits for (mcp_server/queue_wait.py), from real records in a real task store,
and through the real MCP client: the second task of a project names the one it waits behind."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import add_scripted_profile, mcp_client, meta_of, text_of
from fixture_project import make_calc_repo
from tianshu_mcp.core.ids import new_task_id
from tianshu_mcp.core.taskstore import TaskStore
from tianshu_mcp.flows.states import RunState
from tianshu_mcp.mcp_server.queue_wait import QueueFacts, queued_reason


def _task(store: TaskStore, seq: int, project: str = "/p", **fields: Any) -> dict[str, Any]:
    return store.create(new_task_id(), {"projectPath": project, "isolation": "inplace", "acceptedSeq": seq,
                                         "flowRunId": str(uuid.uuid4()), **fields})


def test_each_thing_a_queued_task_can_wait_for(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "home")
    scheduled, pending = RunState("SCHEDULED", "Scheduled"), RunState("PENDING", "Pending")
    fresh = store.create(new_task_id(), {"projectPath": "/p", "acceptedSeq": 1})
    assert queued_reason(fresh, None, QueueFacts(store, lambda: 2), False) == (
        "waiting for the tianshu-mcp service (Prefect) to start and create its flow run")
    assert queued_reason(fresh, None, QueueFacts(store, lambda: 2), True) == "its flow run is being created"
    store.update(fresh["taskId"], finishedAt="2026-01-01T00:00:00Z")  # out of the way
    mine = _task(store, 5)
    assert queued_reason(mine, scheduled, QueueFacts(store, lambda: 2), True) == "waiting for the worker to start its flow run"
    assert queued_reason(mine, pending, QueueFacts(store, lambda: 2), True) == "the worker is starting its flow run"
    # a task accepted earlier on the same project holds its queue; a later one, a worktree task
    # and another project's do not
    later = _task(store, 9)
    _task(store, 3, isolation="worktree")
    _task(store, 4, project="/other", phase="running")
    assert queued_reason(mine, scheduled, QueueFacts(store, lambda: 2), True) == "waiting for the worker to start its flow run"
    ahead = _task(store, 2, phase="running")
    assert queued_reason(mine, scheduled, QueueFacts(store, lambda: 2), True) == (
        f"waiting behind task {ahead['taskId']} on this project (one task at a time per project)")
    assert "behind task " + mine["taskId"] not in str(queued_reason(later, scheduled, QueueFacts(store, lambda: 2), True))
    # the global limit: as many tasks running as it allows (a worktree task is not held by its project)
    wt = _task(store, 6, isolation="worktree")
    assert queued_reason(wt, scheduled, QueueFacts(store, lambda: 2), True) == "waiting for a free slot (2 tasks running, global limit 2)"
    assert queued_reason(wt, scheduled, QueueFacts(store, lambda: 3), True) == "waiting for the worker to start its flow run"
    # a remote task's wait is its work pool's to say
    assert queued_reason({**mine, "workPool": "gpu"}, scheduled, QueueFacts(store, lambda: 2), True) is None


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_a_task_behind_another_names_it_and_no_queued_message_outlives_the_queue(ts_home: Path,
                                                                                        tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    gate = tmp_path / "release"
    add_scripted_profile(ts_home, "gated", "sleep", extra_env={"SCRIPTED_GATE": str(gate), "SCRIPTED_SLEEP": "0",
                                                               "SCRIPTED_TRACE": str(tmp_path / "trace")})
    async with mcp_client(ts_home) as client:
        first = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                            "agentId": "gated", "autoVerify": False}))
        second = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add again",
                                                             "agentId": "scripted-noop", "autoVerify": False}))
        try:
            # the first one runs (its agent waits for the gate file); the second waits behind it
            for _ in range(600):
                one = meta_of(await client.call_tool("query_task", {"taskId": first["taskId"]}))
                if one["status"] == "running" and "agent running" in one["message"]:
                    break
                assert one["status"] in ("queued", "running"), one
                assert one["status"] == "queued" or not one["message"].startswith("queued"), one
                await anyio.sleep(0.2)
            else:
                pytest.fail(f"the first task never ran: {one}")
            r = await client.call_tool("query_task", {"taskId": second["taskId"]})
            two = meta_of(r)
            assert two["status"] == "queued", two
            why = f"waiting behind task {first['taskId']} on this project (one task at a time per project)"
            assert two["message"] == f"queued: {why}" and f"status: queued ({why})" in text_of(r), text_of(r)
        finally:
            gate.write_text("go")
        done = meta_of(await client.call_tool("wait_task", {"taskIds": [first["taskId"], second["taskId"]],
                                                            "timeoutMs": 120000}))
        assert done["status"] not in ("queued", "running"), done


def test_the_log_tail_follows_the_round_at_work_and_shows_only_the_agent(tmp_path: Path) -> None:
    # a tester watching a rework round saw round 0's finished output for its whole run: logFile
    # names the last round that ended; and the spawn header (which quotes the brief) never shows
    from tianshu_mcp.mcp_server.handlers import agent_log_tail

    tdir = tmp_path / "tsk"
    tdir.mkdir()
    header = "===== spawn: agent '[FAIL] round 0 brief' (cwd=/p) @ 2026-01-01T00:00:00.000Z =====\n"
    (tdir / "agent-0.log").write_text(header + "round 0 guessed\n[exit] code=0 duration=5ms\n")
    task = {"roundsUsed": 1, "logFile": str(tdir / "agent-0.log"), "currentRound": 1}
    assert agent_log_tail(tdir, task, 40) == "round 0 guessed"  # round 1 has no log yet
    (tdir / "agent-1.log").write_text(header + "round 1 working\n")
    assert agent_log_tail(tdir, task, 40) == "round 1 working"
    assert agent_log_tail(tmp_path, {"roundsUsed": 0}, 40) is None  # no log at all
    assert agent_log_tail(tdir, task, 0) is None
