"""Benchmark the main job's orchestration (run on demand; not part of the test suite).

Prints, against a fresh data home served by ``tianshu-mcp server`` (the home's service, SQLite):

* run_task and query_task call latency over the MCP stdio client (median, p95, n ≥ 50) with
  200 finished tasks in history (query_task once the measured run_task calls' tasks have ended and
  the service tree has settled below 10 % of a core: a poll's own cost);
* time from the run_task call to the agent process starting (median over n sequential tasks): the
  agent is exec'ed through a two-line bash script that writes the time first (``$EPOCHREALTIME``,
  no child process), so the figure ends where the agent's process begins; the scripted agent's own
  interpreter start, until its first line writes a time, is printed apart as "agent ready";
* orchestration overhead per task = wall (run_task → wait_task settled) − agent time − check time;
* the per-hop trace of those tasks (accepted, flow run created, Scheduled, Pending, Submitting,
  Running, agent started, verify started, final state): medians and the median task's own;
* the service tree's memory (the service and its children, agents and checks excluded): RSS and
  PSS when idle after the warm-up, peak RSS and PSS while the sequential tasks run.

``--compare PYTHON`` measures another checkout too (its interpreter, e.g. the previous main's
``.venv/bin/python``; this script and its fixtures are used for both), alternating the two
``--rounds`` times, and prints each figure's median for both, their ratio and the goal.
``--busy N`` keeps N CPU-bound processes running beside the measurement.

Usage: ``.venv/bin/python bench/bench_run_task.py [--calls 50] [--history 200] [--tasks 8]
[--compare ../main/.venv/bin/python --rounds 2] [--busy 2] [--port 4390]``
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


async def measure(home: Path, args: argparse.Namespace, trace: Path, service: int) -> dict[str, float]:
    """Run the measurement against the home's service (pid ``service``); print it and return its
    figures (:data:`FIGURES` keys, ms or MiB, plus ``hop:<name>`` medians in s)."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=str(BIN / "tianshu-mcp"), env=env_for(home))
    work = home.parent / f"{home.name}-projects"  # projects never live inside the data home
    async with Client(params, mode="legacy") as client:
        await client.call_tool("query_info", {"type": "profiles"})  # warm: Prefect ready
        # and one task: a server imports Prefect's client at its first task (design note 79),
        # which is a session's one-time cost, not a call's
        warm = await client.call_tool("run_task", {"projectPath": str(make_calc_repo(work / "warm")), "task": "noop",
                                                   "agentId": "bench-noop", "autoVerify": False})
        await client.call_tool("wait_task", {"taskId": warm.structured_content["taskId"], "timeoutMs": 600000})
        # 1) call latency of run_task / query_task (tasks on distinct projects, no verification)
        run_ms, query_ms, ids = [], [], []
        for i in range(args.calls):
            repo = make_calc_repo(work / f"lat-{i}")
            t = time.perf_counter()
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "noop", "agentId": "bench-noop", "autoVerify": False})
            run_ms.append((time.perf_counter() - t) * 1000)
            assert not r.is_error and "taskId" in (r.structured_content or {}), r.content[0].text
            ids.append(r.structured_content["taskId"])
        for task_id in ids:
            await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000})
        # queried once they have all ended and the service has written what they left (their
        # events, logs): a poll's own cost, not that of the work beside it
        settled = await asyncio.to_thread(settle, service)
        print(f"service settled {settled:.1f} s after the last task ended")
        for i in range(args.calls):
            t = time.perf_counter()
            await client.call_tool("query_task", {"taskId": ids[i % len(ids)]})
            query_ms.append((time.perf_counter() - t) * 1000)
        print(f"run_task   latency over {len(run_ms)} calls: median {statistics.median(run_ms):.1f} ms, p95 {pct(run_ms, .95):.1f} ms")
        print(f"query_task latency over {len(query_ms)} calls: median {statistics.median(query_ms):.1f} ms, p95 {pct(query_ms, .95):.1f} ms")
        await asyncio.sleep(3)
        idle_rss, idle_pss = tree_memory(service, pss=True)
        print(f"service tree memory, idle: RSS {idle_rss:.0f} MiB, PSS {idle_pss:.0f} MiB")

        # 2) run_task → agent start, 3) overhead = wall − agent − checks (sequential, idle system)
        to_start, to_ready, overhead, walls, traced = [], [], [], [], []
        peak = PeakSampler(service)
        for i in range(args.tasks):
            repo = make_calc_repo(work / f"seq-{i}")
            before = trace.read_text().count("\n") if trace.exists() else 0
            t0 = time.time()
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "fix add test_add_negative", "agentId": "bench-sleep"})
            task_id = r.structured_content["taskId"]
            done = await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000})
            wall = time.time() - t0
            assert (done.structured_content or {}).get("status") == "succeeded", done.content[0].text
            lines = trace.read_text().splitlines()[before:]
            starts = [float(ln.split()[-1].replace(",", ".")) for ln in lines if ln.startswith("exec ")]
            ready = [float(ln.split()[-1]) for ln in lines if ln.startswith("start ")]
            to_start.append(starts[0] - t0)
            to_ready.append(ready[0] - t0)
            log = (home / "tasks" / task_id / "agent-0.log").read_text()
            agent_s = int(log.rsplit("duration=", 1)[1].split("ms")[0]) / 1000
            report = json.loads((home / "tasks" / task_id / "report-0.json").read_text())
            checks_s = sum(c["durationMs"] for c in report["checks"]) / 1000
            walls.append(wall)
            overhead.append(wall - agent_s - checks_s)
            traced.append((task_id, t0, starts[0]))
        print(f"run_task → agent start over {len(to_start)} tasks: median {statistics.median(to_start):.2f} s, "
              f"min {min(to_start):.2f} s, max {max(to_start):.2f} s; agent ready (its first line) "
              f"median {statistics.median(to_ready):.2f} s")
        print(f"orchestration overhead per task (wall − agent − checks): median {statistics.median(overhead):.2f} s "
              f"(wall median {statistics.median(walls):.2f} s)")
        peak_rss, peak_pss = peak.stop()
        print(f"service tree peak while tasks ran: RSS {peak_rss:.0f} MiB, PSS {peak_pss:.0f} MiB")
        hops, rows = print_hops(home, traced)
        # from the run's final state (the API's timestamp) to wait_task's answer in the client
        seen = [(wall - row["final state"]) * 1000 for wall, row in zip(walls, rows) if "final state" in row]
        print(f"final state → wait_task answered: median {statistics.median(seen):.0f} ms, max {max(seen):.0f} ms")
    figures = {"answer_p50": statistics.median(run_ms), "answer_p95": pct(run_ms, .95),
               "query_p50": statistics.median(query_ms), "agent_p50": statistics.median(to_start) * 1000,
               "agent_p95": pct(to_start, .95) * 1000, "ready_p50": statistics.median(to_ready) * 1000,
               "overhead_p50": statistics.median(overhead) * 1000,
               "wall_p50": statistics.median(walls) * 1000, "idle_rss": idle_rss, "idle_pss": idle_pss,
               "peak_rss": peak_rss, "peak_pss": peak_pss, "seen_p50": statistics.median(seen)}
    figures.update({f"hop:{name}": value for name, value in hops.items()})
    return figures


