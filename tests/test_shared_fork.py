"""The fork server forked from the service itself (``hosting/shared_fork.py``, design note 73):
it shares the service's imported pages, carries nothing of the service (host lock, API socket,
signal and log handlers), names itself, and the service declines to fork once a thread runs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from test_service import (
    cli,
    forkservers_of,
    kill_services,
    new_home,
    service_info,
    until,
)
from tianshu_mcp.core.log import LOGGER_NAME, forget_logging, setup_logging
from tianshu_mcp.hosting.shared_fork import ForkedServer, fork_from_service

PY = sys.executable


def shared_anonymous_kib(pid: int) -> int:
    """KiB of anonymous memory (heap and anonymous mappings) that ``pid`` shares with another
    process: only a fork shares such pages; a separately started interpreter shares none."""
    total, anonymous = 0, False
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                anonymous = len(parts) < 6 or parts[5] == "[heap]"
            elif anonymous and parts[0] in ("Shared_Clean:", "Shared_Dirty:"):
                total += int(parts[1])
    return total


@pytest.mark.own_services
def test_the_services_fork_server_is_its_fork_and_carries_nothing_of_it(tmp_path: Path) -> None:
    home = new_home(tmp_path, "shared", 4505)
    try:
        started = cli(home, "service", "start")
        assert started.returncode == 0, started.stderr
        service = psutil.Process(json.loads(started.stdout)["pid"])
        server = until(lambda: forkservers_of(home), 60, "the fork server")[0]
        until(lambda: (home / "prefect" / "engine.sock").exists(), 60, "the fork server to listen")
        assert server.ppid() == service.pid
        assert server.cmdline()[:2] == ["tianshu_mcp.hosting.forkserver", str(service.pid)]
        assert server.name() == "python"  # not the service's name: `killall tianshu-mcp` spares it
        assert server.environ().get("TIANSHU_MCP_HOME") == str(home)  # the environment block is intact
        assert shared_anonymous_kib(server.pid) > 10 * 1024, "the fork server shares no heap with the service"
        # nothing of the service's is held: no host lock, no API socket, no terminal session
        port = service_info(home)["port"]  # type: ignore[index]
        assert not [f for f in server.open_files() if f.path.endswith("host.lock")]
        assert not [c for c in server.net_connections("inet") if c.laddr and c.laddr.port == port]
        assert os.getsid(server.pid) == server.pid
        # a kill -9 of the service: the lock is free at once (the next start takes it) and the
        # fork server follows its parent
        kill_services(home)
        until(lambda: not forkservers_of(home), 30, "the fork server to follow the service")
        again = cli(home, "service", "start")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["state"] == "ready"
    finally:
        cli(home, "service", "stop")
        kill_services(home)


def test_no_fork_while_another_thread_runs(tmp_path: Path) -> None:
    """Forking a process that runs threads can copy a lock another thread holds: declined."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        assert fork_from_service(tmp_path / "engine.sock", {}) is None
    finally:
        stop.set()
        thread.join()
    assert not (tmp_path / "engine.sock").exists()


def test_the_handle_reports_exit_and_signals_only_a_live_child() -> None:
    child = subprocess.Popen([PY, "-c", "import time; time.sleep(600)"])
    handle = ForkedServer(child.pid)
    child.returncode = 0  # the handle, not Popen, reaps it here
    assert handle.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        handle.wait(0.1)
    handle.terminate()
    assert handle.wait(30) == -15
    handle.kill()  # already reaped: no signal to a pid that may be another process's by now
    assert handle.poll() == -15


def test_forget_logging_leaves_the_logger_as_a_new_interpreter_has_it(tmp_path: Path) -> None:
    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.level, logger.propagate, logger.__dict__.get("_tianshu_configured"))
    try:
        configured = list(setup_logging(tmp_path, file_name="forked.log").handlers)
        forget_logging()
        assert not logger.handlers and logger.level == logging.NOTSET and logger.propagate
        files = [h for h in configured if isinstance(h, logging.FileHandler)]
        assert files and all(h.stream is None for h in files)  # closed with its descriptor
        assert len(setup_logging(tmp_path, file_name=None).handlers) == 1  # configurable again
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        handlers, level, propagate, configured = saved
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        logger.__dict__.pop("_tianshu_configured", None)
        if configured is not None:
            logger._tianshu_configured = configured  # type: ignore[attr-defined]


def test_retitle_writes_the_command_line_and_keeps_the_environment() -> None:
    code = ("import os, sys\n"
            "from tianshu_mcp.hosting.shared_fork import retitle\n"
            "assert retitle(['tianshu_mcp.hosting.forkserver', '123', '/a/very/long/path/' * 200], comm=b'forked-name')\n"
            "print(open('/proc/self/comm').read().strip(), flush=True)\n"
            "print(open('/proc/self/cmdline', 'rb').read().decode(errors='replace'), flush=True)\n"
            "print(open('/proc/self/environ', 'rb').read().decode(errors='replace'), flush=True)\n")
    out = subprocess.run([PY, "-c", code, "x" * 40], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MARK_OF_THE_TEST": "kept"})
    assert out.returncode == 0, out.stderr
    comm, cmdline, environ = out.stdout.split("\n")[:3]
    assert comm == "forked-name"
    args = cmdline.rstrip("\0").split("\0")
    assert args[:2] == ["tianshu_mcp.hosting.forkserver", "123"]
    original = len("\0".join([PY, "-c", code, "x" * 40])) + 1
    assert args[2].startswith("/a/very/long/path/") and len(cmdline) == original  # cut to fit
    assert "MARK_OF_THE_TEST=kept" in environ


@pytest.mark.own_services
def test_a_home_too_deep_for_a_socket_runs_its_tasks_without_a_fork_server(tmp_path: Path) -> None:
    """Seen: a home whose ``prefect/engine.sock`` is longer than a unix socket address holds
    made the fork server fail to bind, and the service restarted it every few seconds, for ever.
    Such a home now runs without one: one warning, and each flow run starts a fresh interpreter."""
    from fixture_project import make_calc_repo
    from test_stdio_host import RawClient, _init, meta
    from tianshu_mcp.hosting.forkserver import MAX_SOCKET_PATH, socket_path

    deep = tmp_path / ("d" * max(1, MAX_SOCKET_PATH + 5 - len(str(tmp_path)) - len("/prefect/engine.sock")))
    deep.mkdir()
    home = new_home(deep, "home", 4510)
    assert len(os.fsencode(socket_path(home))) > MAX_SOCKET_PATH
    repo = make_calc_repo(tmp_path / "calc")
    try:
        raw = RawClient(home)
        _init(raw)
        sub = meta(raw.call("run_task", {"projectPath": str(repo), "task": "noop", "agentId": "scripted-noop",
                                         "autoVerify": False}, timeout=60))
        done = meta(raw.call("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}, timeout=300))
        raw.close()
        assert done["status"] == "succeeded", done
        assert not forkservers_of(home)
        log = (home / "logs" / "service.log").read_text()
        assert log.count("no fork server for this home") == 1
        assert "fork server" not in log.replace("no fork server for this home", "")  # no restart, no traceback
    finally:
        cli(home, "service", "stop")
        kill_services(home)
