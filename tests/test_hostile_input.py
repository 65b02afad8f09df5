"""Hostile input never gets INTERNAL and never an unbounded reply (docs/robustness.md §6, §8): NUL bytes and
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
        assert code in ("INVALID_ARGUMENT", "TASK_NOT_FOUND") and size < MAX_REPLY
        assert f"{len(value)} characters, at most 128 allowed" in text  # sized, not quoted
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


def _replies_to(raw: Any, line: str, count: int) -> list[dict[str, Any]]:
    """Send ``line`` and collect the next ``count`` messages (deadline 60 s)."""
    assert raw.proc.stdin is not None
    raw.proc.stdin.write((line + "\n").encode())
    raw.proc.stdin.flush()
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while len(out) < count and time.monotonic() < deadline:
        try:
            out.append(raw.q.get(timeout=1))
        except queue.Empty:
            continue
    return out


@pytest.mark.parametrize("rid", ["null", "1.5", "true", "[1]", "{}"])
def test_a_request_with_an_unusable_id_gets_an_error_with_id_null(raw: Any, rid: str) -> None:
    """Breaker finding: the SDK reads ``{"id": 1.5, "method": …}`` as a notification and answers nothing."""
    [reply] = _replies_to(raw, f'{{"jsonrpc": "2.0", "id": {rid}, "method": "tools/list"}}', 1)
    assert reply["id"] is None and reply["error"]["code"] == -32600 and "id must be" in reply["error"]["message"]


def test_a_batch_gets_an_error_per_request(raw: Any) -> None:
    batch = ('[{"jsonrpc": "2.0", "id": 951, "method": "tools/list"}, '
             '{"jsonrpc": "2.0", "method": "notifications/initialized"}, '
             '{"jsonrpc": "2.0", "id": "s952", "method": "tools/call", "params": {"name": "query_info"}}]')
    replies = _replies_to(raw, batch, 2)
    assert sorted(str(r["id"]) for r in replies) == ["951", "s952"]
    assert all(r["error"]["code"] == -32600 and "batch" in r["error"]["message"] for r in replies)
    [empty] = _replies_to(raw, "[]", 1)
    assert empty["id"] is None and empty["error"]["code"] == -32600
    assert not raw.call("query_info", {"type": "profiles"})["isError"]  # still serving


def test_oversized_and_unknown_inputs_are_refused_with_a_size(raw: Any, tmp_path: Path) -> None:
    """Breaker findings: an unknown key holding a NUL was silently dropped; 20,000 override checks
    and 200,000 extraChecks were accepted and run; 1,000,000 taskIds were validated one by one."""
    repo = make_calc_repo(tmp_path / "calc")
    code, text, _ = error_of(raw.call("query_task", {"taskId": "tsk_x", "bo\u0000gus": 1}))
    assert code == "INVALID_ARGUMENT" and "<key>" in text and "NUL" in text
    check = {"name": "c", "cmd": ["true"]}
    for tool, args, field, n, limit in (
        ("verify_task", {"projectPath": str(repo), "extraChecks": [check] * 200_000}, "extraChecks", 200_000, 100),
        ("run_task", {"projectPath": str(repo), "task": "x", "agentId": "scripted",
                      "acceptanceOverride": {"checks": [check] * 20_000}}, "acceptanceOverride.checks", 20_000, 100),
        ("wait_task", {"taskIds": ["tsk_x"] * 1_000_000}, "taskIds", 1_000_000, 20),
        ("verify_task", {"projectPath": str(repo), "extraChecks": [{"name": "c", "cmd": ["x"] * 5000}]},
         "extraChecks[0].cmd", 5000, 4096),
    ):
        code, text, size = error_of(raw.call(tool, args, timeout=300))
        assert code == "INVALID_ARGUMENT" and f"{field}: {n} items, at most {limit} allowed" in text, text
        assert size < MAX_REPLY
    assert not raw.call("query_info", {"type": "profiles"})["isError"]


def _record(tasks: Path, tid: str, project: str) -> Path:
    (tasks / tid).mkdir(parents=True, exist_ok=True)
    (tasks / tid / "task.json").write_text(json.dumps({"taskId": tid, "createdAt": "2020-01-01T00:00:00.000Z",
                                                      "projectPath": project, "status": "failed"}))
    return tasks / tid


def test_a_huge_report_is_cut_with_a_pointer_to_the_file(raw: Any, ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    tid = "tsk_20200101000000_f0f0f0"
    tdir = _record(ts_daemon["home"] / "tasks", tid, str(tmp_path))
    (tdir / "report-0.md").write_text("# Acceptance report\n" + "- changed: src/file.py\n" * 500_000)  # 12 MB
    result = raw.call("query_info", {"type": "report", "taskId": tid})
    assert not result["isError"]
    text = result["content"][0]["text"]
    assert len(json.dumps(result).encode()) < MAX_REPLY
    assert "report cut at" in text and str(tdir / "report-0.md") in text and str(tdir / "report-0.json") in text


def test_wait_task_skips_a_damaged_record_among_good_ones(raw: Any, ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    tasks = ts_daemon["home"] / "tasks"
    good, bad = "tsk_20200101000000_f1f1f1", "tsk_20200101000000_f2f2f2"
    _record(tasks, good, str(tmp_path))
    (tasks / bad).mkdir(parents=True, exist_ok=True)
    (tasks / bad / "task.json").write_text('{"taskId": 7')  # truncated
    result = raw.call("wait_task", {"taskIds": [bad, good], "timeoutMs": 2000})
    assert not result["isError"], result
    text = result["content"][0]["text"]
    assert f"- {good}: status:" in text and f"- {bad}: not waited for, damaged task record" in text
    assert result["structuredContent"]["skippedRecords"] == [bad]
    code, text, _ = error_of(raw.call("wait_task", {"taskIds": [bad], "timeoutMs": 1000}))
    assert code == "TASK_RECORD_CORRUPT" and bad in text


def test_a_string_id_that_is_not_unicode_does_not_kill_the_server(raw: Any) -> None:
    """Breaker finding: ``"id": "\\ud800"`` was echoed into the reply and the SDK's writer died."""
    for rid in ('"\\ud800"', '"a\\udc00b"'):
        [reply] = _replies_to(raw, f'{{"jsonrpc": "2.0", "id": {rid}, "method": "ping"}}', 1)
        assert reply["id"] is None and reply["error"]["code"] == -32600
    assert not raw.call("query_info", {"type": "profiles"})["isError"]  # still serving


