"""Benchmark the per-home service (run on demand; not part of the test suite).

Prints medians (and max) of:

* ``run_task`` / ``verify_task`` answer time on a **cold** home (fresh data home, no service, the
  first call ever), quiet and beside two CPU-bound busy processes; ``verify_task`` with
  ``verifyToolWaitMs: 0`` (its answer is the acceptance, the verdict is polled);
* a cold home's first task: from the stdio server's spawn (a host connecting and calling
  run_task at once) to ``initialize`` answered, to run_task answered and to the agent's process
  started (issue goal: ≤ 4 s quiet), with the parts of the service's start read from its "ready"
  log line (``hosting/start_phases.py``);
* service start time on a fresh database and warm (stop, start again); a new home's start
  with the machine's migrated database template (``hosting/dbseed.py``) against one
  without (an empty cache: the template is made first, which is what a start without seeding
  costs), and the ratio;
* idle CPU of the service process tree (percent of one core over 30 s);
* attach time: a new stdio server's ``initialize`` + first ``query_task`` on a running service;
* RSS of the service process tree idle and with 2 tasks running.

run_task → agent start and the orchestration overhead per task are printed by
``bench_run_task.py`` (warm service, 200 finished tasks in history).

Usage: ``.venv/bin/python bench/bench_service.py [--cold 5] [--loaded 3] [--attach 10] [--cold-only] [--keep]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixture_project import make_calc_repo, scripted_profile  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from bench_run_task import exec_stamped  # noqa: E402

BIN = Path(sys.executable).parent
CONSOLE = str(BIN / "tianshu-mcp")


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(TIANSHU_MCP_HOME=str(home), TIANSHU_MCP_NO_SKILL_INSTALL="1", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def new_home(base: Path, name: str, port: int) -> Path:
    home = base / name
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"prefect": {"port": port}, "verifyToolWaitMs": 0}))
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": {
        "scripted": scripted_profile(),
        "stamped": exec_stamped(home, scripted_profile(extra_env={"SCRIPTED_TRACE": str(home / "stamps.txt")})),
        "sleepy": scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(home / "trace.txt"), "SCRIPTED_SLEEP": "20"})}}))
    return home


def cli(home: Path, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = env_for(home)
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run([CONSOLE, *args], env=env, capture_output=True, text=True, timeout=300)


def new_home_starts(base: Path, n: int, port0: int, template: bool) -> list[float]:
    """Start (then stop) the service of ``n`` new homes; ``template``: with the machine's
    migrated database template, else each with an empty cache (no template yet)."""
    times = []
    for i in range(n):
        home = new_home(base, f"start-{'t' if template else 'n'}{i}", port0 + 3 * i)
        cache = None if template else Path(tempfile.mkdtemp(prefix="cache-", dir=base))
        t0 = time.monotonic()
        assert cli(home, "service", "start", cache=cache).returncode == 0
        times.append(time.monotonic() - t0)
        cli(home, "service", "stop", cache=cache)
    return times


def idle_cpu_percent(pid: int, seconds: float = 30.0) -> float:
    """CPU of the process tree of ``pid`` over ``seconds``, in percent of one core."""
    def total() -> float:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        return sum(sum(p.cpu_times()[:2]) for p in procs)

    before = total()
    time.sleep(seconds)
    return (total() - before) / seconds * 100


def service_pid(home: Path) -> int | None:
    try:
        return int(json.loads((home / "prefect" / "service.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def wait_for(cond, timeout: float) -> float:  # noqa: ANN001
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise TimeoutError


async def cold_calls(home: Path, repo: Path) -> dict[str, float]:
    """A host connects to a cold home and calls run_task at once: seconds from the server's
    spawn to ``initialize`` answered, to run_task answered, to its flow run created and to the
    agent's process started (``exec_stamped``); then ``verify_task``'s answer. Adds the parts of
    the service's start from its "ready" line (``hosting/start_phases.py``), in seconds."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=CONSOLE, args=[], env=env_for(home))
    trace = home / "stamps.txt"
    out = {}
    t_spawn = time.time()
    async with Client(params, mode="legacy") as client:
        out["initialize"] = time.time() - t_spawn
        t0 = time.time()
        r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                                "agentId": "stamped"})
        out["run_task"] = time.time() - t0
        task_id = r.structured_content["taskId"]
        wait_for(lambda: trace.exists() and "exec " in trace.read_text(), 180)
        stamp = float(next(line for line in trace.read_text().splitlines() if line.startswith("exec ")).split()[-1])
        out["agent started after spawn"] = stamp - t_spawn
        out["agent started after run_task"] = stamp - t0
        t0 = time.time()
        await client.call_tool("verify_task", {"projectPath": str(repo)})
        out["verify_task"] = time.time() - t0
    flow_run = json.loads((home / "tasks" / task_id / "task.json").read_text()).get("flowRunId")
    assert flow_run, "the cold task has no flow run"
    try:  # a checkout before the parts were logged (--compare-style runs with another interpreter)
        from tianshu_mcp.hosting.start_phases import parse
    except ImportError:
        return out
    ready = [line for line in (home / "logs" / "service.log").read_text().splitlines() if " ready in " in line]
    if ready:
        for name, ms in parse(ready[0]).items():
            out[f"service start: {name}"] = ms / 1000
    return out


