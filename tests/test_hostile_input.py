"""Hostile input never gets INTERNAL and never an unbounded reply (input issue): NUL bytes and
unpaired surrogates, huge values, damaged task records; through a real stdio server."""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Any

import pytest

from fixture_project import make_calc_repo
from test_stdio_host import RawClient, _init

MAX_REPLY = 64 * 1024


def error_of(result: dict[str, Any]) -> tuple[str, str, int]:
    """(code, text, result size in bytes) of a tools/call result that must be a tool error."""
    assert result["isError"] is True, str(result)[:2000]
    text = result["content"][0]["text"]
    return text.split("]")[0].removeprefix("Error: ["), text, len(json.dumps(result).encode())


@pytest.fixture
def raw(ts_daemon: dict[str, Any]) -> Any:
    client = RawClient(ts_daemon["home"])
    _init(client)
    yield client
    client.close()


def test_nul_and_unpaired_surrogates_name_the_field(raw: Any, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    cases = [
        ("verify_task", {"projectPath": str(repo), "baselineRef": "\u0000"}, "baselineRef"),
        ("run_task", {"projectPath": str(repo), "task": "fix\u0000it", "agentId": "scripted"}, "task"),
        ("run_task", {"projectPath": str(repo) + "\u0000", "task": "x", "agentId": "scripted"}, "projectPath"),
        ("run_task", {"projectPath": str(repo), "task": "x\ud800y", "agentId": "scripted"}, "task"),
        ("query_task", {"taskId": "tsk_\u0000"}, "taskId"),
        ("verify_task", {"projectPath": str(repo), "extraChecks": [{"name": "a", "cmd": ["echo", "\u0000"]}]},
         "extraChecks[0].cmd[1]"),
    ]
    for tool, args, field in cases:
        code, text, _ = error_of(raw.call(tool, args))
        assert code == "INVALID_ARGUMENT" and field in text, (tool, text)
    assert not raw.call("query_info", {"type": "profiles"})["isError"]  # still answering


def test_huge_values_get_bounded_replies(raw: Any) -> None:
    for value in ("x" * 10_000_000, "\U0001F600" * 1_000_000):
        code, text, size = error_of(raw.call("query_task", {"taskId": value}, timeout=300))
        assert code in ("INVALID_ARGUMENT", "TASK_NOT_FOUND") and size < MAX_REPLY and "more characters" in text
        assert len(text) < 1000  # ~200 characters of the value are quoted, not 10 MB
    code, _, size = error_of(raw.call("run_task", {"projectPath": "/nope", "task": "x", "agentId": "y",
                                                   "context": ["a" * 1000] * 5000}, timeout=300))
    assert code in ("INVALID_ARGUMENT", "PATH_NOT_FOUND") and size < MAX_REPLY


def test_damaged_task_records_are_coded_and_skipped_in_lists(raw: Any, ts_daemon: dict[str, Any]) -> None:
    tasks = ts_daemon["home"] / "tasks"
    empty, wrong, fifo, zero = ("tsk_20200101000000_e0e0e0", "tsk_20200101000000_e1e1e1",
                                "tsk_20200101000000_e2e2e2", "tsk_20200101000000_e3e3e3")
    for tid, body in ((empty, {}), (wrong, {"taskId": wrong, "createdAt": 7, "projectPath": "/x"})):
        (tasks / tid).mkdir(parents=True, exist_ok=True)
        (tasks / tid / "task.json").write_text(json.dumps(body))
    (tasks / fifo).mkdir(parents=True, exist_ok=True)
    os.mkfifo(tasks / fifo / "task.json")  # reading it would block the server forever
    (tasks / zero).mkdir(parents=True, exist_ok=True)
    (tasks / zero / "task.json").symlink_to("/dev/zero")  # reading it would exhaust memory
    try:
        for tid in (empty, wrong, fifo, zero):
            code, text, _ = error_of(raw.call("query_task", {"taskId": tid}))
            assert code == "TASK_RECORD_CORRUPT" and f"{tid}/task.json" in text
        listing = raw.call("query_info", {"type": "tasks", "limit": 200})
        assert not listing["isError"]
        text = listing["content"][0]["text"]
        assert empty in text and wrong in text and fifo in text and "damaged task record" in text
    finally:
        for tid in (empty, wrong, fifo, zero):
            (tasks / tid / "task.json").unlink()
            (tasks / tid).rmdir()


MALFORMED = [  # (line, id): every one carries an id and must get a JSON-RPC answer
    ('{"jsonrpc": "2.0", "id": 901, "method": 5}', 901),
    ('{"jsonrpc": "1.0", "id": 902, "method": "tools/list"}', 902),
    ('{"jsonrpc": "2.0", "id": 903, "method": "tools/call", "params": 7', 903),
    ('{"jsonrpc": "2.0", "id": "s904", "method": "tools/call", "params": [1, 2]}', "s904"),
    ('{"id": 905, "method": "tools/list"}', 905),
    ('{"jsonrpc": "2.0", "id": 906, "method": "tools/call", "params": {"name": 3}}', 906),
    ('{"jsonrpc": "2.0", "id": 907, "method": "tools/call", "params": {"name": "query_task", '
     '"arguments": {"taskId": "\\ud800"}}}', 907),
    ("{'jsonrpc': '2.0', 'id': 908}", None),  # not JSON and no recoverable "id": nothing to answer
]


def test_every_malformed_request_with_an_id_gets_an_answer(raw: Any) -> None:
    for line, _ in MALFORMED:
        assert raw.proc.stdin is not None
        raw.proc.stdin.write((line + "\n").encode())
        raw.proc.stdin.flush()
    want = {rid for _, rid in MALFORMED if rid is not None}
    got: dict[Any, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    while want - set(got) and time.monotonic() < deadline:
        try:
            msg = raw.q.get(timeout=1)
        except queue.Empty:
            continue
        if msg.get("id") in want:
            got[msg["id"]] = msg
    assert set(got) == want
    tool_error = got[907]["result"]
    assert tool_error["isError"] and "[INVALID_ARGUMENT]" in tool_error["content"][0]["text"] \
        and "taskId" in tool_error["content"][0]["text"]
    assert all("error" in got[i] for i in want - {907})
    assert not raw.call("query_info", {"type": "profiles"})["isError"]  # still serving
