"""Prefect's settings for a tianshu-mcp process, decided before Prefect is imported (docs/architecture.md §3).

Who hosts the API is decided elsewhere (:mod:`.launcher` for clients, :mod:`.service` for the
per-home service); this module only holds the settings every mode forces (measured pitfalls,
docs/prefect-facts.md §12) and exports them. Prefect reads its settings from the environment once, at
import, so :func:`export_env` must run before ``import prefect``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.settings import ServerConfig

WORK_POOL = "tianshu"
RUN_TASK_DEPLOYMENT = "run-task/run-task"


def pool_deployment(pool: str) -> str:
    """The ``run-task`` deployment of work pool ``pool``: ``run-task/run-task`` for the home's own
    pool, ``run-task/pool-<pool>`` for any other (one deployment per pool routes a flow run to
    that pool's workers)."""
    return "run-task/run-task" if pool == WORK_POOL else f"run-task/pool-{pool}"


# Settings forced in every mode (measured pitfalls, docs/prefect-facts.md §12).
FORCED_ENV = {
    # the in-memory default leaks concurrency slots forever across an API restart (P1)
    "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": "prefect.server.concurrency.lease_storage.filesystem",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # default 10 s made run_task → agent start ≈10 s (P10); the API pokes the worker after every
    # request that may make a run ready (embedded.identity_app), so the poll is only a safety
    # net for runs made ready inside the server (the scheduler, a repossessed concurrency slot):
    # 2 s, not 1 s (an idle service polled 86 400×/day); 5 s let a run freed by the start-up
    # sweep after a kill -9 wait too long for the hosting tests on a loaded machine
    "PREFECT_WORKER_QUERY_SECONDS": "2",
    "PREFECT_WORKER_PREFETCH_SECONDS": "2",
    "PREFECT_RUNNER_POLL_FREQUENCY": "1",
    "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30",
    "PREFECT_SERVER_SERVICES_LATE_RUNS_AFTER_SECONDS": "3600",
    "PREFECT_SERVER_EPHEMERAL_ENABLED": "false",
    "PREFECT_WORKER_WEBSERVER_HOST": "127.0.0.1",
    "PREFECT_SERVER_API_HOST": "127.0.0.1",
    "PREFECT_CLI_COLORS": "false",
    # Prefect's console lines without Rich: ≈30 ms of CPU per flow run, some before the agent
    # starts (core/log.PlainConsoleHandler, design note 77)
    "PREFECT_LOGGING_HANDLERS_CONSOLE_CLASS": "tianshu_mcp.core.log.PlainConsoleHandler",
    # a new re-verification schedule produces its first run within ≈10 s, not ≈60 s
    "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "10",
    # fail within ≈15 s (not ≈60 s) when the hosting process is gone; tools report
    # PREFECT_UNAVAILABLE; 3 retries still ride out SQLite write stalls (docs/prefect-facts.md P6)
    "PREFECT_CLIENT_MAX_RETRIES": "3",
}


def export_env(home: Path, api_url: str | None, auth: str | None, *, server_port: int | None = None) -> None:
    """Export Prefect's settings for ``home`` to ``os.environ`` (before ``import prefect``).

    Args:
        home: the data home; Prefect's home becomes ``<home>/prefect``.
        api_url: the API this process talks to (None: leave ``PREFECT_API_URL`` alone).
        auth: the home's credentials (``user:password``) sent by this process's Prefect client;
            None for a remote API (whose own settings the environment carries).
        server_port: set when this process hosts the API: the port it bound. The API then
            requires ``auth`` and allows cross-origin requests only from its own UI origin.
    """
    prefect_home = home / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(prefect_home)
    os.environ["TIANSHU_MCP_HOME"] = str(home)
    for key, value in FORCED_ENV.items():
        os.environ[key] = value
    if api_url:
        os.environ["PREFECT_API_URL"] = api_url
        os.environ["PREFECT_UI_URL"] = api_url[: -len("/api")] if api_url.endswith("/api") else api_url
    if auth:
        os.environ["PREFECT_API_AUTH_STRING"] = auth
    if server_port is not None:
        origin = f"http://127.0.0.1:{server_port}"
        os.environ["PREFECT_SERVER_API_PORT"] = str(server_port)
        os.environ["PREFECT_SERVER_API_AUTH_STRING"] = auth or ""
        os.environ["PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS"] = origin
        os.environ["PREFECT_UI_API_URL"] = f"{origin}/api"


def remote_api_url(config: ServerConfig) -> str | None:
    """The external Prefect API (scale-out): ``TIANSHU_PREFECT_API_URL`` or ``prefect.apiUrl``."""
    remote = os.environ.get("TIANSHU_PREFECT_API_URL") or config.prefect.api_url
    return remote.rstrip("/") if remote else None
