"""The per-home background service (docs/hosting.md): durable tasks, instant acceptance, one home =
one Prefect, a locked-down API, entry points, sweeps, UI cancel/delete, the project gate and the
kill matrix. Every test drives the installed console script; services of fresh homes are started
by the clients themselves, as for a new user."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import psutil
import pytest

from conftest import CONSOLE, Retry503, auth_headers, mcp_client, meta_of, server_env, wait_daemon, write_profiles, pid_running
from fixture_project import make_calc_repo, scripted_profile
from test_stdio_host import RawClient, _alive, _init, _pids, _wait_pids, meta

# every test starts services of fresh homes: one such test at a time in a parallel run (conftest)
pytestmark = [pytest.mark.anyio]  # own_services per test: those on ts_daemon start no service


def until(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """Wait for ``cond()`` to be truthy (deadline, never a fixed sleep); return its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def cli(home: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CONSOLE, *args], env=server_env(home), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def service_info(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads((home / "prefect" / "service.json").read_text())
    except (OSError, ValueError):
        return None


def service_processes(home: Path) -> list[psutil.Process]:
    """Service processes (background or ``server``) of ``home`` still alive."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if ("tianshu_mcp.hosting.service" in cmd or cmd.endswith("tianshu-mcp server")) \
                    and proc.environ().get("TIANSHU_MCP_HOME") == str(home) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def forkservers_of(home: Path) -> list[psutil.Process]:
    """The home's fork servers (warm engines) still alive."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "tianshu_mcp.hosting.forkserver" in " ".join(proc.info["cmdline"] or []) \
                    and proc.environ().get("TIANSHU_MCP_HOME") == str(home) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def kill_services(home: Path) -> None:
    for proc in service_processes(home):
        try:
            proc.kill()
        except psutil.Error:
            pass


def new_home(tmp_path: Path, name: str, port: int, **prefect: Any) -> Path:
    home = tmp_path / name
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"prefect": {"port": port, **prefect}}))
    write_profiles(home, home / "trace.txt")
    return home


def api_of(home: Path) -> httpx.Client:
    info = service_info(home)
    assert info is not None
    return httpx.Client(base_url=info["apiUrl"], headers=auth_headers(home), timeout=10, transport=Retry503())


async def start_hanging_task(client: Any, home: Path, repo: Path) -> tuple[dict[str, Any], list[int]]:
    """run_task with the session's TERM-ignoring agent; wait for its two pids."""
    pidfile = home / "hang-pids.txt"
    pidfile.unlink(missing_ok=True)
    # the agent's time limit far above how long a loaded machine takes for the test's steps
    sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "hang", "agentId": "scripted-hang",
                                                      "taskTimeoutMs": 900000}))
    pids = _wait_pids(pidfile, 2)
    assert len(pids) == 2
    return sub, pids


# --- 1. durable tasks ------------------------------------------------------------------------
async def test_one_shot_clients_and_killed_stdio_servers_never_touch_a_task(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    repo = make_calc_repo(tmp_path / "calc")
    # a new stdio server for every call, as MCP Inspector's CLI does
    async with mcp_client(home) as client:
        sub, pids = await start_hanging_task(client, home, repo)
    for how in ("eof", "sigterm", "kill"):  # every way a host drops its stdio server
        raw = RawClient(home)
        _init(raw)
        res = raw.call("query_task", {"taskId": sub["taskId"]}, timeout=60)
        assert meta(res)["status"] == "running", res
        if how == "eof":
            assert raw.close() == 0
        elif how == "sigterm":
            raw.proc.terminate()
            assert raw.proc.wait(30) == 0
        else:
            raw.proc.kill()
            raw.proc.wait(10)
        assert _alive(pids) == pids  # the agent works on
    async with mcp_client(home) as client:
        assert meta_of(await client.call_tool("query_task", {"taskId": sub["taskId"]}))["status"] == "running"
        done = meta_of(await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "cancel"}))
    assert done["status"] == "cancelled" and not _alive(pids)

    # and a task that finishes while no client is connected is read back by a new one
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                                          "agentId": "scripted"}))
    for _ in range(10):
        async with mcp_client(home) as client:
            done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 20000}))
        if done["waitSettled"]:
            break
    assert done["status"] == "succeeded"


