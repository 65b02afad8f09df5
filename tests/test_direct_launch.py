"""The service starts its own flow runs through the fork server (hosting/direct_launch.py;
docs/design-notes.md, note 58): the environment the worker would have given, the claim that
keeps one run to one engine, the runs it leaves to the worker, and a killed engine's crash."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from uuid import UUID, uuid4

import httpx
import psutil
import pytest

from conftest import mcp_client, meta_of
from tianshu_mcp.deployments.setup import RUN_TASK_ENTRYPOINT, locked_job_template
from tianshu_mcp.hosting.direct_launch import DirectLauncher
from tianshu_mcp.hosting.worker import OwnApiJobConfiguration

pytestmark = [pytest.mark.anyio, pytest.mark.prefect]


def until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture
async def client(ts_daemon: dict[str, Any]) -> AsyncIterator[Any]:
    """A Prefect client of the session service's API."""
    from prefect.client.orchestration import PrefectClient

    auth = (ts_daemon["home"] / "prefect" / "credentials").read_text().strip()
    async with PrefectClient(ts_daemon["api"], auth_string=auth) as prefect_client:
        yield prefect_client


@pytest.fixture
def later_run(ts_daemon: dict[str, Any], prefect_api: httpx.Client, tmp_path: Path) -> Any:
    """A re-verification flow run of the home's pool scheduled an hour ahead (nobody's due
    run), deleted afterwards; yields its id."""
    deployments = {d["name"]: d["id"] for d in prefect_api.post("/deployments/filter", json={}).json()}
    when = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    run = prefect_api.post(f"/deployments/{deployments['reverify']}/create_flow_run",
                           json={"parameters": {"project_path": str(tmp_path)},
                                 "state": {"type": "SCHEDULED", "name": "Scheduled",
                                           "state_details": {"scheduled_time": when}}})
    run.raise_for_status()
    yield run.json()["id"]
    prefect_api.delete(f"/flow_runs/{run.json()['id']}")


async def test_the_engine_gets_the_environment_the_worker_would_give_it(client: Any, tmp_path: Path) -> None:
    """Every variable of the worker's job configuration for the run (Prefect's settings, the
    run's id and attribution, the engine's variables) with the same value, and the engine
    starter's run variables."""
    from prefect.client.schemas.objects import FlowRun

    deployment = await client.read_deployment_by_name("run-task/run-task")
    flow = await client.read_flow(deployment.flow_id)
    flow_run = FlowRun(id=uuid4(), name="env-check", flow_id=flow.id, deployment_id=deployment.id)
    ours = DirectLauncher(tmp_path / "engine.sock").environment(flow_run, deployment, flow, "tianshu-test",
                                                                 UUID(int=7))
    job = await OwnApiJobConfiguration.from_template_and_values(base_job_template=locked_job_template(),
                                                                values={}, client=client)
    job.prepare_for_flow_run(flow_run, deployment, flow, None, "tianshu-test", UUID(int=7))
    differing = {k: (v, ours.get(k)) for k, v in job.env.items() if v is not None and ours.get(k) != str(v)}
    assert not differing
    assert ours["PREFECT__FLOW_RUN_ID"] == str(flow_run.id)
    assert ours["PREFECT__FLOW_ENTRYPOINT"] == RUN_TASK_ENTRYPOINT
    assert ours["PREFECT__DEPLOYMENT_NAME"] == "run-task"
    assert ours["PREFECT__ENABLE_CANCELLATION_AND_CRASHED_HOOKS"] == "false"
    assert ours["PREFECT_CLIENT_CSRF_SUPPORT_ENABLED"] == "False"


async def test_without_a_listening_fork_server_the_run_is_left_to_the_worker(client: Any, later_run: str,
                                                                              tmp_path: Path,
                                                                              prefect_api: httpx.Client) -> None:
    """Nothing listens at the socket (the fork server starting or restarting): the run is not
    claimed, so the worker's poll starts it as before."""
    run = await client.read_flow_run(UUID(later_run))
    assert await DirectLauncher(tmp_path / "nobody.sock").launch(client, run, "tianshu-test") is False
    assert prefect_api.get(f"/flow_runs/{later_run}").json()["state"]["type"] == "SCHEDULED"


