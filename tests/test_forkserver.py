"""The warm engine: the fork server and the worker's launcher (``hosting/forkserver.py``,
``hosting/engine_cmd.py``), with real processes and Prefect's real engine module.

An engine that cannot reach its API hangs in ``load_flow_run`` (the API socket listens but never
accepts), which gives the signal tests a live engine to watch.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil
import pytest

from conftest import meta_of, mcp_client
from tianshu_mcp.hosting import engine_cmd
from tianshu_mcp.hosting.worker import engine_env

PY = sys.executable
pytestmark = [pytest.mark.anyio]


def until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def ended(proc: psutil.Process) -> bool:
    """``proc`` has exited (gone, or a zombie); it may vanish between two psutil calls."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def forkserver(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A fork server; ``@pytest.mark.server_env({...})`` adds variables to its environment."""
    path = tmp_path / "engine.sock"
    marker = request.node.get_closest_marker("server_env")
    env = {**os.environ, **(marker.args[0] if marker else {})}
    proc = subprocess.Popen([PY, "-m", "tianshu_mcp.hosting.forkserver", str(path), str(os.getpid())],
                            stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        until(lambda: path.exists() or proc.poll() is not None, 120, "the fork server to listen")
        assert proc.poll() is None
        yield proc, path
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []:
            child.kill()
        proc.kill()
        proc.wait(10)


@pytest.fixture
def silent_api() -> Iterator[str]:
    """An API address whose socket listens but never answers (requests hang)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    finally:
        sock.close()


def launcher_env(sock: Path | None, api: str = "http://127.0.0.1:9/api", flow_run_id: str = "not-a-uuid") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TIANSHU_MCP_ENGINE"))}
    env.update(PREFECT_API_URL=api, PREFECT__FLOW_RUN_ID=flow_run_id, PREFECT_CLIENT_MAX_RETRIES="0")
    if sock is not None:
        env["TIANSHU_MCP_ENGINE_SOCKET"] = str(sock)
    return env


def launch(env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PY, "-m", "tianshu_mcp.hosting.engine_cmd"], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def engines_of(server: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return psutil.Process(server.pid).children()


def test_exit_status_streams_and_environment_pass_through(forkserver: tuple[subprocess.Popen[bytes], Path],
                                                           tmp_path: Path) -> None:
    server, sock = forkserver
    proc = launch(launcher_env(sock), tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1  # prefect.engine's own exit code for a bad flow run id, on our stderr
    assert b"Invalid flow run id" in err and b"unusable" not in err
    # the same request with a valid id gets past that check: the engine saw the launcher's env
    proc = launch(launcher_env(sock, flow_run_id=str(uuid.uuid4())), tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and b"Invalid flow run id" not in err and b"Traceback" in err
    assert server.poll() is None  # the server outlives its engines


def test_engine_runs_forked_with_the_launchers_environment_and_follows_its_signals(
        forkserver: tuple[subprocess.Popen[bytes], Path], silent_api: str, tmp_path: Path) -> None:
    server, sock = forkserver
    run_id = str(uuid.uuid4())
    proc = launch(launcher_env(sock, silent_api, run_id), tmp_path)
    engine = until(lambda: engines_of(server), 60, "an engine forked by the server")[0]
    until(lambda: Path(engine.cwd()) == tmp_path, 30, "the engine to take the launcher's directory")
    assert os.getpgid(engine.pid) == engine.pid  # its own process group, which signals go to
    proc.send_signal(signal.SIGTERM)  # what the worker does to cancel a flow run
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM  # the launcher ends the way its engine ended
    until(lambda: ended(engine), 10, "the engine to end")


@pytest.mark.server_env({"PREFECT_API_URL": "http://127.0.0.1:9/api"})
def test_a_forked_engine_uses_the_launchers_prefect_settings_not_the_servers(
        forkserver: tuple[subprocess.Popen[bytes], Path], silent_api: str, tmp_path: Path) -> None:
    """The server imported Prefect with its own ``PREFECT_API_URL`` (a refused port); an engine
    forked for a launcher with another one must use the launcher's, as ``python -m
    prefect.engine`` would: it connects to the silent API and waits there."""
    server, sock = forkserver
    port = int(silent_api.rsplit(":", 1)[1].split("/")[0])
    proc = launch(launcher_env(sock, silent_api, str(uuid.uuid4())), tmp_path)
    try:
        engine = until(lambda: engines_of(server), 60, "an engine forked by the server")[0]
        until(lambda: any(c.raddr and c.raddr.port == port for c in engine.net_connections()), 60,
              "the engine to connect to the launcher's API")
        assert proc.poll() is None  # not ended by the server's refused API
    finally:
        proc.kill()
        proc.wait(10)


def test_a_launcher_waits_for_a_fork_server_that_is_still_starting(tmp_path: Path, silent_api: str) -> None:
    """The first flow run after a (re)start meets a fork server that is still importing: its
    launcher waits for it rather than starting a plain, cold engine (the same imports, begun
    later). The launcher is started before the server exists."""
    sock = tmp_path / "engine.sock"
    env = launcher_env(sock, silent_api, str(uuid.uuid4()))
    server = subprocess.Popen([PY, "-m", "tianshu_mcp.hosting.forkserver", str(sock), str(os.getpid())],
                              stdin=subprocess.DEVNULL, start_new_session=True)
    proc = launch({**env, "TIANSHU_MCP_ENGINE_SERVER_PID": str(server.pid)}, tmp_path)
    try:
        engine = until(lambda: engines_of(server), 120, "an engine forked by the server once it listens")[0]
        assert psutil.Process(proc.pid).cmdline()[-1] == "tianshu_mcp.hosting.engine_cmd"  # standing in, not exec'd
        assert engine.ppid() == server.pid
    finally:
        proc.kill()
        proc.wait(10)
        for child in psutil.Process(server.pid).children(recursive=True) if server.poll() is None else []:
            child.kill()
        server.kill()
        server.wait(10)


def test_a_launcher_does_not_wait_for_a_fork_server_that_exited(tmp_path: Path) -> None:
    """A fork server that died (a zombie its parent has not reaped, or gone) is not waited for:
    the launcher starts a plain engine at once."""
    dead = subprocess.Popen([PY, "-c", "pass"])
    until(lambda: psutil.Process(dead.pid).status() == psutil.STATUS_ZOMBIE, 30, "a zombie")  # not reaped yet
    assert not engine_cmd._alive(dead.pid) and engine_cmd._alive(os.getpid())
    assert engine_cmd.connect_or_wait(str(tmp_path / "engine.sock"), dead.pid) is None
    env = {**launcher_env(tmp_path / "engine.sock"), "TIANSHU_MCP_ENGINE_SERVER_PID": str(dead.pid)}
    proc = launch(env, tmp_path)
    _, err = proc.communicate(timeout=120)
    dead.wait()
    assert proc.returncode == 1 and b"Invalid flow run id" in err  # the plain engine's own answer


def test_killing_the_launcher_kills_the_engine(forkserver: tuple[subprocess.Popen[bytes], Path], silent_api: str,
                                               tmp_path: Path) -> None:
    server, sock = forkserver
    proc = launch(launcher_env(sock, silent_api, str(uuid.uuid4())), tmp_path)
    engine = until(lambda: engines_of(server), 60, "an engine forked by the server")[0]
    proc.kill()
    proc.wait(10)
    until(lambda: ended(engine), 10, "the engine to die with its launcher")
    until(lambda: not engines_of(server), 10, "the fork server to reap it")
    assert server.poll() is None


def test_bad_requests_are_refused_and_the_server_goes_on(forkserver: tuple[subprocess.Popen[bytes], Path],
                                                          tmp_path: Path) -> None:
    server, sock = forkserver
    body = json.dumps({"env": {}, "cwd": str(tmp_path)}).encode()
    bad = [
        (b"\x00\x00", []),  # shorter than its length prefix
        (struct.pack("!I", 1 << 30) + b"{}", [0, 1, 2]),  # claims 1 GiB
        (struct.pack("!I", len(body)) + body, []),  # no streams attached
        (struct.pack("!I", 7) + b"garbage", [0, 1, 2]),  # not JSON
        (struct.pack("!I", 2) + b"[]", [0, 1, 2]),  # not an object
        *[(struct.pack("!I", len(b)) + b, [0, 1, 2]) for b in (  # a main that is not an entry point written for a fork
            json.dumps({"env": {}, "cwd": str(tmp_path), "main": main}).encode()
            for main in ("os:system", "tianshu_mcp.x", "tianshu_mcp.a:b:c", "tianshu_mcp.a b:c", 7, None,
                         "tianshu_mcp.console.main:main", "tianshu_mcp.core.files:atomic_write_json"))],
    ]
    for data, fds in bad:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(str(sock))
            socket.send_fds(conn, [data], fds) if fds else conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            assert conn.recv(8) == b""  # refused: no engine pid comes back
        assert not engines_of(server)
    proc = launch(launcher_env(sock), tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and b"Invalid flow run id" in err


def test_a_launcher_that_connects_and_closes_without_a_request_is_no_error(tmp_path: Path,
                                                                          capfd: pytest.CaptureFixture[str]) -> None:
    """Tester finding: the service's launcher connects before it claims a run and closes again when
    the worker claimed it first; the server logged that as a bad request. It is no request."""
    from tianshu_mcp.hosting import forkserver

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(4)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(path))
        assert forkserver._accept(listener, {}) is None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(path))
            conn.sendall(b"\x00\x00")
            conn.shutdown(socket.SHUT_WR)
            assert forkserver._accept(listener, {}) is None
    err = capfd.readouterr().err
    assert err.count("bad request") == 1 and "shorter than its length prefix" in err, err  # only the real one


def test_a_request_that_trickles_in_is_cut_off_as_a_whole(forkserver: tuple[subprocess.Popen[bytes], Path],
                                                           tmp_path: Path) -> None:
    """The server reads one request at a time: a client that sends a byte now and then (each
    within the per-read limit) is cut off when the whole request's time is up, not kept on for
    as long as it trickles, and the server goes on serving."""
    server, sock = forkserver
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(sock))
        socket.send_fds(conn, [struct.pack("!I", 1_000_000) + b"{"], [0, 1, 2])
        conn.settimeout(0.5)
        deadline = time.monotonic() + 90
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                closed = conn.recv(8) == b""  # the server hung up: refused
            except socket.timeout:
                try:
                    conn.sendall(b" ")
                except OSError:
                    closed = True
        assert closed, "a trickling request held the fork server for 90 s"
    assert not engines_of(server)
    proc = launch(launcher_env(sock), tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and b"Invalid flow run id" in err


@pytest.mark.parametrize("where", ["no-socket-file", "not-set"])
def test_without_a_fork_server_the_launcher_runs_a_plain_engine(tmp_path: Path, where: str) -> None:
    sock = tmp_path / "missing.sock" if where == "no-socket-file" else None
    proc = launch(launcher_env(sock), tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and b"Invalid flow run id" in err


def test_fork_server_ends_with_its_parent(tmp_path: Path) -> None:
    path = tmp_path / "engine.sock"
    holder = subprocess.Popen([PY, "-c", (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-m', 'tianshu_mcp.hosting.forkserver', sys.argv[1], str(os.getpid())])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(600)\n"), str(path)], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    server = psutil.Process(int(holder.stdout.readline()))
    until(path.exists, 120, "the fork server to listen")
    holder.kill()  # the service dies (kill -9)
    holder.wait(10)
    until(lambda: ended(server), 10, "the fork server to exit")
    assert not path.exists()


def _launches(proc: psutil.Process, run_id: str) -> bool:
    """True when ``proc`` is the worker's launcher (:mod:`~tianshu_mcp.hosting.engine_cmd`) of
    flow run ``run_id`` (the worker names the run in ``PREFECT__FLOW_RUN_ID``)."""
    try:
        return "tianshu_mcp.hosting.engine_cmd" in _cmdline(proc) and proc.environ().get("PREFECT__FLOW_RUN_ID") == run_id
    except psutil.Error:
        return False


def _cmdline(proc: psutil.Process) -> str:
    """``proc``'s command line, or "" once it has exited (a zombie not reaped yet has none:
    another task's engine or check of the session's service may end at any moment)."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


