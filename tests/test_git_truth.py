"""git that refuses is never read as "no repository" or "clean" (issue: never a false pass).

Real repositories in temp dirs and the real git binary; each case is an input observed on a
user's machine: a repository owned by another user, an LFS filter whose program is missing, git
location variables in the server's environment, a corrupt index, a leftover ``index.lock``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.acceptance.engine import verify_round
from tianshu_mcp.acceptance.git import GitFailed, analyze_changes, capture_baseline, is_git_repo
from tianshu_mcp.core.procs import run_process

from conftest import meta_of, mcp_client
from test_acceptance_engine import git, make_pytest_repo, request

pytestmark = [pytest.mark.anyio]
GIT_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


def _pytest_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def owned_by_someone_else(repo: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a repository's owner needs root")
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)


def test_dubious_ownership_is_a_git_failure_not_a_non_repo(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    owned_by_someone_else(repo)
    with pytest.raises(GitFailed) as info:
        is_git_repo(repo)
    assert "dubious ownership" in info.value.message and "safe.directory" in info.value.message  # git's hint
    with pytest.raises(GitFailed):
        capture_baseline(repo)


def test_dubious_ownership_blocks_the_round_instead_of_passing_a_noop(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _pytest_on_path(monkeypatch)
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    owned_by_someone_else(repo)
    out = verify_round(request(tmp_path, repo))  # a no-op agent: nothing changed
    assert not out.passed
    assert [b["code"] for b in out.blocking_issues] == ["GIT_FAILED"]
    assert "dubious ownership" in out.blocking_issues[0]["message"]
    assert "no-changes" not in json.dumps(out.report["checks"]) and "zero file changes" not in json.dumps(out.report)


def _lfs_repo(tmp_path: Path) -> Path:
    """A repository whose *.bin files go through a required `lfs` filter whose program is gone."""
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / "data.bin").write_bytes(b"v1\n")
    git(repo, "add", "data.bin")
    git(repo, "commit", "-qm", "data")
    (repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "lfs attributes")
    return repo


def _lfs_gone(repo: Path) -> None:
    """git-lfs is configured as a required filter but its program is not on PATH."""
    git(repo, "config", "filter.lfs.clean", "git-lfs-is-not-installed clean -- %f")
    git(repo, "config", "filter.lfs.smudge", "git-lfs-is-not-installed smudge -- %f")
    git(repo, "config", "filter.lfs.required", "true")


def test_missing_lfs_filter_is_never_a_clean_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pytest_on_path(monkeypatch)
    repo = _lfs_repo(tmp_path)
    baseline = capture_baseline(repo)
    _lfs_gone(repo)  # e.g. the agent's environment or a PATH change
    (repo / "data.bin").write_bytes(b"v2, changed by the agent\n")
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    with pytest.raises(GitFailed) as info:
        analyze_changes(baseline, repo)
    assert "git-lfs-is-not-installed" in info.value.message
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert not out.passed and "GIT_FAILED" in [b["code"] for b in out.blocking_issues]
    (repo / "data.bin").write_bytes(b"v3\n")  # same size as the committed "v1\n": only the filter can tell
    with pytest.raises(GitFailed) as info:
        capture_baseline(repo)  # the next task's baseline: refused, not "working tree clean"
    assert "clean filter 'lfs' failed" in info.value.message


def test_corrupt_index_is_a_git_failure(tmp_path: Path) -> None:
    repo = make_pytest_repo(tmp_path / "repo")
    (repo / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x02garbage" * 4)
    with pytest.raises(GitFailed) as info:
        capture_baseline(repo)
    assert "index" in info.value.message


def test_leftover_index_lock_does_not_hide_changes(tmp_path: Path) -> None:
    """Our git calls never take the index lock (GIT_OPTIONAL_LOCKS=0, read-only): a lock left by a
    crashed git changes nothing in the verdict."""
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / ".git" / "index.lock").write_text("")
    baseline = capture_baseline(repo)
    assert baseline.is_repo and not baseline.dirty
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b  # edited\n")
    analysis = analyze_changes(baseline, repo)
    assert analysis.changed_files == ["calc.py"]
    assert (repo / ".git" / "index.lock").exists()  # and we never removed it


@pytest.mark.parametrize("var", ["GIT_DIR", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"])
def test_git_location_variables_of_the_server_do_not_reach_our_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     var: str) -> None:
    decoy = make_pytest_repo(tmp_path / "decoy")
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    head = git(repo, "rev-parse", "HEAD").strip()
    monkeypatch.setenv(var, str(decoy / ".git" / ("index" if var == "GIT_INDEX_FILE" else "")) if var != "GIT_WORK_TREE"
                       else str(decoy))
    baseline = capture_baseline(repo)
    assert baseline.is_repo and baseline.head == head
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b  # edited\n")
    assert analyze_changes(baseline, repo).changed_files == ["calc.py"]


def test_an_agents_commit_lands_in_its_project_not_in_the_decoy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started from a git hook or wrapper has GIT_DIR/GIT_INDEX_FILE/… set: the agent
    (started like every agent, through core.procs) must not inherit them."""
    decoy = make_pytest_repo(tmp_path / "decoy")
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    decoy_head = git(decoy, "rev-parse", "HEAD")
    for var in GIT_VARS:
        monkeypatch.setenv(var, str(decoy / ".git") if var != "GIT_INDEX_FILE" else str(decoy / ".git" / "index"))
    agent = ("import subprocess\n"
             "open('calc.py', 'a').write('# agent was here\\n')\n"
             "subprocess.run(['git', 'add', '-A'], check=True)\n"
             "subprocess.run(['git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-qm', 'agent'], check=True)\n")
    result = run_process([sys.executable, "-c", agent], cwd=repo, log_path=tmp_path / "agent.log", timeout_ms=60_000)
    assert result.exit_code == 0, (tmp_path / "agent.log").read_text()
    for var in GIT_VARS:
        monkeypatch.delenv(var)
    assert git(decoy, "rev-parse", "HEAD") == decoy_head and not git(decoy, "status", "--porcelain")
    assert git(repo, "log", "-1", "--format=%s").strip() == "agent"