def tree_memory(pid: int, pss: bool = False) -> tuple[float, float]:
    """(RSS, PSS) in MiB summed over process ``pid`` and its descendants, leaving out agents and
    checks (processes whose command line is not this project's or Prefect's); PSS only when
    asked (0 otherwise: it is slower to read)."""
    import psutil

    rss = pss_sum = 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0, 0.0
    for proc in procs:
        try:
            cmd = " ".join(proc.cmdline())
            if proc is not root and not any(mark in cmd for mark in ("tianshu_mcp", "tianshu-mcp", "prefect")):
                continue
            if pss:
                info = proc.memory_full_info()
                rss, pss_sum = rss + info.rss / 2**20, pss_sum + info.pss / 2**20
            else:
                rss += proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return rss, pss_sum


def settle(pid: int, below: float = 10.0, limit_s: float = 60.0) -> float:
    """Wait until the service tree (process ``pid`` and its children) uses less than ``below``
    percent of one core over a 0.5 s window, at most ``limit_s`` s; return the seconds waited."""
    import psutil

    start = time.monotonic()
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return 0.0
    while time.monotonic() - start < limit_s:
        try:
            procs = [root, *root.children(recursive=True)]
            before = {p.pid: sum(p.cpu_times()[:2]) for p in procs}
        except psutil.Error:
            continue
        time.sleep(0.5)
        used = 0.0
        for p in procs:
            try:
                used += sum(p.cpu_times()[:2]) - before[p.pid]
            except psutil.Error:
                continue
        if used / 0.5 * 100 < below:
            break
    return time.monotonic() - start


