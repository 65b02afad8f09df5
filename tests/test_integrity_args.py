"""The verification-integrity arguments (docs/integrity.md): ``targetTests`` and ``holdoutChecks`` on
run_task / verify_task, their storage (task.json vs the 0600 ``holdout.json``), the idempotency
digest, the ``tianshu-mcp holdout`` console subcommand, and the plumbing into ``VerifyRequest``
and the meta (``testIntegrity``, ``unsupportedClaims``). The tools are driven by the real SDK
client over stdio against the session daemon."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import CONSOLE, mcp_client, meta_of, server_env, text_of
from tianshu_mcp.acceptance.integrity.holdout_store import (
    load_holdout,
    project_holdout_path,
    save_project_holdout,
    save_task_holdout,
    task_holdout_path,
)
from tianshu_mcp.acceptance.integrity.models import (
    MAX_HOLDOUT_CHECKS,
    MAX_TARGETS,
    HoldoutCheck,
)
from tianshu_mcp.core.errors import ErrorCode, TianshuError
from tianshu_mcp.core.model import meta_from_task
from tianshu_mcp.mcp_server.tools import TOOLS_BY_NAME

daemon = pytest.mark.usefixtures("ts_daemon")

CMD_MARK = "HOLDOUT-CMD-SECRET-7f3a"
FILE_MARK = "HOLDOUT-FILE-SECRET-91c2"
NAME = "secret-overflow-probe"
AREA = "overflow handling"
HOLDOUT = [{"name": NAME, "cmd": [sys.executable, "-c", f"print('{CMD_MARK}')"], "area": AREA, "timeoutMs": 60000,
            "files": {"tests/holdout_probe.py": f"# {FILE_MARK}\n"}}]
SECRETS = (CMD_MARK, FILE_MARK, NAME)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _no_secret(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into {where}"


def _result_text(result: Any) -> str:
    return text_of(result) + json.dumps(result.structured_content, ensure_ascii=False)


def _check_stored_holdout(directory: Path) -> None:
    path = task_holdout_path(directory)
    assert not (directory / "holdout.json").exists()  # never in the task directory the agent is pointed at
    assert _mode(path) == 0o600
    doc = json.loads(path.read_text())
    assert doc == {"version": 1, "checks": [HoldoutCheck.model_validate(HOLDOUT[0]).model_dump(by_alias=True)]}


# --- the limits of the published schema are the models' ------------------------------------------
def test_published_limits_equal_the_models() -> None:
    for tool in ("run_task", "verify_task"):
        props = TOOLS_BY_NAME[tool].input_schema["properties"]
        assert props["targetTests"]["maxItems"] == MAX_TARGETS
        assert props["holdoutChecks"]["maxItems"] == MAX_HOLDOUT_CHECKS
        assert props["holdoutChecks"]["items"]["additionalProperties"] is False


# --- storage through run_task -------------------------------------------------------------------
@daemon
@pytest.mark.anyio
async def test_run_task_stores_targets_in_the_record_and_holdout_apart(ts_home: Path, calc_repo: Path) -> None:
    key = f"integrity-{calc_repo.name}-{os.getpid()}-{id(calc_repo)}"
    args = {"projectPath": str(calc_repo), "task": "Fix add", "agentId": "scripted", "autoFixRounds": 0,
            "targetTests": ["tests/test_calc.py::test_add", "  test_add_negative  "], "holdoutChecks": HOLDOUT,
            "idempotencyKey": key}
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", args)
        assert not r.is_error, text_of(r)
        _no_secret("run_task's reply", _result_text(r))
        sub = meta_of(r)
        assert sub["targetTests"] == ["tests/test_calc.py::test_add", "test_add_negative"] and sub["holdoutCount"] == 1
        tdir = ts_home / "tasks" / sub["taskId"]
        task = json.loads((tdir / "task.json").read_text())
        assert task["targetTests"] == ["tests/test_calc.py::test_add", "test_add_negative"]
        assert task["holdoutCount"] == 1 and "holdoutChecks" not in task
        _no_secret("task.json", (tdir / "task.json").read_text())
        _check_stored_holdout(tdir)
        # idempotency: the same call is a replay, other holdout checks a conflict; never in clear
        again = await client.call_tool("run_task", args)
        assert meta_of(again)["idempotencyReplay"] == "hit" and meta_of(again)["taskId"] == sub["taskId"]
        other = [{**HOLDOUT[0], "area": "another area"}]
        conflict = await client.call_tool("run_task", {**args, "holdoutChecks": other})
        assert conflict.is_error and text_of(conflict).startswith("Error: [IDEMPOTENCY_CONFLICT]")
        store = (ts_home / "idempotency.json").read_text()
        assert key in store
        _no_secret("idempotency.json", store)
        assert AREA not in store

        done = await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000})
        meta = meta_of(done)
        # the scripted agent's wrong fix: test_add_negative, a target, fails
        assert meta["status"] in ("failed", "needs_attention") and meta["reportRound"] == 0, meta
        assert meta["targetTests"] == task["targetTests"] and meta["holdoutCount"] == 1
        integrity = json.loads(Path(meta["reportFiles"]["json"]).read_text()).get("integrity")
        if isinstance(integrity, dict):  # the latest report's integrity section reaches the meta
            assert meta.get("testIntegrity") == integrity.get("policy")
            claims = [{"claim": c.get("claim"), "why": c.get("why")} for c in integrity.get("unsupportedClaims") or []]
            assert meta.get("unsupportedClaims", []) == claims
        _no_secret("wait_task", _result_text(done))
        query = await client.call_tool("query_task", {"taskId": sub["taskId"]})
        _no_secret("query_task", _result_text(query))
        listing = await client.call_tool("query_info", {"type": "tasks", "projectPath": str(calc_repo)})
        _no_secret("query_info(tasks)", _result_text(listing))
        assert any(row["taskId"] == sub["taskId"] and row["holdoutCount"] == 1 for row in listing.structured_content["tasks"])
        report = await client.call_tool("query_info", {"type": "report", "taskId": sub["taskId"], "round": 0})
        assert not report.is_error
        for secret in (CMD_MARK, FILE_MARK):
            assert secret not in _result_text(report)

        # a rework keeps the task's targets and holdout checks
        rework = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "rework",
                                                        "feedback": "test_add_negative fails"})
        assert not rework.is_error, text_of(rework)
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
        assert done["reportRound"] == 1 and done["targetTests"] == task["targetTests"], done
    after = json.loads((tdir / "task.json").read_text())
    assert after["targetTests"] == task["targetTests"] and after["holdoutCount"] == 1
    _check_stored_holdout(tdir)
    # what the agent was given never names them: briefs, prompts, logs, events, repair plans
    given = [p for pattern in ("prompt-*", "agent-*.log", "rework-*", "task.json", "task.jsonl")
             for p in tdir.glob(pattern)]
    assert any(p.name.startswith("prompt-") for p in given)
    for path in given:
        _no_secret(path.name, path.read_text(errors="replace"))


# --- storage through verify_task -----------------------------------------------------------------
@daemon
@pytest.mark.anyio
async def test_verify_task_by_project_stores_the_call_s_own(ts_home: Path, calc_repo: Path) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("verify_task", {"projectPath": str(calc_repo), "targetTests": ["test_add"],
                                                   "holdoutChecks": HOLDOUT})
        assert not r.is_error, text_of(r)
        _no_secret("verify_task's reply", _result_text(r))
        meta = meta_of(r)
        record = meta.get("verifyId") or meta["taskId"]  # an in_progress answer (a busy service) names the record
        if meta["status"] not in ("succeeded", "failed", "needs_attention"):
            meta = meta_of(await client.call_tool("wait_task", {"taskId": record, "timeoutMs": 180000}))
        assert meta.get("reportRound") == 0 and meta["holdoutCount"] == 1 and meta["targetTests"] == ["test_add"], meta
        rdir = ts_home / "tasks" / record
        task = json.loads((rdir / "task.json").read_text())
        assert task["targetTests"] == ["test_add"] and task["holdoutCount"] == 1
        _no_secret("the record's task.json", (rdir / "task.json").read_text())
        _check_stored_holdout(rdir)
        query = await client.call_tool("query_task", {"taskId": record})
        _no_secret("query_task", _result_text(query))


# --- bad input --------------------------------------------------------------------------------------
_CHECK = {"name": "h", "cmd": ["true"], "area": "a"}
BAD: list[tuple[str, Any, str]] = [
    ("targetTests", "tests/test_calc.py", "targetTests"),
    ("targetTests", ["a", ""], "targetTests[1]"),
    ("targetTests", ["a", "b", "x" * 501], "targetTests[2]"),
    ("targetTests", ["a\nb"], "targetTests[0]"),
    ("targetTests", ["   "], "targetTests[0]"),
    ("targetTests", ["a", 5], "targetTests[1]"),
    ("targetTests", ["t"] * 101, "targetTests"),
    ("holdoutChecks", {"name": "h"}, "holdoutChecks"),
    ("holdoutChecks", [{"name": "h", "cmd": ["true"]}], "holdoutChecks[0].area"),
    ("holdoutChecks", [_CHECK, {**_CHECK, "name": "h2", "cmd": ""}], "holdoutChecks[1].cmd"),
    ("holdoutChecks", [{**_CHECK, "cmd": []}], "holdoutChecks[0].cmd"),
    ("holdoutChecks", [{**_CHECK, "shell": True}], "holdoutChecks[0]"),
    ("holdoutChecks", [{**_CHECK, "files": {"../x": "a"}}], "holdoutChecks[0].files"),
    ("holdoutChecks", [{**_CHECK, "files": {"/etc/cron.d/x": "a"}}], "holdoutChecks[0].files"),
    ("holdoutChecks", [{**_CHECK, "files": {"a.txt": "x" * 600_000, "b.txt": "y" * 600_000}}], "holdoutChecks[0].files"),
    ("holdoutChecks", [{**_CHECK, "files": {"a.txt": "x" * ((1 << 20) + 1)}}], "holdoutChecks[0].files"),
    ("holdoutChecks", [{**_CHECK, "timeoutMs": 0}], "holdoutChecks[0].timeoutMs"),
    ("holdoutChecks", [_CHECK, dict(_CHECK)], "holdoutChecks[1].name"),
    ("holdoutChecks", [{**_CHECK, "name": f"h{i}"} for i in range(21)], "holdoutChecks"),
]


@daemon
@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["run_task", "verify_task"])
async def test_bad_integrity_arguments_name_the_field(ts_home: Path, calc_repo: Path, tool: str) -> None:
    before = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    base = {"projectPath": str(calc_repo), **({"task": "Fix add", "agentId": "scripted"} if tool == "run_task" else {})}
    async with mcp_client(ts_home) as client:
        for field, value, named in BAD:
            r = await client.call_tool(tool, {**base, field: value})
            text = text_of(r)
            assert r.is_error and text.startswith("Error: [INVALID_ARGUMENT]"), (field, named, text[:300])
            assert named in text, (named, text[:300])
            assert len(text) < 4000
    after = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    assert after == before  # nothing written


@daemon
@pytest.mark.anyio
async def test_a_damaged_project_holdout_file_refuses_before_writing(ts_home: Path, calc_repo: Path) -> None:
    path = project_holdout_path(ts_home, str(calc_repo))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version": 1, "checks": [{"name": "x"}]}')
    before = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    try:
        async with mcp_client(ts_home) as client:
            for tool, args in (("run_task", {"projectPath": str(calc_repo), "task": "x", "agentId": "scripted"}),
                               ("verify_task", {"projectPath": str(calc_repo)})):
                r = await client.call_tool(tool, args)
                assert r.is_error and text_of(r).startswith("Error: [CONFIG_INVALID]"), text_of(r)
                assert str(path) in text_of(r) and "checks[0]" in text_of(r)
    finally:
        path.unlink()
    after = set((ts_home / "tasks").glob("*")) if (ts_home / "tasks").exists() else set()
    assert after == before


# --- the console subcommand ---------------------------------------------------------------------
def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CONSOLE, "holdout", *argv], env=server_env(home), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)


def test_holdout_cli_add_list_remove(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "proj"
    project.mkdir()
    local = tmp_path / "probe.py"
    local.write_text(f"# {FILE_MARK}\n")
    add = _cli(home, "add", "--project", str(project), "--name", NAME, "--area", AREA, "--timeout-ms", "30000",
               "--file", f"tests/probe.py={local}", "--", sys.executable, "-c", f"print('{CMD_MARK}')")
    assert add.returncode == 0, add.stderr
    assert json.loads(add.stdout)["added"] == NAME
    two = _cli(home, "add", "--project", str(project), "--name", "second", "--area", "parsing", "--", "make", "holdout")
    assert two.returncode == 0, two.stderr
    path = project_holdout_path(home, str(project))
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and [c["name"] for c in doc["checks"]] == [NAME, "second"]
    assert doc["checks"][0]["cmd"] == [sys.executable, "-c", f"print('{CMD_MARK}')"]
    assert doc["checks"][0]["files"] == {"tests/probe.py": f"# {FILE_MARK}\n"} and doc["checks"][0]["timeoutMs"] == 30000
    listed = _cli(home, "list", "--project", str(project))
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["checks"] == [{"name": NAME, "area": AREA}, {"name": "second", "area": "parsing"}]
    for secret in (CMD_MARK, FILE_MARK, "tests/probe.py", "make", sys.executable):
        assert secret not in listed.stdout + listed.stderr
    # the loader sees them for any task of the project (and a task's own first)
    own = HoldoutCheck(name="own", cmd="true", area="own area")
    save_task_holdout(tmp_path / "task", [own])
    assert [c.name for c in load_holdout(tmp_path / "task", home, str(project))] == ["own", NAME, "second"]
    removed = _cli(home, "remove", "--project", str(project), "--name", NAME)
    assert removed.returncode == 0, removed.stderr
    assert [c["name"] for c in json.loads(path.read_text())["checks"]] == ["second"]
    assert _cli(home, "remove", "--project", str(project), "--name", "second").returncode == 0
    assert not path.exists()
    assert json.loads(_cli(home, "list", "--project", str(project)).stdout)["checks"] == []


@pytest.mark.parametrize("argv", [
    ["--name", "x", "--area", "a", "--file", "../escape.py=LOCAL", "--", "true"],
    ["--name", "x", "--area", "a", "--file", "/abs.py=LOCAL", "--", "true"],
    ["--name", "x", "--area", "a", "--"],
    ["--name", "x", "--area", "a"],
    ["--name", "x", "--", "true"],
    ["--name", "x", "--area", "a", "--timeout-ms", "0", "--", "true"],
    ["--name", "x", "--area", "a", "--timeout-ms", "soon", "--", "true"],
    ["--name", "x", "--area", "a\nb", "--", "true"],
    ["--name", "kept", "--area", "a", "--", "true"],  # a duplicate name
    ["--name", "x", "--area", "a", "--file", "missing.py=/nonexistent/file", "--", "true"],
    ["--name", "x", "--area", "a", "--file", "endless.py=/dev/zero", "--", "true"],  # read bounded, refused
])
def test_holdout_cli_bad_input_exits_2_and_writes_nothing(tmp_path: Path, argv: list[str]) -> None:
    home = tmp_path / "home"
    project = tmp_path / "proj"
    project.mkdir()
    local = tmp_path / "local.py"
    local.write_text("x = 1\n")
    save_project_holdout(home, str(project), [HoldoutCheck(name="kept", cmd=["true"], area="kept area")])
    path = project_holdout_path(home, str(project))
    before = path.read_bytes()
    out = _cli(home, "add", "--project", str(project), *[a.replace("LOCAL", str(local)) for a in argv])
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.startswith("Error: [INVALID_ARGUMENT]") and out.stdout == ""
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith(".")) == [path.name]


def test_holdout_cli_refuses_a_system_project_and_a_damaged_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _cli(home, "add", "--project", "/etc", "--name", "x", "--area", "a", "--", "true")
    assert out.returncode == 2 and out.stderr.startswith("Error: [PATH_IS_SYSTEM]")
    assert not (home / "holdout").exists() or not any((home / "holdout").glob("*.json"))
    project = tmp_path / "proj"
    project.mkdir()
    path = project_holdout_path(home, str(project))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    out = _cli(home, "list", "--project", str(project))
    assert out.returncode == 1 and out.stderr.startswith("Error: [CONFIG_INVALID]") and str(path) in out.stderr
    out = _cli(home, "add", "--project", str(project), "--name", "x", "--area", "a", "--", "true")
    assert out.returncode == 1 and path.read_text() == "{not json"


# --- the loader -------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["[]", '{"version": 2, "checks": []}', '{"version": 1, "checks": {}}',
                                     '{"version": 1, "checks": [{"name": "x", "cmd": "true", "area": "a", "z": 1}]}',
                                     "{broken"])
def test_a_damaged_holdout_file_is_config_invalid_naming_it(tmp_path: Path, content: str) -> None:
    task_dir = tmp_path / "tasks" / "tsk_20260101000000_aaaaaa"
    path = task_holdout_path(task_dir)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(TianshuError) as info:
        load_holdout(task_dir, tmp_path / "home", str(tmp_path))
    assert info.value.code == ErrorCode.CONFIG_INVALID and str(path) in info.value.message


# --- into VerifyRequest, and back out to the meta --------------------------------------------------
def test_verify_round_task_passes_targets_and_holdout_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.core.taskstore import TaskStore
    from tianshu_mcp.tasks import verify as tv

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TIANSHU_MCP_HOME", str(home))
    project = tmp_path / "proj"
    project.mkdir()
    st = TaskStore(home)
    task_id, record_id = "tsk_20260101000000_abcdef", "vfy_20260101000000_abcdef"
    st.create(task_id, {"projectPath": str(project), "task": "x", "targetTests": ["stored::t"]})
    st.create(record_id, {"projectPath": str(project), "kind": "verify"})
    task_check = HoldoutCheck(name="task", cmd=["true"], area="t")
    call_check = HoldoutCheck(name="call", cmd=["true"], area="c")
    project_check = HoldoutCheck(name="project", cmd=["true"], area="p")
    save_task_holdout(st.dir(task_id), [task_check])
    save_task_holdout(st.dir(record_id), [call_check, task_check])
    save_project_holdout(home, str(project), [project_check])
    seen: list[Any] = []
    integrity = {"policy": "protect", "unsupportedClaims": [{"claim": "all tests pass", "why": "2 failed"}], "x": 1}

    def fake_verify_round(request: Any) -> Any:
        seen.append(request)
        report = {"round": request.round, "passed": True, "integrity": integrity, "message": "ok"}
        return SimpleNamespace(report=report, md_path=tmp_path / "r.md", json_path=tmp_path / "r.json",
                               round=request.round, passed=True, failed_checks=[], blocking_issues=[])

    monkeypatch.setattr(tv, "verify_round", fake_verify_round)
    monkeypatch.setattr(tv, "publish_report_artifacts", lambda *a, **k: None)
    monkeypatch.setattr(tv, "_log_checks", lambda report: None)
    baseline = {"isRepo": False}
    verdict = tv.verify_round_task.fn(task_id, 0, baseline)
    assert list(seen[-1].target_tests) == ["stored::t"]
    assert [c.name for c in seen[-1].holdout_checks] == ["task", "project"]
    assert verdict.integrity.model_dump() == {"testIntegrity": "protect",
                                              "unsupportedClaims": [{"claim": "all tests pass", "why": "2 failed"}]}
    tv.verify_round_task.fn(task_id, 1, baseline, target_tests=["own::t"], holdout_dir=str(st.dir(record_id)))
    assert list(seen[-1].target_tests) == ["own::t"]
    assert [c.name for c in seen[-1].holdout_checks] == ["task", "project", "call"]
    integrity.clear()
    verdict = tv.verify_round_task.fn(record_id, 0, baseline, target_tests=[])
    assert list(seen[-1].target_tests) == [] and [c.name for c in seen[-1].holdout_checks] == ["call", "task", "project"]
    assert verdict.integrity.model_dump() == {"testIntegrity": None, "unsupportedClaims": None}


def test_integrity_fields_reach_the_meta_and_its_strict_schema() -> None:
    from jsonschema import Draft202012Validator
    from tianshu_mcp.mcp_server.outputs import output_schema
    from tianshu_mcp.tasks.verify import integrity_fields

    assert integrity_fields({}).model_dump() == {"testIntegrity": None, "unsupportedClaims": None}
    assert integrity_fields({"integrity": "junk"}).model_dump() == {"testIntegrity": None, "unsupportedClaims": None}
    fields = integrity_fields({"integrity": {"policy": "allow-test-edits", "unsupportedClaims": [
        {"claim": "fixed the bug", "why": "test_add still fails"}, "junk"]}}).model_dump()
    assert fields == {"testIntegrity": "allow-test-edits",
                      "unsupportedClaims": [{"claim": "fixed the bug", "why": "test_add still fails"}]}
    task = {"taskId": "tsk_20260101000000_abcdef", "projectPath": "/p", "createdAt": "x", "targetTests": ["t"],
            "holdoutCount": 2, **fields}
    meta = meta_from_task(task, "failed")
    assert meta["testIntegrity"] == "allow-test-edits" and meta["unsupportedClaims"][0]["why"] == "test_add still fails"
    assert meta["targetTests"] == ["t"] and meta["holdoutCount"] == 2
    for tool in ("query_task", "wait_task", "run_task", "verify_task", "manage_task"):
        errors = list(Draft202012Validator(output_schema(tool, strict=True)).iter_errors(meta))
        assert not errors, (tool, errors[:2])
    rows = {"ok": True, "tasks": [meta]}
    assert not list(Draft202012Validator(output_schema("query_info", strict=True)).iter_errors(rows))
    bare = meta_from_task({k: v for k, v in task.items() if k not in fields}, "failed")
    assert "testIntegrity" not in bare and "unsupportedClaims" not in bare


def test_preflight_refuses_a_damaged_holdout_file_before_the_agent(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.tasks.verify import preflight_acceptance

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TIANSHU_MCP_HOME", str(home))
    project = tmp_path / "proj"
    project.mkdir()
    task_dir = tmp_path / "task"
    save_task_holdout(task_dir, [HoldoutCheck(name="ok", cmd=["true"], area="a")])
    assert preflight_acceptance(str(project), None, task_dir, holdout_project=str(project)) is None
    task_holdout_path(task_dir).write_text('{"version": 1, "checks": "nope"}')
    problem = preflight_acceptance(str(project), None, task_dir, holdout_project=str(project))
    assert problem is not None and problem.startswith("[CONFIG_INVALID]") and str(task_holdout_path(task_dir)) in problem
    assert preflight_acceptance(str(project), None, task_dir) is None  # without the project: the old check only
