"""What the acceptance checks write is never the task's output (docs/robustness.md §10, false passes found by
a breaker): a check that rewrites a file dirty or untracked before the round, or a file an earlier
round's checks wrote, let an agent that did nothing pass the zero-change gate."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.acceptance.check_outputs import ledger_path, load_ledger
from tianshu_mcp.acceptance.engine import verify_round
from tianshu_mcp.acceptance.git import capture_baseline

from conftest import add_scripted_profile, run_to_stop
from fixture_project import make_calc_repo
from test_acceptance_engine import git, make_pytest_repo, request


def _with_checks(repo: Path, *scripts: str, commit: bool = True) -> None:
    """Give ``repo`` an acceptance.json whose checks run each Python ``script`` in the project."""
    (repo / ".tianshu-mcp").mkdir(exist_ok=True)
    checks = [{"name": f"c{i}", "cmd": [sys.executable, "-c", s]} for i, s in enumerate(scripts)]
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": checks}))
    if commit:
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "checks")


def _failed(out: Any) -> list[str]:
    return [c["name"] for c in out.report["checks"] if not c["passed"] and not c.get("skipped")]


APPEND = "open({!r}, 'a').write('# written by a check\\n')"


def test_a_check_rewriting_a_file_dirty_at_the_baseline_is_not_task_output(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, APPEND.format("calc.py"))
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b  # the user's unfinished edit\n")
    baseline = capture_baseline(repo)
    out = verify_round(request(tmp_path, repo, baseline=baseline))  # the agent did nothing
    assert not out.passed and _failed(out) == ["no-changes"], out.report["message"]
    assert any("calc.py" in w and "not counted as task output" in w for w in out.report["analysis"]["warnings"])


def test_a_check_rewriting_an_untracked_file_present_at_the_baseline_is_not_task_output(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, APPEND.format("notes.txt"))
    (repo / "notes.txt").write_text("the user's scratch file\n")
    baseline = capture_baseline(repo)
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert not out.passed and _failed(out) == ["no-changes"], out.report["message"]
    assert out.report["analysis"]["untrackedFiles"] == []


def test_what_an_earlier_rounds_checks_wrote_stays_check_output(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, APPEND.format("calc.py"), "import os; os.makedirs('out', exist_ok=True); "
                 "open('out/report.txt', 'w').write('coverage 100%\\n')")
    baseline = capture_baseline(repo)
    req = request(tmp_path, repo, baseline=baseline)
    first = verify_round(req)
    assert _failed(first) == ["no-changes"]
    assert set(load_ledger(ledger_path(req.home, repo))) == {"calc.py", "out/report.txt"}
    second = verify_round(req)  # the rework round's agent did nothing either
    assert second.round == 1 and _failed(second) == ["no-changes"], second.report["message"]
    assert second.report["analysis"]["untrackedFiles"] == []
    # an agent that then really changes a file the checks wrote is credited with it
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    third = verify_round(req)
    assert third.passed, third.report["message"]
    assert "calc.py" not in load_ledger(ledger_path(req.home, repo))


def test_the_tasks_files_stay_its_output_when_the_checks_rewrite_them(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, APPEND.format("new_module.py"), APPEND.format("calc.py"))
    baseline = capture_baseline(repo)
    (repo / "new_module.py").write_text("VALUE = 1\n")  # the agent's new file, reformatted by a check
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed, out.report["message"]
    assert out.report["analysis"]["untrackedFiles"] == ["new_module.py"]
    assert any("new_module.py" in n and "still the task's output" in n for n in out.report["analysis"]["notes"])


def test_a_committed_change_rewritten_by_a_check_stays_the_tasks_output(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, APPEND.format("calc.py"))
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    git(repo, "commit", "-qam", "the agent's commit")  # clean against HEAD, changed against the baseline
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed, out.report["message"]


def test_a_check_deleting_a_tracked_file_is_not_task_output(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    (repo / "stale.snap").write_text("old snapshot\n")
    _with_checks(repo, "import os; os.path.exists('stale.snap') and os.remove('stale.snap')")
    baseline = capture_baseline(repo)
    req = request(tmp_path, repo, baseline=baseline)
    out = verify_round(req)
    assert _failed(out) == ["no-changes"], out.report["message"]
    assert load_ledger(ledger_path(req.home, repo)) == {"stale.snap": "deleted"}


@pytest.mark.anyio
async def test_a_noop_agent_never_passes_on_check_output_across_rework_rounds(ts_daemon: dict[str, Any],
                                                                             tmp_path: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "noop-agent", "noop")
    repo = make_calc_repo(tmp_path / "calc", checks=[
        {"name": "build", "cmd": [sys.executable, "-c", "open('build-info.txt', 'w').write('built\\n')"]}])
    sub, done = await run_to_stop(home, {"projectPath": str(repo), "task": "Fix add", "agentId": "noop-agent",
                                         "autoFixRounds": 1})
    assert done["status"] == "needs_attention", done
    for rnd in (0, 1):
        report = json.loads((home / "tasks" / sub["taskId"] / f"report-{rnd}.json").read_text())
        assert not report["passed"] and "no-changes" in [c["name"] for c in report["checks"] if not c["passed"]]
        assert report["analysis"]["untrackedFiles"] == []


def _pinned(tmp_path: Path, repo: Path, name: str, verify: list[dict[str, Any]] | None = None) -> Any:
    from tianshu_mcp.acceptance.pinning import PIN_FILE, load_pinned, pin_rules

    task_dir = tmp_path / "home" / "tasks" / f"tsk_20260101000000_{name}"
    assert pin_rules(repo, task_dir, tmp_path / "home", verify) and (task_dir / PIN_FILE).is_file()
    return task_dir, load_pinned(task_dir)


def test_an_agent_is_judged_by_the_rules_pinned_at_the_baseline(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    baseline = capture_baseline(repo)
    task_dir, pinned = _pinned(tmp_path, repo, "aaaaaa")
    (repo / ".tianshu-mcp" / "acceptance.json").write_text('{"checks": [], "requireChanges": false}')
    out = verify_round(request(tmp_path, repo, baseline=baseline, task_dir=task_dir, pinned_rules=pinned))
    assert not out.passed and _failed(out) == ["pytest"], out.report["message"]
    assert any("rules changed since the task started" in w and "acceptance.json" in w
               for w in out.report["analysis"]["warnings"])
    # a project that had no acceptance.json: one the agent adds does not judge it either
    other = make_pytest_repo(tmp_path / "other", gitignore=True)
    baseline = capture_baseline(other)
    other_dir, pinned = _pinned(tmp_path, other, "bbbbbb")
    _with_checks(other, "pass", commit=False)
    out = verify_round(request(tmp_path, other, baseline=baseline, task_dir=other_dir, pinned_rules=pinned))
    assert [c["name"] for c in out.report["checks"]][:2] == ["git-diff-check", "pytest"]  # the derived check


WRONG_FIX = "def add(a, b):\n    return abs(a) + abs(b)\n"


def test_the_global_layer_and_projects_json_are_pinned_too(tmp_path: Path) -> None:
    """Breaker findings: a no-op agent wrote {"requireChanges": false} into the global layer, a wrong
    fix emptied the global checks, and one replaced projects.json's verify entry: all passed."""
    home = tmp_path / "home"
    home.mkdir()
    repo = make_calc_repo(tmp_path / "calc", checks=[])
    (repo / ".tianshu-mcp" / "acceptance.json").unlink()
    git(repo, "commit", "-qam", "no project layer")
    pytest_check = {"name": "pytest", "cmd": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]}
    (home / "acceptance.default.json").write_text(json.dumps({"checks": [pytest_check]}))
    baseline = capture_baseline(repo)
    task_dir, pinned = _pinned(tmp_path, repo, "cccccc")
    (home / "acceptance.default.json").write_text('{"checks": [], "requireChanges": false}')  # the agent
    out = verify_round(request(tmp_path, repo, baseline=baseline, task_dir=task_dir, pinned_rules=pinned))
    assert _failed(out) == ["pytest", "no-changes"], out.report["message"]
    assert any("acceptance.default.json" in w for w in out.report["analysis"]["warnings"])
    # projects.json verify
    (home / "acceptance.default.json").unlink()
    task_dir, pinned = _pinned(tmp_path, repo, "dddddd", verify=[pytest_check])
    (repo / "calc.py").write_text(WRONG_FIX)
    out = verify_round(request(tmp_path, repo, baseline=baseline, task_dir=task_dir, pinned_rules=pinned,
                               project_verify=[{"name": "ok", "cmd": ["true"]}]))
    assert _failed(out) == ["pytest"], out.report["message"]
    assert any("projects.json" in w for w in out.report["analysis"]["warnings"])