class PeakSampler:
    """The service tree's peak RSS and peak PSS (MiB), sampled every 0.5 s in a thread until
    :meth:`stop` (PSS counts the pages forked engines share with the fork server once)."""

    def __init__(self, pid: int) -> None:
        import threading

        self.pid, self.peak, self.peak_pss = pid, 0.0, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.5):
            rss, pss = tree_memory(self.pid, pss=True)
            self.peak, self.peak_pss = max(self.peak, rss), max(self.peak_pss, pss)

    def stop(self) -> tuple[float, float]:
        self._done.set()
        self._thread.join()
        return self.peak, self.peak_pss


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


def print_hops(home: Path, traced: list[tuple[str, float, float]]) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Print the per-hop trace: each hop's median time after the run_task call over the traced
    tasks, and the full trace of the task whose agent start is the median; return the medians
    and each task's hops (s), in the order of ``traced``."""
    rows = [hop_times(home, task_id, t0, start) for task_id, t0, start in traced]
    print("per-hop trace (s after the run_task call): hop, median over tasks, the median task")
    median_task = sorted(rows, key=lambda r: r["agent started"])[len(rows) // 2]
    medians = {}
    for hop in HOPS:
        values = [r[hop] for r in rows if hop in r]
        if values:
            medians[hop] = statistics.median(values)
            print(f"  {hop:<17} {medians[hop]:7.3f}   {median_task.get(hop, float('nan')):7.3f}")
    return medians, rows


# figure key, label, unit, goal (the orchestration targets; None: shown, no goal)
FIGURES = (
    ("answer_p50", "run_task answer p50", "ms", 15.0),
    ("answer_p95", "run_task answer p95", "ms", None),
    ("query_p50", "query_task p50", "ms", 10.0),
    ("agent_p50", "run_task → agent started p50", "ms", 250.0),
    ("agent_p95", "run_task → agent started p95", "ms", 600.0),
    ("ready_p50", "run_task → agent ready p50", "ms", None),
    ("overhead_p50", "whole-task overhead p50", "ms", 400.0),
    ("wall_p50", "whole task p50", "ms", None),
    ("seen_p50", "final state → wait_task answered p50", "ms", None),
    ("idle_rss", "service tree idle RSS", "MiB", None),
    ("idle_pss", "service tree idle PSS", "MiB", 200.0),
    ("peak_rss", "service tree peak RSS, 1 task", "MiB", None),
    ("peak_pss", "service tree peak PSS, 1 task", "MiB", None),  # the goal (≤ 300) is for 2 tasks
)


def compare(args: argparse.Namespace) -> int:
    """Alternate this checkout and ``args.compare`` ``args.rounds`` times, each a child run of
    this script with ``--json``; print each figure's median, the ratio and the goal.

    The order flips every round (compared, this; this, compared; …): the first run of a bench
    starts on a machine that no earlier run's service is still tearing down; in two quiet runs
    it reached the agent 36–37 ms sooner than the next run of the same code."""
    runs: dict[str, list[dict[str, float]]] = {"this": [], "compared": []}
    with tempfile.TemporaryDirectory() as out:
        for rnd in range(args.rounds):
            sides = [("compared", args.compare), ("this", sys.executable)]
            for side, python in (sides if rnd % 2 == 0 else sides[::-1]):
                target = Path(out) / f"{side}-{rnd}.json"
                print(f"--- round {rnd + 1}/{args.rounds}: {side} ({python})", flush=True)
                subprocess.run([python, __file__, "--calls", str(args.calls), "--history", str(args.history),
                                "--tasks", str(args.tasks), "--port", str(args.port), "--json", str(target)], check=True)
                runs[side].append(json.loads(target.read_text()))
    print(f"\n{'figure':<34} {'this':>9} {'compared':>9} {'ratio':>7}  goal")
    keys = [(k, label, unit, goal) for k, label, unit, goal in FIGURES]
    keys += [(f"hop:{h}", f"hop: {h} (ms)", "ms", None) for h in HOPS]
    for key, label, unit, goal in keys:
        scale = 1000.0 if key.startswith("hop:") else 1.0  # hops are recorded in s
        mine = [r[key] * scale for r in runs["this"] if key in r]
        theirs = [r[key] * scale for r in runs["compared"] if key in r]
        if not mine or not theirs:
            continue
        a, b = statistics.median(mine), statistics.median(theirs)
        ratio = f"{a / b:6.2f}x" if b else "   n/a"
        target = f"≤ {goal:g} {unit}" + (" (met)" if a <= goal else "") if goal is not None else ""
        print(f"{label:<34} {a:9.1f} {b:9.1f} {ratio}  {target}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--history", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--compare", help="another checkout's interpreter to measure alternately")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes to run beside it")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the data home and its projects")
    parser.add_argument("--port", type=int, default=4390, help="the bench home's Prefect API port (default 4390)")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        return compare(args) if args.compare else run_once(args)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def run_once(args: argparse.Namespace) -> int:
    """One measurement on a fresh home (removed afterwards); figures to ``args.json`` if given."""
    home = Path(tempfile.mkdtemp(prefix="tianshu-bench-"))
    trace = home / "trace.txt"
    (home / "config.json").write_text(json.dumps({"prefect": {"port": args.port}}))
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": {
        "bench-noop": scripted_profile(mode="noop"),
        "bench-sleep": exec_stamped(home, scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace),
                                                                                      "SCRIPTED_SLEEP": "0"})),
    }}))
    daemon = start_service(home)
    try:
        from conftest import wait_daemon

        t = time.time()
        wait_daemon(home, daemon)
        print(f"embedded Prefect (first start, fresh SQLite) ready in {time.time() - t:.1f} s; home {home}")
        t = time.time()
        asyncio.run(seed_history(home, args.history, make_calc_repo(home.parent / f"{home.name}-projects" / "history")))
        print(f"seeded {args.history} finished tasks in {time.time() - t:.1f} s")
        figures = asyncio.run(measure(home, args, trace, daemon.pid))
        if args.json:
            Path(args.json).write_text(json.dumps(figures))
    finally:
        stop_service(daemon, home, args.keep)
    return 0


