"""``tianshu-mcp worker --pool NAME``: a worker for a shared Prefect server (docs/isolation.md §2).

One per machine (or more): it serves one work pool of the Prefect server named by
``TIANSHU_PREFECT_API_URL`` (or ``prefect.apiUrl`` in its home's ``config.json``), with its own
data home (``TIANSHU_MCP_HOME``: task records, the clones of remotes, worktrees, agent
profiles). It shares no file with the MCP server that submitted the task: a remote task names a
git remote, the worker clones it, works in a worktree, pushes ``tianshu/<taskId>`` and publishes
the record as an artifact (:mod:`tianshu_mcp.flows.remote`).

Credentials come from the worker's environment only: ``PREFECT_API_AUTH_STRING`` (or
``PREFECT_API_KEY``) for the API, and git's own (credential helper, SSH key, ``GIT_ASKPASS``) for
the remotes. The flow-run processes it starts inherit that environment; agents and checks get it
scrubbed of every ``PREFECT_*`` variable (:mod:`tianshu_mcp.core.childenv`).

The worker is Prefect's process worker (:func:`.worker.process_worker`); a worker that dies
leaves its flow runs without heartbeat, and the zombie-run automation
(:func:`.setup.ensure_zombie_automation`) ends them Crashed — ``interrupted`` for the caller.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from ..core.log import setup_logging
from ..core.reaper import export_host
from ..core.errors import TianshuError
from ..core.settings import data_home, load_config
from ..deployments.topology import export_env, remote_api_url

log = logging.getLogger("tianshu_mcp")

async def _serve(pool: str, name: str, limit: int | None, pool_limit: int | None) -> None:
    from prefect.client.orchestration import get_client

    from ..deployments.setup import KEEP_LIMIT, ensure_pool_deployment
    from .worker import process_worker

    async with get_client() as client:
        await ensure_pool_deployment(client, pool, pool_limit if pool_limit is not None else KEEP_LIMIT)
    worker = process_worker(name, pool, limit)
    log.info("worker %s serves work pool %s (limit %s)", name, pool, limit)
    sweeper = asyncio.create_task(_maintain_forever())
    try:
        await worker.start(printer=lambda *a, **k: log.info(" ".join(str(x) for x in a)))
    finally:
        sweeper.cancel()


async def _maintain_forever(every_s: float = 5.0) -> None:
    """Keep a fork server beside the worker (warm flow-run engines, :mod:`.forkserver`; restarted
    when it dies), and sweep the worktrees a killed flow run of this worker left (a crash, a
    restart after power loss): committed to their branch in the worker's clone, then removed
    (core.git.worktree's policy)."""
    from ..core.git.worktree import sweep_home
    from .forkserver import socket_path, spawn
    from .worker import engine_env

    forkserver = None
    starts = 0
    while True:
        if (forkserver is None or forkserver.poll() is not None) and starts < 5:  # then plain engines only
            if forkserver is not None:
                log.warning("the fork server exited with %s; restarting it", forkserver.returncode)
            forkserver = spawn(socket_path(data_home()), engine_env(None, own_api=False))
            starts += 1
        try:
            removed = await asyncio.to_thread(sweep_home, data_home())
            if removed:
                log.info("removed the worktree(s) of %s, left by ended runs", ", ".join(removed))
        except Exception as exc:  # noqa: BLE001 - looked at again next time
            log.warning("worktree sweep failed: %s", exc)
        await asyncio.sleep(every_s)


def run_worker(pool: str, name: str | None = None, limit: int | None = None, pool_limit: int | None = None) -> None:
    """Serve ``pool`` with this process's data home until SIGINT/SIGTERM (blocks).

    Args:
        name: the worker's name in the UI (default ``tianshu-<host>-<pid>``). limit: this
            worker's concurrent flow runs (None: no limit of its own). pool_limit: set the pool's
            and its deployment's concurrency limit (None: keep them).

    Raises:
        TianshuError: PREFECT_UNAVAILABLE — no server is named, or it refused the credentials
            (``PREFECT_API_AUTH_STRING``) or could not be reached.
    """
    from ..core.errors import ErrorCode

    home = data_home()
    home.mkdir(parents=True, exist_ok=True)
    api = remote_api_url(load_config(home))
    if not api:
        raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, "no Prefect server is named; set TIANSHU_PREFECT_API_URL "
                           "(e.g. http://prefect-host:4200/api) or prefect.apiUrl in config.json")
    export_env(home, api, None)
    export_host()  # its flow runs stop their agents when the worker dies (then Crashed: interrupted)
    setup_logging(home, file_name="worker.log")
    name = name or f"tianshu-{socket.gethostname()}-{os.getpid()}"
    try:
        asyncio.run(_serve(pool, name, limit, pool_limit))
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - one coded line, not a traceback: usually the address or the auth
        status = getattr(getattr(exc, "response", None), "status_code", None)
        why = ("the API refused the credentials: set PREFECT_API_AUTH_STRING" if status in (401, 403)
               else f"{type(exc).__name__}: {exc}")
        log.error("worker stopped: %s", why)
        raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, f"cannot serve pool {pool} at {api}: {why}") from exc
