"""Where the Prefect API lives for this process, decided before Prefect is imported (00-design §3).

Three modes:

* ``host``: this process hosts the Prefect API + UI (uvicorn thread on 127.0.0.1) over SQLite at
  ``<home>/prefect/`` and an in-process process worker on work pool ``tianshu``. Chosen when no
  external API is configured and the home's host lock is free.
* ``attach``: another tianshu-mcp process (a daemon, or another stdio instance) already hosts the
  API for this home; we only act as a client of it.
* ``remote``: ``TIANSHU_PREFECT_API_URL`` (or ``config.json`` ``prefect.apiUrl``) names an external
  Prefect server; tianshu hosts neither API nor worker (scale-out).

The host lock is an OS file lock held for the hosting process's lifetime, so a crashed host never
leaves a stale lock. Prefect reads its settings from the environment, so :func:`decide` sets them
(00-design §3 "Settings we always force") and must run before ``import prefect``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout

from ..core.files import atomic_write_json, read_json_safe
from ..core.settings import ServerConfig

WORK_POOL = "tianshu"
RUN_TASK_DEPLOYMENT = "run-task/run-task"

# Settings forced in every mode (measured pitfalls, 50-prefect-lab §12).
FORCED_ENV = {
    # the in-memory default leaks concurrency slots forever across an API restart (P1)
    "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": "prefect.server.concurrency.lease_storage.filesystem",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # default 10 s makes run_task → agent start ≈10 s (P10)
    "PREFECT_WORKER_QUERY_SECONDS": "1",
    "PREFECT_WORKER_PREFETCH_SECONDS": "2",
    "PREFECT_RUNNER_POLL_FREQUENCY": "1",
    "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30",
    "PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS": "3600",
    "PREFECT_SERVER_EPHEMERAL_ENABLED": "false",
    "PREFECT_WORKER_WEBSERVER_HOST": "127.0.0.1",
    "PREFECT_SERVER_API_HOST": "127.0.0.1",
    "PREFECT_CLI_COLORS": "false",
    # a new re-verification schedule produces its first run within ≈10 s, not ≈60 s
    "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "10",
    # fail within ≈15 s (not ≈60 s) when the hosting process is gone; tools report
    # PREFECT_UNAVAILABLE; 3 retries still ride out SQLite write stalls (50-prefect-lab P6)
    "PREFECT_CLIENT_MAX_RETRIES": "3",
}


@dataclass
class Topology:
    """The decided mode: ``mode``, ``api_url`` (``http://127.0.0.1:<port>/api``), ``ui_url``,
    ``port`` (host mode), ``home`` and the held host ``lock`` (host mode only)."""

    mode: Literal["host", "attach", "remote"]
    api_url: str
    ui_url: str
    home: Path
    port: int | None = None
    lock: FileLock | None = None

    def release(self) -> None:
        """Release the host lock (host mode); a no-op otherwise."""
        if self.mode == "host" and self.lock is not None and self.lock.is_locked:
            self.lock.release()


def _free_port(preferred: int) -> int:
    """``preferred`` when it is free on 127.0.0.1, else the next free port above it."""
    for port in range(preferred, min(preferred + 200, 65536)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # as uvicorn binds: a port in TIME_WAIT after a quick restart is still ours to take
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_file(home: Path) -> Path:
    """``<home>/prefect/server.json``: ``{pid, port, apiUrl, uiUrl}`` of the hosting process."""
    return home / "prefect" / "server.json"


def decide(home: Path, config: ServerConfig, allow_host: bool = True) -> Topology:
    """Choose host / attach / remote for ``home`` and export Prefect's settings to ``os.environ``.

    Args:
        home: the data home; Prefect's home becomes ``<home>/prefect``.
        config: server config (``prefect.apiUrl``, ``prefect.port``).
        allow_host: False forces attach (used by clients that must not host).

    Raises:
        RuntimeError: attach was needed but no hosting process has published its address.
    """
    prefect_home = home / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(prefect_home)
    os.environ["TIANSHU_MCP_HOME"] = str(home)
    for key, value in FORCED_ENV.items():
        os.environ[key] = value

    remote = os.environ.get("TIANSHU_PREFECT_API_URL") or config.prefect.api_url
    if remote:
        api = remote.rstrip("/")
        os.environ["PREFECT_API_URL"] = api
        return Topology("remote", api, api[: -len("/api")] if api.endswith("/api") else api, home)

    lock = FileLock(str(prefect_home / "host.lock"))
    if allow_host:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            pass
        else:
            port = _free_port(config.prefect.port)
            return claim_host(home, lock, port)

    info = read_json_safe(server_file(home))
    if not isinstance(info, dict) or "apiUrl" not in info:
        raise RuntimeError(f"no tianshu-mcp process hosts Prefect for {home} (missing {server_file(home)})")
    os.environ["PREFECT_API_URL"] = info["apiUrl"]
    os.environ["PREFECT_UI_URL"] = info.get("uiUrl", "")
    return Topology("attach", info["apiUrl"], info.get("uiUrl", ""), home, port=info.get("port"), lock=lock)


def claim_host(home: Path, lock: FileLock, port: int) -> Topology:
    """Become the host of ``home`` on ``port`` (``lock`` already acquired): export the API URL and
    this process's identity (inherited by flow-run processes, whose watchdog follows it) and
    publish ``server.json``."""
    import psutil

    api = f"http://127.0.0.1:{port}/api"
    ui = f"http://127.0.0.1:{port}"
    os.environ["PREFECT_API_URL"] = api
    os.environ["PREFECT_UI_URL"] = ui
    os.environ["PREFECT_SERVER_API_PORT"] = str(port)
    os.environ["TIANSHU_MCP_HOST_PID"] = str(os.getpid())
    os.environ["TIANSHU_MCP_HOST_CTIME"] = repr(psutil.Process().create_time())
    atomic_write_json(server_file(home), {"pid": os.getpid(), "port": port, "apiUrl": api, "uiUrl": ui})
    return Topology("host", api, ui, home, port=port, lock=lock)


def describe(topology: Topology) -> str:
    """One log line describing the topology."""
    return json.dumps({"mode": topology.mode, "apiUrl": topology.api_url, "uiUrl": topology.ui_url})
