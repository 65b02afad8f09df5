"""The per-home service: Prefect API + UI + process worker for one data home (docs/architecture.md §3,
docs/hosting.md).

:class:`HomeService` is what hosts a home's Prefect, wherever it runs:

* detached, as the **background service** that the first tianshu-mcp process needing Prefect
  starts (``python -m tianshu_mcp.hosting.service``, see :mod:`.launcher`); it keeps tasks
  alive across stdio servers and exits by itself when idle;
* in the foreground, as ``tianshu-mcp server`` (under a process supervisor; no idle exit);
* inside a stdio server, in ``in-process`` hosting (opt-in), where tasks end with that server.

Start-up order: the home's host lock (one host per home; a second one exits with code 3) →
database check (``PREFECT_DB_CORRUPT`` naming the file) → bind the socket itself → publish
``service.json`` (``starting``) → API + UI → work pool, deployments, automation → start-up sweep
and missed-schedule trim → pending submissions → worker → ``service.json`` ``ready``.

While it runs, :meth:`HomeService.maintain` turns submission entries into flow runs every half
second and, when ``idleExitMs`` > 0, ends the service after that long with no active or queued
run, no pending submission, no connected client and no active schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import anyio
import psutil
from filelock import FileLock, Timeout

from ..core import submissions
from ..core.errors import ErrorCode, TianshuError
from ..core.files import atomic_write_json
from ..core.memory import TRIM_EVERY_S, release_free_memory
from ..core.reaper import export_host
from ..core.settings import ServerConfig
from ..deployments.topology import export_env
from . import schema_head
from .dbseed import seed_database
from .start_phases import StartPhases
from .identity import (
    ServiceInfo,
    auth_string,
    home_id,
    live_clients,
    prefect_dir,
    service_error_file,
    service_file,
    service_log,
)

log = logging.getLogger("tianshu_mcp")

EXIT_ALREADY_HOSTED = 3
EXIT_START_FAILED = 4
_ACTIVE = ("SCHEDULED", "PENDING", "RUNNING", "CANCELLING", "PAUSED")
REMAKE_EVERY_S = 10.0
"""How often the service makes its deployments again while a submission finds one missing, s."""


def describe(exc: BaseException) -> str:
    """``exc`` for a log line: its type and text (Prefect's ``ObjectNotFound`` has none of its own)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text and text != "None" else type(exc).__name__


class AlreadyHosted(Exception):
    """Another live process holds the home's host lock."""


def check_database(home: Path) -> None:
    """Open ``<home>/prefect/prefect.db`` read-only and read its schema.

    Raises:
        TianshuError: ``PREFECT_DB_CORRUPT`` naming the file and how to recover; task files
            under ``<home>/tasks`` are never touched.
    """
    db = home / "prefect" / "prefect.db"
    if not db.exists():
        return
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise TianshuError(
            ErrorCode.PREFECT_DB_CORRUPT,
            f"the Prefect database {db} cannot be read ({exc}). To recover, stop every tianshu-mcp "
            f"process of this home and move it aside: mv {db} {db}.corrupt — the next start creates a "
            f"new one. Task files under {home / 'tasks'} are kept; the run history shown in the Prefect UI "
            "starts anew.") from exc


class HomeService:
    """Hosts one data home's Prefect in this process.

    Args:
        home: the data home. config: the server config (``prefect.port``, ``concurrency``).
        mode: ``"service"`` (background or ``tianshu-mcp server``) or ``"in-process"``.
        run_worker: also run the process worker (False only in tests of the API alone).
    """

    def __init__(self, home: Path, config: ServerConfig, mode: str = "service", run_worker: bool = True) -> None:
        self.home = home
        self.config = config
        self.mode = mode
        self.run_worker = run_worker
        self.info: ServiceInfo | None = None
        self._lock = FileLock(str(prefect_dir(home) / "host.lock"))
        self._host: Any = None
        self._stop = threading.Event()
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None  # maintain's loop and its wake-up
        self._phases = StartPhases()
        self._migrations_off = False  # this start found the database at its recorded head (.schema_head)

    # --- start / stop ------------------------------------------------------------------------
    def start(self) -> ServiceInfo:
        """Bring the API, worker and deployments up (blocking, ≈5 s warm; a new home starts from a migrated template, :mod:`.dbseed`).

        Raises:
            AlreadyHosted: another process hosts this home.
            TianshuError: ``PREFECT_DB_CORRUPT``; ``SERVICE_START_FAILED`` for anything else
                (also written to ``service-error.json`` for the client that started us).
        """
        try:
            self._lock.acquire(timeout=0)
        except Timeout as exc:
            raise AlreadyHosted(str(self.home)) from exc
        try:
            self._phases = StartPhases(process=self.mode == "service")
            check_database(self.home)
            seed_database(prefect_dir(self.home))  # a new home: a migrated copy, not 11 CPU-s of migrations
            self._phases.mark("database")
            return self._start_locked()
        except Exception as exc:
            err = exc if isinstance(exc, TianshuError) else TianshuError(
                ErrorCode.SERVICE_START_FAILED, f"the tianshu-mcp service could not start: {type(exc).__name__}: {exc} "
                f"(its log: {service_log(self.home)})")
            atomic_write_json(service_error_file(self.home), {"code": err.code.value, "message": err.message,
                                                              "pid": os.getpid()})
            self._teardown()
            raise err from exc

    def _start_locked(self) -> ServiceInfo:
        from .embedded import bind_socket
        from .forkserver import socket_path

        auth = auth_string(self.home)
        hid = home_id(self.home)
        sock = bind_socket(self.config.prefect.port)
        port = int(sock.getsockname()[1])
        api = f"http://127.0.0.1:{port}/api"
        export_env(self.home, api, auth, server_port=port)
        me = psutil.Process()
        export_host()  # flow-run processes follow this process: when it dies they stop their agents
        self.info = ServiceInfo(me.pid, me.create_time(), port, api, f"http://127.0.0.1:{port}", hid, "starting", self.mode)
        self.info.publish(self.home)
        from .embedded import PrefectHost

        self._host = PrefectHost(sock, {"homeId": hid, "home": str(self.home), "pid": me.pid}, auth,
                                 on_intake=self.wake_intake if self.mode == "service" else None)
        if self.run_worker:  # before any thread and before the API's imports: it shares ours (.shared_fork)
            self._host.fork_engine_server(socket_path(self.home))
        self._phases.mark("preload")
        home_db = self._decide_migrations()
        self._host.start_api(self.config.prefect.ready_timeout_ms / 1000)
        if home_db and not self._migrations_off:  # they ran: the next start with this revision skips them
            with contextlib.suppress(OSError):  # no record: the next start migrates (a no-op) again
                schema_head.record(prefect_dir(self.home))
        self._phases.mark("API")
        anyio.run(self._setup)
        self._phases.mark("setup")
        if self.run_worker:
            self._host.start_worker(socket_path(self.home))
        self._phases.mark("worker")
        if self.mode != "service":  # no maintain loop here: now
            self.settle_heap()
            self._phases.mark("heap")
        self.info = replace(self.info, state="ready")
        self.info.publish(self.home)
        service_error_file(self.home).unlink(missing_ok=True)
        log.info("tianshu-mcp service (%s) ready in %.1f s (%s; Prefect's migrations %s): UI %s, home %s", self.mode,
                 self._phases.total_s(), self._phases.render(),
                 "skipped, the database is at its recorded head" if self._migrations_off else "ran",
                 self.info.ui_url, self.home)
        return self.info

    def _decide_migrations(self) -> bool:
        """Turn Prefect's start-up migrations off when the database it will use is the home's
        and at its recorded head (:mod:`.schema_head`), on otherwise; return whether it is the
        home's database. Prefect's settings are built when it is first imported (the fork
        server's preload): they are rebuilt with the decision."""
        from prefect.context import refresh_global_settings_context
        from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL

        url = str(PREFECT_API_DATABASE_CONNECTION_URL.value() or "")
        self._migrations_off = schema_head.skip_if_at_head(prefect_dir(self.home), os.environ, url)
        refresh_global_settings_context()
        return schema_head.is_home_database(prefect_dir(self.home), url)

    def settle_heap(self) -> None:
        """Move what start-up built out of the collector's way and give freed memory back
        (≈0.1 s of CPU holding the GIL). :meth:`maintain` calls it at its first watchdog check,
        5 s after the service is ready, so a task submitted at once is not slowed by it
        (docs/design-notes.md, note 85); in-process hosting, which has no maintain loop, at start."""
        gc.collect()  # what start-up built lives as long as the service: keep it out of the collector's
        gc.freeze()  # full collections, which otherwise walk it all (docs/design-notes.md, note 57)
        release_free_memory()  # what start-up's imports and migrations freed (core/memory.py)

    async def _setup(self) -> None:
        from ..deployments.setup import ensure_all
        from .intake import submit_pending
        from .sweep import startup_sweep, trim_missed_schedules

        async with self.client() as client:
            await ensure_all(client, self.config.concurrency.max_running)
            await startup_sweep(client, self.home)
            await trim_missed_schedules(client)
            await submit_pending(client, self.home)

    def client(self) -> Any:
        """A new Prefect client on this service's API (use as ``async with``)."""
        from prefect.client.orchestration import PrefectClient

        assert self.info is not None
        return PrefectClient(self.info.api_url, auth_string=auth_string(self.home))

    def request_stop(self) -> None:
        """Ask :meth:`maintain` to return (thread- and signal-safe)."""
        self._stop.set()
        self.wake_intake()

    def wake_intake(self) -> None:
        """Have :meth:`maintain` submit the pending entries now instead of at its next half-second
        tick (thread-safe; a no-op before it runs). A stdio server posts ``/tianshu/intake`` after
        it wrote an entry (docs/design-notes.md, note 84)."""
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                wake[0].call_soon_threadsafe(wake[1].set)

    def stop(self, include_queued: bool = False) -> int:
        """Interrupt running runs (and queued ones with ``include_queued``), stop the worker and
        the API, withdraw ``service.json``, release the host lock; return how many runs were
        interrupted. Never raises."""
        self._stop.set()
        n = 0
        if self._host is not None and self.info is not None and self.info.state == "ready":
            from .sweep import shutdown_interrupt

            async def _interrupt() -> int:
                async with self.client() as client:
                    return await shutdown_interrupt(client, self.home, include_queued=include_queued)

            try:
                n = anyio.run(_interrupt)
            except Exception as exc:  # noqa: BLE001 - stopping goes on
                log.warning("shutdown: %s", exc)
            if n:
                log.info("shutdown: %d active run(s) interrupted", n)
        self._teardown()
        return n

    def _teardown(self) -> None:
        if self._host is not None:
            self._host.stop_worker()
            self._host.stop_api()
            self._host = None
        current = ServiceInfo.read(self.home)
        if current is not None and current.pid == os.getpid():
            service_file(self.home).unlink(missing_ok=True)
        if self._lock.is_locked:
            self._lock.release()

    # --- while running -----------------------------------------------------------------------
    async def maintain(self, idle_exit_ms: int = 0) -> str:
        """Submit pending entries and start webhook deliveries (:class:`~tianshu_mcp.core.webhooks.WebhookDrainer`,
        a thread) every 0.5 s, end hung flow runs (:mod:`.watchdog`) and sweep left worktrees every 5 s, give
        free heap memory back every 30 s (:mod:`~tianshu_mcp.core.memory`); with ``idle_exit_ms`` > 0, return ``"idle"`` after that long idle
        (see module doc). Returns ``"stopped"`` after :meth:`request_stop`."""
        from ..core.git.worktree import sweep_home
        from ..core.webhooks import WebhookDrainer
        from .watchdog import CHECK_EVERY_S, end_hung_runs

        from prefect.exceptions import ObjectNotFound

        idle_since: float | None = None
        last_idle_check = last_remake = 0.0
        # the start swept what a previous service left (.sweep.startup_sweep): the first watchdog
        # check and trim come one period later, with the heap's settling, not beside a first task
        last_watchdog = last_trim = time.monotonic()
        heap_settled = False
        drainer = WebhookDrainer(self.home)  # deliveries in its own thread: never delays this loop
        woken = asyncio.Event()
        self._wake = (asyncio.get_running_loop(), woken)
        async with self.client() as client:
            from .intake import submit_pending

            while not self._stop.is_set():
                drainer.kick()  # also drains what a previous service left pending
                if submissions.has_pending(self.home):
                    try:
                        await submit_pending(client, self.home)
                    except ObjectNotFound as exc:  # a deployment of this home deleted while it runs
                        if time.monotonic() - last_remake >= REMAKE_EVERY_S:
                            last_remake = time.monotonic()
                            await self._remake_deployments(client, exc)
                    except Exception as exc:  # noqa: BLE001 - retried next tick
                        log.warning("submitting pending tasks failed (retrying): %s", describe(exc))
                if self._host is not None:
                    self._host.check_forkserver()
                now = time.monotonic()
                if now - last_watchdog >= CHECK_EVERY_S:
                    last_watchdog = now
                    if not heap_settled:
                        heap_settled = True
                        await anyio.to_thread.run_sync(self.settle_heap)
                    try:
                        await end_hung_runs(client, self.home)
                    except Exception as exc:  # noqa: BLE001 - looked at again on the next check
                        log.warning("watchdog check failed: %s", exc)
                    try:  # worktrees a killed flow run left (core.git.worktree's cleanup policy)
                        removed = await anyio.to_thread.run_sync(sweep_home, self.home)
                        if removed:
                            log.info("removed the worktree(s) of %s, left by ended runs", ", ".join(removed))
                    except Exception as exc:  # noqa: BLE001 - looked at again on the next check
                        log.warning("worktree sweep failed: %s", exc)
                if now - last_trim >= TRIM_EVERY_S:  # what bursts of runs freed goes back (core/memory.py)
                    last_trim = now
                    await anyio.to_thread.run_sync(release_free_memory)
                if idle_exit_ms > 0 and now - last_idle_check >= min(5.0, idle_exit_ms / 4000):
                    last_idle_check = now
                    try:
                        idle = await self._idle(client) and not drainer.busy()
                    except Exception as exc:  # noqa: BLE001
                        log.warning("idle check failed: %s", exc)
                        idle = False
                    idle_since = (idle_since or now) if idle else None
                    if idle_since is not None and now - idle_since >= idle_exit_ms / 1000:
                        log.info("idle for %.0f s (no run, client or schedule): the service exits", now - idle_since)
                        return "idle"
                with anyio.move_on_after(0.5):  # or at once when a client wrote an entry
                    await woken.wait()
                woken.clear()
        self._wake = None
        return "stopped"

    async def _remake_deployments(self, client: Any, exc: BaseException) -> None:
        """Make the home's pool and deployments again (what start-up does), after a submission
        found one missing: someone deleted it in the UI or through the API while the service
        ran. Its tasks would otherwise wait queued for ever. Never raises (the next round tries
        again, at most every :data:`REMAKE_EVERY_S` s)."""
        from ..deployments.setup import ensure_all
        from . import sweep

        log.warning("a deployment of this home is missing (%s): making the home's pool and deployments again",
                    describe(exc))
        try:
            await ensure_all(client, self.config.concurrency.max_running)
        except Exception as again:  # noqa: BLE001 - tried again on a later round
            log.warning("making the home's deployments again failed (retrying): %s", describe(again))
        sweep.forget_deployment_ids()

    async def _idle(self, client: Any) -> bool:
        from prefect.exceptions import ObjectNotFound

        from .sweep import runs_in_states

        if submissions.has_pending(self.home) or live_clients(self.home):
            return False
        if await runs_in_states(client, _ACTIVE, limit=1):
            return False
        try:
            dep = await client.read_deployment_by_name("reverify/reverify")
        except ObjectNotFound:
            return True
        return not any(s.active for s in await client.read_deployment_schedules(dep.id))


def run(home: Path, config: ServerConfig, idle_exit_ms: int, announce: Callable[[ServiceInfo], None] | None = None) -> int:
    """Run the service in this process until SIGTERM/SIGINT or idle; return the exit code
    (0; 3 = another process hosts the home; 4 = start failed, see ``service-error.json``)."""
    service = HomeService(home, config)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: service.request_stop())
    try:
        info = service.start()
    except AlreadyHosted:
        log.info("another process already hosts Prefect for %s", home)
        return EXIT_ALREADY_HOSTED
    except TianshuError as exc:
        log.error("%s", exc.render())
        return EXIT_START_FAILED
    if announce is not None:
        announce(info)
    reason = "stopped"
    try:
        reason = anyio.run(service.maintain, idle_exit_ms)
    except Exception as exc:  # noqa: BLE001
        log.exception("service loop failed: %s", exc)
    finally:
        log.info("service stopping (%s)", reason)
        service.stop()
    return 0


def main() -> int:
    """Entry point of the detached background service (``python -m tianshu_mcp.hosting.service``)."""
    from ..core.log import setup_logging
    from ..core.settings import data_home, load_config

    home = data_home()
    setup_logging(home, file_name=None)  # stderr is <home>/logs/service.log (see launcher)
    config = load_config(home)
    return run(home, config, config.prefect.idle_exit_ms)


if __name__ == "__main__":
    sys.exit(main())