async def test_service_flow_runs_are_forked_warm(ts_daemon: dict[str, Any], calc_repo: Path,
                                                prefect_api: Any) -> None:
    """In the service, a task's flow-run process is a fork of the home's fork server, started
    by the service itself (no launcher process, no Submitting state: docs/design-notes.md,
    note 58), and its pid is the run's ``infrastructure_pid``.

    Who starts a run is Prefect's orchestration's call, as between two workers: under load the
    worker's poll may claim it before the service does (its launcher then asks the same fork
    server). Either way the engine is a warm fork; the service's own start is asserted on the
    first of up to three tasks that it started (two runs in a row went to the worker beside two
    busy processes and a tester's installs)."""
    home = ts_daemon["home"]
    async with mcp_client(home) as client:
        for _attempt in range(3):
            sub = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "hang",
                                                              "agentId": "scripted-hang"}))
            tdir = home / "tasks" / sub["taskId"]
            flow_proc = tdir / "flow-proc.json"
            until(flow_proc.exists, 120, "the flow run to start")
            engine = psutil.Process(json.loads(flow_proc.read_text())["pid"])
            assert "tianshu_mcp.hosting.forkserver" in " ".join(engine.parent().cmdline())  # warm, whoever started it
            assert (home / "prefect" / "engine.sock").exists()
            run_id = json.loads((tdir / "task.json").read_text())["flowRunId"]
            # this run's own launcher, if the worker took it (other tests' runs may have theirs)
            by_worker = [p for p in psutil.Process(ts_daemon["pid"]).children(recursive=True) if _launches(p, run_id)]
            if not by_worker:
                break
            done = meta_of(await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "cancel"}))
            assert done["status"] == "cancelled"
        else:
            pytest.fail("the worker started all three runs: the service never started one itself")
        until(lambda: prefect_api.get(f"/flow_runs/{run_id}").json()["infrastructure_pid"] == str(engine.pid), 30,
              "the engine's pid on the flow run")
        states = prefect_api.get("/flow_run_states/", params={"flow_run_id": run_id}).json()
        names = [st["name"] for st in sorted(states, key=lambda st: st["timestamp"])]
        assert names[:3] == ["Scheduled", "Pending", "Running"], names
        done = meta_of(await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "cancel"}))
        assert done["status"] == "cancelled"


