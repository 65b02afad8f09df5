"""Shared fixtures: one embedded Prefect per test session.

``ts_daemon`` starts ``tianshu-mcp server`` (the home's service in the foreground: Prefect API +
UI + process worker) on a temporary data home once per session; every MCP test then starts the
real console script over stdio with the real SDK client, and that stdio server finds the running
service (``service.json``) instead of starting another (00-design §3).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fixture_project import make_calc_repo, scripted_profile  # noqa: E402

BIN = Path(sys.executable).parent
CONSOLE = str(BIN / "tianshu-mcp")
META_RE = r"---tianshu-mcp-meta---\n([\s\S]*?)\n---tianshu-mcp-meta---"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_env(home: Path) -> dict[str, str]:
    """Environment for a tianshu-mcp child: the data home, and the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["TIANSHU_MCP_HOME"] = str(home)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["TIANSHU_MCP_NO_SKILL_INSTALL"] = "1"
    return env


def write_profiles(home: Path, trace: Path) -> dict[str, Any]:
    """The session's agent profiles: scripted agents in every mode, and broken ones."""
    not_executable = home / "not-executable-agent"
    not_executable.write_text("#!/bin/sh\necho never runs\n")
    not_executable.chmod(0o644)
    profiles = {
        "scripted": scripted_profile(),
        "scripted-noisy": scripted_profile(mode="noisy"),
        "scripted-noop": scripted_profile(mode="noop"),
        "scripted-newfile": scripted_profile(mode="new-file"),
        "scripted-hang": scripted_profile(mode="hang", extra_env={"SCRIPTED_PIDFILE": str(home / "hang-pids.txt")}),
        "scripted-sleep": scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": "4"}),
        "scripted-timeout": {**scripted_profile(mode="hang", extra_env={"SCRIPTED_PIDFILE": str(home / "timeout-pids.txt")}), "timeoutMs": 1500},
        "not-executable": {"command": str(not_executable), "argsTemplate": ["<prompt:arg>"]},
    }
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": profiles}, indent=2))
    return profiles


def auth_headers(home: Path) -> dict[str, str]:
    """The basic-auth header of ``home``'s API (its ``prefect/credentials``)."""
    import base64

    auth = (home / "prefect" / "credentials").read_text().strip()
    return {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}


def wait_daemon(home: Path, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = 180) -> str:
    """Wait until the service of ``home`` is ready and serves deployment run-task; return its API URL."""
    deadline = time.monotonic() + timeout_s
    service_json = home / "prefect" / "service.json"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"tianshu-mcp server exited with {proc.returncode}; see {home}/daemon.log")
        if service_json.exists():
            with contextlib.suppress(ValueError, KeyError, OSError):
                info = json.loads(service_json.read_text())
                api = info["apiUrl"]
                if info.get("state") == "ready":
                    with contextlib.suppress(httpx.HTTPError):
                        headers = auth_headers(home)
                        dep = httpx.get(f"{api}/deployments/name/run-task/run-task", headers=headers, timeout=2)
                        if dep.status_code == 200:
                            return api
        time.sleep(0.25)
    raise TimeoutError("tianshu-mcp service not ready")


@pytest.fixture(scope="session")
def ts_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's data home with config.json (maxRunning 2) and the scripted agent profiles."""
    home = tmp_path_factory.mktemp("tshome")
    (home / "config.json").write_text(json.dumps({"concurrency": {"maxRunning": 2}, "prefect": {"port": 4350}}))
    write_profiles(home, home / "sleep-trace.txt")
    return home


@pytest.fixture(scope="session")
def ts_daemon(ts_home: Path) -> Iterator[dict[str, Any]]:
    """``tianshu-mcp server`` on the session home; yields ``{home, api, proc}``."""
    log = open(ts_home / "daemon.log", "wb")
    proc = subprocess.Popen([CONSOLE, "server"], env=server_env(ts_home), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        api = wait_daemon(ts_home, proc)
        yield {"home": ts_home, "api": api, "proc": proc}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    """A fresh fixture repository (pytest project with a bug in ``add``)."""
    return make_calc_repo(tmp_path / "calc")


@contextlib.asynccontextmanager
async def mcp_client(home: Path, mode: str = "legacy", env: dict[str, str] | None = None) -> AsyncIterator[Any]:
    """The SDK's stdio client connected to the installed console script for ``home`` (``env``:
    extra variables of the host's ``env`` block)."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=CONSOLE, args=[], env={**server_env(home), **(env or {})})
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        yield client


def meta_of(result: Any) -> dict[str, Any]:
    """Parse the meta block out of a tool result's text and check it equals structuredContent."""
    import re

    text = result.content[0].text
    m = re.search(META_RE, text)
    assert m, f"no meta block in: {text}"
    meta = json.loads(m.group(1))
    assert result.structured_content == meta
    return meta


def add_scripted_profile(home: Path, agent_id: str, mode: str, extra_env: dict[str, str] | None = None) -> None:
    """Register ``scripted_agent.py`` in ``mode`` as ``agent_id`` in ``home``'s agent-profiles.json."""
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"][agent_id] = scripted_profile(mode=mode, extra_env=extra_env)
    (home / "agent-profiles.json").write_text(json.dumps(profiles))


async def run_to_stop(home: Path, args: dict[str, Any], timeout_ms: int = 180000) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run_task(args)`` then ``wait_task`` until it stops; returns both metas."""
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", args))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": timeout_ms}))
    return sub, done


def text_of(result: Any) -> str:
    """The single text item of a tool result."""
    assert len(result.content) == 1
    return result.content[0].text


class Retry503(httpx.HTTPTransport):
    """SQLite write stalls make the API answer 503 now and then (50-prefect-lab P6); Prefect's own
    client retries those, and so does this test client."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(20):
            response = super().handle_request(request)
            if response.status_code != 503:
                return response
            response.close()
            time.sleep(0.25)
        return response


@pytest.fixture
def prefect_api(ts_daemon: dict[str, Any]) -> httpx.Client:
    """An HTTP client on the session daemon's Prefect API."""
    with httpx.Client(base_url=ts_daemon["api"], timeout=10, headers=auth_headers(ts_daemon["home"]),
                      transport=Retry503()) as client:
        yield client


def task_runs(api: httpx.Client, flow_run_id: str) -> list[dict[str, Any]]:
    """Task runs of a flow run, oldest first."""
    resp = api.post("/task_runs/filter", json={"flow_runs": {"id": {"any_": [flow_run_id]}}, "sort": "EXPECTED_START_TIME_ASC"})
    resp.raise_for_status()
    return resp.json()


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