def test_the_top_level_id_of_a_broken_line_is_the_one_answered(raw: Any) -> None:
    long_id = "x" * 300
    cases = [
        ('{"jsonrpc": "2.0", "params": {"id": 55}, "id": 7, "method": "ping"', 7),
        ('{"jsonrpc": "2.0", "id": 123456789012345678901234567890, "method": "ping"', 123456789012345678901234567890),
        (f'{{"jsonrpc": "2.0", "id": "{long_id}", "method": "ping"', long_id),
    ]
    for line, rid in cases:
        [reply] = _replies_to(raw, line, 1)
        assert reply["id"] == rid and reply["error"]["code"] == -32700, reply


def test_a_damaged_record_with_huge_fields_gets_bounded_replies(raw: Any, ts_daemon: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    """Breaker finding: a task.json with a 10 MB lastMessage made 20–30 MB replies."""
    tasks = ts_daemon["home"] / "tasks"
    tid = "tsk_20200101000000_f3f3f3"
    tdir = _record(tasks, tid, str(tmp_path))
    record = json.loads((tdir / "task.json").read_text())
    record.update(lastMessage="m" * 10_000_000, changedFiles=[f"f{i}.py" for i in range(100_000)])
    (tdir / "task.json").write_text(json.dumps(record))
    for tool, args in (("query_task", {"taskId": tid}), ("wait_task", {"taskId": tid, "timeoutMs": 1000}),
                       ("wait_task", {"taskIds": [tid], "timeoutMs": 1000}), ("manage_task", {"taskId": tid, "action": "cancel"}),
                       ("query_info", {"type": "tasks", "limit": 200})):
        result = raw.call(tool, args, timeout=120)
        assert len(json.dumps(result).encode()) < 256 * 1024, (tool, len(json.dumps(result)))


def test_a_task_json_that_is_a_directory_is_a_damaged_record_everywhere(raw: Any, ts_daemon: dict[str, Any]) -> None:
    tid = "tsk_20200101000000_f4f4f4"
    (ts_daemon["home"] / "tasks" / tid / "task.json").mkdir(parents=True)
    for tool, args in (("query_task", {"taskId": tid}), ("wait_task", {"taskId": tid, "timeoutMs": 1000}),
                       ("wait_task", {"taskIds": [tid], "timeoutMs": 1000})):
        code, text, _ = error_of(raw.call(tool, args))
        assert code == "TASK_RECORD_CORRUPT" and tid in text, (tool, text)


def test_a_huge_method_or_tool_name_or_a_huge_record_object_is_not_echoed(raw: Any, ts_daemon: dict[str, Any],
                                                                       tmp_path: Path) -> None:
    """Breaker findings: a 200 KB method came back whole in -32601; a 200 KB tool name in 16 KB; a
    task.json whose diffstat was an object of 100,000 keys made 23 MB replies."""
    [reply] = _replies_to(raw, json.dumps({"jsonrpc": "2.0", "id": 961, "method": "m" * 200_000}), 1)
    assert reply["id"] == 961 and reply["error"]["code"] == -32601 and len(json.dumps(reply)) < 1000
    code, text, size = error_of(raw.call("x" * 200_000, {}))
    assert code == "UNKNOWN_TOOL" and size < 2000
    tid = "tsk_20200101000000_f5f5f5"
    tdir = _record(ts_daemon["home"] / "tasks", tid, str(tmp_path))
    record = json.loads((tdir / "task.json").read_text())
    record["diffstat"] = {f"k{i}": i for i in range(100_000)}
    (tdir / "task.json").write_text(json.dumps(record))
    result = raw.call("query_task", {"taskId": tid}, timeout=120)
    assert len(json.dumps(result).encode()) < MAX_REPLY
