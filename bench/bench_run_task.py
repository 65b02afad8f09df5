"""Benchmark the main job's orchestration (run on demand; not part of the test suite).

Prints, against a fresh data home served by ``tianshu-mcp server`` (the home's service, SQLite):

* run_task and query_task call latency over the MCP stdio client (median, p95, n ≥ 50) with
  200 finished tasks in history;
* time from the run_task call to the agent process starting (median over n sequential tasks);
* orchestration overhead per task = wall (run_task → wait_task settled) − agent time − check time;
* the per-hop trace of those tasks (accepted, flow run created, Scheduled, Pending, Submitting,
  Running, agent started, verify started, final state): medians and the median task's own.

Usage: ``.venv/bin/python bench/bench_run_task.py [--calls 50] [--history 200] [--tasks 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixture_project import make_calc_repo, scripted_profile  # noqa: E402

BIN = Path(sys.executable).parent


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(TIANSHU_MCP_HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


async def seed_history(home: Path, n: int, repo: Path) -> None:
    """Create ``n`` finished tasks (task dir + Completed flow run of deployment run-task)."""
    os.environ.update(env_for(home))
    os.environ["PREFECT_API_URL"] = json.loads((home / "prefect" / "service.json").read_text())["apiUrl"]
    os.environ["PREFECT_API_AUTH_STRING"] = (home / "prefect" / "credentials").read_text().strip()
    from prefect.client.orchestration import get_client
    from prefect.states import Completed

    from tianshu_mcp.core.ids import new_task_id
    from tianshu_mcp.core.paths import project_key
    from tianshu_mcp.core.taskstore import TaskStore

    store = TaskStore(home)
    async with get_client() as client:
        dep = await client.read_deployment_by_name("run-task/run-task")
        for i in range(n):
            task_id = new_task_id()
            store.create(task_id, {"projectPath": str(repo), "agentId": "bench", "task": f"history {i}",
                                   "autoVerify": True, "autoFixRounds": 0, "taskTimeoutMs": 60000, "roundsUsed": 1})
            run = await client.create_flow_run_from_deployment(
                dep.id, name=task_id, state=Completed(name="Succeeded"),
                parameters={"task_id": task_id, "project_path": str(repo), "agent_id": "bench"},
                tags=[f"tianshu-task:{task_id}", f"project:{project_key(str(repo))}", "agent:bench"],
            )
            store.update(task_id, flowRunId=str(run.id))


async def measure(home: Path, args: argparse.Namespace, trace: Path) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=str(BIN / "tianshu-mcp"), env=env_for(home))
    work = home.parent / f"{home.name}-projects"  # projects never live inside the data home
    async with Client(params, mode="legacy") as client:
        await client.call_tool("query_info", {"type": "profiles"})  # warm: Prefect ready + imports
        # 1) call latency of run_task / query_task (tasks on distinct projects, no verification)
        run_ms, query_ms, ids = [], [], []
        for i in range(args.calls):
            repo = make_calc_repo(work / f"lat-{i}")
            t = time.perf_counter()
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "noop", "agentId": "bench-noop", "autoVerify": False})
            run_ms.append((time.perf_counter() - t) * 1000)
            assert not r.is_error and "taskId" in (r.structured_content or {}), r.content[0].text
            ids.append(r.structured_content["taskId"])
        for i in range(args.calls):
            t = time.perf_counter()
            await client.call_tool("query_task", {"taskId": ids[i % len(ids)]})
            query_ms.append((time.perf_counter() - t) * 1000)
        for task_id in ids:
            await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000})
        print(f"run_task   latency over {len(run_ms)} calls: median {statistics.median(run_ms):.1f} ms, p95 {pct(run_ms, .95):.1f} ms")
        print(f"query_task latency over {len(query_ms)} calls: median {statistics.median(query_ms):.1f} ms, p95 {pct(query_ms, .95):.1f} ms")
        await asyncio.sleep(3)

        # 2) run_task → agent start, 3) overhead = wall − agent − checks (sequential, idle system)
        to_start, overhead, walls, traced = [], [], [], []
        for i in range(args.tasks):
            repo = make_calc_repo(work / f"seq-{i}")
            before = trace.read_text().count("\n") if trace.exists() else 0
            t0 = time.time()
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "fix add test_add_negative", "agentId": "bench-sleep"})
            task_id = r.structured_content["taskId"]
            done = await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000})
            wall = time.time() - t0
            assert done.structured_content["status"] == "succeeded", done.content[0].text
            starts = [float(ln.split()[-1]) for ln in trace.read_text().splitlines()[before:] if ln.startswith("start")]
            to_start.append(starts[0] - t0)
            log = (home / "tasks" / task_id / "agent-0.log").read_text()
            agent_s = int(log.rsplit("duration=", 1)[1].split("ms")[0]) / 1000
            report = json.loads((home / "tasks" / task_id / "report-0.json").read_text())
            checks_s = sum(c["durationMs"] for c in report["checks"]) / 1000
            walls.append(wall)
            overhead.append(wall - agent_s - checks_s)
            traced.append((task_id, t0, starts[0]))
        print(f"run_task → agent start over {len(to_start)} tasks: median {statistics.median(to_start):.2f} s, "
              f"min {min(to_start):.2f} s, max {max(to_start):.2f} s")
        print(f"orchestration overhead per task (wall − agent − checks): median {statistics.median(overhead):.2f} s "
              f"(wall median {statistics.median(walls):.2f} s)")
        print_hops(home, traced)


HOPS = ("accepted", "flow run created", "Scheduled", "Pending", "Submitting", "Running", "agent started",
        "verify started", "final state")


def hop_times(home: Path, task_id: str, t0: float, agent_start: float) -> dict[str, float]:
    """Seconds after the run_task call (``t0``, epoch s) at which task ``task_id`` passed each hop
    of :data:`HOPS`: from its record and event log, and its flow run's state history in the API."""
    import httpx

    def at(iso: str) -> float:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() - t0

    tdir = home / "tasks" / task_id
    rec = json.loads((tdir / "task.json").read_text())
    events = [json.loads(ln) for ln in (tdir / "task.jsonl").read_text().splitlines() if ln.strip()]
    hops = {"accepted": at(rec["acceptedAt"]), "agent started": agent_start - t0}
    verify = [e["ts"] for e in events if e.get("event") == "verify_start"]
    if verify:
        hops["verify started"] = at(verify[0])
    api = json.loads((home / "prefect" / "service.json").read_text())["apiUrl"]
    user, password = (home / "prefect" / "credentials").read_text().strip().split(":", 1)
    with httpx.Client(base_url=api, auth=(user, password), timeout=30) as http:
        run = http.get(f"/flow_runs/{rec['flowRunId']}").json()
        states = http.get("/flow_run_states/", params={"flow_run_id": rec["flowRunId"]}).json()
    hops["flow run created"] = at(run["created"])
    for state in sorted(states, key=lambda s: s["timestamp"]):
        name = state["name"] if state["name"] in HOPS else ("final state" if state["type"] in
                                                              ("COMPLETED", "FAILED", "CANCELLED", "CRASHED") else None)
        if name and name not in hops:
            hops[name] = at(state["timestamp"])
    return hops


