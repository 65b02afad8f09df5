"""Baseline-aware grading (acceptance.grading + the engine's opt-in ``baselineChecks``) on real git
repos in temp dirs with real pytest runs: regression / still_failing / new_failure / fixed, the
verdict policies, dirty-baseline reproduction, repository hygiene, worktree cleanup, caching."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.acceptance.config import AcceptanceConfigError, parse_layer, resolve_checks
from tianshu_mcp.acceptance.engine import VerifyRequest, verify_round
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.grading.grade import (
    CACHE_FILE,
    LOG_FILE,
    STATE_FILE,
    WORKTREE_PREFIX,
    capture_baseline_state,
    classify,
    is_targeted,
    log_sections,
    maybe_capture_baseline_state,
    parse_test_ids,
)
from tianshu_mcp.core.errors import ErrorCode

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
LEGACY = "tests/test_legacy.py::test_unrelated_legacy"
MUL = "tests/test_calc.py::test_mul"
ADD = "tests/test_calc.py::test_add"

CONFTEST = """import os

_mark = os.environ.get("TIANSHU_GRADING_MARK")
if _mark:
    with open(_mark, "a") as fh:
        fh.write(os.getcwd() + "\\n")
"""


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # our own status calls must not refresh the index
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env
    ).stdout


def make_repo(path: Path) -> Path:
    """test_add passes; test_mul fails (the task fixes it); test_unrelated_legacy fails, unrelated."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n")
    (path / "conftest.py").write_text(CONFTEST)
    (path / "tests").mkdir()
    (path / "tests" / "test_calc.py").write_text(
        "from calc import add, mul\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n"
    )
    (path / "tests" / "test_legacy.py").write_text("def test_unrelated_legacy():\n    assert 1 == 2, 'legacy'\n")
    (path / "old.txt").write_text("old\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


def fix_mul(repo: Path) -> None:
    text = (repo / "calc.py").read_text()
    (repo / "calc.py").write_text(text.replace("def mul(a, b):\n    return a + b", "def mul(a, b):\n    return a * b"))


def hygiene(repo: Path) -> dict[str, Any]:
    return {
        "stash": git(repo, "stash", "list"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "index": os.stat(repo / ".git" / "index").st_mtime_ns,
        "refs": git(repo, "for-each-ref"),
    }


def our_tmp_dirs() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(WORKTREE_PREFIX)}


def run_round(tmp_path: Path, repo: Path, baseline: Any, *, task: str = "tsk_20260101000000_aaaaaa", rnd: int = 0,
              text: str = "Fix mul in calc.py.", checks: list[dict[str, Any]] | None = None, **override: Any) -> Any:
    # verification integrity (docs/integrity.md) has tests of its own; these judge baseline grading alone
    ov: dict[str, Any] = {"baselineChecks": True, "testIntegrity": "off", "checks": checks or [{"name": "pytest", "cmd": PYTEST}]}
    ov.update(override)
    req = VerifyRequest(
        task_id=task,
        project_path=str(repo),
        task_dir=tmp_path / "home" / "tasks" / task,
        round=rnd,
        baseline=baseline,
        home=tmp_path / "home",
        acceptance_override=ov,
        task_text=text,
        verify_command_timeout_ms=60_000,
        verify_concurrency=1,
    )
    return verify_round(req)


def start(tmp_path: Path, repo: Path, task: str = "tsk_20260101000000_aaaaaa") -> Any:
    """What run_task does before the agent starts: baseline + (baselineChecks on) baseline state."""
    baseline = capture_baseline(repo)
    capture_baseline_state(repo, tmp_path / "home" / "tasks" / task)
    return baseline


def ids_by_class(report: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: t["classification"] for t in report["baselineGrading"]["tests"]}


# --- verdict policies ---------------------------------------------------------------------------


def test_default_policy_excuses_untargeted_still_failing_strict_does_not(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    before = hygiene(repo)
    tmp_before = our_tmp_dirs()
    b1 = start(tmp_path, repo, "tsk_20260101000000_aaaaaa")
    b2 = start(tmp_path, repo, "tsk_20260101000000_bbbbbb")
    fix_mul(repo)  # the agent's work
    after_work = hygiene(repo)

    out = run_round(tmp_path, repo, b1)
    r = out.report
    assert out.passed is True and out.failed_checks == [], r["message"]
    g = r["baselineGrading"]
    assert g["enabled"] is True and g["policy"] == "tolerate-untargeted"
    assert g["checks"] == [{"name": "pytest", "before": "failed", "after": "failed", "classification": "still_failing",
                            "counted": False, "note": "every failing test already failed at baseline"}]
    assert ids_by_class(r) == {LEGACY: "still_failing", MUL: "fixed"}
    assert r["message"] == f"Still failing before the task (not counted): pytest ({LEGACY})."
    pyt = r["checks"][1]
    assert pyt["passed"] is False and pyt["notCounted"] is True and pyt["baseline"] == "still_failing"
    assert not any("baseline grading" in n for n in r["analysis"]["notes"])  # no notes in a clean run
    assert "repairDirectives" not in r
    saved = json.loads(out.json_path.read_text())
    assert saved["baselineGrading"] == g

    strict = run_round(tmp_path, repo, b2, task="tsk_20260101000000_bbbbbb", baselinePolicy="strict")
    assert strict.passed is False and strict.failed_checks == ["pytest"]
    gs = strict.report["baselineGrading"]
    assert gs["policy"] == "strict" and gs["checks"][0]["classification"] == "still_failing"
    assert gs["checks"][0]["counted"] is True
    assert "failed checks: pytest" in strict.report["message"].lower()
    assert f"still failing before the task, counted: pytest ({LEGACY})" in strict.report["message"]

    # the user's repository, index, refs, stash list and worktree list are untouched
    assert hygiene(repo) == after_work
    assert {k: v for k, v in before.items() if k != "status"} == {k: v for k, v in after_work.items() if k != "status"}
    assert our_tmp_dirs() == tmp_before


def test_regression_fails_the_round(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    baseline = start(tmp_path, repo)
    fix_mul(repo)
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("return a + b", "return a - b"))
    out = run_round(tmp_path, repo, baseline)
    assert out.passed is False and out.failed_checks == ["pytest"]
    g = out.report["baselineGrading"]
    assert g["checks"][0]["classification"] == "still_failing" and g["checks"][0]["counted"] is True
    assert ids_by_class(out.report) == {ADD: "regression", LEGACY: "still_failing", MUL: "fixed"}
    assert f"regressions relative to the pre-work baseline: pytest ({ADD})" in out.report["message"]
    assert out.report["checks"][1].get("notCounted") is None


def test_new_failing_test_is_a_new_failure(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    baseline = start(tmp_path, repo)
    fix_mul(repo)
    (repo / "tests" / "test_new.py").write_text("def test_brand_new():\n    assert False\n")
    (repo / "tools").mkdir()
    (repo / "tools" / "check_new.py").write_text("raise SystemExit(1)\n")
    checks = [{"name": "pytest", "cmd": PYTEST}, {"name": "tool", "cmd": [sys.executable, "tools/check_new.py"]}]
    out = run_round(tmp_path, repo, baseline, checks=checks)
    assert out.passed is False and out.failed_checks == ["pytest", "tool"]
    byid = ids_by_class(out.report)
    assert byid["tests/test_new.py::test_brand_new"] == "new_failure" and byid[LEGACY] == "still_failing"
    rows = {c["name"]: c for c in out.report["baselineGrading"]["checks"]}
    assert rows["pytest"]["counted"] is True
    # check level (no test ids): the script was missing at baseline (exit 2), fails now with exit 1
    assert rows["tool"] == {"name": "tool", "before": "failed", "after": "failed", "classification": "still_failing",
                            "counted": True, "note": "exit code differs from the baseline run"}
    assert "new failures (not present at baseline): pytest (tests/test_new.py::test_brand_new)" in out.report["message"]


def test_task_naming_the_still_failing_test_counts_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    b1 = start(tmp_path, repo, "tsk_20260101000000_aaaaaa")
    b2 = start(tmp_path, repo, "tsk_20260101000000_bbbbbb")
    fix_mul(repo)
    text = "Fix mul in calc.py and make test_unrelated_legacy pass."
    out = run_round(tmp_path, repo, b1, text=text)
    assert out.passed is False and out.failed_checks == ["pytest"]
    row = out.report["baselineGrading"]["checks"][0]
    assert row["classification"] == "still_failing" and row["counted"] is True and row["note"] == "targeted by the task"
    assert [t["targeted"] for t in out.report["baselineGrading"]["tests"] if t["id"] == LEGACY] == [True]
    # regressions-only: still failing never counts, even when targeted
    lenient = run_round(tmp_path, repo, b2, task="tsk_20260101000000_bbbbbb", text=text, baselinePolicy="regressions-only")
    assert lenient.passed is True, lenient.report["message"]


# --- dirty baseline, hygiene ----------------------------------------------------------------------

SHOW = [sys.executable, "-c", (
    "import calc, pathlib; print('SEEN', calc.VERSION, pathlib.Path('notes.txt').read_text().strip(), "
    "'OLD', pathlib.Path('old.txt').exists())"
)]


def test_dirty_baseline_is_reproduced_in_the_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    # the user's uncommitted work before the task: a tracked edit, a deletion, an untracked file
    (repo / "calc.py").write_text((repo / "calc.py").read_text() + '\nVERSION = "dirty-baseline"\n')
    (repo / "old.txt").unlink()
    (repo / "notes.txt").write_text("pre-existing untracked\n")
    baseline_calc = (repo / "calc.py").read_text()
    before = hygiene(repo)
    baseline = start(tmp_path, repo)
    baseline_nostate = capture_baseline(repo)
    state = json.loads((tmp_path / "home" / "tasks" / "tsk_20260101000000_aaaaaa" / STATE_FILE).read_text())
    assert state["dirtyStashCommit"] and state["untrackedFiles"] == ["notes.txt"] and state["capped"] is False
    assert hygiene(repo) == before  # stash create ran on a copy of the index
    # the agent's work changes all three
    fix_mul(repo)
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("dirty-baseline", "agent"))
    (repo / "notes.txt").write_text("agent notes\n")
    (repo / "old.txt").write_text("back\n")
    after_work = hygiene(repo)

    checks = [{"name": "show", "cmd": SHOW}]
    out = run_round(tmp_path, repo, baseline, checks=checks)
    tdir = tmp_path / "home" / "tasks" / "tsk_20260101000000_aaaaaa"
    blog = (tdir / LOG_FILE).read_text()
    assert "SEEN dirty-baseline pre-existing untracked OLD False" in blog
    assert "SEEN agent agent notes OLD True" in (tdir / "verify-0.log").read_text()
    assert out.report["baselineGrading"]["checks"] == [
        {"name": "show", "before": "passed", "after": "passed", "classification": "passing"}]
    assert hygiene(repo) == after_work

    # without a stored state: the dirty files still identical to the baseline are copied from the
    # project, the others cannot be reproduced (and a note says so)
    (repo / "calc.py").write_text(baseline_calc)
    (repo / "old.txt").unlink()
    show2 = [sys.executable, "-c", (
        "import calc, pathlib; print('SEEN2', calc.VERSION, pathlib.Path('notes.txt').exists(), "
        "pathlib.Path('old.txt').exists())"
    )]
    out2 = run_round(tmp_path, repo, baseline_nostate, task="tsk_20260101000000_cccccc", checks=[{"name": "show", "cmd": show2}])
    blog2 = (tmp_path / "home" / "tasks" / "tsk_20260101000000_cccccc" / LOG_FILE).read_text()
    assert "SEEN2 dirty-baseline False False" in blog2
    notes = out2.report["baselineGrading"]["notes"]
    assert any("baseline-state.json is missing" in n for n in notes)
    assert any("1 pre-work dirty file(s) changed since the baseline" in n and "notes.txt" in n for n in notes)


def test_ignored_project_tools_are_available_to_the_baseline_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text(".venv/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore venv")
    tool = repo / ".venv" / "bin" / "mytool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho TOOL-RAN\n")
    tool.chmod(0o755)
    baseline = start(tmp_path, repo)
    fix_mul(repo)
    out = run_round(tmp_path, repo, baseline, checks=[{"name": "tool", "cmd": ["mytool"]}])
    assert out.passed is True, out.report["message"]
    assert out.report["baselineGrading"]["checks"][0]["before"] == "passed"
    assert "TOOL-RAN" in (tmp_path / "home" / "tasks" / "tsk_20260101000000_aaaaaa" / LOG_FILE).read_text()
    assert tool.is_file() and not (repo / ".venv" / ".venv").exists()


def test_worktree_removed_after_check_timeout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    baseline = start(tmp_path, repo)
    fix_mul(repo)
    after_work = hygiene(repo)
    tmp_before = our_tmp_dirs()
    slow = [{"name": "slow", "cmd": [sys.executable, "-c", "import time; time.sleep(30)"], "timeoutMs": 1500}]
    out = run_round(tmp_path, repo, baseline, checks=slow)
    assert out.passed is False
    row = out.report["baselineGrading"]["checks"][0]
    assert row == {"name": "slow", "before": "timeout", "after": "timeout", "classification": "new_failure",
                   "counted": True, "note": "the baseline run ended with timeout: not comparable"}
    assert any("timed out" in n for n in out.report["baselineGrading"]["notes"])
    assert hygiene(repo) == after_work
    assert our_tmp_dirs() == tmp_before


def test_baseline_runs_once_per_task_and_cache_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = tmp_path / "runs.txt"
    monkeypatch.setenv("TIANSHU_GRADING_MARK", str(mark))
    repo = make_repo(tmp_path / "repo")
    baseline = start(tmp_path, repo)
    (repo / "tests" / "test_new.py").write_text("def test_brand_new():\n    assert False\n")
    first = run_round(tmp_path, repo, baseline)
    assert first.passed is False and first.round == 0
    fix_mul(repo)
    (repo / "tests" / "test_new.py").unlink()
    second = run_round(tmp_path, repo, baseline)
    assert second.round == 1 and second.passed is True, second.report["message"]
    # a third round with an extra check: only the new check runs on the baseline
    third = run_round(tmp_path, repo, baseline, checks=[{"name": "pytest", "cmd": PYTEST},
                                                        {"name": "echo", "cmd": [sys.executable, "-c", "print('hi')"]}])
    assert third.round == 2 and third.passed is True
    cwds = mark.read_text().splitlines()
    in_repo = [c for c in cwds if Path(c) == repo]
    elsewhere = [c for c in cwds if Path(c) != repo]
    assert len(in_repo) == 3 and len(elsewhere) == 1, cwds
    assert WORKTREE_PREFIX in elsewhere[0]
    cache = json.loads((tmp_path / "home" / "tasks" / "tsk_20260101000000_aaaaaa" / CACHE_FILE).read_text())
    assert sorted(json.loads(k)[0] for k in cache["checks"]) == ["echo", "pytest"]
    assert cache["head"] == baseline.head
    assert set(cache["checks"][json.dumps(["pytest", PYTEST])]["tests"]["failedIds"]) == {MUL, LEGACY}


def test_health_check_captures_state_now(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("untracked now\n")
    out = run_round(tmp_path, repo, None)  # verify_task(projectPath): the baseline is "now"
    tdir = tmp_path / "home" / "tasks" / "tsk_20260101000000_aaaaaa"
    assert json.loads((tdir / STATE_FILE).read_text())["untrackedFiles"] == ["notes.txt"]
    g = out.report["baselineGrading"]
    assert g["checks"][0]["classification"] == "still_failing" and g["checks"][0]["counted"] is False
    # nothing changed: the verdict is the zero-change gate's
    assert out.passed is False and out.failed_checks == ["no-changes"]


# --- skipped grading ------------------------------------------------------------------------------


def test_non_git_and_unborn_head_skip_with_a_note(tmp_path: Path) -> None:
    ok = [{"name": "ok", "cmd": [sys.executable, "-c", "raise SystemExit(1)"]}]
    plain = tmp_path / "plain"
    plain.mkdir()
    out = run_round(tmp_path, plain, None, checks=ok)
    g = out.report["baselineGrading"]
    assert g == {"enabled": True, "policy": "tolerate-untargeted", "checks": [], "tests": [],
                 "notes": ["baseline grading skipped: the project is not a git repository"]}
    assert out.passed is False and out.failed_checks == ["ok"]

    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q")
    (unborn / "a.txt").write_text("x\n")
    b = capture_baseline(unborn)
    state = capture_baseline_state(unborn, tmp_path / "home" / "tasks" / "tsk_20260101000000_dddddd")
    assert state["head"] is None and any("unborn" in n for n in state["notes"])
    out = run_round(tmp_path, unborn, b, task="tsk_20260101000000_dddddd", checks=ok)
    assert "unborn HEAD" in out.report["baselineGrading"]["notes"][0]
    assert "ok" in out.failed_checks
    assert not (tmp_path / "home" / "tasks" / "tsk_20260101000000_dddddd" / CACHE_FILE).exists()


def test_disabled_by_default_no_report_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    baseline = capture_baseline(repo)
    fix_mul(repo)
    out = run_round(tmp_path, repo, baseline, baselineChecks=False)
    assert "baselineGrading" not in out.report and out.passed is False
    assert not (tmp_path / "home" / "tasks" / "tsk_20260101000000_aaaaaa" / CACHE_FILE).exists()


# --- config ---------------------------------------------------------------------------------------


def test_config_fields_merge_and_validation(tmp_path: Path) -> None:
    layer = parse_layer({"baselineChecks": True, "baselinePolicy": "strict"}, "override", "acceptanceOverride")
    assert layer.to_json() == {"baselineChecks": True, "baselinePolicy": "strict"}
    for bad in ({"baselinePolicy": "lenient"}, {"baselineChecks": "yes"}, {"baselineChecks": None}):
        with pytest.raises(AcceptanceConfigError) as ei:
            parse_layer(bad, "override", "acceptanceOverride")
        assert ei.value.code is ErrorCode.CONFIG_INVALID
    home = tmp_path / "home"
    home.mkdir()
    (home / "acceptance.default.json").write_text(json.dumps({"baselineChecks": True, "baselinePolicy": "strict"}))
    proj = tmp_path / "proj"
    proj.mkdir()
    r = resolve_checks(proj, home, {"baselinePolicy": "regressions-only"})
    assert r.baseline_checks is True and r.baseline_policy == "regressions-only"
    r = resolve_checks(proj, home, {"baselineChecks": False})
    assert r.baseline_checks is False and r.baseline_policy == "strict"
    r = resolve_checks(proj, tmp_path / "nohome", None)
    assert r.baseline_checks is False and r.baseline_policy == "tolerate-untargeted"
    # maybe_capture_baseline_state follows the resolved switch
    assert maybe_capture_baseline_state(proj, tmp_path / "t1", tmp_path / "nohome", {"testIntegrity": "off"}) is None
    # verification integrity (on by default, docs/integrity.md) needs the state too
    assert maybe_capture_baseline_state(proj, tmp_path / "t0", tmp_path / "nohome") is not None
    st = maybe_capture_baseline_state(proj, tmp_path / "t2", home)
    assert st is not None and st["isRepo"] is False and (tmp_path / "t2" / STATE_FILE).exists()


# --- pure parts -----------------------------------------------------------------------------------


def test_classify_table() -> None:
    assert classify("passed", "passed") == "passing"
    assert classify(None, "passed") == "passing"
    assert classify("failed", "passed") == "fixed"
    assert classify("passed", "failed") == "regression"
    assert classify("failed", "failed") == "still_failing"
    assert classify(None, "failed") == "new_failure"
    assert classify("timeout", "failed") == "new_failure"
    assert classify("failed", "timeout") == "still_failing"


def test_parse_pytest_ids_minimal() -> None:
    out = (
        "..F.E\n=========================== short test summary info ============================\n"
        "PASSED tests/test_a.py::test_ok\nPASSED tests/test_a.py::test_p[1-2]\n"
        "FAILED tests/test_a.py::test_bad - assert 1 == 2\nERROR tests/test_b.py - ImportError: x\n"
        "SKIPPED [1] tests/test_a.py:9: nope\n"
        "==================== 1 failed, 2 passed, 1 error in 0.12s ====================\n"
    )
    ids = parse_test_ids(out, ["pytest", "-rA"])
    assert ids is not None and ids.runner == "pytest"
    assert ids.passed_ids == ["tests/test_a.py::test_ok", "tests/test_a.py::test_p[1-2]"]
    assert ids.failed_ids == ["tests/test_a.py::test_bad", "tests/test_b.py"] and ids.complete
    verbose = "tests/test_a.py::test_ok PASSED [ 50%]\ntests/test_a.py::test_bad FAILED [100%]\n"
    v = parse_test_ids(verbose, ["pytest", "-v"])
    assert v is not None and v.passed_ids == ["tests/test_a.py::test_ok"] and v.failed_ids == ["tests/test_a.py::test_bad"]
    partial = parse_test_ids("FAILED t.py::a - x\n===== 3 failed in 0.1s =====\n", ["pytest"])
    assert partial is not None and not partial.complete
    assert parse_test_ids("hello\n", ["pytest"]) is None and parse_test_ids("", ["x"]) is None


def test_is_targeted() -> None:
    assert is_targeted(LEGACY, "please fix test_unrelated_legacy")
    assert is_targeted(LEGACY, "see tests/test_legacy.py")
    assert is_targeted(LEGACY, "see test_legacy.py for details")
    assert is_targeted(LEGACY, f"run {LEGACY}")
    assert not is_targeted(LEGACY, "fix test_unrelated_legacy_two and mytest_unrelated_legacy")
    assert not is_targeted(LEGACY, "")
    assert is_targeted("tests/test_p.py::test_param[1-2]", "test_param is broken")


def test_log_sections() -> None:
    text = ("\n=== check: a — x y @ 2026-01-01T00:00:00.000Z ===\nout a\n\n[exit] code=0 duration=5ms\n"
            "\n=== check: b — z @ 2026-01-01T00:00:01.000Z ===\nout b\n\n[exit] code=1 duration=5ms\n")
    secs = log_sections(text)
    assert [h.split(" @ ")[0] for h, _ in secs] == ["=== check: a — x y", "=== check: b — z"]
    assert secs[0][1].strip() == "out a" and secs[1][1].strip() == "out b"


def _listed(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True,
                          text=True, check=True).stdout


def test_a_baseline_worktree_is_forgotten_even_when_every_git_is_killed(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Observed: a cancel during the baseline checks killed the flow run's children while it removed
    its baseline worktree; the user's repository kept an entry pointing at nothing
    (``/tmp/tianshu-baseline-…/wt … prunable``)."""
    from tianshu_mcp.acceptance.grading import baseline_runs
    from tianshu_mcp.core.git import registration

    sys.path.insert(0, str(Path(__file__).parent))
    from fixture_project import make_calc_repo

    repo = make_calc_repo(tmp_path / "calc")
    baseline = capture_baseline(str(repo))
    tdir = tmp_path / "task"
    tdir.mkdir()
    notes: list[str] = []
    with baseline_runs.baseline_worktree(repo, tdir, baseline, notes) as wt:
        assert wt is not None, notes
        made = wt.top
        assert str(made) in _listed(repo)
        real = baseline_runs.run_git  # from here on every git fails, as under a cancel's kills
        failing = lambda args, cwd, *a, **k: real(["--no-such-option", *args], cwd, *a, **k)  # noqa: E731
        monkeypatch.setattr(baseline_runs, "run_git", failing)
        monkeypatch.setattr(registration, "run_git", failing)
    monkeypatch.undo()
    listed = _listed(repo)
    assert not made.parent.exists() and listed.count("worktree ") == 1 and "prunable" not in listed, listed


def test_what_a_dead_process_left_of_its_baseline_worktree_is_swept(tmp_path: Path) -> None:
    """A killed flow run leaves a registered worktree, a registration whose directory is gone (an
    older version's half-done removal) or a directory whose registration is gone: the next
    baseline worktree of any repository removes all three."""
    from tianshu_mcp.acceptance.grading import baseline_runs

    sys.path.insert(0, str(Path(__file__).parent))
    from fixture_project import make_calc_repo

    repo = make_calc_repo(tmp_path / "calc")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = []
    for kind in ("registered", "dir-gone", "registration-gone"):
        parent = Path(tempfile.mkdtemp(prefix=baseline_runs.WORKTREE_PREFIX))
        (parent / "owner.json").write_text(json.dumps({"pid": dead.pid, "project": str(repo)}))
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(parent / "wt"), "HEAD"],
                       check=True)
        if kind == "dir-gone":
            subprocess.run(["rm", "-rf", str(parent / "wt")], check=True)
        elif kind == "registration-gone":
            admin = Path((parent / "wt" / ".git").read_text().split("gitdir:", 1)[1].strip())
            subprocess.run(["rm", "-rf", str(admin)], check=True)
        left.append(parent)
    assert "prunable" in _listed(repo)
    baseline_runs._sweep_stale(repo)
    listed = _listed(repo)
    assert listed.count("worktree ") == 1 and "prunable" not in listed, listed
    assert not [p for p in left if p.exists()]
