"""Shared fixtures: one embedded Prefect per test session.

``ts_daemon`` starts ``tianshu-mcp server`` (the home's service in the foreground: Prefect API +
UI + process worker) on a temporary data home once per session; every MCP test then starts the
real console script over stdio with the real SDK client, and that stdio server finds the running
service (``service.json``) instead of starting another (docs/architecture.md §3).
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

# A machine-wide PYTHONDONTWRITEBYTECODE=1 (this image sets it) made every xdist worker, and every
# server, engine and check process a test starts, compile our modules again, and pytest rewrite
# every test module's asserts again: 15 s of CPU per worker before the first test, minutes on a
# loaded 2-core machine. Bytecode caches are what a user's machine has; the tests that need them
# off set the variable themselves.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fixture_project import make_calc_repo, scripted_profile  # noqa: E402

collect_ignore = ["data/real"]
"""Vendored real projects (tests/data/real/*): their own tests run only in the copies the integrity tests make."""

BIN = Path(sys.executable).parent
CONSOLE = str(BIN / "tianshu-mcp")
META_RE = r"---tianshu-mcp-meta---\n([\s\S]*?)\n---tianshu-mcp-meta---"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- parallel runs (pytest-xdist, ``-n`` in pyproject's addopts) -------------------------------
# Every worker is a session of its own: its own basetemp, hence its own data home and session
# daemon (the service takes the next free port when 4350 is taken). What keeps workers apart:
# * each worker gets its own TMPDIR (inherited by its daemon, agents and checks), so a test that
#   looks for leftovers in the temporary directory (baseline worktrees) sees its own worker's only;
# * the modules in ONE_WORKER run on one worker (a module fixture spans their tests: the fuzz
#   storm counts the calls of every tool); every other test is scheduled on its own (xdist's
#   ``xdist_group``/``loadgroup`` cannot be used: it renames ``item._nodeid``, which pytest 9
#   no longer reads);
# * tests marked ``own_services`` (they start whole Prefect services of fresh homes) run at most
#   two at a time, beside the other workers' ordinary tests; they are the run's critical path,
#   so they are spread through the front of the collection order;
# * a test marked ``alone`` (a tight latency bound or a burst of services) runs while no other
#   test of this run does: every test holds a shared lock, an ``alone`` test the exclusive one,
#   taken through a gate so that a waiting exclusive test is not starved.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
ONE_WORKER = ("tests/test_fuzz_tools.py", "tests/test_remote_e2e.py", "tests/test_real_agents.py")
"""Modules that run in one xdist worker, in a row (a module-scoped cluster serves all their tests)."""
LONG_FIRST = ("test_fuzz_tools.py", "test_verify_task.py", "test_e2e_run_task.py", "test_desktop_e2e.py",
              "test_adapter_contract.py", "test_acp_e2e.py", "test_hostile_input.py", "test_agent_failures.py")
_RUN_LOCKS: dict[str, Path] = {}


def pytest_configure(config: pytest.Config) -> None:
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not XDIST_WORKER or not run_id:
        return
    import tempfile

    shared_tmp = Path(tempfile.gettempdir())
    _RUN_LOCKS.update({name: shared_tmp / f"tianshu-tests-{run_id}.{name}" for name in ("services0", "services1", "gate", "all")})
    own_tmp = Path(tempfile.mkdtemp(prefix=f"tianshu-tests-{XDIST_WORKER}-", dir=shared_tmp))
    os.environ["TMPDIR"] = str(own_tmp)
    tempfile.tempdir = None  # recomputed from TMPDIR
    config.add_cleanup(lambda: shutil.rmtree(own_tmp, ignore_errors=True))
    config.add_cleanup(lambda: [p.unlink(missing_ok=True) for p in _RUN_LOCKS.values()])


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load scheduling, except that each ONE_WORKER module is one unit of work."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER else nodeid

    return Scheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker: long modules first, and one ``own_services`` test every few ordinary ones
    (the chain of them starts at once and ends before the ordinary tests do)."""
    if not XDIST_WORKER:
        return
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    together = {f"tests/{item.path.name}" for item in items} & set(ONE_WORKER)
    own: list[list[pytest.Item]] = []  # units: one test, or a whole ONE_WORKER module in a row
    for item in items:
        if not item.get_closest_marker("own_services"):
            continue
        if f"tests/{item.path.name}" in together and own and own[-1][0].path == item.path:
            own[-1].append(item)
        else:
            own.append([item])
    rest = sorted((item for item in items if not item.get_closest_marker("own_services")),
                  key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))  # stable
    gap = max(1, len(rest) // max(1, 2 * len(own)))
    merged: list[pytest.Item] = []
    for n, item in enumerate(rest):
        if n % gap == 0 and own:
            merged.extend(own.pop(0))
        merged.append(item)
    items[:] = merged + [item for unit in own for item in unit]


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Take the run's locks (outside pytest-timeout's timer: waiting is not the test's time)."""
    if not _RUN_LOCKS:
        yield
        return
    import fcntl

    alone = item.get_closest_marker("alone") is not None
    with contextlib.ExitStack() as held:
        def lock(name: str, how: int) -> Any:
            f = held.enter_context(open(_RUN_LOCKS[name], "a+b"))
            fcntl.flock(f, how)  # released when the file is closed
            return f

        if alone:  # both service slots
            lock("services0", fcntl.LOCK_EX)
            lock("services1", fcntl.LOCK_EX)
        elif item.get_closest_marker("own_services") is not None:  # one of the two service slots
            while not any(_try_lock(held, name) for name in ("services0", "services1")):
                time.sleep(0.2)
        gate = lock("gate", fcntl.LOCK_EX)
        lock("all", fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


def _try_lock(held: contextlib.ExitStack, name: str) -> bool:
    """Take run lock ``name`` exclusively if it is free (kept until ``held`` closes)."""
    import fcntl

    f = open(_RUN_LOCKS[name], "a+b")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return False
    held.enter_context(f)
    return True


def pid_running(pid: int) -> bool:
    """``pid`` runs (a zombie, or a process that ends while we look, does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


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
    """``tianshu-mcp server`` on the session home (or its service already running); yields
    ``{home, api, proc, pid}`` (``pid``: the service's process)."""
    log = open(ts_home / "daemon.log", "wb")
    proc = subprocess.Popen([CONSOLE, "server"], env=server_env(ts_home), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            api = wait_daemon(ts_home, proc)
        except RuntimeError:
            if proc.returncode != 3:  # 3: the home's service, started by an earlier test's client, still runs
                raise
            api = wait_daemon(ts_home)
        pid = json.loads((ts_home / "prefect" / "service.json").read_text())["pid"]
        yield {"home": ts_home, "api": api, "proc": proc, "pid": pid}
    finally:
        stop_server(proc)
        # the home's service outlives its clients (it would idle 10 min before it exits, using
        # CPU beside the next run): the session stops it, as a user would with `service stop`
        subprocess.run([CONSOLE, "service", "stop"], env=server_env(ts_home), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120, check=False)
        log.close()


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop a ``tianshu-mcp server`` started by a test: SIGTERM, then its process group killed
    after 60 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def prefect_ui_login(page: Any, ui: str, credentials: str) -> None:
    """Log a Playwright ``page`` in to the Prefect UI at ``ui`` with the home's basic-auth
    ``credentials`` (the UI asks for them on its first page)."""
    await page.goto(f"{ui}/deployments", wait_until="networkidle", timeout=120000)
    await page.locator("input").first.fill(credentials)
    await page.keyboard.press("Enter")
    await page.wait_for_load_state("networkidle")


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    """A fresh fixture repository (pytest project with a bug in ``add``)."""
    return make_calc_repo(tmp_path / "calc")


@contextlib.asynccontextmanager
async def mcp_client(home: Path, mode: str = "legacy", env: dict[str, str] | None = None,
                     **options: Any) -> AsyncIterator[Any]:
    """The SDK's stdio client connected to the installed console script for ``home`` (``env``:
    extra variables of the host's ``env`` block; ``options``: more ``Client`` fields, e.g.
    ``message_handler``)."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=CONSOLE, args=[], env={**server_env(home), **(env or {})})
    async with Client(params, mode=mode, **options) as client:  # type: ignore[arg-type]
        yield CheckedClient(client)


def check_output(tool: str, result: Any) -> None:
    """``result.structuredContent`` validates against ``tool``'s published outputSchema and against
    its strict form (no key the output models do not declare), on success and on error."""
    from jsonschema import Draft202012Validator

    from tianshu_mcp.mcp_server.outputs import OUTPUT_MODELS, output_schema

    if tool not in OUTPUT_MODELS:
        return  # a test of an unknown tool name
    assert result.structured_content is not None, f"{tool} returned no structuredContent: {result.content}"
    for strict in (False, True):
        errors = list(Draft202012Validator(output_schema(tool, strict=strict)).iter_errors(result.structured_content))
        assert not errors, f"{tool} structuredContent breaks its {'strict ' if strict else ''}outputSchema: " + "; ".join(
            f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:5])


class CheckedClient:
    """The SDK client, with every ``call_tool`` result checked by :func:`check_output`."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        result = await self._client.call_tool(name, arguments, *args, **kwargs)
        check_output(name, result)
        return result


def list_deployment_reads(client: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Any]:
    """Have a Prefect client's ``read_deployment_by_name`` list the names it is asked for (then
    read them as usual); returns that list and the client's own method."""
    reads: list[str] = []
    real = client.read_deployment_by_name

    async def read(name: str) -> Any:
        reads.append(name)
        return await real(name)

    monkeypatch.setattr(client, "read_deployment_by_name", read)
    return reads, real


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
    """SQLite write stalls make the API answer 503 now and then (docs/prefect-facts.md P6); Prefect's own
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


def flow_run_logs(api: httpx.Client, flow_run_id: str, *, final: bool = True,
                  timeout_s: float = 60) -> list[dict[str, Any]]:
    """The flow run's log entries, oldest first.

    Prefect ships log lines in batches, after the state change that ends the run; with ``final``
    this waits (up to ``timeout_s``) until the flow's own last line, "Finished in state …" without a
    task run, has arrived, so no later line is missed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        resp = api.post("/logs/filter", json={"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "limit": 200,
                                              "sort": "TIMESTAMP_ASC"})
        resp.raise_for_status()
        logs = resp.json()
        if not final or any(e["message"].startswith("Finished in state") and not e["task_run_id"] for e in logs):
            return logs
        assert time.monotonic() < deadline, f"the flow run's last log line never arrived: {logs}"
        time.sleep(0.3)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