async def test_run_task_on_a_repository_git_refuses_needs_attention_before_the_agent(
        ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    owned_by_someone_else(repo)
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": "scripted-noop"}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    assert done["status"] == "needs_attention", done
    assert done.get("errorType") == "git_failed"
    assert "dubious ownership" in done.get("message", "") + json.dumps(done)
    assert not (home / "tasks" / sub["taskId"] / "agent-0.log").exists()  # the agent never started
    shutil.rmtree(repo, ignore_errors=True)


@pytest.mark.parametrize("damage", ["garbage-head", "gitdir-nowhere", "inside-dot-git"])
def test_a_broken_or_misaimed_repository_is_not_a_plain_directory(tmp_path: Path, damage: str) -> None:
    """Observed false passes: a garbage .git/HEAD, a `.git` file pointing nowhere and a projectPath
    inside .git were all read as "not a repository", skipping every git gate."""
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    target = repo
    if damage == "garbage-head":
        (repo / ".git" / "HEAD").write_text("garbage\n")
    elif damage == "gitdir-nowhere":
        shutil.rmtree(repo / ".git")
        (repo / ".git").write_text("gitdir: /nonexistent/x\n")
    else:
        target = repo / ".git"
    with pytest.raises(GitFailed) as info:
        capture_baseline(target)
    assert ".git" in info.value.message
    plain = tmp_path / "plain"
    plain.mkdir()
    assert capture_baseline(plain).is_repo is False  # a directory with no .git stays a non-repo


async def test_git_failing_only_during_verification_ends_git_failed(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    """Breaker finding: the baseline was fine, the agent broke the index; the task said
    ``verify_failed`` as if the acceptance configuration were at fault."""
    from conftest import add_scripted_profile, run_to_stop
    from fixture_project import make_calc_repo

    home = ts_daemon["home"]
    add_scripted_profile(home, "git-breaker", "break-git")
    repo = make_calc_repo(tmp_path / "calc")
    sub, done = await run_to_stop(home, {"projectPath": str(repo), "task": "Fix add", "agentId": "git-breaker",
                                         "autoFixRounds": 2})
    task = json.loads((home / "tasks" / sub["taskId"] / "task.json").read_text())
    assert done["status"] == "needs_attention" and task["errorType"] == "git_failed", task
    assert task["roundsUsed"] == 1 and "[GIT_FAILED]" in task["lastMessage"] and "exit 128" in task["lastMessage"]


@pytest.mark.parametrize("how", ["count", "parameters"])
def test_git_config_injected_through_the_environment_reaches_no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    how: str) -> None:
    """Breaker finding: ``GIT_CONFIG_COUNT``/``KEY``/``VALUE`` or ``GIT_CONFIG_PARAMETERS`` (set by
    ``git -c`` for what it runs) carried a ``core.worktree`` of another repository to our git and
    to the agent's."""
    from tianshu_mcp.core.childenv import scrub

    decoy = make_pytest_repo(tmp_path / "decoy")
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    if how == "count":
        monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
        monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.worktree")
        monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(decoy))
    else:
        monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.worktree'='{decoy}'")
    assert not any(k.startswith("GIT_CONFIG_") and k not in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                                                             "GIT_CONFIG_NOSYSTEM") for k in scrub())
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b  # edited\n")
    assert analyze_changes(baseline, repo).changed_files == ["calc.py"]
    agent = ("import subprocess\n"
             "subprocess.run(['git', 'add', '-A'], check=True)\n"
             "subprocess.run(['git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-qm', 'agent'], check=True)\n")
    result = run_process([sys.executable, "-c", agent], cwd=repo, log_path=tmp_path / "agent.log", timeout_ms=60_000)
    assert result.exit_code == 0, (tmp_path / "agent.log").read_text()
    for var in ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(var, raising=False)
    assert git(repo, "log", "-1", "--format=%s").strip() == "agent"
    assert "calc.py" in git(repo, "show", "--name-only", "--format=", "HEAD")
    assert not git(decoy, "status", "--porcelain")


