"""Structured output: every tool publishes an outputSchema and its structuredContent validates against
it, on success and on error (docs/host-parity.md §2).

``conftest.mcp_client`` checks every ``call_tool`` result of the whole suite against the tool's
published schema and its strict form (:func:`conftest.check_output`); this file makes sure each tool
is called here for a success and for an error, and reads the lists as data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import check_output, mcp_client, meta_of
from jsonschema import Draft202012Validator

from tianshu_mcp.mcp_server.outputs import OUTPUT_MODELS, output_schema
from tianshu_mcp.mcp_server.tools import TOOL_DEFS

pytestmark = [pytest.mark.anyio]


def test_every_tool_has_an_object_output_schema_that_is_valid_json_schema() -> None:
    assert {t.name for t in TOOL_DEFS} == set(OUTPUT_MODELS)
    for tool in OUTPUT_MODELS:
        for strict in (False, True):
            schema = output_schema(tool, strict=strict)
            Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and "$ref" not in str(schema) and "$defs" not in schema
            assert "error" in schema["properties"]  # an error result validates too
        assert "additionalProperties" not in output_schema(tool)  # published: open to newer fields


def test_a_key_no_model_declares_is_caught_by_the_strict_form() -> None:
    class Result:
        structured_content = {"ok": True, "taskId": "tsk_x", "status": "queued", "surprise": 1}
        content: list[Any] = []

    check_output_loose = Draft202012Validator(output_schema("query_task")).is_valid(Result.structured_content)
    assert check_output_loose
    with pytest.raises(AssertionError, match="surprise"):
        check_output("query_task", Result())
    bad_type = type("R", (), {"structured_content": {"status": "done"}, "content": []})()
    with pytest.raises(AssertionError, match="status"):
        check_output("query_task", bad_type)


async def test_every_tool_success_and_error_validate(ts_daemon: dict[str, Any], calc_repo: Path, tmp_path: Path) -> None:
    home = ts_daemon["home"]
    async with mcp_client(home) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        for name, tool in listed.items():
            assert tool.output_schema == output_schema(name), name
        called: dict[str, set[str]] = {name: set() for name in OUTPUT_MODELS}

        async def call(name: str, args: dict[str, Any], error: bool) -> Any:
            result = await client.call_tool(name, args)  # checked against the schemas by conftest
            assert result.is_error is error, (name, args, result.content)
            called[name].add("error" if error else "success")
            return result

        sub = meta_of(await call("run_task", {"projectPath": str(calc_repo), "agentId": "scripted-noop",
                                              "task": "Look around", "autoVerify": False}, False))
        await call("run_task", {"projectPath": "relative/path", "task": "x"}, True)
        tid = sub["taskId"]
        done = meta_of(await call("wait_task", {"taskId": tid, "timeoutMs": 180000}, False))
        assert done["status"] == "succeeded"
        await call("wait_task", {"taskId": "tsk_20200101000000_000000"}, True)
        assert meta_of(await call("query_task", {"taskId": tid}, False))["recentEvents"] is not None
        await call("query_task", {"taskId": "tsk_20200101000000_000000"}, True)
        await call("manage_task", {"taskId": tid, "action": "cancel"}, False)
        await call("manage_task", {"taskId": tid, "action": "continue", "message": "x"}, True)
        verified = meta_of(await call("verify_task", {"projectPath": str(calc_repo)}, False))
        await call("verify_task", {}, True)

        listing = meta_of(await call("query_info", {"type": "tasks", "limit": 200}, False))
        rows = {row["taskId"]: row for row in listing["tasks"]}
        assert rows[tid]["status"] == "succeeded" and rows[tid]["agentId"] == "scripted-noop"
        assert listing["message"] == f"{len(listing['tasks'])} task(s)"
        profiles = meta_of(await call("query_info", {"type": "profiles"}, False))["profiles"]
        assert {p["id"] for p in profiles} >= {"scripted", "scripted-noop"} and all("ok" in p for p in profiles)
        report = meta_of(await call("query_info", {"type": "report", "taskId": verified["verifyId"]}, False))
        assert report["report"]["md"].endswith("report-0.md") and report["report"]["passed"] is False
        assert report["report"]["json"].endswith("report-0.json") and report["taskId"] == verified["verifyId"]
        await call("query_info", {"type": "report", "taskId": tid}, True)  # verification was off: no report
        empty = meta_of(await call("query_info", {"type": "tasks", "projectPath": str(tmp_path / "none")}, False))
        assert empty["tasks"] == [] and empty["message"] == "empty list"

        plain = tmp_path / "plain"
        plain.mkdir()
        await call("prepare_visual_baseline", {"projectPath": str(plain)}, True)
        await call("approve_visual_baseline", {"candidateId": "cand-none", "expectedDigest": "0" * 64,
                                               "approvalNote": "looks right"}, True)
    # the visual tools' successes are called by test_visual_e2e through the same checked client
    assert all(kinds == {"success", "error"} for name, kinds in called.items()
               if name not in ("prepare_visual_baseline", "approve_visual_baseline")), called


async def test_a_damaged_record_field_is_left_out_and_named(ts_daemon: dict[str, Any]) -> None:
    """A hand-edited task.json whose fields have the wrong types: the results still validate."""
    import json

    home = ts_daemon["home"]
    tid = "tsk_20200101000000_d1ff57"
    tdir = home / "tasks" / tid
    tdir.mkdir(parents=True)
    (tdir / "task.json").write_text(json.dumps({
        "taskId": tid, "projectPath": "/work/x", "createdAt": "2020-01-01T00:00:00Z", "finalStatus": "failed",
        "diffstat": {"k": 1}, "roundsUsed": 2, "changedFiles": "calc.py", "agentId": "scripted",
        "logFile": 8, "updatedAt": 12345, "pendingQuestion": {"q": 1}, "needsUserKind": 5}))
    try:
        async with mcp_client(home) as client:
            # logFile 8 once made query_task read (or close) the server's own file descriptor 8
            meta = meta_of(await client.call_tool("query_task", {"taskId": tid}))
            assert meta["damagedFields"] == ["changedFiles", "diffstat", "logFile", "needsUserKind", "pendingQuestion"]
            assert "diffstat" not in meta and meta["status"] == "failed" and meta["roundsUsed"] == 2
            assert meta_of(await client.call_tool("query_task", {"taskId": tid}))["taskId"] == tid  # still serving
        from tasks_client import TasksRequester, tasks_request
        from test_tasks_ext import modern

        async with modern(home, TasksRequester()) as client:
            task = await tasks_request(client.session, "tasks/get", {"taskId": tid})
            assert task["status"] == "completed" and task["lastUpdatedAt"] == task["createdAt"] == "2020-01-01T00:00:00Z"
            check_output("query_task", type("R", (), {"structured_content": task["result"]["structuredContent"],
                                                      "content": task["result"]["content"]})())
        async with mcp_client(home) as client:
            listing = meta_of(await client.call_tool("query_info", {"type": "tasks", "limit": 200}))
            row = next(r for r in listing["tasks"] if r["taskId"] == tid)
            assert "diffstat" not in row and f"tasks.{listing['tasks'].index(row)}.diffstat" in listing["damagedFields"]
    finally:
        import shutil

        shutil.rmtree(tdir)


def test_a_number_where_a_path_belongs_never_reads_or_closes_a_file_descriptor() -> None:
    """A damaged record's logFile/reportJson of 8 once opened the server's own fd 8 (and closed it)."""
    import os

    from tianshu_mcp.core.files import read_json_safe, read_text_tail, tail_lines

    r, w = os.pipe()
    try:
        os.write(w, b'{"a": 1}\n')
        assert read_json_safe(r) is None and read_text_tail(r, 100) is None and tail_lines(r, 5) is None
        assert os.read(r, 100) == b'{"a": 1}\n'  # still open, nothing consumed
    finally:
        os.close(r)
        os.close(w)