def print_hops(home: Path, traced: list[tuple[str, float, float]]) -> None:
    """The per-hop trace: each hop's median time after the run_task call over the traced tasks,
    and the full trace of the task whose agent start is the median."""
    rows = [hop_times(home, task_id, t0, start) for task_id, t0, start in traced]
    print("per-hop trace (s after the run_task call): hop, median over tasks, the median task")
    median_task = sorted(rows, key=lambda r: r["agent started"])[len(rows) // 2]
    for hop in HOPS:
        values = [r[hop] for r in rows if hop in r]
        if values:
            print(f"  {hop:<17} {statistics.median(values):7.3f}   {median_task.get(hop, float('nan')):7.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--history", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=8)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tianshu-bench-"))
    trace = home / "trace.txt"
    (home / "config.json").write_text(json.dumps({"prefect": {"port": 4390}}))
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": {
        "bench-noop": scripted_profile(mode="noop"),
        "bench-sleep": scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": "0"}),
    }}))
    daemon = subprocess.Popen([str(BIN / "tianshu-mcp"), "server"], env=env_for(home), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=open(home / "daemon.log", "wb"), start_new_session=True)
    try:
        sys.path.insert(0, str(ROOT / "tests"))
        from conftest import wait_daemon

        t = time.time()
        wait_daemon(home, daemon)
        print(f"embedded Prefect (first start, fresh SQLite) ready in {time.time() - t:.1f} s; home {home}")
        t = time.time()
        asyncio.run(seed_history(home, args.history, make_calc_repo(home.parent / f"{home.name}-projects" / "history")))
        print(f"seeded {args.history} finished tasks in {time.time() - t:.1f} s")
        asyncio.run(measure(home, args, trace))
    finally:
        daemon.terminate()
        daemon.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