# --- 2. instant acceptance on a cold home, nothing lost -------------------------------------------
@pytest.mark.own_services
def test_cold_home_accepts_at_once_and_a_dead_submitter_loses_nothing(tmp_path: Path) -> None:
    home = new_home(tmp_path, "cold", 4460)
    repo = make_calc_repo(tmp_path / "calc")
    try:
        raw = RawClient(home)
        _init(raw)
        res = raw.call("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)", "agentId": "scripted"}, timeout=30)
        task_id = meta(res)["taskId"]
        # durable before the answer: the record and its submission entry (the service is still migrating)
        assert (home / "tasks" / task_id / "task.json").is_file()
        assert (home / "submissions" / f"{task_id}.json").is_file()
        first = raw.call("query_task", {"taskId": task_id}, timeout=30)
        assert meta(first)["status"] == "queued" and "waiting for the tianshu-mcp service" in res["content"][0]["text"] + first["content"][0]["text"]
        # the client and the service it started die before the flow run exists
        raw.proc.kill()
        raw.proc.wait(10)
        until(lambda: service_processes(home), 30, "the service process")
        kill_services(home)
        until(lambda: not service_processes(home), 30, "the service to die")
        assert (home / "submissions" / f"{task_id}.json").is_file()
        assert json.loads((home / "tasks" / task_id / "task.json").read_text()).get("flowRunId") is None
        # the next start submits it
        started = cli(home, "service", "start")
        assert started.returncode == 0, started.stderr
        until(lambda: json.loads((home / "tasks" / task_id / "task.json").read_text()).get("finishedAt"), 120, "the task to finish")
        # the flow records finishedAt, then returns its final state: wait for that state, not the file
        with api_of(home) as api:
            def runs() -> list[dict[str, Any]]:
                return api.post("/flow_runs/filter", json={"flow_runs": {"tags": {"all_": [f"tianshu-task:{task_id}"]}}}).json()

            until(lambda: [r["state"]["type"] for r in runs()] == ["COMPLETED"], 60, "the flow run to complete")
            assert [r["state"]["name"] for r in runs()] == ["Succeeded"]
        assert not (home / "submissions" / f"{task_id}.json").exists()
    finally:
        cli(home, "service", "stop")
        kill_services(home)


# --- 3. one home, one Prefect ----------------------------------------------------------------
@pytest.mark.extended
@pytest.mark.own_services
@pytest.mark.alone  # five Prefect services start at once
def test_five_homes_at_once_get_five_apis_and_a_taken_port_is_skipped(tmp_path: Path) -> None:
    foreign = socket.socket()
    foreign.bind(("127.0.0.1", 0))
    foreign.listen(1)
    taken = foreign.getsockname()[1]  # something else listens on the port every home prefers
    homes = [new_home(tmp_path, f"h{i}", taken) for i in range(5)]
    try:
        procs = [subprocess.Popen([CONSOLE, "service", "start"], env=server_env(h), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL) for h in homes]
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * 5, outs
        infos = [json.loads(out) for out, _ in outs]
        apis = [i["apiUrl"] for i in infos]
        assert len(set(apis)) == 5 and all(f":{taken}/" not in a for a in apis)
        for home, info in zip(homes, infos):
            ident = httpx.get(info["uiUrl"] + "/tianshu/identity", headers=auth_headers(home), timeout=5).json()
            assert ident["homeId"] == (home / "prefect" / "home-id").read_text().strip()
            other = homes[(homes.index(home) + 1) % 5]
            assert httpx.get(info["uiUrl"] + "/tianshu/identity", headers=auth_headers(other), timeout=5).status_code == 401
        # each home's task lands in its own database and task list only
        ids = []
        for home in homes:
            repo = make_calc_repo(home.parent / f"{home.name}-calc")
            raw = RawClient(home)
            _init(raw)
            ids.append(meta(raw.call("run_task", {"projectPath": str(repo), "task": "noop", "agentId": "scripted-noop",
                                                  "autoVerify": False}, timeout=30))["taskId"])
            raw.close()
        for home, task_id in zip(homes, ids):
            with api_of(home) as api:
                until(lambda: api.post("/flow_runs/filter", json={"flow_runs": {"tags": {
                    "all_": [f"tianshu-task:{task_id}"]}}}).json(), 60, "the flow run")
                names = {r["name"].split(" · ", 1)[0] for r in api.post("/flow_runs/filter", json={}).json()}
            assert names == {task_id}
            assert {p.name for p in (home / "tasks").iterdir()} == {task_id}
    finally:
        foreign.close()
        for home in homes:
            cli(home, "service", "stop")
            kill_services(home)