async def test_a_run_someone_else_claimed_is_not_started_again(client: Any, later_run: str, tmp_path: Path,
                                                               prefect_api: httpx.Client) -> None:
    """The worker proposed Pending first: the launch is refused by Prefect's orchestration,
    sends the fork server no request and leaves the run as the worker made it."""
    run = await client.read_flow_run(UUID(later_run))
    prefect_api.post(f"/flow_runs/{later_run}/set_state",
                     json={"state": {"type": "PENDING", "name": "Pending"}}).raise_for_status()
    path = tmp_path / "engine.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    try:
        assert await DirectLauncher(path).launch(client, run, "tianshu-test") is True
        listener.settimeout(5)
        conn, _ = listener.accept()
        conn.settimeout(5)
        assert conn.recv(1024) == b""  # connected, then closed without a request
        conn.close()
    finally:
        listener.close()
    state = prefect_api.get(f"/flow_runs/{later_run}").json()["state"]
    assert state["type"] == "PENDING" and not prefect_api.get(f"/flow_runs/{later_run}").json()["infrastructure_pid"]


async def test_an_engine_killed_outright_crashes_its_run(ts_daemon: dict[str, Any], calc_repo: Path,
                                                         prefect_api: httpx.Client) -> None:
    """kill -9 of a directly started engine: the service sees its exit status and reports the run
    Crashed with Prefect's explanation, as the worker does for its launchers; the task is
    ``interrupted``; the agent, in a session of its own, is killed too (it would otherwise go on
    changing the project after the task ended)."""
    home = ts_daemon["home"]
    pidfile = home / "hang-pids.txt"
    pidfile.unlink(missing_ok=True)
    async with mcp_client(home) as mcp:
        sub = meta_of(await mcp.call_tool("run_task", {"projectPath": str(calc_repo), "task": "hang",
                                                       "agentId": "scripted-hang", "taskTimeoutMs": 900000}))
        tdir = home / "tasks" / sub["taskId"]
        until(lambda: pidfile.exists() and len(pidfile.read_text().split()) >= 2, 120, "the agent to start")
        agents = [int(p) for p in pidfile.read_text().split()]
        engine = json.loads((tdir / "flow-proc.json").read_text())["pid"]
        run_id = json.loads((tdir / "task.json").read_text())["flowRunId"]
        os.kill(engine, signal.SIGKILL)
        state = until(lambda: (s := prefect_api.get(f"/flow_runs/{run_id}").json()["state"])["type"] == "CRASHED" and s,
                      60, "the run to be reported crashed")
        # the service's launcher or, when its poll claimed the run first (a loaded machine), the
        # worker's: each words the exit status its own way, with Prefect's explanation of it
        assert "-9" in state["message"] and "SIGKILL signal" in state["message"], state
        status = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = meta_of(await mcp.call_tool("query_task", {"taskId": sub["taskId"]}))["status"]
            if status == "interrupted":
                break
        assert status == "interrupted"
        live = [psutil.Process(p) for p in agents if psutil.pid_exists(p)]
        _, alive = psutil.wait_procs(live, timeout=60)
        assert alive == [], alive


def test_prefects_settings_are_turned_into_variables_once_per_settings_object(tmp_path: Path,
                                                                                monkeypatch: Any) -> None:
    """The worker serialises Prefect's settings twice per run (12 ms each): here once per
    settings object, and again when the settings are another object (design note 77)."""
    from prefect.settings import PREFECT_LOGGING_LEVEL, get_current_settings, temporary_settings

    root = type(get_current_settings())
    real = root.to_environment_variables
    calls: list[int] = []
    monkeypatch.setattr(root, "to_environment_variables", lambda self, **kw: (calls.append(1), real(self, **kw))[1])
    launcher = DirectLauncher(tmp_path / "engine.sock")
    first = launcher._settings_environment()
    assert launcher._settings_environment() is first and len(calls) == 1
    with temporary_settings({PREFECT_LOGGING_LEVEL: "DEBUG"}):
        changed = launcher._settings_environment()
    assert changed["PREFECT_LOGGING_LEVEL"] == "DEBUG" and len(calls) == 2
    assert first == real(get_current_settings(), exclude_unset=True)