def test_derived_checks_survive_the_agent_deleting_what_they_run(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    baseline = capture_baseline(repo)
    task_dir, pinned = _pinned(tmp_path, repo, "eeeeee")
    import shutil

    shutil.rmtree(repo / "tests")
    (repo / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (repo / "calc.py").write_text(WRONG_FIX)
    out = verify_round(request(tmp_path, repo, baseline=baseline, task_dir=task_dir, pinned_rules=pinned))
    assert not out.passed and "pytest" in _failed(out), out.report["message"]
    assert any("no longer derivable" in w and "pytest" in w for w in out.report["analysis"]["warnings"])
    # a toolchain the agent adds is still derived and run
    (repo / "package.json").write_text(json.dumps({"scripts": {"test": "node -e 0"}}))
    names = [c["name"] for c in verify_round(request(tmp_path, repo, baseline=baseline, task_dir=task_dir,
                                                      pinned_rules=pinned)).report["checks"]]
    assert "pytest" in names and "test" in names


@pytest.mark.anyio
async def test_an_agent_rewriting_acceptance_json_does_not_pass(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "bar-lowerer", "lower-the-bar")
    repo = make_calc_repo(tmp_path / "calc")
    sub, done = await run_to_stop(home, {"projectPath": str(repo), "task": "Fix add", "agentId": "bar-lowerer"})
    assert done["status"] != "succeeded", done
    report = json.loads((home / "tasks" / sub["taskId"] / "report-0.json").read_text())
    assert "pytest" in [c["name"] for c in report["checks"] if not c["passed"]]
    assert report["analysis"]["signals"]["acceptanceTampering"] >= 1
    assert any("rules changed since the task started" in w for w in report["analysis"]["warnings"])


# --- breaker findings: what the baseline could not fingerprint, and checks that commit or move submodules


@pytest.mark.parametrize("kind", ["big-untracked", "big-dirty", "dangling-link", "dir-link"])
def test_pre_existing_files_the_baseline_could_not_hash_are_not_the_agents_change(tmp_path: Path, kind: str) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, "pass")
    if kind == "big-dirty":
        (repo / "big.txt").write_bytes(b"a" * (5 << 20))
        git(repo, "add", "big.txt")
        git(repo, "commit", "-qm", "big")
        (repo / "big.txt").write_bytes(b"b" * (5 << 20))
    elif kind == "big-untracked":
        (repo / "big.bin").write_bytes(os.urandom(5 << 20))
    elif kind == "dangling-link":
        (repo / "dangling").symlink_to("nowhere/x")
    else:
        (tmp_path / "elsewhere").mkdir()
        (repo / "dirlink").symlink_to(tmp_path / "elsewhere")
    baseline = capture_baseline(repo)
    out = verify_round(request(tmp_path, repo, baseline=baseline))  # a no-op agent
    assert _failed(out) == ["no-changes"], out.report["analysis"]
    # and the agent's own change to such a file still counts
    if kind.startswith("big"):
        target = repo / ("big.txt" if kind == "big-dirty" else "big.bin")
        target.write_bytes(b"c" * (5 << 20 + 1))
    else:
        link = repo / ("dangling" if kind == "dangling-link" else "dirlink")
        link.unlink()
        link.symlink_to("somewhere/else")
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert out.passed, out.report["message"]


def _submodule_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with submodule ``sub`` pinned at its first commit; returns it and the
    submodule's second commit."""
    sub = make_pytest_repo(tmp_path / "sub-src")
    (sub / "more.txt").write_text("more\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "second")
    second = git(sub, "rev-parse", "HEAD").strip()
    first = git(sub, "rev-parse", "HEAD~1").strip()
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo / "sub", "checkout", "-q", first)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "submodule")
    return repo, second


