"""Timeouts (docs/lifecycle.md §6): ``taskTimeoutMs`` comes from the call, else the
agent's profile, else ``config.json``'s ``defaultTaskTimeoutMs``; and the service's watchdog ends a
flow whose process hangs (here: stopped with SIGSTOP, the hardest hang there is)."""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx
import psutil
import pytest

from conftest import add_scripted_profile, auth_headers, mcp_client, meta_of, run_to_stop
from fixture_project import make_calc_repo, scripted_profile

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon")]


@contextmanager
def config_of(home: Path, **fields: Any) -> Iterator[None]:
    """``fields`` merged into ``home``'s config.json for the block; the file is restored after."""
    path = home / "config.json"
    before = path.read_bytes() if path.exists() else None
    current = json.loads(before) if before else {}
    path.write_text(json.dumps({**current, **fields}))
    try:
        yield
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


def _task(home: Path, task_id: str) -> dict[str, Any]:
    return json.loads((home / "tasks" / task_id / "task.json").read_text())


async def test_task_timeout_comes_from_the_call_then_the_profile_then_the_config(ts_home: Path, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    profiles = json.loads((ts_home / "agent-profiles.json").read_text())
    untimed = scripted_profile(mode="noop")
    del untimed["timeoutMs"]
    profiles["profiles"]["untimed-noop"] = untimed
    profiles["profiles"]["timed-noop"] = scripted_profile(mode="noop", timeout_ms=123000)
    (ts_home / "agent-profiles.json").write_text(json.dumps(profiles))
    base = {"projectPath": str(repo), "task": "Fix add", "autoVerify": False}
    with config_of(ts_home, defaultTaskTimeoutMs=654000):
        call, _ = await run_to_stop(ts_home, {**base, "agentId": "timed-noop", "taskTimeoutMs": 4321})
        profile, _ = await run_to_stop(ts_home, {**base, "agentId": "timed-noop"})
        config, done = await run_to_stop(ts_home, {**base, "agentId": "untimed-noop"})
    assert done["status"] == "succeeded", done
    got = [_task(ts_home, m["taskId"])["taskTimeoutMs"] for m in (call, profile, config)]
    assert got == [4321, 123000, 654000]
    # the flow run is given the same limit (a UI-visible parameter)
    run = httpx.get(f"{ts_home_api(ts_home)}/flow_runs/{done['flowRunId']}", headers=auth_headers(ts_home), timeout=30).json()
    assert run["parameters"]["task_timeout_ms"] == 654000


def ts_home_api(home: Path) -> str:
    return json.loads((home / "prefect" / "service.json").read_text())["apiUrl"]


async def test_the_watchdog_ends_a_flow_whose_process_hangs(ts_home: Path, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    pidfile = tmp_path / "hang-pids.txt"
    add_scripted_profile(ts_home, "stall-hang", "hang", {"SCRIPTED_PIDFILE": str(pidfile)})
    stopped: psutil.Process | None = None
    with config_of(ts_home, flowStallMs=10000):
        try:
            async with mcp_client(ts_home) as client:
                tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                                  "agentId": "stall-hang"}))["taskId"]
                tdir = ts_home / "tasks" / tid
                deadline = time.monotonic() + 120
                while not (pidfile.exists() and len(pidfile.read_text().split()) >= 2 and (tdir / "flow-proc.json").exists()):
                    assert time.monotonic() < deadline, "the agent never started"
                    await anyio.sleep(0.2)
                agent_pids = [int(p) for p in pidfile.read_text().split()]
                flow_pid = json.loads((tdir / "flow-proc.json").read_text())["pid"]
                stopped = psutil.Process(flow_pid)
                os.kill(flow_pid, signal.SIGSTOP)  # hung: no progress, no stop probe, no state change
                done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
            assert done["status"] == "failed" and done["errorType"] == "timeout", done
            assert done["abortSource"] == "timeout" and "made no progress" in done["message"], done
            deadline = time.monotonic() + 30
            while stopped.is_running() and stopped.status() != psutil.STATUS_ZOMBIE or any(_alive(p) for p in agent_pids):
                assert time.monotonic() < deadline, "the hung flow process or its agent survived the watchdog"
                await anyio.sleep(0.2)
            # written before the kill: the worker does not turn the killed process into a crash
            run = httpx.get(f"{ts_home_api(ts_home)}/flow_runs/{done['flowRunId']}", headers=auth_headers(ts_home),
                            timeout=30).json()
            assert run["state"]["type"] == "FAILED", run["state"]
            api = ts_home_api(ts_home)
            runs = httpx.post(f"{api}/task_runs/filter", headers=auth_headers(ts_home), timeout=30,
                              json={"flow_runs": {"id": {"any_": [done["flowRunId"]]}}}).json()
            assert {tr["name"]: tr["state"]["type"] for tr in runs}["dispatch-round-0"] == "CRASHED", runs
            logs = httpx.post(f"{api}/logs/filter", headers=auth_headers(ts_home), timeout=30,
                              json={"logs": {"flow_run_id": {"any_": [done["flowRunId"]]}}, "limit": 200}).json()
            assert any("made no progress" in e["message"] and e["name"] == "tianshu.watchdog" for e in logs), logs
            events = [json.loads(line)["event"] for line in (tdir / "task.jsonl").read_text().splitlines()]
            assert events[-1] == "failed"
        finally:
            if stopped is not None and stopped.is_running():
                stopped.send_signal(signal.SIGCONT)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_stall_limit_below_ten_seconds_is_refused() -> None:
    """A limit the stop probes (a stamp per second) could not keep is a config error, never a
    watchdog that kills healthy flows."""
    from pydantic import ValidationError

    from tianshu_mcp.core.settings import ServerConfig

    with pytest.raises(ValidationError, match="flowStallMs"):
        ServerConfig.model_validate({"flowStallMs": 2000})
    assert ServerConfig.model_validate({"flowStallMs": 10000}).flow_stall_ms == 10000