# --- 4. locked-down API -----------------------------------------------------------------------
async def test_api_needs_credentials_refuses_other_origins_and_job_overrides(ts_daemon: dict[str, Any], tmp_path: Path,
                                                                            prefect_api: httpx.Client) -> None:
    home, api = ts_daemon["home"], ts_daemon["api"]
    assert httpx.post(f"{api}/flow_runs/filter", json={}, timeout=5).status_code == 401
    assert httpx.get(f"{api}/work_pools/tianshu", timeout=5).status_code == 401
    assert os.stat(home / "prefect" / "credentials").st_mode & 0o777 == 0o600
    ui = api[: -len("/api")]
    evil = httpx.options(f"{api}/flow_runs/filter", headers={"Origin": "http://evil.example",
                                                            "Access-Control-Request-Method": "POST"}, timeout=5)
    assert evil.status_code == 400 and "access-control-allow-origin" not in evil.headers
    own = httpx.options(f"{api}/flow_runs/filter", headers={"Origin": ui, "Access-Control-Request-Method": "POST"}, timeout=5)
    assert own.status_code == 200 and own.headers["access-control-allow-origin"] == ui
    # a flow run asking the worker to run a command of its choosing is refused
    marker = tmp_path / "pwned"
    dep = prefect_api.get("/deployments/name/run-task/run-task").json()
    for hostile in ({"command": f"touch {marker}"}, {"env": {"PYTHONSTARTUP": str(marker)}}, {"working_dir": str(tmp_path)}):
        resp = prefect_api.post(f"/deployments/{dep['id']}/create_flow_run",
                                json={"name": "hostile", "parameters": {"task_id": "x", "project_path": "/nonexistent",
                                                                        "agent_id": "x"}, "job_variables": hostile})
        assert resp.status_code == 422, resp.text
    pool = prefect_api.get("/work_pools/tianshu").json()
    assert set(pool["base_job_template"]["job_configuration"]) == {"name", "labels", "stream_output"}
    # even a template that reached the worker with those values would not apply them
    from prefect.client.orchestration import PrefectClient
    from prefect.workers.process import ProcessJobConfiguration

    from tianshu_mcp.deployments.setup import locked_job_template

    auth = (home / "prefect" / "credentials").read_text().strip()
    async with PrefectClient(api, auth_string=auth) as client:  # never an ephemeral API of its own
        cfg = await ProcessJobConfiguration.from_template_and_values(
            locked_job_template(), {"command": f"touch {marker}", "env": {"EVIL": "1"}, "working_dir": str(tmp_path)},
            client=client)
    assert cfg.command is None and "EVIL" not in (cfg.env or {}) and cfg.working_dir is None
    assert not marker.exists()
    # agents never see the API address or its credentials
    out = tmp_path / "env.json"
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"]["scripted-env"] = scripted_profile(mode="env", extra_env={"SCRIPTED_ENV_OUT": str(out)})
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                                          "agentId": "scripted-env"}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}))
    assert done["status"] == "succeeded"
    env = json.loads(out.read_text())
    assert not [k for k in env if k.startswith("PREFECT_")]
    assert not {"TIANSHU_MCP_HOST_PID", "TIANSHU_MCP_HOME"} & set(env)
    assert (home / "prefect" / "credentials").read_text().strip() not in json.dumps(env)


