"""Remote topology end to end (docs/isolation.md §2–§3), on real parts only: PostgreSQL from
Debian, a Prefect server on it, two ``tianshu-mcp worker`` processes with their own data homes
(they see the bare remotes, never the caller's home), and the MCP server over stdio in remote
mode (``TIANSHU_PREFECT_API_URL`` + ``PREFECT_API_AUTH_STRING`` in the host's env block).
"""

from __future__ import annotations

import http.server
import json
import threading
from datetime import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import mcp_client, meta_of, pid_running, text_of
from fixture_project import RIGHT_FIX
from remote_cluster import (
    AUTH,
    Cluster,
    bare_remote,
    branch_file,
    pg_bin,
    sleepy_profiles,
    until,
)
from tianshu_mcp.core.remotes import repo_key, repo_limit_name
from tianshu_mcp.deployments.setup import ZOMBIE_WITHIN_S

pytestmark = [pytest.mark.anyio, pytest.mark.own_services,
              pytest.mark.skipif(pg_bin() is None, reason="PostgreSQL is not installed (setup.sh installs it as root)")]

POOL = "remote"
POOL_LIMIT = 4
WORKER_LIMIT = 3
PARALLEL = 2
BRIEF = "fix add() in calc.py so that test_add_negative passes"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """PostgreSQL + Prefect server + workers w1, w2 of pool ``remote`` (limit 3 each, pool limit 4)."""
    cl = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        cl.start_server(cl.start_postgres())
        trace = cl.root / "trace"
        for name in ("w1", "w2"):
            cl.start_worker(name, POOL, sleepy_profiles(trace, 1.0), "--limit", str(WORKER_LIMIT),
                            "--pool-limit", str(POOL_LIMIT))
        cl.wait_workers(POOL, ["w1", "w2"])
        yield cl
    finally:
        cl.close()


def caller_home(cl: Cluster, name: str, config: dict[str, Any] | None = None) -> Path:
    home = cl.root / f"caller-{name}"
    home.mkdir(exist_ok=True)
    cfg = {"concurrency": {"worktreeParallel": PARALLEL}, **(config or {})}
    (home / "config.json").write_text(json.dumps(cfg))
    return home


async def wait_all(client: Any, ids: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
    """wait_task each id until it settles; ``{id: meta}``."""
    out: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(timeout_s):
        for tid in ids:
            while True:
                meta = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 30000}))
                if meta.get("waitSettled"):
                    out[tid] = meta
                    break
    return out


def flow_runs(cl: Cluster, tag: str) -> list[dict[str, Any]]:
    with cl.api() as api:
        r = api.post("/flow_runs/filter", json={"flow_runs": {"tags": {"all_": [tag]}}, "limit": 200})
        r.raise_for_status()
        return r.json()


def work_spans(cl: Cluster, flow_run_ids: list[str]) -> dict[str, tuple[float, float]]:
    """flow run id -> (first task run's start, last task run's end), epoch seconds."""
    with cl.api() as api:
        r = api.post("/task_runs/filter", json={"flow_runs": {"id": {"any_": flow_run_ids}}, "limit": 200})
        r.raise_for_status()
    spans: dict[str, tuple[float, float]] = {}
    for tr in r.json():
        if tr["start_time"] and tr["end_time"]:
            a, b = _ts(tr["start_time"]), _ts(tr["end_time"])
            old = spans.get(tr["flow_run_id"], (a, b))
            spans[tr["flow_run_id"]] = (min(old[0], a), max(old[1], b))
    assert set(spans) == set(flow_run_ids), "a flow run without a finished task run"
    return spans


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda p: (p[0], p[1]))
    best = cur = 0
    for _, step in points:
        cur += step
        best = max(best, cur)
    return best


