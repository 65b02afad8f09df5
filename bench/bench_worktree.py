"""Benchmark worktree parallelism on one repository (docs/isolation.md §4.4, local part).

N tasks on one repository, each agent sleeping a fixed time (``sleep`` mode of the scripted agent,
verification off so the agent dominates), once with ``worktreeParallel`` 1 and once with 3 (the
pool's ``maxRunning`` 3 in both). Prints the makespan (first ``run_task`` to the last task's end)
per setting, the ideal makespan ``ceil(N / p) * d``, the ratio actual/ideal, and the speed-up
of 3 over 1. A warm-up task runs first so the service's start is not measured.

Usage: ``.venv/bin/python bench/bench_worktree.py [--tasks 9] [--sleep 4]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import mcp_client, meta_of, text_of  # noqa: E402
from fixture_project import make_calc_repo, scripted_profile  # noqa: E402
from test_service import cli, kill_services, new_home  # noqa: E402


async def makespan(home: Path, repo: Path, tasks: int) -> float:
    """Submit ``tasks`` worktree tasks at once and wait for all; seconds from first submit to last end."""
    async with mcp_client(home) as client:
        start = time.monotonic()
        ids = []
        for n in range(tasks):
            r = await client.call_tool("run_task", {"projectPath": str(repo), "task": f"bench {n}", "agentId": "bench",
                                                    "autoVerify": False, "isolation": "worktree"})
            assert not r.is_error, text_of(r)
            ids.append(meta_of(r)["taskId"])
        for task_id in ids:
            meta = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000}))
            assert meta["status"] == "succeeded", meta
        return time.monotonic() - start


async def run(tasks: int, sleep_s: float) -> None:
    results: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-wt-") as tmp:
        for parallel in (1, 3):
            home = new_home(Path(tmp), f"home{parallel}", 4700 + parallel)
            cfg: dict[str, Any] = json.loads((home / "config.json").read_text())
            cfg["concurrency"] = {"maxRunning": 3, "worktreeParallel": parallel}
            (home / "config.json").write_text(json.dumps(cfg))
            profiles = json.loads((home / "agent-profiles.json").read_text())
            profiles["profiles"]["bench"] = scripted_profile(
                mode="sleep", extra_env={"SCRIPTED_TRACE": str(home / "trace.txt"), "SCRIPTED_SLEEP": str(sleep_s)})
            (home / "agent-profiles.json").write_text(json.dumps(profiles))
            repo = make_calc_repo(Path(tmp) / f"repo{parallel}")
            try:
                await makespan(home, repo, 1)  # warm-up: the service starts
                results[parallel] = await makespan(home, repo, tasks)
            finally:
                cli(home, "service", "stop")
                kill_services(home)
    print(f"{tasks} worktree tasks on one repository, agents sleeping {sleep_s:.1f} s each")
    print(f"{'worktreeParallel':>16} {'makespan s':>11} {'ideal s':>8} {'actual/ideal':>13}")
    for parallel, secs in results.items():
        ideal = math.ceil(tasks / parallel) * sleep_s
        print(f"{parallel:>16} {secs:>11.1f} {ideal:>8.1f} {secs / ideal:>13.2f}")
    print(f"speed-up of 3 over 1: {results[1] / results[3]:.2f}x (ideal 3.00x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=9)
    parser.add_argument("--sleep", type=float, default=4.0)
    args = parser.parse_args()
    asyncio.run(run(args.tasks, args.sleep))


if __name__ == "__main__":
    main()