# --- 5. entry points --------------------------------------------------------------------------
async def test_the_zombie_automation_is_a_shared_servers_only_and_replaces_an_older_window(ts_daemon: dict[str, Any]) -> None:
    """A live run on a loaded machine may lose or delay a heartbeat: the window is three of them."""
    from datetime import timedelta

    from prefect.client.orchestration import PrefectClient
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.client.schemas.objects import StateType

    from tianshu_mcp.deployments.setup import ZOMBIE_AUTOMATION, drop_zombie_automation, ensure_zombie_automation

    auth = (ts_daemon["home"] / "prefect" / "credentials").read_text().strip()
    async with PrefectClient(ts_daemon["api"], auth_string=auth) as client:
        # a home's own service has none (its runs die with it; a late heartbeat crashed a live run)
        assert await client.read_automations_by_name(ZOMBIE_AUTOMATION) == []
        await ensure_zombie_automation(client)  # what a remote worker makes on a shared server
        (found,) = await client.read_automations_by_name(ZOMBIE_AUTOMATION)
        assert found.trigger.within == timedelta(seconds=150)
        await client.delete_automation(found.id)  # what an older version made: 75 s
        await client.create_automation(AutomationCore(
            name=ZOMBIE_AUTOMATION, trigger=EventTrigger(
                after={"prefect.flow-run.heartbeat"}, expect={"prefect.flow-run.heartbeat"},
                match={"prefect.resource.id": ["prefect.flow-run.*"]}, for_each={"prefect.resource.id"},
                posture=Posture.Proactive, threshold=1, within=timedelta(seconds=75)),
            actions=[ChangeFlowRunState(state=StateType.CRASHED, message="old")]))
        await ensure_zombie_automation(client)
        (now,) = await client.read_automations_by_name(ZOMBIE_AUTOMATION)
        assert now.trigger.within == timedelta(seconds=150) and now.id != found.id
        await ensure_zombie_automation(client)  # the right one stays
        assert [a.id for a in await client.read_automations_by_name(ZOMBIE_AUTOMATION)] == [now.id]
        assert await drop_zombie_automation(client) == 1  # what a service start does
        assert await client.read_automations_by_name(ZOMBIE_AUTOMATION) == []