def _ts(value: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@pytest.mark.extended
async def test_twenty_tasks_over_four_remotes_on_two_workers(cluster: Cluster) -> None:
    """Must show 2 and 3 (remote): 20 tasks / 4 bare remotes / 2 workers all succeed, spread over
    both workers; branches pushed with the right fix; reports through query_info; no credential in
    any flow run's parameters; Prefect's records never show more than the pool's limit running
    at once, nor more than worktreeParallel of one repository."""
    remotes = [bare_remote(cluster.root, f"calc{i}") for i in range(4)]
    home = caller_home(cluster, "main")
    async with mcp_client(home, env=cluster.caller_env()) as client:
        ids = []
        for n in range(20):
            meta = meta_of(await client.call_tool("run_task", {
                "task": BRIEF, "repoUrl": str(remotes[n % 4]), "workPool": POOL, "agentId": "scripted-sleep"}))
            assert meta["status"] == "queued" and meta["workPool"] == POOL and meta["isolation"] == "worktree"
            ids.append(meta["taskId"])
        done = await wait_all(client, ids, 900)
        assert {tid: m["status"] for tid, m in done.items()} == {tid: "succeeded" for tid in ids}, \
            {tid: m.get("message") for tid, m in done.items() if m["status"] != "succeeded"}
        report = text_of(await client.call_tool("query_info", {"type": "report", "taskId": ids[0]}))
        assert "Acceptance report" in report and "[PASS] pytest" in report, report[:800]
        listed = text_of(await client.call_tool("query_task", {"taskId": ids[1]}))
        assert "succeeded" in listed
    for n, tid in enumerate(ids):
        meta = done[tid]
        assert meta["resultPushed"] is True and meta["resultBranch"] == f"tianshu/{tid}"
        assert branch_file(remotes[n % 4], f"tianshu/{tid}", "calc.py") == RIGHT_FIX
        patch = (home / "tasks" / tid / "result.patch").read_text()
        assert "+    return a + b" in patch
    # both workers ran tasks: each task's worktree lived in one worker's home
    homes = {tid: [w for w in ("w1", "w2") if (cluster.root / f"home-{w}" / "tasks" / tid / "task.json").exists()]
             for tid in ids}
    assert all(len(v) == 1 for v in homes.values()), homes
    assert {v[0] for v in homes.values()} == {"w1", "w2"}, homes
    # no leftover worktree on either worker
    for w in ("w1", "w2"):
        root = cluster.root / f"home-{w}" / "worktrees"
        assert not [p for p in root.iterdir() if p.is_dir()], list(root.iterdir())
    # Prefect's own records: parameters hold no credential; the gates held
    runs = flow_runs(cluster, "work-pool:remote")
    ours = [r for r in runs if r["name"] in ids]
    assert len(ours) == 20
    password = AUTH.split(":")[1]
    for r in ours:
        dumped = json.dumps(r["parameters"])
        assert password not in dumped and "PREFECT_" not in dumped and str(home) not in dumped
        assert r["work_pool_name"] == POOL
    spans = [(_ts(r["start_time"]), _ts(r["end_time"])) for r in ours]
    assert max_overlap(spans) <= POOL_LIMIT
    # a repository's limit is a global concurrency limit the run waits for while Running: its
    # work (the task runs: agent rounds, verification) never overlaps more than PARALLEL
    work = work_spans(cluster, [r["id"] for r in ours])
    for remote in remotes:
        per_repo = [work[r["id"]] for r in ours if r["parameters"]["remote"]["repoUrl"] == str(remote)]
        assert len(per_repo) == 5 and max_overlap(per_repo) <= PARALLEL, per_repo
    with cluster.api() as api:
        limits = {g["name"]: g["limit"] for g in api.post("/v2/concurrency_limits/filter", json={}).json()}
    assert all(limits.get(repo_limit_name(POOL, repo_key(str(r)))) == PARALLEL for r in remotes), limits
    with cluster.api() as api:
        pool = api.get(f"/work_pools/{POOL}").json()
        assert pool["concurrency_limit"] == POOL_LIMIT


@pytest.mark.extended
async def test_killed_worker_interrupts_its_task_and_the_other_keeps_going(cluster: Cluster) -> None:
    """Must show 2 (worker death): a worker is killed (-9, its process group) mid-task: the
    agent it ran dies with it (no orphan edits a worktree unsupervised), the task ends
    ``interrupted`` within the zombie-detection window, the other worker runs the next task to
    ``succeeded``, and the restarted worker sweeps the dead run's worktree."""
    remote = bare_remote(cluster.root, "calc-kill")
    home = caller_home(cluster, "kill")
    pidfile = cluster.root / "trace.hang"
    before = pidfile.read_text().splitlines() if pidfile.exists() else []
    async with mcp_client(home, env=cluster.caller_env()) as client:
        hang = meta_of(await client.call_tool("run_task", {
            "task": BRIEF, "repoUrl": str(remote), "workPool": POOL, "agentId": "scripted-hang"}))
        tid = hang["taskId"]

        def running_on() -> str | None:
            for w in ("w1", "w2"):
                if (cluster.root / f"home-{w}" / "worktrees" / tid).is_dir():
                    return w
            return None

        victim = until(running_on, 180, "the hanging task to start on a worker")
        survivor = "w2" if victim == "w1" else "w1"
        until(lambda: pidfile.exists() and len(pidfile.read_text().splitlines()) > len(before), 120,
              "the hanging agent to start")
        pids = [int(p) for line in pidfile.read_text().splitlines()[len(before):] for p in line.split()]
        cluster.kill_worker(victim)
        until(lambda: not any(pid_running(p) for p in pids), 60, f"the dead worker's agent tree {pids} to be gone")
        nxt = meta_of(await client.call_tool("run_task", {
            "task": BRIEF, "repoUrl": str(remote), "workPool": POOL, "agentId": "scripted-sleep"}))
        later = await wait_all(client, [nxt["taskId"]], 300)
        assert later[nxt["taskId"]]["status"] == "succeeded", later
        assert (cluster.root / f"home-{survivor}" / "tasks" / nxt["taskId"]).is_dir()
        # zombie detection: heartbeat every 30 s, Crashed 150 s after the last one
        final = await wait_all(client, [tid], 400)
        assert final[tid]["status"] == "interrupted", final[tid]
    crashed_after = zombie_crash_delay(cluster, final[tid]["flowRunId"])
    # Crashed by the zombie automation, not early and within its window (plus the trigger
    # service's evaluation period) after the run's last heartbeat, in Prefect's own records
    assert ZOMBIE_WITHIN_S - 1 <= crashed_after <= ZOMBIE_WITHIN_S + TRIGGER_SLACK_S, crashed_after
    # the machine comes back: its worker sweeps the worktree the dead run left (committed to the
    # task's branch in its clone, then removed) and serves the pool again
    cluster.start_worker(victim, POOL, sleepy_profiles(cluster.root / "trace", 1.0), "--limit", str(WORKER_LIMIT))
    cluster.wait_workers(POOL, ["w1", "w2"])
    until(lambda: not (cluster.root / f"home-{victim}" / "worktrees" / tid).exists(), 60,
          "the restarted worker to sweep the dead run's worktree")


TRIGGER_SLACK_S = 60.0
"""The proactive trigger's evaluation period on a loaded machine (Prefect evaluates proactive
triggers every 5 s; 60 s allows for a late triggers service)."""


def zombie_crash_delay(cl: Cluster, flow_run_id: str) -> float:
    """Seconds from the run's last heartbeat event to its Crashed state, both instants the
    server's own (the event feed and the state history)."""
    with cl.api() as api:
        states = api.get("/flow_run_states/", params={"flow_run_id": flow_run_id}).json()
        events = api.post("/events/filter", json={"filter": {
            "event": {"name": ["prefect.flow-run.heartbeat"]},
            "resource": {"id": [f"prefect.flow-run.{flow_run_id}"]}}, "limit": 50}).json()["events"]
    crashed = [s for s in states if s["type"] == "CRASHED"]
    assert crashed and "No heartbeat" in (crashed[0]["message"] or ""), states
    assert events, "the run sent no heartbeat"
    last = max(datetime.fromisoformat(e["occurred"]) for e in events)
    return (datetime.fromisoformat(crashed[0]["timestamp"]) - last).total_seconds()


class _NeedsLogin(http.server.BaseHTTPRequestHandler):
    """A git smart-HTTP endpoint that wants a login (401 + Basic challenge) for everything."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_bad_remote_inputs_end_coded(cluster: Cluster, tmp_path: Path) -> None:
    """Bad input: a repoUrl that does not exist, one that needs credentials the worker lacks, a
    ref that does not exist → each task ends ``failed`` with its code, no agent ran; credentials in
    the URL and ``inplace`` for a remote task are refused at the call."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NeedsLogin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    remote = bare_remote(cluster.root, "calc-bad")
    home = caller_home(cluster, "bad")
    cases = {
        "remote_unavailable": {"repoUrl": str(cluster.root / "remotes" / "missing.git")},
        "remote_auth_failed": {"repoUrl": f"http://127.0.0.1:{server.server_address[1]}/private.git"},
        "ref_not_found": {"repoUrl": str(remote), "ref": "no-such-branch"},
    }
    try:
        async with mcp_client(home, env=cluster.caller_env()) as client:
            ids = {}
            for code, extra in cases.items():
                meta = meta_of(await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL,
                                                                   "agentId": "scripted", **extra}))
                ids[code] = meta["taskId"]
            done = await wait_all(client, list(ids.values()), 300)
            for code, tid in ids.items():
                meta = done[tid]
                assert meta["status"] == "failed" and meta["errorType"] == code, meta
                assert "agent was not started" in meta["message"], meta["message"]
            assert "terminal prompts disabled" in done[ids["remote_auth_failed"]]["message"].lower() or \
                "credentials" in done[ids["remote_auth_failed"]]["message"]
            refused = await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL,
                                                          "repoUrl": "https://user:tok3n@example.com/r.git"})
            assert refused.is_error and "[INVALID_ARGUMENT]" in text_of(refused) and "tok3n" not in text_of(refused)
            inplace = await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL, "repoUrl": str(remote),
                                                          "isolation": "inplace"})
            assert inplace.is_error and "[INVALID_ARGUMENT]" in text_of(inplace)
            bad_ref = await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL, "repoUrl": str(remote),
                                                          "ref": "--upload-pack=evil"})
            assert bad_ref.is_error and "[INVALID_ARGUMENT]" in text_of(bad_ref)
            token = await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL,
                                                        "repoUrl": "user:tok3n@example.com:r.git"})
            assert token.is_error and "tok3n" not in text_of(token)
            dry = await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL, "repoUrl": str(remote), "dryRun": True})
            assert dry.is_error and "dryRun is not available for a remote task" in text_of(dry)
            tid = ids["ref_not_found"]
            merge = await client.call_tool("manage_task", {"taskId": tid, "action": "merge"})
            assert merge.is_error and "[INVALID_STATE]" in text_of(merge) and "git fetch origin" in text_of(merge)
            verify = await client.call_tool("verify_task", {"taskId": tid})
            assert verify.is_error and "[INVALID_STATE]" in text_of(verify) and "worker" in text_of(verify)
    finally:
        server.shutdown()
    assert not list((home / "tasks").glob("*/agent-proc.json"))