def test_a_check_moving_a_submodule_is_not_task_output(tmp_path: Path) -> None:
    repo, second = _submodule_repo(tmp_path)
    _with_checks(repo, f"import subprocess; subprocess.run(['git', '-C', 'sub', 'checkout', '-q', '{second}'], check=True)")
    baseline = capture_baseline(repo)
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert _failed(out) == ["no-changes"], out.report["analysis"]


COMMIT = ("import subprocess, time\n"
          "open('gen.txt', 'w').write(str(time.time_ns()))\n"
          "subprocess.run(['git', 'add', '-A'], check=True)\n"
          "subprocess.run(['git', '-c', 'user.name=c', '-c', 'user.email=c@example.invalid', 'commit', '-qm', 'gen'],"
          " check=True)\n")


def test_a_check_that_commits_is_not_task_output_but_the_agents_work_it_commits_is(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, COMMIT)
    baseline = capture_baseline(repo)
    req = request(tmp_path, repo, baseline=baseline)
    out = verify_round(req)
    assert _failed(out) == ["no-changes"], out.report["analysis"]
    assert verify_round(req).report["checks"][-1]["name"] == "no-changes"  # still, a round later
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")  # the agent's work, committed by the check
    out = verify_round(req)
    assert out.passed, out.report["message"]
    assert "calc.py" in out.report["analysis"]["changedFiles"]