@pytest.mark.own_services
def test_every_subcommand_has_help_errors_exit_nonzero_and_bad_addresses(tmp_path: Path) -> None:
    home = new_home(tmp_path, "cli", 4470)
    for args in (["--help"], ["server", "--help"], ["service", "--help"], ["schedule", "--help"],
                 ["config", "--help"], ["demo", "--help"], ["config", "schema", "--help"]):
        done = cli(home, *args, timeout=60)
        assert done.returncode == 0 and "usage" in done.stdout.lower(), (args, done.stdout, done.stderr)
    assert not (home / "prefect" / "service.json").exists() and not service_processes(home)  # help started nothing
    for args in (["service", "bogus"], ["service"], ["config", "bogus"], ["server", "--bogus"],
                 ["schedule", "add", str(tmp_path)], ["config", "acceptance", "--bogus"], ["bogus-subcommand"]):
        done = cli(home, *args, timeout=60)
        assert done.returncode != 0, (args, done.stdout, done.stderr)
    assert not service_processes(home)

    # a stale address file (dead pid) is ignored
    (home / "prefect").mkdir(exist_ok=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = {"pid": dead.pid, "createTime": 1.0, "port": 1, "apiUrl": "http://127.0.0.1:1/api", "uiUrl": "http://127.0.0.1:1",
             "homeId": "x", "state": "ready", "mode": "service"}
    (home / "prefect" / "service.json").write_text(json.dumps(stale))
    assert json.loads(cli(home, "service", "status").stdout)["running"] is False

    # an address file naming a live process that is no service (and answers nothing): never signalled
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        (home / "prefect" / "service.json").write_text(json.dumps(
            {**stale, "pid": sleeper.pid, "createTime": psutil.Process(sleeper.pid).create_time()}))
        assert json.loads(cli(home, "service", "status").stdout)["running"] is False
        done = cli(home, "service", "stop", timeout=60)
        assert done.returncode == 1 and "[SERVICE_IDENTITY_MISMATCH]" in done.stderr, done.stderr
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait(10)

    # an address file pointing at a live foreign process and port: refused, coded, nothing sent
    foreign = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        line = until(lambda: foreign.stdout.readline(), 30, "http.server to listen")
        port = int(line.split("port ")[1].split()[0])
        (home / "prefect" / "service.json").write_text(json.dumps({
            **stale, "pid": foreign.pid, "createTime": psutil.Process(foreign.pid).create_time(), "port": port,
            "apiUrl": f"http://127.0.0.1:{port}/api", "uiUrl": f"http://127.0.0.1:{port}"}))
        done = cli(home, "service", "start", timeout=60)
        assert done.returncode == 1 and "[SERVICE_IDENTITY_MISMATCH]" in done.stderr, done.stderr
        repo = make_calc_repo(tmp_path / "calc")
        raw = RawClient(home)
        _init(raw)
        accepted = raw.call("run_task", {"projectPath": str(repo), "task": "x", "agentId": "scripted-noop"}, timeout=30)
        assert not accepted["isError"]  # accepted durably; it runs once the home has its own service
        task_id = meta(accepted)["taskId"]
        # the task says why it waits: the home's address points at a foreign process
        until(lambda: "[SERVICE_IDENTITY_MISMATCH]" in raw.call("query_task", {"taskId": task_id}, timeout=30)["content"][0]["text"],
              30, "query_task to show the mismatch")
        raw.close()
        assert foreign.poll() is None  # never signalled
    finally:
        foreign.kill()
        foreign.wait(10)
    assert not service_processes(home)


@pytest.mark.own_services
def test_corrupt_database_is_coded_and_task_files_are_untouched(tmp_path: Path) -> None:
    home = new_home(tmp_path, "corrupt", 4475)
    (home / "prefect").mkdir()
    (home / "prefect" / "prefect.db").write_bytes(b"this is not a database " * 100)
    task_dir = home / "tasks" / "tsk_20260101000000_abcdef"
    task_dir.mkdir(parents=True)
    (task_dir / "task.json").write_text('{"taskId": "tsk_20260101000000_abcdef"}')
    before = {p: p.read_bytes() for p in (home / "tasks").rglob("*") if p.is_file()}
    done = cli(home, "service", "start", timeout=120)
    assert done.returncode == 1 and "[PREFECT_DB_CORRUPT]" in done.stderr
    assert str(home / "prefect" / "prefect.db") in done.stderr and ".corrupt" in done.stderr
    assert {p: p.read_bytes() for p in (home / "tasks").rglob("*") if p.is_file()} == before
    assert not service_processes(home)


@pytest.mark.own_services
def test_two_services_racing_for_one_home(tmp_path: Path) -> None:
    home = new_home(tmp_path, "race", 4480)
    procs = [subprocess.Popen([CONSOLE, "server"], env=server_env(home), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True) for _ in range(2)]
    try:
        loser = until(lambda: next((p for p in procs if p.poll() is not None), None), 120, "one server to give up")
        assert loser.returncode == 3
        winner = next(p for p in procs if p is not loser)
        wait_daemon(home, winner)
        assert service_info(home)["pid"] == winner.pid
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(60)


# --- 6. no stuck pool, missed schedules, UI cancel/delete ----------------------------------------
@pytest.mark.own_services
def test_restart_crashes_orphans_and_fires_a_missed_schedule_once(tmp_path: Path) -> None:
    home = new_home(tmp_path, "sweep", 4485)
    repo = make_calc_repo(tmp_path / "calc")
    try:
        assert cli(home, "service", "start").returncode == 0
        with api_of(home) as api:
            deps = {n: api.get(f"/deployments/name/{n}").json()["id"] for n in ("run-task/run-task", "reverify/reverify")}
            orphans = []
            for name, state in (("run-task/run-task", "RUNNING"), ("reverify/reverify", "PENDING"), ("reverify/reverify", "RUNNING")):
                params = ({"task_id": "tsk_20260101000000_000000", "project_path": str(repo), "agent_id": "x"}
                          if name.startswith("run-task") else {"project_path": str(repo)})
                run = api.post(f"/deployments/{deps[name]}/create_flow_run",
                               json={"parameters": params, "state": {"type": "SCHEDULED", "name": "Scheduled",
                                                                     "state_details": {"scheduled_time": "2099-01-01T00:00:00Z"}}}).json()
                api.post(f"/flow_runs/{run['id']}/set_state", json={"state": {"type": state}, "force": True}).raise_for_status()
                orphans.append(run["id"])
            missed = []
            for minutes in (50, 40, 30, 20, 10):  # what a 10-minute schedule left while no service ran
                when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - minutes * 60))
                run = api.post(f"/deployments/{deps['reverify/reverify']}/create_flow_run",
                               json={"parameters": {"project_path": str(repo)},
                                     "state": {"type": "SCHEDULED", "name": "Scheduled", "state_details": {"scheduled_time": when}}}).json()
                missed.append(run["id"])
        # the service dies outright (as in a crash or reboot), then starts again
        kill_services(home)
        until(lambda: not service_processes(home), 30, "the service to die")
        assert cli(home, "service", "start").returncode == 0
        with api_of(home) as api:
            states = {r: api.get(f"/flow_runs/{r}").json()["state"] for r in orphans + missed}
            assert all(states[r]["type"] == "CRASHED" for r in orphans), states
            cancelled = [r for r in missed if states[r]["type"] == "CANCELLED" and states[r]["name"] == "Missed"]
            assert cancelled == missed[:4]  # one catch-up run (the newest) is left to fire
            assert states[missed[4]]["type"] != "CANCELLED"
            # the pool is free: a new task runs at once
            pool = api.get("/work_pools/tianshu").json()
            assert pool["concurrency_limit"] == 2
        raw = RawClient(home)
        _init(raw)
        sub = meta(raw.call("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)", "agentId": "scripted"}, timeout=30))
        done = meta(raw.call("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}, timeout=150))
        raw.close()
        assert done["status"] == "succeeded"
    finally:
        cli(home, "service", "stop")
        kill_services(home)


@pytest.mark.parametrize("how", ["cancel", "delete"])
async def test_ui_cancel_or_delete_kills_the_agent_and_ends_the_task(ts_daemon: dict[str, Any], tmp_path: Path,
                                                                     prefect_api: httpx.Client, how: str) -> None:
    home = ts_daemon["home"]
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub, pids = await start_hanging_task(client, home, repo)
        run_id = json.loads((home / "tasks" / sub["taskId"] / "task.json").read_text())["flowRunId"]
        t0 = time.monotonic()
        if how == "cancel":  # what the UI's Cancel button sends
            prefect_api.post(f"/flow_runs/{run_id}/set_state", json={"state": {"type": "CANCELLING"}, "force": True}).raise_for_status()
        else:
            assert prefect_api.delete(f"/flow_runs/{run_id}").status_code == 204
        until(lambda: not _alive(pids), 10, "the agent tree to die")
        status = None
        while time.monotonic() - t0 < 10:
            status = meta_of(await client.call_tool("query_task", {"taskId": sub["taskId"]}))["status"]
            if status == "cancelled":
                break
    assert status == "cancelled"
    waited = meta_of(await _wait(home, sub["taskId"]))
    assert waited["waitSettled"] and waited["status"] == "cancelled"


async def _wait(home: Path, task_id: str) -> Any:
    """A fresh client's wait for a task already at its stop point: it answers as soon as the
    client's connection is ready (a cold import of Prefect took over 5 s on a loaded machine)."""
    async with mcp_client(home) as client:
        return await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 120000})