def exec_stamped(home: Path, profile: dict) -> dict:
    """``profile`` run through ``<home>/exec-stamp.sh``, which appends ``exec <cwd> <epoch s>`` to
    ``$SCRIPTED_TRACE`` and then execs the profile's command in its own process: the time the
    agent's process began, before its interpreter starts."""
    stamp = home / "exec-stamp.sh"
    stamp.write_text('#!/bin/bash\nprintf \'exec %s %s\\n\' "$PWD" "$EPOCHREALTIME" >> "$SCRIPTED_TRACE"\nexec "$@"\n')
    stamp.chmod(0o755)
    return {**profile, "command": "/bin/bash", "argsTemplate": [str(stamp), profile["command"], *profile["argsTemplate"]]}


def start_service(home: Path) -> subprocess.Popen[bytes]:
    """Start ``tianshu-mcp server`` for ``home`` (its stderr in ``<home>/daemon.log``)."""
    return subprocess.Popen([str(BIN / "tianshu-mcp"), "server"], env=env_for(home), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(home / "daemon.log", "wb"), start_new_session=True)


def stop_service(daemon: subprocess.Popen[bytes], home: Path, keep: bool) -> None:
    """Stop the service; remove the home and its projects unless ``keep``."""
    import shutil

    daemon.terminate()
    daemon.wait(60)
    if not keep:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(home.parent / f"{home.name}-projects", ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