def test_a_verification_between_two_rounds_does_not_turn_check_output_into_the_agents(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    _with_checks(repo, "import time; open('gen.txt', 'w').write(str(time.time_ns()))")
    baseline = capture_baseline(repo)
    req = request(tmp_path, repo, baseline=baseline)
    assert _failed(verify_round(req)) == ["no-changes"]
    # a verify_task of the project as it is now (its own record, its own fresh baseline)
    health = verify_round(request(tmp_path, repo, baseline=None, task_id="vfy_20260101000000_abcdef",
                                  task_dir=tmp_path / "home" / "tasks" / "vfy_20260101000000_abcdef",
                                  agent_work=False))
    assert _failed(health) == ["no-changes"]
    assert _failed(verify_round(req)) == ["no-changes"]  # the rework round of the no-op agent


def test_a_pytest_the_agent_puts_in_a_new_venv_does_not_judge_it(tmp_path: Path) -> None:
    """Breaker finding: a fake .venv/bin/pytest printing "2 passed" replaced the derived check."""
    repo = make_pytest_repo(tmp_path / "r", gitignore=True)
    baseline = capture_baseline(repo)
    task_dir, pinned = _pinned(tmp_path, repo, "ffffff")
    (repo / "calc.py").write_text(WRONG_FIX + "\n\ndef broken():\n    return 1 +\n")
    fake = repo / ".venv" / "bin" / "pytest"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho '2 passed in 0.01s'\nexit 0\n")
    fake.chmod(0o755)
    out = verify_round(request(tmp_path, repo, baseline=baseline, task_dir=task_dir, pinned_rules=pinned))
    assert not out.passed and "pytest" in _failed(out), out.report["message"]
