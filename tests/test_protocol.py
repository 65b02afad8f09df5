"""The tool surface on the wire: list snapshot, annotations, _meta, coded errors, bad input
(docs/tools.md §1–§3.1, docs/architecture.md §7). Drives the installed console script with the SDK client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import TESTS, mcp_client, meta_of, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon")]

SNAPSHOT = TESTS / "snapshots" / "list_tools.json"


def _walk(node: object):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_list_tools_matches_snapshot(ts_home: Path, mode: str) -> None:
    async with mcp_client(ts_home, mode=mode) as client:
        tools = (await client.list_tools()).tools
    wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(wire, indent=2, ensure_ascii=False) + "\n")
    assert wire == json.loads(SNAPSHOT.read_text())
    names = [t["name"] for t in wire]
    assert names == ["prepare_visual_baseline", "approve_visual_baseline", "run_task", "query_task", "manage_task",
                     "verify_task", "query_info", "wait_task"]  # docs/tools.md §1 order
    for t in wire:
        ann = t["annotations"]
        assert ann["readOnlyHint"] is (t["_meta"]["capability"] == "read")
        assert all(isinstance(ann[k], bool) for k in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"))
        assert t["inputSchema"]["type"] == "object" and t["inputSchema"]["properties"]
        # optional fields are plain: no anyOf/oneOf with null anywhere
        for node in _walk(t["inputSchema"]):
            for key in ("anyOf", "oneOf"):
                assert all(alt.get("type") != "null" for alt in node.get(key, []))
    by = {t["name"]: t for t in wire}
    assert by["run_task"]["_meta"] == {"requireApproval": True, "capability": "write"}
    assert by["run_task"]["annotations"]["idempotentHint"] is True and by["run_task"]["annotations"]["openWorldHint"] is True
    assert by["manage_task"]["annotations"]["destructiveHint"] is True
    assert by["query_task"]["_meta"] == {"requireApproval": False, "capability": "read"}
    assert by["verify_task"]["_meta"] == {"requireApproval": False, "capability": "execute"}
    assert by["verify_task"]["annotations"]["readOnlyHint"] is False and by["verify_task"]["annotations"]["idempotentHint"] is True


async def test_schema_violation_is_a_coded_error_naming_the_field(ts_home: Path) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"task": "x", "autoFixRounds": 11})
        assert r.is_error and text_of(r).startswith("Error: [INVALID_ARGUMENT]") and "autoFixRounds" in text_of(r)
        assert "---tianshu-mcp-meta---" not in text_of(r)
        assert "pydantic" not in text_of(r) and "validation error for" not in text_of(r)
        r = await client.call_tool("query_task", {})
        assert r.is_error and "taskId: required" in text_of(r)
        r = await client.call_tool("run_task", {"task": "x", "acceptanceOverride": {"checks": [{"name": "a"}]}})
        assert r.is_error and "acceptanceOverride.checks[0].cmd" in text_of(r)
        r = await client.call_tool("wait_task", {"taskId": "tsk_20260101000000_abcdef", "timeoutMs": 0})
        assert r.is_error and "timeoutMs" in text_of(r)
        # absurd time limits (observed stored as a 31- and a 309-digit number): refused, not stored
        tasks = ts_home / "tasks"
        before = set(tasks.iterdir()) if tasks.exists() else set()
        for huge in (10**30, 86_400_001):
            r = await client.call_tool("run_task", {"projectPath": str(ts_home.parent), "task": "x", "taskTimeoutMs": huge})
            assert r.is_error and text_of(r).startswith("Error: [INVALID_ARGUMENT]") and "taskTimeoutMs" in text_of(r)
            override = {"checks": [{"name": "a", "cmd": ["true"], "timeoutMs": huge}]}
            r = await client.call_tool("run_task", {"task": "x", "acceptanceOverride": override})
            assert r.is_error and text_of(r).startswith("Error: [INVALID_ARGUMENT]") and "checks.0.timeoutMs" in text_of(r)
        assert (set(tasks.iterdir()) if tasks.exists() else set()) == before  # the home is shared: nothing new


async def test_unknown_and_removed_tools(ts_home: Path) -> None:
    async with mcp_client(ts_home) as client:
        for name in ("nope", "cancel_task", "list_tasks"):
            r = await client.call_tool(name, {})
            assert r.is_error and text_of(r) == f"Error: [UNKNOWN_TOOL] tool {name} not found"


async def test_unknown_task_id(ts_home: Path) -> None:
    async with mcp_client(ts_home) as client:
        for tool, args in (
            ("query_task", {"taskId": "tsk_20260101000000_abcdef"}),
            ("wait_task", {"taskId": "tsk_20260101000000_abcdef"}),
            ("wait_task", {"taskIds": ["tsk_20260101000000_abcdef", "../../etc"]}),
            ("manage_task", {"taskId": "tsk_20260101000000_abcdef", "action": "cancel"}),
            ("query_info", {"type": "report", "taskId": "nope"}),
        ):
            r = await client.call_tool(tool, args)
            assert r.is_error and text_of(r).startswith("Error: [TASK_NOT_FOUND]"), (tool, text_of(r))


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("relative/dir", "PATH_NOT_ABSOLUTE"),
        ("/definitely/missing/dir", "PATH_NOT_FOUND"),
        ("/", "PATH_IS_SYSTEM"),
        ("/etc", "PATH_IS_SYSTEM"),
        ("/tmp", "PATH_IS_SYSTEM"),
        (str(Path.home()), "PATH_IS_HOME"),
    ],
)
async def test_project_path_safety_gate(ts_home: Path, path: str, code: str) -> None:
    before = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"projectPath": path, "task": "x", "agentId": "scripted"})
    assert r.is_error and text_of(r).startswith(f"Error: [{code}]"), text_of(r)
    after = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    assert after == before  # nothing written


async def test_a_file_is_not_a_project(ts_home: Path, tmp_path: Path) -> None:
    f = tmp_path / "file.txt"
    f.write_text("x")
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"projectPath": str(f), "task": "x", "agentId": "scripted"})
    assert r.is_error and "PATH_NOT_FOUND" in text_of(r)


async def test_unknown_agent_is_not_an_error(ts_home: Path, calc_repo: Path) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "x", "agentId": "ghost"})
    assert not r.is_error
    meta = meta_of(r)
    assert meta["ok"] is False and meta["agentId"] == "ghost" and "not configured" in meta["message"]
    assert "taskId" not in meta


async def test_malformed_agent_profiles_is_a_coded_error_and_writes_nothing(ts_home: Path, calc_repo: Path) -> None:
    path = ts_home / "agent-profiles.json"
    good = path.read_text()
    before = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    try:
        path.write_text('{"profiles": {"scripted": {"promptMode": "telepathy"}}}')
        async with mcp_client(ts_home) as client:
            r = await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "x", "agentId": "scripted"})
            assert r.is_error and text_of(r).startswith("Error: [CONFIG_INVALID]")
            assert str(path) in text_of(r) and "promptMode" in text_of(r)
            # one broken entry does not take the listing (or the other agents) down
            r = await client.call_tool("query_info", {"type": "profiles"})
            rows = {row["id"]: row for row in meta_of(r)["profiles"]}
            assert not r.is_error and rows["scripted"]["ok"] is False and "promptMode" in rows["scripted"]["message"]
            assert rows["codex"]["driver"] == "spawn"
            path.write_text("{not json")
            r = await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "x", "agentId": "scripted"})
            assert r.is_error and "CONFIG_INVALID" in text_of(r) and str(path) in text_of(r)
    finally:
        path.write_text(good)
    after = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    assert after == before


async def test_branch_whitelists_and_cross_field_rules(ts_home: Path) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", {"taskId": "tsk_20260101000000_abcdef", "action": "cancel", "message": ""})
        assert r.is_error and "action=cancel does not accept: message" in text_of(r)
        r = await client.call_tool("query_info", {"type": "profiles", "limit": 3})
        assert r.is_error and "type=profiles does not accept: limit" in text_of(r)
        r = await client.call_tool("wait_task", {})
        assert r.is_error and "exactly one of taskId" in text_of(r)


async def test_query_info_profiles_lists_every_agent(ts_home: Path) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("query_info", {"type": "profiles"})
    text = text_of(r)
    assert not r.is_error
    assert "[PASS] available\tscripted" in text
    assert "[FAIL] unavailable\tzcode" in text
    # resolution only checks that the command exists; spawning it is the dispatch round's job
    assert "[PASS] available\tnot-executable" in text
    assert meta_of(r)["ok"] is True


async def test_idempotency_key_hit_conflict_and_validation(ts_home: Path, calc_repo: Path) -> None:
    args = {"projectPath": str(calc_repo), "task": "noop", "agentId": "scripted-noop", "autoVerify": False,
            "idempotencyKey": "  key-1  "}
    async with mcp_client(ts_home) as client:
        first = meta_of(await client.call_tool("run_task", args))
        assert first["idempotencyKey"] == "key-1" and "idempotencyReplay" not in first
        again = await client.call_tool("run_task", {**args, "idempotencyKey": "key-1"})
        replay = meta_of(again)
        assert replay["taskId"] == first["taskId"] and replay["idempotencyReplay"] == "hit"
        assert "idempotent replay" in text_of(again)
        clash = await client.call_tool("run_task", {**args, "task": "something else"})
        assert clash.is_error and text_of(clash).startswith("Error: [IDEMPOTENCY_CONFLICT]") and first["taskId"] in text_of(clash)
        bad = await client.call_tool("run_task", {**args, "idempotencyKey": "a\x01b"})
        assert bad.is_error and "[INVALID_ARGUMENT]" in text_of(bad) and "control" in text_of(bad)
        no_key = {k: v for k, v in args.items() if k != "idempotencyKey"}
        a = meta_of(await client.call_tool("run_task", no_key))
        b = meta_of(await client.call_tool("run_task", no_key))
        assert a["taskId"] != b["taskId"] and "idempotencyKey" not in a
        for task_id in (first["taskId"], a["taskId"], b["taskId"]):
            await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 120000})


async def test_blank_brief_and_damaged_records(ts_home: Path, calc_repo: Path) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "   ", "agentId": "scripted"})
        assert r.is_error and "[INVALID_ARGUMENT]" in text_of(r) and "blank" in text_of(r)
        # one damaged task.json must not sink the list, and reads as corrupt, not missing
        bad = ts_home / "tasks" / "tsk_20200101000000_badbad"
        bad.mkdir(parents=True)
        (bad / "task.json").write_text('{"taskId": "tsk_20200101000000_badbad", "flowRunId": "not-a-uuid", "createdAt": "2020-01-01T00:00:00Z"}')
        torn = ts_home / "tasks" / "tsk_20200101000000_70a70a"
        torn.mkdir(parents=True)
        (torn / "task.json").write_text('{"taskId": "tsk_2020')
        try:
            r = await client.call_tool("query_info", {"type": "tasks", "limit": 200})
            assert not r.is_error and "tsk_20200101000000_badbad" in text_of(r)
            r = await client.call_tool("query_task", {"taskId": "tsk_20200101000000_70a70a"})
            assert r.is_error and text_of(r).startswith("Error: [TASK_RECORD_CORRUPT]")
        finally:
            import shutil

            shutil.rmtree(bad)
            shutil.rmtree(torn)


def test_a_system_directory_is_refused_as_data_home(tmp_path: Path) -> None:
    import subprocess

    from conftest import CONSOLE, server_env

    env = server_env(tmp_path)
    env["TIANSHU_MCP_HOME"] = "/etc"
    out = subprocess.run([CONSOLE, "server"], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 1 and "TIANSHU_MCP_HOME must not be a system or root directory: /etc" in out.stderr
    assert not Path("/etc/prefect").exists()
