"""The MCP tasks extension (io.modelcontextprotocol/tasks, SEP-2663) over the real stdio server.

Clients: the Python SDK's ``Client`` negotiating 2026-07-28 with the test requester of
``tasks_client.py`` (the SDK's client extension interface), the same client without the extension,
the SDK's legacy handshake, and raw JSON-RPC handshakes of 2024-11-05 and 2025-06-18.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from conftest import CONSOLE, add_scripted_profile, meta_of, mcp_client, server_env
from fixture_project import RIGHT_FIX, make_calc_repo
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from tasks_client import EXTENSION_ID, TasksRequester, tasks_request
from test_desktop_e2e import until
from test_stdio_host import RawClient

pytestmark = [pytest.mark.anyio]

BRIEF = "Fix add() so that test_add_negative passes"


@asynccontextmanager
async def modern(home: Path, requester: TasksRequester | None = None) -> AsyncIterator[Any]:
    """A 2026-07-28 client (probing server/discover), declaring the extension when ``requester``."""
    params = StdioServerParameters(command=CONSOLE, args=[], env=server_env(home))
    async with Client(params, mode="auto", extensions=[requester] if requester else None) as client:
        assert client.protocol_version == "2026-07-28"
        yield client


async def _get(client: Any, task_id: str) -> dict[str, Any]:
    return await tasks_request(client.session, "tasks/get", {"taskId": task_id})


async def _until_status(client: Any, task_id: str, wanted: set[str], timeout_s: float = 240) -> dict[str, Any]:
    import time

    import anyio

    deadline = time.monotonic() + timeout_s
    while True:
        task = await _get(client, task_id)
        if task["status"] in wanted:
            return task
        assert time.monotonic() < deadline, f"{task_id} still {task['status']}, wanted {wanted}"
        await anyio.sleep(0.5)


async def test_run_task_becomes_a_task_polled_to_the_same_result_as_query_task(ts_daemon: dict[str, Any],
                                                                              calc_repo: Path) -> None:
    home = ts_daemon["home"]
    async with modern(home, TasksRequester()) as client:
        created = await client.session.call_tool("run_task", {"projectPath": str(calc_repo), "agentId": "scripted",
                                                              "task": BRIEF}, allow_claimed=True)
        assert created.result_type == "task" and created.task_id.startswith("tsk_")
        seed = created.model_dump(by_alias=True)
        assert seed["status"] in ("working", "completed") and seed["ttlMs"] is None and seed["pollIntervalMs"] == 5000
        assert seed["createdAt"].endswith("Z") and seed["lastUpdatedAt"] >= seed["createdAt"]
        # durably created before the answer: tasks/get resolves at once, with query_task's status
        first = await _get(client, created.task_id)
        assert first["resultType"] == "complete" and first["status"] in ("working", "completed")
        done = await _until_status(client, created.task_id, {"completed", "cancelled", "failed"})
        assert done["status"] == "completed", done
        result = done["result"]
        assert result["isError"] is False and result["structuredContent"]["status"] == "succeeded"
        assert result["structuredContent"]["taskId"] == created.task_id
        # one source of truth: the classic query_task says the same
        classic = meta_of(await client.call_tool("query_task", {"taskId": created.task_id}))
        assert classic["status"] == "succeeded" and classic["reportFiles"] == result["structuredContent"]["reportFiles"]
        assert "[PASS]" in result["content"][0]["text"]
        # the requester's transparent path: call_tool returns the final CallToolResult
        other = make_calc_repo(calc_repo.parent / "calc2")
        final = await client.call_tool("run_task", {"projectPath": str(other), "agentId": "scripted", "task": BRIEF})
        assert final.structured_content["status"] == "succeeded" and (other / "calc.py").read_text() == RIGHT_FIX


async def test_server_discover_advertises_the_extension_and_legacy_handshakes_do_not(ts_home: Path) -> None:
    async with modern(ts_home) as client:  # server/discover, whether or not the client declares it
        assert EXTENSION_ID in (client.server_capabilities.extensions or {})
        assert "tasks/get" in (client.instructions or "")
    for version in ("2024-11-05", "2025-06-18"):
        client = RawClient(ts_home)
        try:
            init = client.request("initialize", {"protocolVersion": version, "capabilities": {},
                                                 "clientInfo": {"name": "old-host", "version": "0"}}, timeout=60)
            assert init["result"]["protocolVersion"] == version
            assert "extensions" not in init["result"]["capabilities"], init
            client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = client.request("tools/list", {}, timeout=60)["result"]["tools"]
            assert {t["name"] for t in listed} >= {"run_task", "verify_task", "wait_task"}
            info = client.request("tools/call", {"name": "query_info", "arguments": {"type": "profiles"}}, timeout=60)
            assert "---tianshu-mcp-meta---" in info["result"]["content"][0]["text"]  # the text contract
            answer = client.request("tasks/get", {"taskId": "tsk_20260101000000_abcdef"}, timeout=60)
            assert answer["error"]["code"] == -32601, answer  # no such method before 2026-07-28
        finally:
            client.proc.kill()
            client.proc.wait()


async def test_without_the_extension_the_classic_contract_stays(ts_daemon: dict[str, Any], calc_repo: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "tasks-noop", "noop")
    async with modern(home) as client:  # 2026-07-28, extension not declared
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "agentId": "tasks-noop",
                                                          "task": "Look around", "autoVerify": False}))
        assert sub["taskId"].startswith("tsk_") and sub["status"] == "queued"
        with pytest.raises(MCPError) as exc:
            await _get(client, sub["taskId"])
        assert exc.value.error.code == -32021 and EXTENSION_ID in str(exc.value.error.data)
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
        assert done["status"] == "succeeded"
    async with mcp_client(home) as client:  # the SDK's legacy handshake
        with pytest.raises(MCPError) as exc:
            await _get(client, sub["taskId"])
        assert exc.value.error.code == -32601


async def test_needs_user_is_input_required_and_answered_through_tasks_update(ts_daemon: dict[str, Any],
                                                                            calc_repo: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "tasks-asker", "ask")
    questions: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> str:
        questions.append(request)
        return "yes, negative numbers too"

    requester = TasksRequester(answer=answer)
    async with modern(home, requester) as client:
        final = await client.call_tool("run_task", {"projectPath": str(calc_repo), "agentId": "tasks-asker",
                                                    "task": "Fix add", "autoFixRounds": 0})
        assert final.structured_content["status"] == "succeeded", final.content[0].text
        (request,) = questions
        assert request["method"] == "elicitation/create" and "negative numbers" in request["params"]["message"]
        assert request["params"]["requestedSchema"]["required"] == ["message"]
        asked = [t for t in requester.seen if t["status"] == "input_required"]
        assert asked and set(asked[0]["inputRequests"]) == {"needs-user-1"}
        assert (calc_repo / "calc.py").read_text() == RIGHT_FIX

        # the same question answered through manage_task instead: the task leaves input_required
        other = make_calc_repo(calc_repo.parent / "calc-b")
        created = await client.session.call_tool("run_task", {"projectPath": str(other), "agentId": "tasks-asker",
                                                              "task": "Fix add", "autoFixRounds": 0}, allow_claimed=True)
        waiting = await _until_status(client, created.task_id, {"input_required"})
        key = next(iter(waiting["inputRequests"]))
        # responses to keys that are not outstanding are ignored, and so is a declined question
        for responses in ({"needs-user-99": {"action": "accept", "content": {"message": "yes"}}},
                          {key: {"action": "decline"}}):
            ack = await tasks_request(client.session, "tasks/update", {"taskId": created.task_id,
                                                                      "inputResponses": responses})
            assert ack.get("resultType") == "complete"
        assert (await _get(client, created.task_id))["status"] == "input_required"
        with pytest.raises(MCPError) as exc:
            await tasks_request(client.session, "tasks/update", {"taskId": created.task_id, "inputResponses": {
                key: {"action": "accept", "content": {"message": "  "}}}})
        assert exc.value.error.code == -32602 and "non-empty" in exc.value.error.message
        for bad in ("a\u0000b", "x" * 100_001):  # manage_task(action="continue")'s rules hold here too
            with pytest.raises(MCPError) as exc:
                await tasks_request(client.session, "tasks/update", {"taskId": created.task_id, "inputResponses": {
                    key: {"action": "accept", "content": {"message": bad}}}})
            assert exc.value.error.code == -32602 and "[INVALID_ARGUMENT]" in exc.value.error.message
        assert (await _get(client, created.task_id))["status"] == "input_required"
        meta_of(await client.call_tool("manage_task", {"taskId": created.task_id, "action": "continue",
                                                       "message": "yes"}))
        done = await _until_status(client, created.task_id, {"completed"})
        assert done["result"]["structuredContent"]["status"] == "succeeded"


async def test_tasks_cancel_and_bad_task_ids(ts_daemon: dict[str, Any], calc_repo: Path, tmp_path: Path) -> None:
    home = ts_daemon["home"]
    pidfile = tmp_path / "hang-pids.txt"
    add_scripted_profile(home, "tasks-hang", "hang", {"SCRIPTED_PIDFILE": str(pidfile)})
    async with modern(home, TasksRequester()) as client:
        created = await client.session.call_tool("run_task", {"projectPath": str(calc_repo), "agentId": "tasks-hang",
                                                              "task": "Hang"}, allow_claimed=True)
        await until(lambda: pidfile.exists() and pidfile.read_text().strip(), 180, "the hanging agent to start")
        assert (await tasks_request(client.session, "tasks/cancel", {"taskId": created.task_id}))["resultType"] == "complete"
        done = await _until_status(client, created.task_id, {"cancelled"})
        assert "tasks/cancel" in done["statusMessage"] and "result" not in done
        assert meta_of(await client.call_tool("query_task", {"taskId": created.task_id}))["status"] == "cancelled"
        # a verification is not cancellable (manage_task refuses it too): acknowledged, it runs on
        vfy = await client.session.call_tool("verify_task", {"projectPath": str(calc_repo)}, allow_claimed=True)
        await tasks_request(client.session, "tasks/cancel", {"taskId": vfy.task_id})
        assert (await _until_status(client, vfy.task_id, {"completed", "cancelled"}))["status"] == "completed"
        # cancel of a final task: acknowledged, nothing changes
        await tasks_request(client.session, "tasks/cancel", {"taskId": created.task_id})
        assert (await _get(client, created.task_id))["status"] == "cancelled"
        # unknown and foreign ids: -32602 for every method
        for bad in ("tsk_20200101000000_000000", "786512e2-9e0d-44bd-8f29-789f320fe840", "../../etc/passwd", "vfy_x"):
            for method, extra in (("tasks/get", {}), ("tasks/cancel", {}),
                                  ("tasks/update", {"inputResponses": {"k": {"action": "accept"}}})):
                with pytest.raises(MCPError) as exc:
                    await tasks_request(client.session, method, {"taskId": bad, **extra})
                assert exc.value.error.code == -32602 and "Task not found" in exc.value.error.message, (method, bad)
        with pytest.raises(MCPError) as exc:  # params that are not the method's shape
            await tasks_request(client.session, "tasks/get", {"id": created.task_id})
        assert exc.value.error.code == -32602


async def test_verify_task_becomes_a_task_with_the_verification_summary(ts_daemon: dict[str, Any],
                                                                       calc_repo: Path) -> None:
    async with modern(ts_daemon["home"], TasksRequester()) as client:
        created = await client.session.call_tool("verify_task", {"projectPath": str(calc_repo)}, allow_claimed=True)
        assert created.result_type == "task" and created.task_id.startswith("vfy_")
        done = await _until_status(client, created.task_id, {"completed"})
        summary = done["result"]
        assert summary["content"][0]["text"].startswith("[FAIL] manual verification failed")  # the fixture's bug
        assert summary["structuredContent"]["verifyId"] == created.task_id
        # a bad call stays an ordinary tool error: no task is created
        bad = await client.call_tool("verify_task", {"projectPath": str(calc_repo / "nope")})
        assert bad.is_error and bad.structured_content["error"]["code"] == "PATH_NOT_FOUND"


@pytest.mark.parametrize("written", [True, False])
async def test_a_question_written_between_the_two_reads_is_read_again(written: bool) -> None:
    """TaskService.view reads task.json, then the run's state: a flow that records its question and
    pauses in between gives needs_user with a record that has no question yet (seen under load)."""
    from types import SimpleNamespace

    from tianshu_mcp.mcp_server.tasks_ext import TasksExtension
    from tianshu_mcp.mcp_server.taskops import TaskView

    stale = {"taskId": "tsk_x", "createdAt": "2026-12-01T00:00:00.000Z", "lastMessage": "queued: waiting"}
    fresh = {**stale, "needsUserKey": "needs-user-1", "pendingQuestion": "Negative numbers too?",
             "lastMessage": "Negative numbers too?"}

    async def view(task_id: str) -> TaskView:
        return TaskView(dict(stale), "needs_user", "PAUSED", "Suspended")

    service = SimpleNamespace(view=view, store=SimpleNamespace(read=lambda tid: dict(fresh if written else stale)))
    task = await TasksExtension(SimpleNamespace(service=service)).task_object("tsk_x")
    if written:
        assert task["status"] == "input_required" and list(task["inputRequests"]) == ["needs-user-1"]
        assert task["inputRequests"]["needs-user-1"]["params"]["message"] == "Negative numbers too?"
    else:
        assert task["status"] == "working" and "inputRequests" not in task


async def test_needs_attention_and_interrupted_end_completed_with_query_tasks_result(ts_daemon: dict[str, Any],
                                                                                     calc_repo: Path,
                                                                                     tmp_path: Path) -> None:
    """The two final statuses besides succeeded/failed map to ``completed`` (tasks_ext's mapping), with
    ``result`` equal to what query_task answers for the task: rounds exhausted (needs_attention, the
    args of test_e2e_run_task::test_rounds_exhausted_means_needs_attention) and a flow-run process
    killed with SIGKILL (interrupted, as test_worktree_e2e does)."""
    import json
    import os
    import signal

    home = ts_daemon["home"]
    pidfile = tmp_path / "hang-pids.txt"
    add_scripted_profile(home, "tasks-hang-kill", "hang", {"SCRIPTED_PIDFILE": str(pidfile)})
    other = make_calc_repo(tmp_path / "calc-killed")
    async with modern(home, TasksRequester()) as client:
        exhausted = await client.session.call_tool("run_task", {"projectPath": str(calc_repo), "agentId": "scripted-noop",
                                                                "task": "Fix add", "autoFixRounds": 1}, allow_claimed=True)
        killed = await client.session.call_tool("run_task", {"projectPath": str(other), "agentId": "tasks-hang-kill",
                                                             "task": "Hang"}, allow_claimed=True)
        assert exhausted.result_type == killed.result_type == "task"
        await until(lambda: pidfile.exists() and pidfile.read_text().strip(), 180, "the hanging agent to start")
        flow_proc = home / "tasks" / killed.task_id / "flow-proc.json"
        await until(flow_proc.exists, 60, "the flow-run process record")
        os.kill(int(json.loads(flow_proc.read_text())["pid"]), signal.SIGKILL)
        try:
            for task_id, final in ((exhausted.task_id, "needs_attention"), (killed.task_id, "interrupted")):
                done = await _until_status(client, task_id, {"completed", "cancelled", "failed", "input_required"})
                assert done["status"] == "completed", done
                result = done["result"]
                assert result["isError"] is False and result["structuredContent"]["status"] == final, result
                classic = await client.call_tool("query_task", {"taskId": task_id})
                assert meta_of(classic)["status"] == final
                # the same result: the extension's is query_task's CallToolResult for the task
                assert result["structuredContent"] == classic.structured_content
                assert result["content"][0]["text"] == classic.content[0].text
                assert done["statusMessage"] == (classic.structured_content.get("message") or final)
            assert classic.structured_content["errorType"] == "interrupted"
        finally:  # the killed run's agent, should the service's sweep not have ended it yet
            for pid in (int(p) for p in pidfile.read_text().split()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _meta_of_raw(result: dict[str, Any]) -> dict[str, Any]:
    import json
    import re

    text = result["content"][0]["text"]
    match = re.search(r"---tianshu-mcp-meta---\n([\s\S]*?)\n---tianshu-mcp-meta---", text)
    assert match, text
    return json.loads(match.group(1))


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18"])
async def test_legacy_raw_handshake_runs_a_task_with_the_classic_contract(ts_daemon: dict[str, Any], tmp_path: Path,
                                                                         version: str) -> None:
    """At the exact legacy revisions, over a raw JSON-RPC session: run_task answers its taskId at
    once (a CallToolResult with the meta block, no task object) and wait_task follows it to its
    final state — even when the host (wrongly) names the extension in its capabilities."""
    import anyio

    home = ts_daemon["home"]
    repo = make_calc_repo(tmp_path / f"calc-{version}")
    client = RawClient(home)
    try:
        init = client.request("initialize", {"protocolVersion": version,
                                             "capabilities": {"extensions": {EXTENSION_ID: {}}},
                                             "clientInfo": {"name": "old-host", "version": "0"}}, timeout=60)
        assert init["result"]["protocolVersion"] == version, init
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = await anyio.to_thread.run_sync(lambda: client.request(
            "tools/call", {"name": "run_task", "arguments": {"projectPath": str(repo), "agentId": "scripted",
                                                             "task": BRIEF}}, 120))
        assert "error" not in answer, answer
        sub = answer["result"]
        assert "resultType" not in sub and "taskId" not in sub and sub["isError"] is False, sub  # no task object
        meta = _meta_of_raw(sub)
        assert meta["taskId"].startswith("tsk_") and meta["status"] == "queued"  # answered at once, not at the end
        done = await anyio.to_thread.run_sync(lambda: client.call(
            "wait_task", {"taskId": meta["taskId"], "timeoutMs": 240000}, 300))
        final = _meta_of_raw(done)
        assert final["status"] == "succeeded" and final["waitSettled"] is True, final
        assert (repo / "calc.py").read_text() == RIGHT_FIX
        got = client.request("tasks/get", {"taskId": meta["taskId"]}, timeout=60)
        assert got["error"]["code"] == -32601, got  # still no tasks/get at this revision
    finally:
        client.proc.kill()
        client.proc.wait()
