"""Worktree isolation's git side on real repositories (docs/isolation.md §1; core/git/worktree.py).

No Prefect here: the flow-run side and the MCP tools are in test_worktree_e2e.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_project import RIGHT_FIX, git, make_calc_repo
from tianshu_mcp.core.errors import TianshuError
from tianshu_mcp.core.git import registration, worktree as wt
from tianshu_mcp.core.record import TaskRecord


def _meta(task_id: str, **fields: str) -> TaskRecord:
    """A task record as the sweep's ``describe`` gives it."""
    return TaskRecord(taskId=task_id, createdAt="2026-12-01T00:00:00Z", **fields)


def tree_hash(repo: Path, raw_index: bool = True) -> str:
    """The user's side of a repository: every file outside .git, the index (its bytes, or with
    ``raw_index`` False its entries: git rewrites the stat cache) and HEAD."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            p = Path(root, name)
            h.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes())
    h.update((repo / ".git" / "index").read_bytes() if raw_index else git(repo, "ls-files", "-s").encode())
    h.update(git(repo, "rev-parse", "HEAD").encode() + git(repo, "symbolic-ref", "HEAD").encode())
    return h.hexdigest()


def dirty_repo(tmp_path: Path) -> Path:
    repo = make_calc_repo(tmp_path / "calc")
    (repo / "notes.txt").write_text("the user's own notes\n")  # untracked
    (repo / "staged.txt").write_text("staged by the user\n")
    git(repo, "add", "staged.txt")  # in the index only
    return repo


def test_a_worktree_starts_at_head_without_the_users_changes_and_leaves_them_alone(tmp_path: Path) -> None:
    repo = dirty_repo(tmp_path)
    before = tree_hash(repo)
    home = tmp_path / "home"
    ws = wt.open_worktree(home, "tsk_20261201000000_aaaaaa", str(repo))
    assert ws.created and ws.branch == "tianshu/tsk_20261201000000_aaaaaa"
    assert ws.base_commit == git(repo, "rev-parse", "HEAD").strip()
    assert sorted(ws.dirty_not_carried) == ["notes.txt", "staged.txt"]
    top = Path(ws.top)
    assert top == home / "worktrees" / "tsk_20261201000000_aaaaaa" and ws.work_path == str(top)
    assert not (top / "notes.txt").exists() and not (top / "staged.txt").exists()
    (top / "calc.py").write_text(RIGHT_FIX)
    (top / "__pycache__").mkdir()
    (top / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0cache")
    out = wt.close_worktree(ws, tmp_path, ["calc.py"], "tianshu: fix add")
    assert not top.exists() and out.resultCommit and out.error is None
    assert git(repo, "show", f"{ws.branch}:calc.py") == RIGHT_FIX
    assert git(repo, "diff", "--name-only", ws.base_commit, ws.branch).split() == ["calc.py"]
    patch = Path(out.resultPatch).read_text()
    assert "+    return a + b" in patch and "pycache" not in patch and out.patchBytes == len(patch.encode())
    assert "tsk_20261201000000_aaaaaa" not in git(repo, "worktree", "list")
    assert tree_hash(repo) == before  # work tree, index and HEAD untouched
    # the patch applies to the user's tree by hand, too
    subprocess.run(["git", "-C", str(repo), "apply", "--check", out.resultPatch], check=True)


def test_a_monorepo_package_works_at_its_path_inside_the_worktree(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "mono" / "packages" / "calc")
    top = tmp_path / "mono"
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)  # keep the package's own repo out
    os.rename(repo / ".git", tmp_path / "pkg-git")  # make the monorepo the repository instead
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qm", "mono")
    ws = wt.open_worktree(tmp_path / "home", "tsk_20261201000000_bbbbbb", str(repo))
    assert ws.work_path == str(Path(ws.top) / "packages" / "calc") and Path(ws.work_path, "calc.py").exists()
    wt.remove_worktree(ws.project_top, ws.top)


def test_merge_brings_the_branch_in_and_a_conflict_leaves_the_project_as_it_was(tmp_path: Path) -> None:
    repo = dirty_repo(tmp_path)
    home = tmp_path / "home"
    ws = wt.open_worktree(home, "tsk_20261201000000_cccccc", str(repo))
    Path(ws.top, "calc.py").write_text(RIGHT_FIX)
    wt.close_worktree(ws, tmp_path, None, "tianshu: fix")
    before = tree_hash(repo, raw_index=False)
    with pytest.raises(TianshuError) as err:  # git merges only into an index that matches HEAD
        wt.merge_result(home, str(repo), "tsk_20261201000000_cccccc", "Merge it")
    assert err.value.code.value == "GIT_FAILED" and "staged.txt" in err.value.message
    assert tree_hash(repo, raw_index=False) == before
    git(repo, "commit", "-qm", "the user's staged file")
    merged = wt.merge_result(home, str(repo), "tsk_20261201000000_cccccc", "Merge it")
    assert merged.mergeCommit and not merged.alreadyMerged
    assert (repo / "calc.py").read_text() == RIGHT_FIX and (repo / "notes.txt").exists()
    assert git(repo, "show", "-s", "--format=%s", "HEAD").strip() == "Merge it"
    assert not git(repo, "branch", "--list", ws.branch).strip()  # merged, so deleted
    with pytest.raises(TianshuError) as err:
        wt.merge_result(home, str(repo), "tsk_20261201000000_cccccc", "again")
    assert err.value.code.value == "INVALID_STATE"
    # a second task whose change conflicts with what the user committed meanwhile
    ws2 = wt.open_worktree(home, "tsk_20261201000000_dddddd", str(repo))
    Path(ws2.top, "calc.py").write_text("def add(a, b):\n    return b + a\n")
    wt.close_worktree(ws2, tmp_path, None, "tianshu: other fix")
    (repo / "calc.py").write_text("def add(a, b):\n    return sum((a, b))\n")
    git(repo, "commit", "-qam", "the user's own fix")
    before = tree_hash(repo, raw_index=False)
    with pytest.raises(TianshuError) as err:
        wt.merge_result(home, str(repo), "tsk_20261201000000_dddddd", "Merge 2")
    assert err.value.code.value == "MERGE_CONFLICT" and "calc.py" in err.value.message
    assert tree_hash(repo, raw_index=False) == before and not (repo / ".git" / "MERGE_HEAD").exists()
    assert git(repo, "branch", "--list", ws2.branch).strip()  # kept for a merge by hand


def test_a_project_that_cannot_have_a_worktree_is_refused_with_a_code(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    for project, said in ((plain, "needs a git repository"), (empty, "has no commit yet")):
        with pytest.raises(TianshuError) as err:
            wt.open_worktree(tmp_path / "home", "tsk_20261201000000_eeeeee", str(project))
        assert err.value.code.value == "WORKTREE_UNAVAILABLE" and said in err.value.message
    assert not (tmp_path / "home" / "worktrees" / "tsk_20261201000000_eeeeee").exists()


def test_a_crash_leftover_is_replaced_and_a_rework_reopens_the_branch(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    home = tmp_path / "home"
    junk = wt.worktree_dir(home, "tsk_20261201000000_ffffff")
    junk.mkdir(parents=True)
    (junk / "half-written").write_text("x")  # a directory a crash left, not a worktree
    ws = wt.open_worktree(home, "tsk_20261201000000_ffffff", str(repo))
    assert ws.created and not (junk / "half-written").exists()
    Path(ws.top, "calc.py").write_text(RIGHT_FIX)
    wt.close_worktree(ws, tmp_path, None, "round 1")
    again = wt.open_worktree(home, "tsk_20261201000000_ffffff", str(repo), ws.base_commit)
    assert not again.created and again.base_commit == ws.base_commit
    assert Path(again.top, "calc.py").read_text() == RIGHT_FIX  # the earlier result is there
    same = wt.open_worktree(home, "tsk_20261201000000_ffffff", str(repo), ws.base_commit)  # resumed: the same
    assert same.top == again.top
    wt.remove_worktree(again.project_top, again.top)


HOLDER = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1]); lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_the_sweep_keeps_live_and_waiting_worktrees_and_commits_and_removes_the_rest(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    home = tmp_path / "home"
    ids = ["tsk_20261201000000_a00001", "tsk_20261201000000_a00002", "tsk_20261201000000_a00003"]
    for task_id in ids:
        ws = wt.open_worktree(home, task_id, str(repo))
        Path(ws.top, "calc.py").write_text(RIGHT_FIX)  # work a killed run left uncommitted
    (home / "tasks" / ids[2]).mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home / "worktrees" / f"{ids[0]}.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        metas = {ids[0]: _meta(ids[0], projectPath=str(repo)),
                 ids[1]: _meta(ids[1], projectPath=str(repo), pendingQuestion="which?"),
                 ids[2]: _meta(ids[2], projectPath=str(repo), worktreeBase=ws.base_commit)}
        closed: dict[str, wt.WorktreeClose] = {}
        removed = wt.sweep_worktrees(home, metas.get, lambda task_id, out: closed.update({task_id: out}))
        assert removed == [ids[2]] and list(closed) == [ids[2]]
        assert closed[ids[2]].resultCommit and "+    return a + b" in Path(closed[ids[2]].resultPatch).read_text()
        assert wt.worktree_dir(home, ids[0]).is_dir() and wt.worktree_dir(home, ids[1]).is_dir()
        assert not wt.worktree_dir(home, ids[2]).exists()
        assert git(repo, "show", f"tianshu/{ids[2]}:calc.py") == RIGHT_FIX  # nothing lost
        assert "interrupted" in git(repo, "log", "-1", "--format=%s", f"tianshu/{ids[2]}")
    finally:
        holder.kill()
        holder.wait()
    assert wt.sweep_worktrees(home, lambda _id: None) == [ids[0], ids[1]]  # the holder died; records gone
    assert git(repo, "worktree", "list").count("\n") == 1


# --- what a breaker round found ---------------------------------------------------------------
def test_a_merge_never_touches_the_users_own_unfinished_merge(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    home = tmp_path / "home"
    ws = wt.open_worktree(home, "tsk_20261201000000_b00001", str(repo))
    Path(ws.top, "calc.py").write_text(RIGHT_FIX)
    wt.close_worktree(ws, tmp_path, None, "fix")
    (repo / "notes.txt").write_text("main\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes on main")
    git(repo, "checkout", "-qb", "feature", "HEAD~1")
    (repo / "notes.txt").write_text("feature\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes on feature")
    git(repo, "checkout", "-q", "main")
    subprocess.run(["git", "-C", str(repo), "merge", "feature"], capture_output=True)  # stops on a conflict
    (repo / "notes.txt").write_text("my careful resolution\n")
    (repo / "wip.txt").write_text("wip\n")
    git(repo, "add", "wip.txt")
    with pytest.raises(TianshuError) as err:
        wt.merge_result(home, str(repo), "tsk_20261201000000_b00001", "Merge")
    assert err.value.code.value == "INVALID_STATE" and "MERGE_HEAD" in err.value.message
    assert (repo / ".git" / "MERGE_HEAD").exists() and (repo / "notes.txt").read_text() == "my careful resolution\n"
    assert (repo / "wip.txt").exists() and "wip.txt" in git(repo, "diff", "--cached", "--name-only")


def test_merges_into_one_repository_run_one_at_a_time(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    repo = make_calc_repo(tmp_path / "calc")
    home = tmp_path / "home"
    ids = [f"tsk_20261201000000_c0000{n}" for n in range(6)]
    for n, task_id in enumerate(ids):
        ws = wt.open_worktree(home, task_id, str(repo))
        Path(ws.top, f"big{n}.txt").write_text(f"file {n}\n" * 1000)
        wt.close_worktree(ws, tmp_path, None, f"add big{n}")
    with ThreadPoolExecutor(6) as pool:
        merged = list(pool.map(lambda t: wt.merge_result(home, str(repo), t, f"Merge {t}"), ids))
    assert all(m.mergeCommit for m in merged)
    assert git(repo, "status", "--porcelain") == "" and all((repo / f"big{n}.txt").exists() for n in range(6))


def test_the_users_own_worktree_on_an_unmounted_disk_keeps_its_registration(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    mine = tmp_path / "mine"
    git(repo, "worktree", "add", "-q", "--detach", str(mine))
    (mine / "staged.txt").write_text("mine\n")
    git(mine, "add", "staged.txt")
    os.rename(mine, tmp_path / "unmounted")
    ws = wt.open_worktree(tmp_path / "home", "tsk_20261201000000_d00001", str(repo))
    wt.close_worktree(ws, tmp_path, None, "nothing")
    os.rename(tmp_path / "unmounted", mine)
    assert "staged.txt" in git(mine, "diff", "--cached", "--name-only")  # still a worktree with its index


def test_a_removal_stopped_half_way_never_leaves_a_registration_pointing_at_nothing(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Observed: a forced cancel killed the flow run's children while it closed its worktree;
    the directory was gone, git's registration stayed (``git worktree list``: prunable)."""
    repo = make_calc_repo(tmp_path / "calc")
    home = tmp_path / "home"
    ids = ["tsk_20261201000000_e00001", "tsk_20261201000000_e00002"]
    # 1. every git the removal runs is killed (it fails): the registration still goes
    ws = wt.open_worktree(home, ids[0], str(repo))
    real = wt.run_git
    failing = lambda args, cwd, *a, **k: real(["--no-such-option", *args], cwd, *a, **k)  # noqa: E731
    monkeypatch.setattr(wt, "run_git", failing)
    monkeypatch.setattr(registration, "run_git", failing)
    wt.remove_worktree(ws.project_top, ws.top)
    monkeypatch.undo()
    assert not Path(ws.top).exists() and git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    # 2. the process dies after the registration went, before the directory did: the directory
    # is what the sweep finds, and it goes too
    ws = wt.open_worktree(home, ids[1], str(repo))
    Path(ws.top, "calc.py").write_text(RIGHT_FIX)
    for entry in registration.admin_dirs(ws.project_top, Path(ws.top)):
        shutil.rmtree(entry)
    assert wt.sweep_worktrees(home, lambda _id: _meta(_id, projectPath=str(repo))) == [ids[1]]
    assert not Path(ws.top).exists()
    listed = git(repo, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 1 and "prunable" not in listed


def test_odd_names_a_branch_switch_and_hooks_never_lose_the_result(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-checkout", "pre-commit", "reference-transaction"):
        (hooks / hook).write_text("#!/bin/sh\nexit 1\n")
        (hooks / hook).chmod(0o755)
    home = tmp_path / "home"
    ws = wt.open_worktree(home, "tsk_20261201000000_e00001", str(repo))  # the hooks do not decide
    Path(ws.top, "calc.py").write_text(RIGHT_FIX)
    with open(os.path.join(os.fsencode(ws.top), b"caf\xe9.txt"), "wb") as fh:  # a Latin-1 name
        fh.write(b"x\n")
    # the verified set as the report has it: the odd name decoded lossily
    out = wt.close_worktree(ws, tmp_path, ["calc.py", "caf\ufffd.txt"], "fix")
    assert out.resultCommit and out.patchBytes > 0 and out.error is None, out
    assert git(repo, "show", f"{ws.branch}:calc.py") == RIGHT_FIX
    assert b"caf\xe9.txt" in subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", "-z", ws.branch],
                                            capture_output=True, check=True).stdout
    # an agent that commits on a branch of its own: the result branch follows it
    ws2 = wt.open_worktree(home, "tsk_20261201000000_e00002", str(repo))
    git(Path(ws2.top), "-c", "core.hooksPath=/dev/null", "checkout", "-qb", "agent-branch")
    Path(ws2.top, "calc.py").write_text(RIGHT_FIX)
    git(Path(ws2.top), "-c", "core.hooksPath=/dev/null", "commit", "-qam", "the agent's own commit")
    out2 = wt.close_worktree(ws2, tmp_path, ["calc.py"], "fix")
    assert git(repo, "rev-parse", ws2.branch).strip() == out2.resultCommit != ws2.base_commit
    assert git(repo, "show", f"{ws2.branch}:calc.py") == RIGHT_FIX


def test_refusals_before_anything_is_made(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    (repo / "newpkg").mkdir()
    (repo / "newpkg" / "a.py").write_text("x = 1\n")
    with pytest.raises(TianshuError) as err:  # a directory HEAD does not have
        wt.open_worktree(tmp_path / "home", "tsk_20261201000000_f00001", str(repo / "newpkg"))
    assert err.value.code.value == "WORKTREE_UNAVAILABLE" and "not part of" in err.value.message
    git(repo, "branch", "tianshu")
    with pytest.raises(TianshuError) as err:  # refs/heads/tianshu blocks refs/heads/tianshu/<id>
        wt.open_worktree(tmp_path / "home", "tsk_20261201000000_f00002", str(repo))
    assert err.value.code.value == "WORKTREE_UNAVAILABLE" and "branch named" in err.value.message
    git(repo, "branch", "-D", "tianshu")
    ws = wt.open_worktree(tmp_path / "home", "tsk_20261201000000_f00003", str(repo))
    wt.close_worktree(ws, tmp_path, None, "nothing")
    git(repo, "branch", "-D", ws.branch)
    with pytest.raises(TianshuError) as err:  # a re-run whose result branch is gone: never a fresh one
        wt.open_worktree(tmp_path / "home", "tsk_20261201000000_f00003", str(repo), ws.base_commit)
    assert err.value.code.value == "INVALID_STATE" and "no longer exists" in err.value.message
    assert not git(repo, "branch", "--list", ws.branch).strip()
    ws = wt.open_worktree(tmp_path / "home", "tsk_20261201000000_f00004", str(repo))
    Path(ws.top, "calc.py").write_text(RIGHT_FIX)
    wt.close_worktree(ws, tmp_path, None, "fix")
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(TianshuError) as err:
        wt.merge_result(tmp_path / "home", str(repo), "tsk_20261201000000_f00004", "Merge")
    assert err.value.code.value == "INVALID_STATE" and "detached" in err.value.message


def test_a_rerun_of_a_task_whose_branch_is_gone_is_refused_at_the_call(tmp_path: Path) -> None:
    # breaker: rework and verify_task of a merged or deleted result were accepted and then ended
    # the task needs_attention; mcp_server.isolation.refuse_gone_result says INVALID_STATE first
    from tianshu_mcp.mcp_server.isolation import refuse_gone_result

    repo = make_calc_repo(tmp_path / "calc")
    task = {"taskId": "tsk_20260101000000_abcdef", "isolation": "worktree", "projectPath": str(repo),
            "resultBranch": wt.branch_name("tsk_20260101000000_abcdef")}
    git(repo, "branch", task["resultBranch"])
    refuse_gone_result(task)  # the branch is there: a re-run may continue it
    refuse_gone_result({**task, "isolation": "inplace"})  # nothing to check for other tasks
    refuse_gone_result({**task, "workPool": "remote"})  # a remote task's branch lives on its remote
    for gone, why in (({**task, "mergeCommit": "0123456789abcdef"}, "was merged as 0123456789ab"),
                      ({**task, "projectPath": str(tmp_path / "missing")}, "no longer exists")):
        with pytest.raises(TianshuError) as info:
            refuse_gone_result(gone)
        assert info.value.code.value == "INVALID_STATE" and why in info.value.message, info.value.message
    git(repo, "branch", "-D", task["resultBranch"])
    with pytest.raises(TianshuError) as info:
        refuse_gone_result(task)
    assert "no longer exists (deleted by hand?)" in info.value.message and "start a new task" in info.value.message
