"""Worktree isolation end to end through the MCP client (docs/isolation.md §1, §4.1 and §4.3).

A home of its own (maxRunning 4, worktreeParallel 3) with its own service for the parallel
test, the session's daemon for the others: tasks of one
repository run at once on their own branches, each verified in its own worktree; the user's work
tree and index are untouched; the result is a branch plus a patch; worktrees are gone after
success, cancel and kill -9; Prefect's own records show the per-repository limit.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from conftest import add_scripted_profile, auth_headers, mcp_client, meta_of, text_of
from fixture_project import RIGHT_FIX, git, make_calc_repo
from test_desktop_e2e import until
from test_gates_cancel import intervals, max_overlap
from test_service import cli, kill_services, new_home, service_info
from test_worktree_git import dirty_repo, tree_hash
from tianshu_mcp.core.settings import task_dir

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def wt_home(tmp_path: Path) -> Any:
    home = new_home(tmp_path, "wthome", 4600)
    cfg = json.loads((home / "config.json").read_text())
    cfg["concurrency"] = {"maxRunning": 4, "worktreeParallel": 3}
    (home / "config.json").write_text(json.dumps(cfg))
    try:
        yield home
    finally:
        cli(home, "service", "stop")
        kill_services(home)


@pytest.mark.own_services  # a pool of 4: the session daemon's is 2
async def test_worktree_tasks_of_one_repository_run_at_once_on_their_own_branches(wt_home: Path,
                                                                                  tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    add_scripted_profile(wt_home, "wt-sleep", "sleep", {"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": "0.5",
                                                        "SCRIPTED_RENDEZVOUS": "3", "SCRIPTED_WAIT_S": "280"})
    repo = dirty_repo(tmp_path)  # an untracked file and a staged one: never carried, never touched
    before = tree_hash(repo)
    async with mcp_client(wt_home) as client:
        subs = []
        for n in range(4):
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": f"Fix add ({n})",
                                                    "agentId": "wt-sleep", "autoFixRounds": 1, "isolation": "worktree",
                                                    "taskTimeoutMs": 400000})
            assert not r.is_error, text_of(r)
            assert "isolation: worktree on branch tianshu/" in text_of(r) and "starts at HEAD without them" in text_of(r)
            subs.append(meta_of(r))
        done = [meta_of(await client.call_tool("wait_task", {"taskId": s["taskId"], "timeoutMs": 300000}))
                for s in subs]
    for meta in done:
        events = (task_dir(meta["taskId"], wt_home) / "task.jsonl").read_text()
        assert meta["status"] == "succeeded", (meta.get("message"), meta.get("errorType"), events)
        assert meta["isolation"] == "worktree" and meta["dirtyNotCarried"] == 2 and "worktreePath" not in meta
        branch = meta["resultBranch"]
        assert branch == f"tianshu/{meta['taskId']}" and meta["resultCommit"]
        assert git(repo, "show", f"{branch}:calc.py") == RIGHT_FIX
        assert git(repo, "diff", "--name-only", "HEAD", branch).split() == ["calc.py"]  # the verified change only
        patch = Path(meta["resultPatch"]).read_text()
        assert "+    return a + b" in patch and "notes.txt" not in patch and "staged.txt" not in patch
        report = json.loads(Path(meta["reportFiles"]["json"]).read_text())
        assert report["projectPath"].startswith(str(wt_home / "worktrees" / meta["taskId"]))
    # at most 3 at once, and 3 did run at once (the agents wait for each other): each in its own worktree
    trees = [wt_home / "worktrees" / m["taskId"] for m in done]
    runs = intervals(trace, trees)
    assert {cwd for cwd, _, _ in runs} == {str(t) for t in trees} and len(runs) == len(trace.read_text().splitlines()) // 2
    assert max_overlap(runs) == 3, runs
    assert tree_hash(repo) == before  # the user's work tree, index and HEAD: untouched
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not [p for p in (wt_home / "worktrees").iterdir() if p.is_dir()]  # removed after success
    # Prefect's own records: one queue for the repository's worktree tasks, limit 3
    info = service_info(wt_home)
    assert info is not None
    with httpx.Client(base_url=info["apiUrl"], headers=auth_headers(wt_home), timeout=30) as api:
        queues = {q["name"]: q for q in api.post("/work_pools/tianshu/queues/filter", json={}).json()}
        runs_ = [api.get(f"/flow_runs/{m['flowRunId']}").json() for m in done]
    assert len({r["work_queue_name"] for r in runs_}) == 1
    assert runs_[0]["work_queue_name"].endswith("-wt") and queues[runs_[0]["work_queue_name"]]["concurrency_limit"] == 3
    # merge one result into the project through manage_task
    async with mcp_client(wt_home) as client:
        r = await client.call_tool("manage_task", {"taskId": done[0]["taskId"], "action": "merge"})
        assert r.is_error, "a staged file blocks git merge"
        assert "[GIT_FAILED]" in text_of(r) and "staged.txt" in text_of(r)
        git(repo, "commit", "-qm", "the user's staged file")
        r = await client.call_tool("manage_task", {"taskId": done[0]["taskId"], "action": "merge"})
        assert not r.is_error, text_of(r)
        merged = meta_of(r)
    assert merged["merge"]["mergeCommit"] and merged["mergeCommit"] == merged["merge"]["mergeCommit"]
    assert (repo / "calc.py").read_text() == RIGHT_FIX and (repo / "notes.txt").exists()
    assert not git(repo, "branch", "--list", done[0]["resultBranch"]).strip()


def flow_pid(home: Path, task_id: str) -> int:
    return int(json.loads((home / "tasks" / task_id / "flow-proc.json").read_text())["pid"])


@pytest.mark.usefixtures("ts_daemon")
async def test_worktrees_are_removed_after_cancel_and_after_a_killed_flow_run(ts_home: Path, tmp_path: Path) -> None:
    wt_home = ts_home
    add_scripted_profile(wt_home, "wt-hang", "hang", {"SCRIPTED_PIDFILE": str(tmp_path / "pids.txt")})
    repo = make_calc_repo(tmp_path / "calc")
    before = tree_hash(repo)
    async with mcp_client(wt_home) as client:
        ids = []
        for _ in range(2):
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "hang", "agentId": "wt-hang",
                                                    "isolation": "worktree"})
            assert not r.is_error, text_of(r)
            ids.append(meta_of(r)["taskId"])

        async def both_running() -> bool:
            states = [meta_of(await client.call_tool("query_task", {"taskId": i}))["status"] for i in ids]
            pids = (tmp_path / "pids.txt").read_text().split() if (tmp_path / "pids.txt").exists() else []
            return states == ["running", "running"] and len(pids) == 4

        await until(both_running, 180, "both hanging agents")
        agents = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
        assert all((wt_home / "worktrees" / i).is_dir() for i in ids)
        # one is cancelled through the tool, the other's flow-run process is killed outright
        r = await client.call_tool("manage_task", {"taskId": ids[0], "action": "cancel", "reason": "enough"})
        assert not r.is_error, text_of(r)
        os.kill(flow_pid(wt_home, ids[1]), signal.SIGKILL)
        first = meta_of(await client.call_tool("wait_task", {"taskId": ids[0], "timeoutMs": 120000}))
        assert first["status"] == "cancelled", first
        second = meta_of(await client.call_tool("wait_task", {"taskId": ids[1], "timeoutMs": 120000}))
        assert second["status"] == "interrupted", second
    # the cancelled run removed its own worktree; the service's sweep removed the killed one's and
    # killed its agent, whose work is committed on the branch
    await until(lambda: not any((wt_home / "worktrees" / i).exists() for i in ids), 120, "worktree cleanup")
    await until(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                                for p in agents), 60, "the agents' end")
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    for task_id in ids:
        assert git(repo, "rev-parse", "--verify", f"tianshu/{task_id}").strip()
    # the sweep closed the killed run's worktree as the run itself would have: patch and record
    killed = wt_home / "tasks" / ids[1] / "task.json"
    await until(lambda: json.loads(killed.read_text()).get("resultPatch"), 60, "the sweep's record")
    assert Path(json.loads(killed.read_text())["resultPatch"]).is_file() and "worktreePath" not in json.loads(killed.read_text())
    assert tree_hash(repo) == before


@pytest.mark.usefixtures("ts_daemon")
async def test_worktree_isolation_of_a_project_without_git_is_refused_with_a_code(ts_home: Path, tmp_path: Path) -> None:
    wt_home = ts_home
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("x\n")
    async with mcp_client(wt_home) as client:
        r = await client.call_tool("run_task", {"projectPath": str(plain), "task": "x", "agentId": "scripted",
                                                "isolation": "worktree"})
        assert r.is_error and "[WORKTREE_UNAVAILABLE]" in text_of(r), text_of(r)
        assert not [t for t in (wt_home / "tasks").glob("tsk_*/task.json") if t.is_file() and str(plain) in t.read_text()], \
            "a refused call leaves no task"
        repo = make_calc_repo(tmp_path / "calc")
        r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted",
                                                "autoFixRounds": 1})
        inplace = meta_of(await client.call_tool("wait_task", {"taskId": meta_of(r)["taskId"], "timeoutMs": 180000}))
        assert inplace["status"] == "succeeded" and inplace["isolation"] == "inplace"
        r = await client.call_tool("manage_task", {"taskId": inplace["taskId"], "action": "merge"})
        assert r.is_error and "[INVALID_STATE]" in text_of(r) and "nothing to merge" in text_of(r)
        r = await client.call_tool("manage_task", {"taskId": inplace["taskId"], "action": "merge", "reason": "x"})
        assert r.is_error and "[INVALID_ARGUMENT]" in text_of(r)


@pytest.mark.usefixtures("ts_daemon")
async def test_a_reworked_and_a_verified_worktree_task_work_in_its_worktree_again(ts_home: Path, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    before = tree_hash(repo)
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted",
                                                "isolation": "worktree"})
        task_id = meta_of(r)["taskId"]
        first = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 180000}))
        assert first["status"] == "failed" and first["resultCommit"], first  # the wrong fix, kept on the branch
        assert "abs(a)" in git(repo, "show", f"tianshu/{task_id}:calc.py")
        r = await client.call_tool("manage_task", {"taskId": task_id, "action": "rework",
                                                   "feedback": "test_add_negative fails"})
        assert not r.is_error, text_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 180000}))
        assert done["status"] == "succeeded" and done["roundsUsed"] == 2, done
        assert git(repo, "show", f"tianshu/{task_id}:calc.py") == RIGHT_FIX
        assert git(repo, "rev-list", "--count", f"HEAD..tianshu/{task_id}").strip() == "2"  # one commit per run
        # verify_task by taskId judges the branch in a re-opened worktree, against the task's baseline,
        # even when a value of its record is one this version cannot read (a breaker finding: the
        # project's own tree was judged instead)
        rec_path = ts_home / "tasks" / task_id / "task.json"
        rec_path.write_text(json.dumps({**json.loads(rec_path.read_text()), "errorType": "exploded"}))
        v = meta_of(await client.call_tool("verify_task", {"taskId": task_id}))
        if v["status"] not in ("succeeded", "failed", "needs_attention"):
            v = meta_of(await client.call_tool("wait_task", {"taskId": v["taskId"], "timeoutMs": 180000}))
        assert v["status"] == "succeeded", v
    assert not (ts_home / "worktrees" / task_id).exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert tree_hash(repo) == before


@pytest.mark.usefixtures("ts_daemon")
async def test_an_inplace_task_holds_the_work_tree_beside_worktree_tasks_and_blocks_their_merge(
        ts_home: Path, tmp_path: Path) -> None:
    """docs/isolation.md §4.3 in mixed modes: an ``inplace`` task has the project's work tree to itself (a
    second in-place task waits ``queued``) while a ``worktree`` task of the same repository runs
    beside it on its own branch; merging that branch into the work tree is refused while an
    in-place task is unfinished, and goes through once they have ended."""
    add_scripted_profile(ts_home, "mixed-hang", "hang", {"SCRIPTED_PIDFILE": str(tmp_path / "pids.txt")})
    repo = make_calc_repo(tmp_path / "mixed")
    async with mcp_client(ts_home) as client:
        async def start(agent: str, **extra: Any) -> str:
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add", "agentId": agent, **extra})
            assert not r.is_error, text_of(r)
            return str(meta_of(r)["taskId"])

        async def status(task_id: str) -> str:
            return str(meta_of(await client.call_tool("query_task", {"taskId": task_id}))["status"])

        editing = await start("mixed-hang")
        await until(lambda: (tmp_path / "pids.txt").exists(), 180, "the in-place agent")
        waiting = await start("mixed-hang")
        isolated = await start("scripted", isolation="worktree", autoFixRounds=2)
        done = meta_of(await client.call_tool("wait_task", {"taskId": isolated, "timeoutMs": 300000}))
        assert done["status"] == "succeeded", done
        # the worktree task ran and finished while the in-place one held the work tree, alone
        assert await status(editing) == "running" and await status(waiting) == "queued"
        assert len((tmp_path / "pids.txt").read_text().splitlines()) == 1  # the second agent never started
        r = await client.call_tool("manage_task", {"taskId": isolated, "action": "merge"})
        assert r.is_error and "[INVALID_STATE]" in text_of(r) and "isolation inplace" in text_of(r), text_of(r)
        assert git(repo, "rev-parse", "--verify", done["resultBranch"]).strip()  # refused: nothing done
        for task_id in (waiting, editing):
            r = await client.call_tool("manage_task", {"taskId": task_id, "action": "cancel", "reason": "done"})
            assert meta_of(r)["status"] == "cancelled", text_of(r)
        r = await client.call_tool("manage_task", {"taskId": isolated, "action": "merge"})
        assert not r.is_error, text_of(r)
        # breaker: a re-run of the merged task was accepted and ended it needs_attention; now
        # refused at the call, and the task stays succeeded
        for tool, args in (("manage_task", {"taskId": isolated, "action": "rework", "feedback": "again"}),
                           ("verify_task", {"taskId": isolated})):
            r = await client.call_tool(tool, args)
            assert r.is_error and "[INVALID_STATE]" in text_of(r) and "was merged as" in text_of(r), (tool, text_of(r))
        assert await status(isolated) == "succeeded"
    assert (repo / "calc.py").read_text() == RIGHT_FIX