async def test_unserved_pool_stays_queued_then_ends_no_worker(cluster: Cluster) -> None:
    """Bad input: a pool nobody serves: the task stays ``queued`` saying no worker serves the pool
    and when it ends; after ``remote.queueTimeoutMs`` it is ``failed`` with ``no_worker``."""
    remote = bare_remote(cluster.root, "calc-nobody")
    home = caller_home(cluster, "nobody", {"remote": {"queueTimeoutMs": 10000}})
    async with mcp_client(home, env=cluster.caller_env()) as client:
        meta = meta_of(await client.call_tool("run_task", {"task": BRIEF, "workPool": "nobody-serves",
                                                           "repoUrl": str(remote), "agentId": "scripted"}))
        tid = meta["taskId"]
        with anyio.fail_after(60):  # once its flow run exists, the task says why it waits
            while "no worker serves" not in (first := meta_of(await client.call_tool("query_task", {"taskId": tid})))["message"]:
                assert first["status"] == "queued", first
                await anyio.sleep(0.3)
        assert first["status"] == "queued"
        assert "no worker serves work pool nobody-serves" in first["message"] and "queueTimeoutMs" in first["message"]
        final = await wait_all(client, [tid], 120)
        assert final[tid]["status"] == "failed" and final[tid]["errorType"] == "no_worker", final[tid]
    run = flow_runs(cluster, f"tianshu-task:{tid}")[0]
    assert run["state"]["type"] == "FAILED" and run["work_pool_name"] == "nobody-serves"