async def attach_times(home: Path, n: int) -> list[float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=CONSOLE, args=[], env=env_for(home))
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        async with Client(params, mode="legacy") as client:
            await client.call_tool("query_info", {"type": "tasks", "limit": 1})
            times.append(time.monotonic() - t0)
    return times


def rss_tree(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def summary(name: str, values: list[float], unit: str = "s") -> None:
    print(f"{name:<46} median {statistics.median(values):7.3f} {unit}  max {max(values):7.3f} {unit}  n={len(values)}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--loaded", type=int, default=3)
    parser.add_argument("--attach", type=int, default=10)
    parser.add_argument("--cold-only", action="store_true", help="only the cold homes (quiet and loaded)")
    parser.add_argument("--keep", action="store_true", help="keep the homes and projects under the bench's temp dir")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tsbench-"))
    results: dict[str, list[float]] = {}
    homes = []
    try:
        for label, n, busy in (("quiet", args.cold, 0), ("2 busy CPUs", args.loaded, 2)):
            burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            try:
                for i in range(n):
                    home = new_home(base, f"{label[:5]}-{i}", 4600 + len(homes) * 3)
                    homes.append(home)
                    repo = make_calc_repo(home.parent / f"{home.name}-calc")
                    got = asyncio.run(cold_calls(home, repo))
                    for key, value in got.items():
                        results.setdefault(f"cold {key} ({label})", []).append(value)
                    cli(home, "service", "stop")
            finally:
                for b in burners:
                    b.kill()
        if args.cold_only:
            for key, values in results.items():
                summary(key, values)
            return 0
        home = homes[0]
        starts = []
        for _ in range(3):
            t0 = time.monotonic()
            assert cli(home, "service", "start").returncode == 0
            starts.append(time.monotonic() - t0)
            if len(starts) < 3:
                cli(home, "service", "stop")
        results["service start, warm database"] = starts
        results["service start, new home, no database template"] = new_home_starts(base, 3, 4800, template=False)
        results["service start, new home, database template"] = new_home_starts(base, 3, 4830, template=True)
        results["attach: new stdio server + first query_info"] = asyncio.run(attach_times(home, args.attach))
        pid = service_pid(home)
        time.sleep(3)
        idle = rss_tree(pid)
        idle_cpu = idle_cpu_percent(pid)
        repo_a, repo_b = make_calc_repo(home.parent / f"{home.name}-a"), make_calc_repo(home.parent / f"{home.name}-b")

        async def two() -> None:
            from mcp import Client, StdioServerParameters

            async with Client(StdioServerParameters(command=CONSOLE, args=[], env=env_for(home)), mode="legacy") as c:
                for repo in (repo_a, repo_b):
                    await c.call_tool("run_task", {"projectPath": str(repo), "task": "x", "agentId": "sleepy"})

        asyncio.run(two())
        wait_for(lambda: (home / "trace.txt").exists() and (home / "trace.txt").read_text().count("start") >= 2, 120)
        busy_rss = rss_tree(pid)
        for key, values in results.items():
            summary(key, values)
        ratio = (statistics.median(results["service start, new home, database template"])
                 / statistics.median(results["service start, new home, no database template"]))
        print(f"{'new home start: template / no template':<46} ratio {ratio:5.2f}")
        print(f"{'service idle CPU (process tree, 30 s)':<46} {idle_cpu:7.1f} % of one core")
        print(f"{'service RSS (process tree) idle':<46} {idle:7.0f} MiB")
        print(f"{'service RSS (process tree), 2 tasks running':<46} {busy_rss:7.0f} MiB (agents included)")
        print(f"{'service RSS (service process alone), 2 running':<46} {psutil.Process(pid).memory_info().rss / 2**20:7.0f} MiB")
    finally:
        for home in homes:
            cli(home, "service", "stop")
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
