"""The task record (core/record.py): one writer, a declared schema, enums for what is closed,
and today's records loading unchanged."""

from __future__ import annotations

import ast
import json
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from tianshu_mcp.core.model import TaskStatus
from tianshu_mcp.core.record import (
    FIELDS,
    AbortSource,
    ErrorType,
    Isolation,
    Phase,
    RecordKind,
    RoundVerdict,
    VerificationSource,
    WorkspaceMode,
    dump_record,
    load_record,
    migrate,
    read_record,
)
from tianshu_mcp.core.taskstore import TaskStore

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("core", "adapters", "acceptance", "tasks", "flows", "deployments", "mcp_server")
RECORDS = sorted((Path(__file__).parent / "data" / "task_records").glob("*.json"))

# the record fields whose values are closed, and their enums
ENUM_FIELDS: dict[str, type[Enum]] = {
    "errorType": ErrorType, "abortSource": AbortSource, "phase": Phase, "finalStatus": TaskStatus,
    "kind": RecordKind, "workspaceMode": WorkspaceMode, "isolation": Isolation,
    "verificationSource": VerificationSource, "latestVerificationVerdict": RoundVerdict,
}
WRITERS = {"record", "update", "update_foreign", "create", "finish", "_finish", "finish_cancel"}


def _modules() -> list[tuple[Path, ast.Module]]:
    out = []
    for folder in PACKAGE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            out.append((path, ast.parse(path.read_text(), str(path))))
    return out


def _values(enum: type[Enum]) -> set[str]:
    return {str(m.value) for m in enum}


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def test_task_json_is_written_only_by_the_store() -> None:
    """The file name lives in core/record.py only; only core/taskstore.py writes through it."""
    named, writes = [], []
    for path, tree in _modules():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "task.json" and rel != "core/record.py":
                named.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Call) and _call_name(node) in ("atomic_write_json", "write_text", "write_bytes", "open"):
                text = ast.unparse(node)
                if ("RECORD_FILE" in text or "record_path" in text or ".path(" in text) and rel != "core/taskstore.py":
                    writes.append(f"{rel}:{node.lineno}: {text[:100]}")
    assert not named, f"the record's file name spelled outside core/record.py: {named}"
    assert not writes, f"task.json written outside core/taskstore.py: {writes}"


def test_every_closed_value_written_is_a_member_of_its_enum() -> None:
    """Literal values of errorType, abortSource, phase, finalStatus, … passed to a record writer
    (as keywords, dict entries or finish's positional status/error type) and the states of
    status events are members of their enums."""
    wrong = []
    statuses = _values(TaskStatus)
    for path, tree in _modules():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            pairs: list[tuple[str, ast.AST]] = []
            if isinstance(node, ast.Call) and _call_name(node) in WRITERS:
                pairs += [(kw.arg, kw.value) for kw in node.keywords if kw.arg in ENUM_FIELDS]
                if _call_name(node) in ("finish", "_finish") and len(node.args) >= 2:
                    pairs.append(("finalStatus", node.args[1]))
                    if len(node.args) >= 4:
                        pairs.append(("errorType", node.args[3]))
            if isinstance(node, ast.Call) and _call_name(node) in ("event", "emit") and len(node.args) >= 3:
                state = node.args[2]
                if isinstance(state, ast.Constant) and isinstance(state.value, str) and state.value not in statuses:
                    wrong.append(f"{rel}:{node.lineno}: event state {state.value!r}")
            if isinstance(node, ast.Call) and _call_name(node) in WRITERS:
                for arg in node.args:
                    if isinstance(arg, ast.Dict):  # create(task_id, {...})
                        pairs += [(k.value, v) for k, v in zip(arg.keys, arg.values)
                                  if isinstance(k, ast.Constant) and k.value in ENUM_FIELDS]
            for name, value in pairs:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and \
                        value.value not in _values(ENUM_FIELDS[name]):
                    wrong.append(f"{rel}:{value.lineno}: {name}={value.value!r}")
    assert not wrong, wrong


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_records_of_the_current_format_load_unchanged(path: Path, tmp_path: Path) -> None:
    raw = json.loads(path.read_text())
    assert dump_record(load_record(raw)) == raw
    assert set(raw) <= FIELDS, set(raw) - FIELDS  # every key of today's records is declared
    # the store updates one without touching the rest
    store = TaskStore(tmp_path)
    store.dir(raw["taskId"]).mkdir(parents=True)
    store.path(raw["taskId"]).write_text(json.dumps(raw))
    out = store.update(raw["taskId"], lastMessage="changed")
    assert {k: v for k, v in out.items() if k not in ("lastMessage", "updatedAt")} == \
        {k: v for k, v in raw.items() if k not in ("lastMessage", "updatedAt")}


