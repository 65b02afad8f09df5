"""Soak benchmark: many tasks on one data home, memory sampled as they go (run on demand; not
part of the test suite).

Starts ``tianshu-mcp server`` on a fresh home (SQLite), connects one MCP stdio client and runs
``--tasks`` tasks (default 1,000) through ``run_task`` → ``wait_task``, ``--parallel`` at a time
(default 2, the default ``maxRunning``). Each task has its own small repository, the scripted
agent (fixes ``add()`` at once, no sleep) and one check (pytest). After every ``--every`` tasks
(default 50) the clients pause until nothing runs and the bench samples the service tree's RSS
and PSS (the service and its children: agents and checks excluded), the service process's own
RSS with its anonymous and file-backed PSS, threads and descriptors, the size of the Prefect
database, the answer and ``query_task`` latency of that batch and its wall time, and prints one
row. With ``--settle S`` it then rests S seconds and samples the tree's PSS again (the resting
figure once the service's periodic trim has run).

At the end it asserts and prints:

* **stuck runs**: flow runs of the home not in a final state (0 expected) and tasks whose
  ``wait_task`` did not end ``succeeded``;
* **leaked slots**: active slots of every global concurrency limit (0 expected), submission
  entries left in ``<home>/submissions`` (0) and live agent processes (0);
* **growth**: service-tree PSS and RSS at the last sample against the sample at task 100 (the
  first sample in a shorter soak; none with one sample) (goal ≤ 5 %), and the same for the
  resting figure with ``--settle``;
* ``query_task`` latency with the whole history in the home.

Usage: ``.venv/bin/python bench/bench_soak.py [--tasks 1000] [--parallel 2] [--every 50]
[--settle S] [--json F] [--keep]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_run_task import BIN, env_for, pct, start_service, stop_service, tree_memory  # noqa: E402
from fixture_project import make_calc_repo, scripted_profile  # noqa: E402

FINAL = ("COMPLETED", "FAILED", "CANCELLED", "CRASHED")


def own_rss(pid: int) -> float:
    """RSS of process ``pid`` alone, MiB (0 when it is gone)."""
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


def service_detail(pid: int, home: Path) -> dict[str, float]:
    """What the service process itself holds: anonymous and file-backed PSS (MiB, from
    ``/proc/<pid>/smaps_rollup``), threads, open descriptors, and the size of the home's Prefect
    database with its WAL (MiB). Zeros when the process is gone."""
    import psutil

    out = {"anon": 0.0, "file": 0.0, "threads": 0.0, "fds": 0.0, "db": 0.0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("Pss_Anon", "Pss_File"):
                out[key[4:].lower()] = int(value.split()[0]) / 1024
        proc = psutil.Process(pid)
        out["threads"], out["fds"] = float(proc.num_threads()), float(proc.num_fds())
    except (OSError, psutil.Error):
        pass
    out["db"] = sum(f.stat().st_size for f in (home / "prefect").glob("*.db*")) / 2**20
    return out


def agents_alive(marker: str) -> int:
    """Live processes whose command line contains ``marker`` (the soak's agent script path)."""
    import psutil

    count = 0
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(proc.info["cmdline"] or []):
                count += 1
        except psutil.Error:
            continue
    return count


def api_leftovers(home: Path) -> tuple[int, int]:
    """(flow runs of the home not in a final state, active slots over all global concurrency
    limits), read from the home's Prefect API."""
    import httpx

    api = json.loads((home / "prefect" / "service.json").read_text())["apiUrl"]
    user, password = (home / "prefect" / "credentials").read_text().strip().split(":", 1)
    with httpx.Client(base_url=api, auth=(user, password), timeout=60) as http:
        body = {"flow_runs": {"state": {"type": {"not_any_": list(FINAL)}}}}
        unfinished = http.post("/flow_runs/count", json=body)
        unfinished.raise_for_status()
        limits = http.post("/v2/concurrency_limits/filter", json={})
        limits.raise_for_status()
    return int(unfinished.json()), sum(int(lim.get("active_slots", 0)) for lim in limits.json())


async def soak(home: Path, args: argparse.Namespace, service: int) -> dict[str, object]:
    """Run the soak against the home's service (pid ``service``); print the table, return the figures."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=str(BIN / "tianshu-mcp"), env=env_for(home))
    work = home.parent / f"{home.name}-projects"
    statuses: dict[str, int] = {}
    not_succeeded: list[str] = []
    rows: list[dict[str, float]] = []
    async with Client(params, mode="legacy") as client:
        await client.call_tool("query_info", {"type": "profiles"})
        done = 0
        started = time.monotonic()
        rested = 0.0  # seconds of --settle rest, left out of the time per task
        print(f"{'tasks':>6} {'tree RSS':>9} {'tree PSS':>9} {'service RSS':>12} {'anon':>6} {'file':>6} "
              f"{'thr':>4} {'fds':>4} {'db':>6} {'answer p50':>11} {'query p50':>10} {'s/task':>7}"
              + (f" {'settled PSS':>12} {'anon':>6}" if args.settle else ""), flush=True)
        while done < args.tasks:
            batch = min(args.every, args.tasks - done)
            answer_ms: list[float] = []
            query_ms: list[float] = []
            queue = list(range(done, done + batch))
            t_batch = time.monotonic()

            async def lane() -> None:
                while queue:
                    i = queue.pop(0)
                    repo = make_calc_repo(work / f"soak-{i}")
                    t = time.perf_counter()
                    r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "fix add test_add_negative",
                                                            "agentId": "soak", "autoFixRounds": 0})
                    answer_ms.append((time.perf_counter() - t) * 1000)
                    assert not r.is_error, r.content[0].text
                    task_id = r.structured_content["taskId"]
                    end = await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000})
                    status = str((end.structured_content or {}).get("status"))
                    statuses[status] = statuses.get(status, 0) + 1
                    if status != "succeeded":
                        not_succeeded.append(f"{task_id}: {status}")
                    t = time.perf_counter()
                    await client.call_tool("query_task", {"taskId": task_id})
                    query_ms.append((time.perf_counter() - t) * 1000)
                    shutil.rmtree(repo, ignore_errors=True)  # the projects' disk stays small

            await asyncio.gather(*(lane() for _ in range(args.parallel)))
            done += batch
            per_task = (time.monotonic() - t_batch) / batch
            await resting(service)  # engines end ≈0.5 s after their final state (Prefect's heartbeat join)
            rss, pss = tree_memory(service, pss=True)
            detail = service_detail(service, home)
            row = {"tasks": done, "rss": rss, "pss": pss, "service_rss": own_rss(service), **detail,
                   "answer_p50": statistics.median(answer_ms), "query_p50": statistics.median(query_ms),
                   "s_per_task": per_task}
            line = (f"{done:>6} {rss:>8.0f}M {pss:>8.0f}M {row['service_rss']:>11.0f}M {detail['anon']:>5.0f}M "
                    f"{detail['file']:>5.0f}M {detail['threads']:>4.0f} {detail['fds']:>4.0f} {detail['db']:>5.0f}M "
                    f"{row['answer_p50']:>9.1f}ms {row['query_p50']:>8.1f}ms {per_task:>7.2f}")
            if args.settle:  # the resting figure after the service's periodic trim (core/memory.TRIM_EVERY_S)
                await asyncio.sleep(args.settle)
                rested += args.settle
                row["settled_pss"] = tree_memory(service, pss=True)[1]
                row["settled_anon"] = service_detail(service, home)["anon"]
                line += f" {row['settled_pss']:>11.0f}M {row['settled_anon']:>5.0f}M"
            rows.append(row)
            print(line, flush=True)
        total_s = time.monotonic() - started - rested
        # query_task with the whole history in the home (distinct finished tasks)
        ids = sorted(p.name for p in (home / "tasks").iterdir() if p.is_dir())
        history_ms = []
        for task_id in ids[:: max(1, len(ids) // 50)]:
            t = time.perf_counter()
            await client.call_tool("query_task", {"taskId": task_id})
            history_ms.append((time.perf_counter() - t) * 1000)
    unfinished, slots = api_leftovers(home)
    entries = len(list((home / "submissions").glob("*.json"))) if (home / "submissions").exists() else 0
    agents = agents_alive(str(Path(scripted_profile()["argsTemplate"][0])))
    # growth from the first sample at or after task 100 (the first sample when the soak is
    # shorter) to the last; with one sample there is nothing to compare
    base = next((r for r in rows if r["tasks"] >= 100 and r is not rows[-1]), rows[0])
    last = rows[-1]
    compared = base is not last
    growth_pss = (last["pss"] - base["pss"]) / base["pss"] * 100 if compared else None
    growth_rss = (last["rss"] - base["rss"]) / base["rss"] * 100 if compared else None
    growth_settled = ((last["settled_pss"] - base["settled_pss"]) / base["settled_pss"] * 100
                      if args.settle and compared else None)
    print(f"\n{args.tasks} tasks in {total_s / 60:.1f} min ({total_s / args.tasks:.2f} s per task, {args.parallel} at once"
          + (f"; {rested:.0f} s of rest left out" if rested else "") + f"); statuses {statuses}")
    print(f"stuck runs: {unfinished} flow runs not final; {len(not_succeeded)} tasks not succeeded {not_succeeded[:5]}")
    print(f"leaked slots: {slots} active global-concurrency slots; {entries} submission entries left; "
          f"{agents} agent processes alive")
    if not compared:
        print("growth: one sample only (use more tasks than --every)")
    else:
        print(f"growth, task {base['tasks']:.0f} → {last['tasks']:.0f}: tree PSS {base['pss']:.0f} → {last['pss']:.0f} MiB "
              f"({growth_pss:+.1f} %), tree RSS {base['rss']:.0f} → {last['rss']:.0f} MiB ({growth_rss:+.1f} %) (goal ≤ 5 %)")
    if growth_settled is not None:
        print(f"growth after {args.settle:.0f} s of rest: tree PSS {base['settled_pss']:.0f} → {last['settled_pss']:.0f} MiB "
              f"({growth_settled:+.1f} %)")
    print(f"query_task with {len(ids)} tasks in history: median {statistics.median(history_ms):.1f} ms, "
          f"p95 {pct(history_ms, .95):.1f} ms (goal ≤ 10 ms)")
    return {"rows": rows, "statuses": statuses, "unfinished": unfinished, "slots": slots, "entries": entries,
            "agents": agents, "growth_pss": growth_pss, "growth_rss": growth_rss, "growth_settled": growth_settled,
            "history_query_p50": statistics.median(history_ms), "total_s": total_s}


async def resting(service: int, limit_s: float = 60.0) -> None:
    """Wait until the service tree has no flow-run engine left (a process whose parent is the
    fork server), at most ``limit_s`` seconds, so that a sample measures the resting tree."""
    import psutil

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            engines = [p for p in psutil.Process(service).children(recursive=True)
                       if p.status() != psutil.STATUS_ZOMBIE and "hosting.forkserver" in " ".join(p.parent().cmdline())]
        except psutil.Error:
            engines = [None]
        if not engines:
            return
        await asyncio.sleep(0.2)


def _at_least(low: float, kind: type = int) -> Callable[[str], float]:
    """An argparse type: a number of ``kind`` that is at least ``low``."""
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {text}")
        return value
    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=_at_least(1), default=1000)
    parser.add_argument("--parallel", type=_at_least(1), default=2)
    parser.add_argument("--every", type=_at_least(1), default=50)
    parser.add_argument("--settle", type=_at_least(0, float), default=0.0,
                        help="after each sample, rest this many seconds (35 covers the service's 30-s trim) "
                             "and sample the tree's PSS again")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the data home")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tianshu-soak-"))
    (home / "config.json").write_text(json.dumps({"prefect": {"port": 4395}}))
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": {
        "soak": scripted_profile(mode="normal"),
    }}))
    daemon = start_service(home)
    failed = True
    try:
        from conftest import wait_daemon

        wait_daemon(home, daemon)
        print(f"home {home}; service pid {daemon.pid}", flush=True)
        figures = asyncio.run(soak(home, args, daemon.pid))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
        failed = bool(figures["unfinished"] or figures["slots"] or figures["entries"] or figures["agents"]
                      or sum(v for k, v in figures["statuses"].items() if k != "succeeded"))  # type: ignore[union-attr]
    finally:
        stop_service(daemon, home, args.keep)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