async def test_a_forked_flow_run_runs_its_flow_once(ts_daemon: dict[str, Any], calc_repo: Path) -> None:
    """Seen once: the forked engine ran ``prefect.engine`` twice, so every task ran a second
    round after it had succeeded (its flow run Completed, then Running again). One task: one
    round, one ending, its flow run's run count 1."""
    import httpx

    home = ts_daemon["home"]
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "noop",
                                                          "agentId": "scripted-noop", "autoVerify": False}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 300000}))
    assert done["status"] == "succeeded", done
    tdir = home / "tasks" / sub["taskId"]
    record = json.loads((tdir / "task.json").read_text())

    def settled() -> bool:  # the engine has exited: a second run would have begun by then
        return not psutil.pid_exists(json.loads((tdir / "flow-proc.json").read_text())["pid"]) or \
            ended(psutil.Process(json.loads((tdir / "flow-proc.json").read_text())["pid"]))
    until(settled, 120, "the flow-run process to exit")
    events = [json.loads(line)["event"] for line in (tdir / "task.jsonl").read_text().splitlines() if line.strip()]
    assert events.count("started") == 1 and events.count("succeeded") == 1, events
    assert record["roundsUsed"] == 1 and not (tdir / "agent-1.log").exists()
    api = json.loads((home / "prefect" / "service.json").read_text())["apiUrl"]
    user, password = (home / "prefect" / "credentials").read_text().strip().split(":", 1)
    with httpx.Client(base_url=api, auth=(user, password), timeout=30) as http:
        assert http.get(f"/flow_runs/{record['flowRunId']}").json()["run_count"] == 1