def test_untracking_every_file_is_not_a_change(tmp_path: Path) -> None:
    """Breaker finding: an agent that ran `git rm -r --cached .` and changed no file passed."""
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    (repo / "link").symlink_to("calc.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a link")
    baseline = capture_baseline(repo)
    git(repo, "rm", "-r", "--cached", "-q", ".")
    analysis = analyze_changes(baseline, repo)
    assert not analysis.has_changes, analysis.to_json()
    assert any("removed from git's index but are unchanged" in n for n in analysis.notes)
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert "no-changes" in [c["name"] for c in out.report["checks"] if not c["passed"]]
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")  # a real edit on top still counts
    assert analyze_changes(baseline, repo).has_changes


def test_a_repository_whose_baseline_commit_is_gone_is_a_git_failure(tmp_path: Path) -> None:
    """Breaker finding: `rm -rf .git && git init` made every file new, and the task passed."""
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    baseline = capture_baseline(repo)
    shutil.rmtree(repo / ".git")
    git(repo, "init", "-q")
    with pytest.raises(GitFailed) as info:
        analyze_changes(baseline, repo)
    assert baseline.head is not None and baseline.head[:12] in info.value.message
    out = verify_round(request(tmp_path, repo, baseline=baseline))
    assert not out.passed and [i["code"] for i in out.report["blockingIssues"]] == ["GIT_FAILED"]


def test_git_replace_does_not_hide_a_change(tmp_path: Path) -> None:
    """Breaker finding: an agent replaced the baseline's blob of calc.py with its own (`git
    replace`), and the change vanished from the analysis and from baseline grading."""
    repo = make_pytest_repo(tmp_path / "repo", gitignore=True)
    baseline = capture_baseline(repo)
    original = git(repo, "rev-parse", "HEAD:calc.py").strip()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    new = git(repo, "hash-object", "-w", "calc.py").strip()
    git(repo, "replace", "-f", original, new)
    assert analyze_changes(baseline, repo).changed_files == ["calc.py"]


def test_the_work_tree_top_level_takes_one_git_call_and_answers_as_is_git_repo(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``work_tree_root`` (design note 85) asks git once where is_git_repo and --show-toplevel
    would both succeed, and every other case the way is_git_repo does: a non-repo is None, a
    directory inside ``.git``, a broken ``gitdir:`` file and a repository owned by someone else
    are git failures, never "no repository"."""
    from tianshu_mcp.core.git import run as git_run
    from tianshu_mcp.core.git.run import work_tree_root

    repo = make_pytest_repo(tmp_path / "repo")
    (repo / "pkg" / "sub").mkdir(parents=True)
    calls: list[list[str]] = []
    real = git_run.run_git

    def counted(args: list[str], *rest: Any, **kw: Any) -> Any:
        calls.append(list(args))
        return real(args, *rest, **kw)

    monkeypatch.setattr(git_run, "run_git", counted)
    top = os.path.realpath(repo)
    assert [os.path.realpath(work_tree_root(p)) for p in (repo, repo / "pkg" / "sub")] == [top, top]
    assert len(calls) == 2  # one each
    plain = tmp_path / "plain"
    plain.mkdir()
    assert work_tree_root(plain) is None and work_tree_root(tmp_path / "missing") is None
    with pytest.raises(GitFailed):
        work_tree_root(repo / ".git")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".git").write_text("gitdir: /nowhere/at/all\n")
    with pytest.raises(GitFailed):
        work_tree_root(broken)
    monkeypatch.setattr(git_run, "run_git", real)
    owned_by_someone_else(repo)
    with pytest.raises(GitFailed) as info:
        work_tree_root(repo)
    assert "dubious ownership" in info.value.message