async def test_cancel_of_a_running_remote_task_ends_it_on_its_worker(cluster: Cluster) -> None:
    """manage_task(cancel) of a remote task that runs: the worker ends the flow run (Prefect's
    Cancelling state) and the agent's whole tree with it; the task is ``cancelled``."""
    remote = bare_remote(cluster.root, "calc-cancel")
    home = caller_home(cluster, "cancel")
    pidfile = cluster.root / "trace.hang"
    before = pidfile.read_text().splitlines() if pidfile.exists() else []
    async with mcp_client(home, env=cluster.caller_env()) as client:
        tid = meta_of(await client.call_tool("run_task", {"task": BRIEF, "repoUrl": str(remote), "workPool": POOL,
                                                          "agentId": "scripted-hang"}))["taskId"]
        until(lambda: pidfile.exists() and len(pidfile.read_text().splitlines()) > len(before), 180,
              "the hanging agent to start on a worker")
        pids = [int(p) for line in pidfile.read_text().splitlines()[len(before):] for p in line.split()]
        out = await client.call_tool("manage_task", {"taskId": tid, "action": "cancel", "reason": "changed my mind"})
        assert not out.is_error, text_of(out)
        final = await wait_all(client, [tid], 120)
        assert final[tid]["status"] == "cancelled", final[tid]
    until(lambda: not any(pid_running(p) for p in pids), 60, f"the agent tree {pids} to be gone")