# --- 7 + 8. the gate outlives the agent; the kill matrix ---------------------------------------
def _cwd(pid: int) -> Path | None:
    try:
        return Path(psutil.Process(pid).cwd())
    except psutil.Error:
        return None


@pytest.mark.parametrize("leftover", ["agent", "check"])
def test_project_gate_waits_for_a_killed_runs_processes(ts_daemon: dict[str, Any], tmp_path: Path, leftover: str) -> None:
    """kill -9 of a flow-run process while its agent (or a check: no record of it exists outside
    that process) runs in its own session: the project's next task starts work only once they
    are dead."""
    home = ts_daemon["home"]
    pidfile, probe, flag = tmp_path / "pids.txt", tmp_path / "probe.txt", tmp_path / "hang-now"
    flag.touch()
    hang_check = ("import os, signal, sys, time\nif os.path.exists(sys.argv[1]):\n"
                  "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                  "    open(sys.argv[2], 'a').write(f'{os.getpid()}\\n')\n    time.sleep(600)\n")
    checks = [{"name": "pytest", "cmd": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]},
              {"name": "slow", "cmd": [sys.executable, "-c", hang_check, str(flag), str(pidfile)]}]
    repo = make_calc_repo(tmp_path / "calc", checks=checks if leftover == "check" else None)
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"]["gate-hang"] = scripted_profile(mode="hang", extra_env={"SCRIPTED_PIDFILE": str(pidfile)})
    profiles["profiles"]["gate-probe"] = scripted_profile(mode="probe", extra_env={"SCRIPTED_WATCH": str(pidfile),
                                                                                   "SCRIPTED_PROBE_OUT": str(probe)})
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    raw = RawClient(home)
    try:
        _init(raw)
        agent = "gate-hang" if leftover == "agent" else "scripted"
        first = meta(raw.call("run_task", {"projectPath": str(repo), "task": "Fix add", "agentId": agent}, timeout=30))
        if leftover == "agent":
            pids = _wait_pids(pidfile, 2, timeout=120)
        else:  # the round's own check: the baseline run's (in its worktree) is stopped by its warm child
            until(lambda: any(_cwd(p) == Path(repo).resolve() for p in _pids(pidfile)), 120, "the round's check to hang")
            pids = _pids(pidfile)
        second = meta(raw.call("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                            "agentId": "gate-probe"}, timeout=30))
        flow_proc = json.loads((home / "tasks" / first["taskId"] / "flow-proc.json").read_text())
        os.kill(flow_proc["pid"], signal.SIGKILL)  # the flow-run process dies; its children (own sessions) do not
        flag.unlink()  # the second task's checks finish at once
        done = meta(raw.call("wait_task", {"taskId": second["taskId"], "timeoutMs": 180000}, timeout=200))
        assert done["status"] == "succeeded"
        line = probe.read_text().splitlines()[0]
        assert "alive=[]" in line and str(pids[0]) in line, line  # the second agent never overlapped them
        assert not _alive(pids)
        if leftover == "check":  # nothing but the gate knows a check's processes
            events = (home / "tasks" / second["taskId"] / "task.jsonl").read_text()
            assert "project gate:" in events and "leftover process(es) of the previous run killed" in events
        status = meta(raw.call("query_task", {"taskId": first["taskId"]}, timeout=30))["status"]
        assert status == "interrupted"
    finally:
        raw.close()


@pytest.mark.own_services
@pytest.mark.alone  # bounds: the tree dies within 5 s; the next agent starts within 90 s (a restart of the
# service beside two busy processes took over 30 s; a slot left to its lease would take minutes)
def test_kill_minus_9_of_the_service_mid_task(tmp_path: Path) -> None:
    home = new_home(tmp_path, "kill9", 4490)
    repo = make_calc_repo(tmp_path / "calc")
    pidfile = home / "hang-pids.txt"
    try:
        raw = RawClient(home)
        _init(raw)
        first = meta(raw.call("run_task", {"projectPath": str(repo), "task": "hang", "agentId": "scripted-hang"}, timeout=30))
        pids = _wait_pids(pidfile, 2, timeout=180)
        assert len(pids) == 2
        raw.close()  # no client stays connected: the kill below is the only event
        kill_services(home)
        t0 = time.monotonic()
        until(lambda: not _alive(pids), 5, "the agent tree to die within 5 s")
        assert time.monotonic() - t0 <= 5
        until(lambda: not forkservers_of(home), 10, "the fork server to follow the service")
        tdir = home / "tasks" / first["taskId"]
        assert (tdir / "task.json").is_file() and (tdir / "agent-0.log").is_file() and (tdir / "prompt-0.txt").is_file()
        # a new task on the same project: the next start sweeps, and its agent starts within 90 s
        raw = RawClient(home)
        _init(raw)
        t1 = time.monotonic()
        second = meta(raw.call("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                            "agentId": "scripted"}, timeout=30))
        until(lambda: (home / "tasks" / second["taskId"] / "agent-0.log").exists(), 90, "the new agent to start")
        assert time.monotonic() - t1 <= 90
        assert meta(raw.call("query_task", {"taskId": first["taskId"]}, timeout=60))["status"] == "interrupted"
        assert meta(raw.call("wait_task", {"taskId": second["taskId"], "timeoutMs": 120000}, timeout=150))["status"] == "succeeded"
        raw.close()
    finally:
        cli(home, "service", "stop")
        kill_services(home)


@pytest.mark.own_services
def test_idle_service_exits_by_itself(tmp_path: Path) -> None:
    # the pid from start's own report: on a loaded machine service.json can be gone (the service
    # idled out) before the test reads it
    home = new_home(tmp_path, "idle", 4495, idleExitMs=8000)
    started = cli(home, "service", "start")
    assert started.returncode == 0, started.stderr
    pid = json.loads(started.stdout)["pid"]
    until(lambda: not pid_running(pid), 90,
          "the idle service to exit")
    assert not (home / "prefect" / "service.json").exists()
    assert not forkservers_of(home) and not (home / "prefect" / "engine.sock").exists()
    log = (home / "logs" / "service.log").read_text()
    assert "idle for" in log and "Task was destroyed but it is pending" not in log  # a clean exit


@pytest.mark.own_services
def test_a_deployment_deleted_while_the_service_runs_is_made_again_and_its_tasks_run(tmp_path: Path) -> None:
    """Someone deletes ``run-task`` in the UI while the service runs (a fresh tester's case): the
    next task from the same, still connected stdio server waited queued for ever ("submitting
    pending tasks failed (retrying): None"). The service makes its deployments again (design
    note 81) and the task ends."""
    home = new_home(tmp_path, "remake", 4530)
    try:
        raw = RawClient(home)
        _init(raw)

        def run_one(name: str) -> str:
            repo = make_calc_repo(tmp_path / name)
            res = raw.call("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                        "agentId": "scripted"}, timeout=60)
            task_id = meta(res)["taskId"]

            def ended() -> str | None:
                status = meta(raw.call("query_task", {"taskId": task_id}, timeout=60))["status"]
                return status if status in ("succeeded", "failed", "needs_attention", "cancelled", "interrupted") else None

            assert until(ended, 180, f"task {name} to end", every=0.5) == "succeeded"
            return task_id

        run_one("first")
        with api_of(home) as api:
            deps = {d["name"]: d["id"] for d in api.post("/deployments/filter", json={}).json()}
            assert api.delete(f"/deployments/{deps['run-task']}").status_code == 204
        run_one("second")
        with api_of(home) as api:
            remade = {d["name"]: d["id"] for d in api.post("/deployments/filter", json={}).json()}
        assert remade["run-task"] != deps["run-task"]
        log = (home / "logs" / "service.log").read_text(errors="replace")
        warnings = [line for line in log.splitlines() if "[WARNING]" in line]
        # one clear line; not Prefect's empty text, nor the raw HTTP error of the creation
        assert any("a deployment of this home is missing (ObjectNotFound: deployment run-task/run-task not found)"
                   in line for line in warnings), warnings
        assert not [line for line in warnings if "retrying): None" in line or "404 Not Found" in line], warnings
    finally:
        cli(home, "service", "stop")
        kill_services(home)
