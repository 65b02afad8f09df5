"""Benchmark the remote topology (docs/isolation.md §4.4).

A cluster on this machine (``tests/remote_cluster.py``: PostgreSQL, a Prefect server on it,
``tianshu-mcp worker`` processes with their own data homes, bare git remotes) and an MCP client in
remote mode. Agents sleep a fixed time (``sleep`` mode of the scripted agent, verification off so
the agent dominates).

* A: 40 tasks over 8 remotes, 1 worker vs 2 workers (each ``--limit L``);
  ideal makespan ``ceil(40 / (workers * L)) * d``.
* B: 12 tasks on one remote, 2 workers, ``worktreeParallel`` 1 vs 3;
  ideal ``ceil(12 / p) * d``.

Prints each makespan (first ``run_task`` to the last task's end, after a warm-up task), its ratio
to the ideal and the speed-ups; ``--repeat`` runs each setting several times and prints medians.

Usage: ``.venv/bin/python bench/bench_remote.py [--sleep 4] [--limit 4] [--repeat 1]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import mcp_client, meta_of, text_of  # noqa: E402
from remote_cluster import Cluster, bare_remote, scripted_profile  # noqa: E402

POOL = "bench"


async def makespan(cl: Cluster, home: Path, remotes: list[Path], tasks: int) -> float:
    """Warm up with one task, then submit ``tasks`` over ``remotes`` round-robin and wait for all; s."""
    async with mcp_client(home, env=cl.caller_env()) as client:
        async def submit(n: int) -> str:
            r = await client.call_tool("run_task", {"task": f"bench {n}", "repoUrl": str(remotes[n % len(remotes)]),
                                                    "workPool": POOL, "agentId": "bench", "autoVerify": False})
            assert not r.is_error, text_of(r)
            return str(meta_of(r)["taskId"])

        async def wait(ids: list[str]) -> None:
            for task_id in ids:
                while True:
                    meta = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 30000}))
                    if meta.get("waitSettled"):
                        assert meta["status"] == "succeeded", meta
                        break

        await wait([await submit(-1)])
        start = time.monotonic()
        ids = [await submit(n) for n in range(tasks)]
        await wait(ids)
        return time.monotonic() - start


def caller(cl: Cluster, name: str, parallel: int) -> Path:
    home = cl.root / f"caller-{name}"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"concurrency": {"worktreeParallel": parallel}}))
    return home


async def run(sleep_s: float, limit: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        cl = Cluster(Path(tmp))
        try:
            cl.start_server(cl.start_postgres())
            profiles = {"bench": scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(cl.root / "trace"),
                                                                           "SCRIPTED_SLEEP": str(sleep_s)})}
            many = [bare_remote(cl.root, f"p{i}") for i in range(8)]
            one = [bare_remote(cl.root, "one")]
            cl.start_worker("w1", POOL, profiles, "--limit", str(limit))
            cl.wait_workers(POOL, ["w1"])
            a: dict[int, list[float]] = {1: [], 2: []}
            b: dict[int, list[float]] = {1: [], 3: []}
            for r in range(repeat):
                a[1].append(await makespan(cl, caller(cl, f"a1-{r}", 3), many, 40))
            cl.start_worker("w2", POOL, profiles, "--limit", str(limit))
            cl.wait_workers(POOL, ["w1", "w2"])
            for r in range(repeat):
                a[2].append(await makespan(cl, caller(cl, f"a2-{r}", 3), many, 40))
                for p in (1, 3):
                    b[p].append(await makespan(cl, caller(cl, f"b{p}-{r}", p), one, 12))
        finally:
            cl.close()
    print(f"agent sleep {sleep_s} s, worker limit {limit}, {repeat} run(s) per setting (medians)")
    med = {f"A{w}": statistics.median(v) for w, v in a.items()} | {f"B{p}": statistics.median(v) for p, v in b.items()}
    for w in (1, 2):
        ideal = math.ceil(40 / (w * limit)) * sleep_s
        print(f"A: 40 tasks / 8 remotes, {w} worker(s): makespan {med[f'A{w}']:.1f} s, ideal {ideal:.0f} s, "
              f"ratio {med[f'A{w}'] / ideal:.2f}")
    print(f"A: speed-up 2 workers over 1: {med['A1'] / med['A2']:.2f}x (ideal {math.ceil(40 / limit) / math.ceil(40 / (2 * limit)):.2f}x)")
    for p in (1, 3):
        ideal = math.ceil(12 / p) * sleep_s
        print(f"B: 12 tasks / 1 remote, worktreeParallel {p}: makespan {med[f'B{p}']:.1f} s, ideal {ideal:.0f} s, "
              f"ratio {med[f'B{p}'] / ideal:.2f}")
    print(f"B: speed-up parallel 3 over 1: {med['B1'] / med['B3']:.2f}x (ideal 3.00x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep", type=float, default=4.0)
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(run(args.sleep, args.limit, args.repeat))


if __name__ == "__main__":
    main()