async def test_rework_and_a_question_of_a_remote_task(cluster: Cluster) -> None:
    """A remote task that fails, reworked with feedback: the caller's copy follows the new run
    (status, verdict, report, result.patch). An agent's question ends a remote task
    ``needs_attention`` with the question (an answer cannot reach another worker yet)."""
    remote = bare_remote(cluster.root, "calc-rework")
    home = caller_home(cluster, "rework")
    async with mcp_client(home, env=cluster.caller_env()) as client:
        first = meta_of(await client.call_tool("run_task", {"task": "Fix the add function in calc.py.", "workPool": POOL,
                                                            "repoUrl": str(remote), "agentId": "scripted"}))
        tid = first["taskId"]
        failed = (await wait_all(client, [tid], 300))[tid]
        assert failed["status"] == "failed" and failed["latestVerificationVerdict"] == "failed", failed
        assert "abs(a)" in (home / "tasks" / tid / "result.patch").read_text()
        out = await client.call_tool("manage_task", {"taskId": tid, "action": "rework",
                                                     "feedback": "test_add_negative still fails: add(-2, -3) must be -5"})
        assert not out.is_error, text_of(out)
        done = (await wait_all(client, [tid], 300))[tid]
        assert done["status"] == "succeeded" and done["latestVerificationVerdict"] == "passed", done
        assert "+    return a + b" in (home / "tasks" / tid / "result.patch").read_text()
        report = text_of(await client.call_tool("query_info", {"type": "report", "taskId": tid}))
        assert "[PASS] pytest" in report, report[:600]
        assert branch_file(remote, f"tianshu/{tid}", "calc.py") == RIGHT_FIX
        ask = meta_of(await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL, "repoUrl": str(remote),
                                                          "agentId": "scripted-ask"}))
        asked = (await wait_all(client, [ask["taskId"]], 300))[ask["taskId"]]
        assert asked["status"] == "needs_attention" and asked["errorType"] == "needs_user_unsupported", asked
        assert "the agent asked" in asked["message"] and "rework it with the answer" in asked["message"]


async def test_wrong_credentials_of_the_caller_are_said_not_waited_on(cluster: Cluster) -> None:
    """A caller whose PREFECT_API_AUTH_STRING the server refuses: the task it accepted says so
    (PREFECT_UNAVAILABLE, the env variable named) instead of reading queued forever."""
    home = caller_home(cluster, "wrongauth")
    env = {**cluster.caller_env(), "PREFECT_API_AUTH_STRING": "admin:wrong"}
    async with mcp_client(home, env=env) as client:
        meta = meta_of(await client.call_tool("run_task", {"task": BRIEF, "workPool": POOL,
                                                           "repoUrl": str(cluster.root / "remotes" / "x.git")}))
        seen = meta_of(await client.call_tool("query_task", {"taskId": meta["taskId"]}))
        assert seen["status"] == "queued", seen
        assert "refused this server's credentials" in seen["message"] and "PREFECT_API_AUTH_STRING" in seen["message"]
