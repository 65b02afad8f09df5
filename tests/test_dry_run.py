"""dryRun (docs/tools.md §3.7, docs/acceptance.md §7; docs/lifecycle.md §5): a static report of what
the task would do — no agent, no round, no change anywhere in the project (``.git`` included)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import meta_of, run_to_stop, task_runs, text_of, mcp_client
from fixture_project import make_calc_repo
from tianshu_mcp.acceptance.dry_run import PLAN_FILE, check_plan


def _plan(repo: Path, files: list[dict[str, Any]] | Any, summary: str = "fix add") -> None:
    (repo / PLAN_FILE).parent.mkdir(exist_ok=True)
    body = {"summary": summary, "files": files} if isinstance(files, list) else files
    (repo / PLAN_FILE).write_text(json.dumps(body))


def _codes(findings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((f["severity"], f["code"]) for f in findings)


def test_a_sound_plan_has_no_finding(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    _plan(repo, [{"path": "calc.py", "action": "modify", "reason": "the bug", "edits": [{"symbol": "def add", "line": 1}]},
                 {"path": "./docs/NOTES.md", "action": "create"}])
    plan, findings = check_plan(str(repo))
    assert findings == []
    assert plan is not None and [f["path"] for f in plan["files"]] == ["calc.py", "docs/NOTES.md"]


def test_no_plan_is_no_finding(tmp_path: Path) -> None:
    assert check_plan(str(make_calc_repo(tmp_path / "calc"))) == (None, [])


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", "sub/../../x", "link/escape.py"])
def test_a_path_outside_the_project_is_an_error(tmp_path: Path, path: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    (repo / "link").symlink_to(tmp_path)
    _plan(repo, [{"path": path, "action": "create"}])
    _, findings = check_plan(str(repo))
    assert _codes(findings) == [("error", "path_outside_project")]


@pytest.mark.parametrize("path", [".git/config", ".tianshu-mcp/acceptance.json", "./.git/hooks/pre-commit", ".GIT/x"])
def test_the_repository_and_the_acceptance_rules_are_forbidden(tmp_path: Path, path: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    _plan(repo, [{"path": path, "action": "modify"}])
    _, findings = check_plan(str(repo))
    assert _codes(findings) == [("error", "path_forbidden")]


def test_conflicting_actions_and_the_warnings(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    (repo / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    _plan(repo, [
        {"path": "calc.py", "action": "modify", "edits": [{"line": 999}, {"symbol": "def nowhere"}, {}]},
        {"path": "./calc.py", "action": "delete"},
        {"path": "calc.py", "action": "create"},
        {"path": "missing.py", "action": "modify"},
        {"path": "blob.bin", "action": "modify", "edits": [{"line": 1}]},
        {"path": "x.py"},
    ])
    _, findings = check_plan(str(repo))
    assert _codes(findings) == [
        ("error", "conflicting_actions"), ("error", "plan_invalid"),
        ("warning", "edit_line_out_of_range"), ("warning", "edit_location_missing"), ("warning", "edit_location_missing"),
        ("warning", "file_already_exists"), ("warning", "file_not_found"), ("warning", "file_unreadable"),
    ]
    conflict = next(f for f in findings if f["code"] == "conflicting_actions")
    assert conflict["path"] == "calc.py" and "create, delete, modify" in conflict["message"]


@pytest.mark.parametrize("body", ["not json", '{"files": "calc.py"}', "[1, 2]",
                                  '{"files": [{"path": "a\\u0000b", "action": "create"}]}',
                                  '{"files": [{"path": "", "action": "create"}]}'])
def test_an_unreadable_plan_is_one_error(tmp_path: Path, body: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    (repo / PLAN_FILE).write_text(body)
    _, findings = check_plan(str(repo))
    assert _codes(findings) == [("error", "plan_invalid")]


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (``.git`` included) → sha256 of its bytes, plus directory names."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = "link:" + os.readlink(p) if p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_a_dry_run_reports_what_would_run_and_changes_nothing(ts_home: Path, tmp_path: Path,
                                                                    prefect_api: Any) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    (repo / "scratch.txt").write_text("uncommitted\n")  # a dirty tree: a warning, not a blocker
    _plan(repo, [{"path": "calc.py", "action": "modify", "edits": [{"symbol": "def add"}]}])
    before = _tree(repo)
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": "Fix the bug in add()",
                                            "agentId": "scripted", "autoFixRounds": 2, "dryRun": True})
    assert meta["status"] == "succeeded", meta
    assert meta["dryRun"] is True and meta["roundsUsed"] == 0 and meta["dryRunPlanDoc"] == PLAN_FILE
    assert meta["message"].startswith("dry run 0 (dry-run-report-0): ready: 1 check(s) would run, 1 warning(s): worktree_dirty")
    assert _tree(repo) == before  # not one byte, .git included
    tdir = ts_home / "tasks" / sub["taskId"]
    assert not list(tdir.glob("agent-*.log")) and not list(tdir.glob("prompt-*.txt")) and not list(tdir.glob("report-*"))
    report = json.loads(Path(meta["dryRunReportFiles"]["json"]).read_text())
    assert report["kind"] == "dry-run" and report["verdict"] == "ready" and report["number"] == 0
    assert report["agent"]["ok"] and "<prompt: " in " ".join(report["agent"]["argv"]) and report["agent"]["cwd"] == str(repo)
    assert [c["name"] for c in report["acceptance"]["checks"]] == ["pytest"] and report["acceptance"]["checks"][0]["program"]
    assert report["git"]["isRepo"] is True and report["git"]["uncommitted"] == 2  # scratch.txt and the plan
    assert "## Checks that would run" in Path(meta["dryRunReportFiles"]["md"]).read_text()
    names = [tr["name"] for tr in task_runs(prefect_api, meta["flowRunId"])]
    assert names == ["dry-run"], names  # no baseline, no dispatch, no verification
    # a rework of a dry-run task is another dry run, numbered on
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "rework"})
        assert not r.is_error, text_of(r)
        again = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
        # breaker: the several-task form of wait_task pointed a dry run at query_info(type=report)
        r = await client.call_tool("wait_task", {"taskIds": [sub["taskId"]], "timeoutMs": 10000})
        assert "next: read the dry-run report" in text_of(r) and "dry-run-report-1.md" in text_of(r), text_of(r)
    assert again["status"] == "succeeded" and again["dryRunReportFiles"]["md"].endswith("dry-run-report-1.md"), again
    assert _tree(repo) == before


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_a_dry_run_that_finds_blockers_needs_attention(ts_home: Path, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc", checks=[{"name": "lint", "cmd": ["no-such-linter-here", "."]}])
    _plan(repo, [{"path": "../elsewhere.py", "action": "create"}])
    before = _tree(repo)
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted",
                                            "dryRun": True})
    assert meta["status"] == "needs_attention" and meta["errorType"] == "verify_failed", meta
    assert "[check_command_not_found]" in meta["message"] and "[path_outside_project]" in meta["message"]
    assert meta["roundsUsed"] == 0 and _tree(repo) == before
    assert not list((ts_home / "tasks" / sub["taskId"]).glob("agent-*.log"))


def test_a_plan_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    (tmp_path / "elsewhere.json").write_text(json.dumps({"files": [{"path": "calc.py", "action": "modify"}]}))
    (repo / PLAN_FILE).symlink_to(tmp_path / "elsewhere.json")
    plan, findings = check_plan(str(repo))
    assert _codes(findings) == [("error", "plan_invalid")] and "symbolic link" in findings[0]["message"]


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_a_dry_run_of_a_project_nothing_could_judge_is_blocked(ts_home: Path, tmp_path: Path) -> None:
    """Breaker: a directory outside git with no check read "ready" in the dry run, while the real
    run ends needs_attention [NOTHING_VERIFIED]: the dry run says what the run would meet."""
    project = tmp_path / "notgit"
    project.mkdir()
    (project / "notes.txt").write_text("x\n")
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(project), "task": "x", "agentId": "scripted",
                                            "dryRun": True})
    assert meta["status"] == "needs_attention" and "[nothing_verified]" in meta["message"], meta
    report = json.loads(Path(meta["dryRunReportFiles"]["json"]).read_text())
    assert report["verdict"] == "blocked" and report["git"]["isRepo"] is False and report["acceptance"]["checks"] == []
    # with a check, the same project is ready (the check alone judges the work)
    (project / ".tianshu-mcp").mkdir()
    (project / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [{"name": "ok", "cmd": ["true"]}]}))
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(project), "task": "x", "agentId": "scripted",
                                            "dryRun": True})
    assert meta["status"] == "succeeded" and "nothing_verified" not in meta["message"], meta