def test_an_undeclared_field_or_a_value_outside_its_enum_is_refused_and_nothing_written(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    rec = store.create("tsk_20261203000000_aaaaaa", {"projectPath": "/p", "agentId": "a", "task": "t"})
    assert rec["recordVersion"] == 1 and rec["roundsUsed"] == 0
    before = store.path(rec["taskId"]).read_bytes()
    for fields in ({"errorTyp": "timeout"}, {"errorType": "exploded"}, {"phase": "thinking"}, {"roundsUsed": "many"},
                   {"finalStatus": "done"}, {"changedFiles": "calc.py"}):
        with pytest.raises(ValueError):
            store.update(rec["taskId"], **fields)
        assert store.path(rec["taskId"]).read_bytes() == before, fields
    # enum members and their values are both accepted and written as the value
    out = store.update(rec["taskId"], errorType=ErrorType.AGENT_FAILED, phase="fixing", abortSource=AbortSource.USER)
    assert (out["errorType"], out["phase"], out["abortSource"]) == ("agent_failed", "fixing", "user")
    assert json.loads(store.path(rec["taskId"]).read_text())["errorType"] == "agent_failed"


def test_a_newer_workers_fields_are_kept_as_they_are(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    rec = store.create("tsk_20261203000000_bbbbbb", {"projectPath": "/p"})
    out = store.update_foreign(rec["taskId"], {"futureField": {"x": 1}, "roundsUsed": 2})
    assert out["futureField"] == {"x": 1} and out["roundsUsed"] == 2
    assert load_record(out).model_extra == {"futureField": {"x": 1}}
    # a value a newer version added to a closed set is kept in the file; the strict load refuses
    # it, the reader's view leaves just that value out (the rest of the record still counts)
    out = store.update_foreign(rec["taskId"], {"errorType": "a_newer_error", "isolation": "worktree"})
    assert out["errorType"] == "a_newer_error" and store.read(rec["taskId"]) == out
    with pytest.raises(ValueError):
        load_record(out)
    view = store.load(rec["taskId"])
    assert view is not None and view.errorType is None and view.isolation == "worktree" and view.roundsUsed == 2


def test_the_readers_view_survives_damaged_values_and_newer_versions() -> None:
    """Breaker finding: one unreadable value (errorType "exploded", recordVersion 2) made the
    whole record unreadable, so verify_task judged a worktree task's project instead of its
    worktree and a rework ended failed/internal."""
    raw = json.loads((Path(__file__).parent / "data" / "task_records" / "worktree-merged.json").read_text())
    for damage in ({"errorType": "exploded"}, {"recordVersion": 2}, {"recordVersion": "two"}, {"reportRound": "x"},
                   {"changedFiles": 5}, {"phase": "cloning", "latestVerificationVerdict": "flaky"}):
        view, unread = read_record({**raw, **damage})
        assert unread == damage, damage
        assert view.isolation == "worktree" and view.worktreeBase == raw["worktreeBase"], damage
    with pytest.raises(ValueError):
        read_record({"taskId": "tsk_20261203000000_aaaaaa"})  # no createdAt: not a record at all


def test_record_versions() -> None:
    raw = json.loads(RECORDS[0].read_text())
    assert migrate(raw) == raw and migrate({**raw, "recordVersion": 1}) == {**raw, "recordVersion": 1}
    for bad in (2, 0, "1", True):
        with pytest.raises(ValueError):
            migrate({**raw, "recordVersion": bad})


def test_a_scan_parses_a_record_again_only_when_its_file_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """read_cached (the scans of run_task's answer and the listings): an unchanged task.json is
    not parsed again, a rewritten one is, and a removed one reads as absent."""
    store = TaskStore(tmp_path)
    store.create("tsk_20261203000000_aaaaab", {"projectPath": "/p", "task": "t", "agentId": "a"})
    reads: list[str] = []
    real = TaskStore.read

    def counting(self: TaskStore, task_id: str) -> Any:
        reads.append(task_id)
        return real(self, task_id)

    monkeypatch.setattr(TaskStore, "read", counting)
    first = store.read_cached("tsk_20261203000000_aaaaab")
    assert first is not None and first["projectPath"] == "/p" and len(reads) == 1
    first["projectPath"] = "mutated by a caller"  # a copy: the cache keeps the record
    assert store.read_cached("tsk_20261203000000_aaaaab")["projectPath"] == "/p" and len(reads) == 1
    store.update("tsk_20261203000000_aaaaab", finishedAt="2026-12-03T00:00:00.000Z")
    assert store.read_cached("tsk_20261203000000_aaaaab")["finishedAt"] == "2026-12-03T00:00:00.000Z"
    assert len(reads) == 2
    store.path("tsk_20261203000000_aaaaab").unlink()
    assert store.read_cached("tsk_20261203000000_aaaaab") is None
    assert store.read_cached("not-an-id") is None


def test_task_state_records_skip_the_fsync_and_promises_keep_it(tmp_path: Path, monkeypatch: Any) -> None:
    """Accepting a task and every record update replace their files whole without an fsync
    (design note 65: the durability of Prefect's own SQLite); a write that carries a promise
    (the default, e.g. a webhook entry) still syncs before it is renamed into place."""
    import os

    from tianshu_mcp.core import files, submissions
    from tianshu_mcp.core.ids import new_task_id
    from tianshu_mcp.core.projects import ProjectRegistry

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    home = tmp_path / "home"
    store, task_id = TaskStore(home), new_task_id()
    ProjectRegistry(home).register(str(tmp_path / "proj"))
    record = store.create(task_id, {"projectPath": str(tmp_path / "proj"), "agentId": "scripted", "task": "Fix add"})
    submissions.enqueue(home, task_id, "run-task/run-task", {"task_id": task_id}, [], "p-1", record["createdAt"])
    store.update(task_id, lastMessage="running")
    assert synced == []
    assert store.read(task_id)["lastMessage"] == "running" and store.read(task_id)["acceptedSeq"] >= 1
    assert not [p for p in (home / "tasks" / task_id).iterdir() if p.name.endswith(".tmp")]

    files.atomic_write_json(tmp_path / "promise.json", {"kept": True})
    assert len(synced) == 1 and json.loads((tmp_path / "promise.json").read_text()) == {"kept": True}


def test_unfinished_inplace_finds_the_newest_open_in_place_record_of_the_project(tmp_path: Path) -> None:
    """run_task's answer names the task its new one waits behind: the newest record of the same
    project that is in place and has no ``finishedAt``; finished, worktree and other projects'
    records do not count, and a record reopened (a rework clears ``finishedAt``) counts again
    although this process had read it finished."""
    from tianshu_mcp.core.ids import new_task_id

    store = TaskStore(tmp_path)
    ids = [new_task_id() for _ in range(5)]
    store.create(ids[0], {"projectPath": "/p", "isolation": "inplace"})  # open, oldest
    store.create(ids[1], {"projectPath": "/p", "isolation": "inplace", "finishedAt": "2026-01-01T00:00:00Z"})
    store.create(ids[2], {"projectPath": "/p", "isolation": "worktree"})
    store.create(ids[3], {"projectPath": "/other", "isolation": "inplace"})
    store.create(ids[4], {"projectPath": "/p", "isolation": "inplace", "finishedAt": "2026-01-01T00:00:00Z"})
    (tmp_path / "tasks" / "not-a-task").mkdir()
    found = store.unfinished_inplace("/p")
    assert found is not None and found["taskId"] == ids[0]
    assert store.unfinished_inplace("/nowhere") is None
    # ids made in the same second order by their random part, so "newest" among two open records
    # is not what this checks: the oldest ends, and the one reopened is then the only open one
    store.update(ids[0], finishedAt="2026-01-01T00:00:01Z")
    store.update(ids[4], finishedAt=None)  # reopened after this process cached it finished
    found = store.unfinished_inplace("/p")
    assert found is not None and found["taskId"] == ids[4]
