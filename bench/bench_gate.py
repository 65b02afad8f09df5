"""Benchmark the project gate over many trials (run on demand; not part of the test suite).

For each way a task's work can be cut short — kill -9 of its flow-run process, kill -9 of the
home's service, ``manage_task(cancel)``, the agent's timeout — it runs N trials of: a task whose
agent ignores SIGTERM and leaves a TERM-ignoring grandchild (in its own session), then a second
task on the same project whose agent records, as it starts, which of the first task's processes
are still alive. Prints, per cause, the trials, how many overlapped (goal: 0) and the median time
from the cause to the second agent's start.

Usage: ``.venv/bin/python bench/bench_gate.py [--trials 10]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import write_profiles  # noqa: E402
from fixture_project import make_calc_repo, scripted_profile  # noqa: E402
from test_service import cli, kill_services, until  # noqa: E402
from test_stdio_host import RawClient, _alive, _init, _wait_pids  # noqa: E402


def call(home: Path, tool: str, args: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """One call on a fresh stdio server (the service may have been killed: retry while it restarts)."""
    deadline = time.monotonic() + 180
    while True:
        raw = RawClient(home)
        try:
            _init(raw)
            res = raw.call(tool, args, timeout=timeout)
        finally:
            raw.close()
        text = res["content"][0]["text"]
        if not (res.get("isError") and "PREFECT_UNAVAILABLE" in text) or time.monotonic() > deadline:
            return res
        time.sleep(1)


def _service_alive(home: Path) -> bool:
    from test_service import service_processes

    return bool(service_processes(home))


def trial(home: Path, cause: str, n: int) -> tuple[bool, float]:
    base = home.parent / f"{home.name}-{cause.split()[0]}-{n}"  # projects never live inside the data home
    base.mkdir()
    repo = make_calc_repo(base / "calc")
    pidfile, probe = base / "pids.txt", base / "probe.txt"
    profiles = json.loads((home / "agent-profiles.json").read_text())
    hang = scripted_profile(mode="hang", extra_env={"SCRIPTED_PIDFILE": str(pidfile)})
    if cause == "timeout":
        hang["timeoutMs"] = 2000
    profiles["profiles"]["b-hang"] = hang
    profiles["profiles"]["b-probe"] = scripted_profile(mode="probe", extra_env={"SCRIPTED_WATCH": str(pidfile),
                                                                                "SCRIPTED_PROBE_OUT": str(probe)})
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    first = call(home, "run_task", {"projectPath": str(repo), "task": "hang", "agentId": "b-hang"})["structuredContent"]
    pids = _wait_pids(pidfile, 2, timeout=180)
    second = call(home, "run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                     "agentId": "b-probe", "autoVerify": False})["structuredContent"]
    t0 = time.time()
    if cause == "flow-run kill -9":
        os.kill(json.loads((home / "tasks" / first["taskId"] / "flow-proc.json").read_text())["pid"], signal.SIGKILL)
    elif cause == "service kill -9":
        kill_services(home)
        until(lambda: not _service_alive(home), 30, "the service to die")
        call(home, "query_task", {"taskId": second["taskId"]})  # a host polling: its server starts the service
    elif cause == "cancel":
        call(home, "manage_task", {"taskId": first["taskId"], "action": "cancel"})
    until(lambda: probe.exists() and probe.read_text().endswith("\n"), 240, "the second agent to start")
    line = probe.read_text().splitlines()[0]
    started = float(line.split()[0])
    overlap = "alive=[]" not in line
    until(lambda: not _alive(pids), 30, "the first tree to be gone")
    return overlap, started - t0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--causes", default="flow-run kill -9,service kill -9,cancel,timeout",
                        help="comma-separated subset of the causes")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tsgate-")) / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"prefect": {"port": 4650}}))
    write_profiles(home, home / "trace.txt")
    try:
        for cause in args.causes.split(","):
            results = [trial(home, cause, i) for i in range(args.trials)]
            overlaps = sum(1 for o, _ in results if o)
            gaps = [g for _, g in results]
            print(f"{cause:<18} trials {len(results):3d}  overlaps {overlaps}  cause → next agent start "
                  f"median {statistics.median(gaps):6.2f} s  max {max(gaps):6.2f} s", flush=True)
    finally:
        cli(home, "service", "stop")
        kill_services(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