def test_a_dead_fork_server_is_restarted(ts_daemon: dict[str, Any]) -> None:
    """kill -9 of the home's fork server: the service reaps it, says so and starts a new one."""
    home = ts_daemon["home"]
    service = psutil.Process(ts_daemon["pid"])

    def servers() -> list[psutil.Process]:
        found = []
        for child in service.children():
            try:
                if child.status() != psutil.STATUS_ZOMBIE and "tianshu_mcp.hosting.forkserver" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.Error:
                continue
        return found

    old = until(servers, 60, "the fork server")[0]
    old.kill()
    new = until(lambda: [p for p in servers() if p.pid != old.pid], 30, "a new fork server")[0]
    assert new.is_running()
    until(lambda: "the fork server (pid %d) exited" % old.pid in (home / "daemon.log").read_text(), 10, "the log line")
    until(lambda: (home / "prefect" / "engine.sock").exists(), 60, "the new fork server to listen")


@pytest.mark.parametrize(("entrypoint", "own_api", "expected"), [
    ("tianshu_mcp.flows.run_task:run_task_flow", True,
     {"PREFECT__FLOW_ENTRYPOINT": "tianshu_mcp.flows.run_task:run_task_flow",
      "PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED": "False", "PREFECT_CLIENT_CSRF_SUPPORT_ENABLED": "False"}),
    ("pkg.flows.run", False, {"PREFECT__FLOW_ENTRYPOINT": "pkg.flows.run",
                              "PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED": "False"}),
    # a file path needs the deployment's storage: the engine must read the deployment itself
    ("flows/run_task.py:run_task_flow", False, {"PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED": "False"}),
    ("C:\\flows\\x.py:f", False, {"PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED": "False"}),
    (None, True, {"PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED": "False", "PREFECT_CLIENT_CSRF_SUPPORT_ENABLED": "False"}),
])
def test_the_engine_environment_names_a_module_entrypoint_and_skips_known_handshakes(
        entrypoint: str | None, own_api: bool, expected: dict[str, str]) -> None:
    """A scale-out worker's server may protect against CSRF: only the home's own keeps it off."""
    assert engine_env(entrypoint, own_api) == expected


FORK_GC_PROBE = r"""
import gc, os, sys
import psutil
from tianshu_mcp.hosting import forkserver

for module in forkserver.PRELOAD:
    __import__(module)
forkserver.warm()


def child_uss_after_a_full_collection() -> int:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        gc.collect()
        os.write(w, str(psutil.Process().memory_full_info().uss).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 64)
    os.waitpid(pid, 0)
    return int(data)


gc.collect()
before = child_uss_after_a_full_collection()
forkserver.freeze_heap()
after = child_uss_after_a_full_collection()
print(before, after, gc.get_freeze_count())
"""


def test_a_forked_engines_collection_leaves_the_servers_heap_shared() -> None:
    """The fork server freezes its preloaded heap (docs/design-notes.md, note 57): a full
    collection in a forked child then leaves the inherited pages shared. Unfrozen, it walks
    every object, writes its header and so copies the pages it touches into the child."""
    out = subprocess.run([PY, "-c", FORK_GC_PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    before, after, frozen = (int(x) for x in out.stdout.split())
    assert frozen > 100_000, frozen  # the preloaded engine's objects
    assert after < before / 2, (before >> 20, after >> 20)  # MiB copied into the child
