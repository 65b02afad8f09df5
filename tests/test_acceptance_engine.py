"""acceptance.engine end to end on real temp pytest repos, plus report and repair rendering
(docs/acceptance.md §3, §5, §6; docs/agents-tasks.md §3 repair plan / feedback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.engine import (
    VerificationActiveError,
    VerifyRequest,
    build_message,
    next_round,
    verify_round,
)
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.repair import (
    extract_repair_directives,
    feedback_text,
    render_repair_plan,
    write_repair_plan,
)
from tianshu_mcp.acceptance.report import REPORT_KEY_ORDER, render_markdown, summarize_report

BIN = str(Path(sys.executable).parent)


@pytest.fixture(autouse=True)
def _pytest_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # the derived default check runs plain `pytest`: make the venv's one visible to the checks
    monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ.get("PATH", ""))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL
    ).stdout


def make_pytest_repo(path: Path, gitignore: bool = False) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    (path / "pyproject.toml").write_text('[project]\nname = "demo"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (path / "tests").mkdir()
    (path / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (path / "conftest.py").write_text("")  # puts the repo root on sys.path for `from calc import add`
    if gitignore:
        (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


def request(tmp_path: Path, repo: Path, **kw: object) -> VerifyRequest:
    base = dict(
        task_id="tsk_20260101000000_abcdef",
        project_path=str(repo),
        task_dir=tmp_path / "home" / "tasks" / "tsk_20260101000000_abcdef",
        round=0,
        baseline=None,
        home=tmp_path / "home",
        verify_command_timeout_ms=60_000,
    )
    base.update(kw)
    return VerifyRequest(**base)  # type: ignore[arg-type]


def test_passing_round(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (repo / "tests" / "test_sub.py").write_text("from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed is True and out.round == 0 and out.failed_checks == [] and out.blocking_issues == []
    r = out.report
    assert [c["name"] for c in r["checks"]] == ["git-diff-check", "pytest"]
    assert r["verdict"] == "passed" and r["message"] == "Acceptance passed."
    assert r["analysis"]["changedFiles"] == ["calc.py"]
    assert r["analysis"]["untrackedFiles"] == ["tests/test_sub.py"]  # .pytest_cache/__pycache__ ignored
    assert "repairDirectives" not in r and "blockingIssues" not in r
    # files on disk, json key order (§1.5)
    data = json.loads(out.json_path.read_text())
    assert list(data) == [k for k in REPORT_KEY_ORDER if k in data]
    assert list(data)[:11] == list(REPORT_KEY_ORDER[:11])
    assert data["files"] == {"md": str(out.md_path), "json": str(out.json_path), "html": str(out.md_path.with_suffix(".html")),
                             "patch": str(out.md_path.with_suffix(".patch"))}  # the round changed files
    assert "+++ b/tests/test_sub.py" in out.md_path.with_suffix(".patch").read_text()  # untracked: a new file
    assert out.md_path.name == "report-0.md" and out.json_path.name == "report-0.json"
    md = out.md_path.read_text()
    assert md.startswith("# Acceptance report — round 0\n")
    assert "- Verdict: **[PASS]**" in md and "- [PASS] pytest — `pytest -q`" in md
    assert "### Changed files (1 tracked + 1 untracked)" in md and md.rstrip().endswith("Acceptance passed.")
    log = (out.md_path.parent / "verify-0.log").read_text()
    # verification integrity lists every test id (pytest -rA, docs/integrity.md): the log shows the command as
    # run
    assert "=== check: pytest — pytest -rA -q @ " in log and "2 passed" in log
    assert summarize_report(r).startswith("[PASS] Acceptance passed (round 0): 2/2 command checks passed.")


def test_failing_round_then_next_round_and_repair(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    baseline = capture_baseline(repo)
    (repo / "tests" / "test_feature.py").write_text(
        "from calc import add\n\n\ndef test_broken_feature_xyz():\n    assert add(2, 2) == 5, 'add is wrong'\n"
    )
    req = request(tmp_path, repo, baseline=baseline, task_text="Add a feature to calc")
    out = verify_round(req)
    assert out.passed is False and out.round == 0
    assert out.failed_checks == ["pytest"]
    pyt = out.report["checks"][1]
    assert pyt["exitCode"] == 1 and "test_broken_feature_xyz" in pyt["outputTail"]
    assert out.report["message"] == "Failed checks: pytest."
    rd = out.report["repairDirectives"]
    assert rd["sources"] == ["pytest"] and "fallbackReason" not in rd
    assert (rd["items"][0]["file"], rd["items"][0]["line"]) == ("tests/test_feature.py", 5)
    assert "test_broken_feature_xyz failed: AssertionError: add is wrong" in rd["items"][0]["issue"]
    md = out.md_path.read_text()
    assert "- [FAIL] pytest — `pytest -q`" in md and "  - Exit code: 1" in md
    assert "test_broken_feature_xyz" in md
    summary = summarize_report(out.report)
    assert summary.startswith("[FAIL] Acceptance failed (round 0): 1 check(s) failed.")

    # repair plan + feedback carry the failing test's name and output
    plan = render_repair_plan(out.report, req.task_id, req.task_text, out.md_path)
    assert plan.startswith("# Repair plan (rework round 1)")
    assert "## 2. Failing checks (must fix)" in plan and "### 2.1 pytest" in plan
    assert "test_broken_feature_xyz" in plan and "Add a feature to calc" in plan
    assert "## 3. Passed checks (do not break)" in plan and "git-diff-check" in plan
    assert "## 2.5 Structured repair directives (directly actionable)" in plan and "- `tests/test_feature.py:5` — " in plan
    plan_path = write_repair_plan(req.task_dir, out.report, req.task_id, req.task_text, out.md_path)
    assert plan_path.name == f"rework-{req.task_id}-r0.md" and "test_broken_feature_xyz" in plan_path.read_text()
    fb = feedback_text(out.report, plan_path)
    assert fb.startswith("Fix these first") and fb.splitlines()[1].startswith("- tests/test_feature.py:5 — ")
    assert "pytest" in fb and "test_broken_feature_xyz" in fb and "add is wrong" in fb
    assert str(plan_path) in fb and str(out.md_path) in fb

    # the agent fixes it; a second call never overwrites report-0
    (repo / "tests" / "test_feature.py").write_text(
        "from calc import add\n\n\ndef test_fixed_feature():\n    assert add(2, 2) == 4\n"
    )
    out2 = verify_round(req)  # req.round is still 0
    assert out2.round == 1 and out2.passed is True
    assert json.loads(out.json_path.read_text())["passed"] is False  # report-0 untouched
    assert (req.task_dir / "report-1.json").exists() and (req.task_dir / "verify-1.log").exists()
    assert next_round(req.task_dir, 0) == 2 and next_round(req.task_dir, 7) == 7


def test_zero_change_gate(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")  # no .gitignore: pytest's caches must not count
    out = verify_round(request(tmp_path, repo))  # baseline None → captured now
    assert out.passed is False and out.failed_checks == ["no-changes"]
    gate = out.report["checks"][-1]
    assert gate["name"] == "no-changes" and gate["exitCode"] is None and gate["durationMs"] == 0
    assert gate["cmd"] == "requireChanges gate"
    assert "no file changes detected relative to the pre-work baseline" in out.report["message"]
    assert out.report["analysis"]["untrackedFiles"] == []


def test_require_changes_false_only_notes(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"requireChanges": False}))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "cfg")
    out = verify_round(request(tmp_path, repo))
    assert out.passed is True
    assert any(n.startswith("requireChanges=false") for n in out.report["analysis"]["notes"])


def test_malformed_acceptance_json_is_a_blocking_issue(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    cfg = repo / ".tianshu-mcp" / "acceptance.json"
    cfg.parent.mkdir()
    cfg.write_text('{"checks": [ {"name": "x", "cmd": "true"} ')  # truncated JSON
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed is False
    assert len(out.blocking_issues) == 1
    issue = out.blocking_issues[0]
    assert issue["code"] == "CONFIG_INVALID" and str(cfg) in issue["message"] and "project" in issue["message"]
    assert [c["name"] for c in out.report["checks"]] == ["git-diff-check"]  # no command checks ran
    assert out.report["blockingIssues"] == out.blocking_issues
    assert out.report["message"].startswith("Acceptance blocked [CONFIG_INVALID]: ")
    assert out.json_path.exists() and out.md_path.exists()
    assert str(cfg) in out.md_path.read_text()
    assert not (out.md_path.parent / "verify-0.log").exists()


def test_schema_violation_in_global_layer(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    (home / "acceptance.default.json").write_text(json.dumps({"checks": [{"name": "x", "cmd": "x", "timeoutMs": -5}]}))
    out = verify_round(request(tmp_path, repo, home=home))
    assert out.blocking_issues[0]["code"] == "CONFIG_INVALID"
    assert "global" in out.blocking_issues[0]["message"] and "timeoutMs" in out.blocking_issues[0]["message"]
    assert not any(c["name"] == "no-changes" for c in out.report["checks"])  # requireChanges off


def test_override_extra_checks_and_optional(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    baseline = capture_baseline(repo)
    (repo / "notes.md").write_text("# notes\n")
    out = verify_round(
        request(
            tmp_path,
            repo,
            baseline=baseline,
            acceptance_override={"checks": [{"name": "lint", "cmd": [sys.executable, "-c", "raise SystemExit(1)"], "optional": True}]},
            extra_checks=[{"name": "smoke", "cmd": [sys.executable, "-c", "print('smoke ok')"]}],
            verify_concurrency=1,
        )
    )
    assert [c["name"] for c in out.report["checks"]] == ["git-diff-check", "lint", "smoke"]
    assert out.passed is True and out.failed_checks == []
    assert out.report["message"] == "Optional checks failed (do not affect the verdict): lint."


def test_zero_test_check_fails_round(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    baseline = capture_baseline(repo)
    (repo / "x.py").write_text("X = 1\n")
    # tests/ is not a package, so unittest discovery from the root finds nothing and exits 0 (3.11)
    out = verify_round(
        request(
            tmp_path,
            repo,
            baseline=baseline,
            extra_checks=[{"name": "unit", "cmd": [sys.executable, "-m", "unittest"]}],
            checks_mode="replace",
        )
    )
    unit = out.report["checks"][1]
    assert unit["name"] == "unit" and unit["exitCode"] == 0 and unit["passed"] is False
    assert out.passed is False and out.failed_checks == ["unit"]
    assert out.report["message"] == "Failed checks: unit; test commands ran zero tests: unit."


def test_non_repo_project(tmp_path: Path) -> None:
    proj = tmp_path / "plain"
    proj.mkdir()
    (proj / "pytest.ini").write_text("[pytest]\n")
    (proj / "test_one.py").write_text("def test_one():\n    assert True\n")
    out = verify_round(request(tmp_path, proj))
    git_check = out.report["checks"][0]
    assert git_check["skipped"] is True and git_check["name"] == "git-diff-check"
    assert out.report["checks"][1]["name"] == "pytest" and out.report["checks"][1]["passed"]
    assert out.passed is True
    notes = out.report["analysis"]["notes"]
    assert any("not a git repository" in n for n in notes)
    assert any("zero-change gate was skipped" in n for n in notes)


def test_cancellation_marks_round_incomplete(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    out = verify_round(request(tmp_path, repo, should_stop=lambda: True))
    assert out.passed is False
    assert out.report["checks"][1]["skipped"] is True
    assert out.report["message"].startswith("Task cancelled, verification incomplete")
    assert summarize_report(out.report).startswith("[FAIL] Acceptance incomplete (round 0): task cancelled")


def test_same_task_cannot_verify_twice_at_once(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    req = request(
        tmp_path,
        repo,
        acceptance_override={"checks": [{"name": "slow", "cmd": [sys.executable, "-c", "import time; time.sleep(1.0)"]}]},
    )
    t = threading.Thread(target=verify_round, args=(req,))
    t.start()
    time.sleep(0.3)
    with pytest.raises(VerificationActiveError):
        verify_round(req)
    t.join()
    assert (req.task_dir / "report-0.json").exists() and not (req.task_dir / "report-1.json").exists()


def test_signals_and_warnings_in_message_and_md(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    # TODO: overflow\n    return a + b\n")
    (repo / "poetry.lock").write_text("x\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed is True
    assert out.report["message"] == "Suspicious markers present, review the report; 1 warning(s)."
    md = out.md_path.read_text()
    assert "### Suspicious markers and warnings" in md and "- TODO/FIXME/HACK hits: 1" in md
    assert "- [WARN] Lockfile modified: poetry.lock" in md


# --- pure rendering --------------------------------------------------------------------------------


def _report(**kw: object) -> dict:
    r = {
        "round": 2,
        "taskId": "t",
        "projectPath": "/p",
        "startedAt": "s",
        "finishedAt": "f",
        "passed": False,
        "verdict": "failed",
        "checks": [
            {"name": "typecheck", "cmd": "npm run typecheck", "passed": False, "durationMs": 5, "exitCode": 2,
             "outputTail": "src/a.ts(3,5): error TS2322: Type 'x' is not assignable.\n/p/src/b.ts:7:1 - error TS2304: Cannot find name 'y'.\nsrc/a.ts(3,5): error TS2322: Type 'x' is not assignable.\n```\n",
             "timeout": False, "aborted": False},
            {"name": "build", "cmd": "npm run build", "passed": True, "durationMs": 9, "exitCode": 0, "outputTail": "",
             "timeout": False, "aborted": False},
        ],
        "analysis": {"changedFiles": ["package-lock.json"], "untrackedFiles": [], "diffstat": {"totalAdd": 1, "totalDel": 0, "perFile": []},
                     "signals": {"todo": 0, "consoleDebug": 2, "commentedBlock": 0, "secretLike": 0},
                     "bigFileChanges": ["gen.ts (+900 -0)"], "warnings": [], "notes": []},
        "files": {"md": "/h/report-2.md", "json": "/h/report-2.json"},
        "message": "Failed checks: typecheck.",
    }
    r.update(kw)
    return r


def test_extract_repair_directives() -> None:
    rd = extract_repair_directives(_report())
    assert rd["sources"] == ["tsc", "diffstat"] and "fallbackReason" not in rd
    items = rd["items"]
    assert items[0] == {"file": "src/a.ts", "line": 3, "issue": "TS2322: Type 'x' is not assignable.",
                        "action": "fix this type error (per the TS2322 diagnostic): make the value match the declared "
                                  "type (or correct the declaration)", "source": "tsc"}
    assert items[1]["file"] == "src/b.ts" and items[1]["line"] == 7  # absolute inside project → relative
    assert len([i for i in items if i["source"] == "tsc"]) == 2  # deduplicated
    assert [i.get("file") for i in items[2:]] == ["gen.ts (+900 -0)", "package-lock.json", None]
    assert "console.log/debugger (2 hit(s))" in items[-1]["issue"]


def test_markdown_fences_survive_backticks_and_directives() -> None:
    report = _report()
    report["repairDirectives"] = extract_repair_directives(report)
    md = render_markdown(report)
    assert "    ````" in md  # fence longer than the ``` inside the output
    assert "- `src/a.ts:3` — TS2322: Type 'x' is not assignable. → fix this type error" in md
    assert "- (no specific file) — added/changed lines contain console.log/debugger" in md


def test_build_message_order() -> None:
    checks = [
        {"name": "a", "passed": False},
        {"name": "t", "passed": False, "reason": "z"},
        {"name": "o", "passed": False, "optional": True},
        {"name": "no-changes", "passed": False},
    ]
    msg = build_message(checks, {"signals": {"todo": 1}, "warnings": ["w"]}, [{"code": "C", "message": "m"}], True, ["t"])
    assert msg == (
        "Acceptance blocked [C]: m; task cancelled, verification incomplete; failed checks: a, t, no-changes; "
        "test commands ran zero tests: t; no file changes detected relative to the pre-work baseline; "
        "optional checks failed (do not affect the verdict): o; suspicious markers present, review the report; 1 warning(s)."
    )
    assert build_message([], {}, [], False, []) == "Acceptance passed."


def test_build_message_baseline_grading_bits() -> None:
    checks = [
        {"name": "pytest", "passed": False, "notCounted": True},
        {"name": "lint", "passed": False},
    ]
    bits = ["regressions relative to the pre-work baseline: lint", "still failing before the task (not counted): pytest (t::a)"]
    assert build_message(checks, {}, [], False, [], bits) == (
        "Failed checks: lint; regressions relative to the pre-work baseline: lint; "
        "still failing before the task (not counted): pytest (t::a)."
    )
    only = [{"name": "pytest", "passed": False, "notCounted": True}]
    assert build_message(only, {}, [], False, [], bits[1:]) == "Still failing before the task (not counted): pytest (t::a)."


def test_baseline_checks_off_by_default(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b  # ok\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed is True and "baselineGrading" not in out.report
    # verification integrity (on by default, docs/integrity.md) runs the checks on the baseline too, but
    # grades nothing
    assert out.report["integrity"]["policy"] == "protect"
    assert not any(p.name.startswith("baseline-") and p.name != "baseline-checks.json" and p.name != "baseline-state.json"
                   and not p.name.startswith("baseline-checks") for p in out.md_path.parent.iterdir())
    assert all("baseline" not in c and "notCounted" not in c for c in out.report["checks"])


def test_tracked_files_changed_by_the_checks_are_not_task_output(tmp_path: Path) -> None:
    # pins a finding: a check that edits a tracked file (a formatter, a snapshot update) passed the zero-change gate
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    (repo / ".tianshu-mcp").mkdir()
    touch = [sys.executable, "-c", "open('calc.py', 'a').write('# touched by a check\\n')"]
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [{"name": "fmt", "cmd": touch}]}))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    baseline = capture_baseline(repo)
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert not out.passed and out.report["checks"][-1]["name"] == "no-changes"
    assert any("modified tracked file(s) during verification" in w and "calc.py" in w
               for w in out.report["analysis"]["warnings"])
    # the agent's own change to the same kind of file still counts
    git(repo, "checkout", "--", "calc.py")
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed, out.report["message"]
