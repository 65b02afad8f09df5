"""The Prefect side of one tianshu-mcp client process (docs/architecture.md §3, docs/hosting.md).

Three modes, decided from the config before Prefect is imported:

* ``service`` (default): find the home's background service, or start it detached
  (:mod:`tianshu_mcp.hosting.launcher`); this process is a thin client, and its exit never
  touches a task.
* ``in-process`` (``prefect.hosting``): attach to a live host of the home, else host the API,
  UI and worker here (:class:`~tianshu_mcp.hosting.service.HomeService`); when this process
  exits every active task of the home is interrupted (the original behaviour).
* ``remote``: ``TIANSHU_PREFECT_API_URL`` / ``prefect.apiUrl`` names an external Prefect server;
  tianshu hosts nothing.

``initialize`` is answered before Prefect is ready: :meth:`Runtime.start_background` connects
in a thread, tools that need Prefect ``await`` :meth:`Runtime.wait_ready`, and Prefect's client
is imported only when a tool needs it (:func:`ensure_prefect`). A task is accepted
without Prefect (a durable submission entry). With the home's service, this process then wakes
the service, which submits it, and reads flow-run states with plain HTTP
(:mod:`.run_states`): a stdio server that runs and polls tasks never imports Prefect. In the
other modes this process submits it as soon as the API is up. When the API stops answering
(the service was killed), the next call reconnects — which starts a new service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from ..core import submissions
from ..core.errors import ErrorCode, TianshuError
from ..core.settings import ServerConfig, home_tag
from ..core.webhooks import WebhookDrainer
from ..hosting.identity import INTAKE_PATH, auth_header, auth_string, clients_dir, register_client
from ..deployments.topology import export_env, remote_api_url

log = logging.getLogger("tianshu_mcp")

RETRY_S = 15.0
INTAKE_POST_S = 2.0
"""How long a submission's wake-up post to the home's service may take, s (it answers at once)."""


class Runtime:
    """Connection of one process to its home's Prefect.

    Args:
        home: data home. config: server config.
    """

    def __init__(self, home: Path, config: ServerConfig) -> None:
        self.home = home
        self.config = config
        remote = remote_api_url(config)
        self.mode = "remote" if remote else config.prefect.hosting
        self.api_url = remote or ""
        self.ui_url = (remote[: -len("/api")] if remote and remote.endswith("/api") else remote) or ""
        self.home_tag = home_tag(home)
        # a remote server's credentials come from this process's environment (the host's env
        # block), never from a file of ours; the home's service has its own (identity.auth_string)
        self.auth: str | None = (os.environ.get("PREFECT_API_AUTH_STRING") or None) if remote else None
        self._ready = threading.Event()
        self._error: TianshuError | None = None
        self._host: Any = None  # HomeService in in-process hosting
        self._thread: threading.Thread | None = None
        self._generation = 0
        self._kick = threading.Event()
        self._closing = False
        self._failed_at = 0.0
        self._probed = threading.Event()
        self._reconnecting = threading.Lock()
        self._intake_route: bool | None = None  # whether the service has POST /tianshu/intake (None: not asked yet)
        self._submitter: Any = None  # the submitter thread's PrefectClient, open while its URL is current
        self._submitter_url = ""
        export_env(home, remote, None)

    @property
    def hosting(self) -> bool:
        """True when this process hosts the API and worker (in-process hosting)."""
        return self._host is not None

    def flow_run_url(self, flow_run_id: str) -> str:
        """UI link of a flow run (empty host part until connected): the V2 UI's page, Prefect's
        default UI, which sends a browser that has not logged in to its login page and back to
        the run; the V1 page of the same run only said "Authentication failed" there."""
        return f"{self.ui_url}/v2/runs/flow-run/{flow_run_id}"

    # --- connecting --------------------------------------------------------------------------
    def start_background(self) -> None:
        """Connect in a thread; the thread then submits pending entries whenever kicked (and,
        without a per-home service — remote or in-process mode — delivers pending webhooks).
        Once per runtime: a later call does nothing (the stdio entry point calls it before the
        server's lifespan does)."""
        if self._thread is not None:
            return
        register_client(self.home)
        self._thread = threading.Thread(target=self._run, name="tianshu-prefect", daemon=True)
        self._thread.start()

    def _connect(self) -> None:
        t0 = time.monotonic()
        self._error = None
        try:
            timeout_s = self.config.prefect.ready_timeout_ms / 1000
            if self.mode == "remote":
                self._wait_remote(timeout_s)
            elif self.mode == "in-process":
                self._connect_in_process(timeout_s)
            else:
                from ..hosting.launcher import connect, find

                info = find(self.home)
                if info is None:
                    self._probed.set()  # none runs: start one (seconds), tools do not wait for it
                    info = connect(self.home, timeout_s)
                self._use(info.api_url, info.ui_url)
            if self.mode != "service":  # remote: run_task creates flow runs inline; in-process: hosting imported it
                ensure_prefect()
            log.info("Prefect ready (%s) in %.1f s; UI %s", self.mode, time.monotonic() - t0, self.ui_url)
        except TianshuError as exc:
            self._error = exc
            log.error("%s", exc.render())
        except Exception as exc:  # noqa: BLE001 - reported to every tool call
            self._error = TianshuError(ErrorCode.PREFECT_UNAVAILABLE, f"Prefect did not start: {exc}")
            log.error("%s", self._error.message)
        finally:
            self._generation += 1
            self._failed_at = time.monotonic() if self._error else 0.0
            self._ready.set()
            self._probed.set()

    async def settle(self, timeout_s: float) -> bool:
        """Wait ≤ ``timeout_s`` until connected, or until it is known that no service runs yet
        (then a start takes seconds and accepting a task must not wait for it). Returns
        :attr:`ready`."""
        deadline = time.monotonic() + timeout_s
        while not self._probed.is_set() and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        return self.ready

    def _retry_due(self) -> bool:
        """A failed connection is retried at most every RETRY_S seconds (a broken database or a
        foreign service needs the user; a crash loop must not spawn a service per second)."""
        return time.monotonic() - self._failed_at >= RETRY_S

    @property
    def error(self) -> TianshuError | None:
        """Why the last connection failed (None when connected or still connecting)."""
        return self._error

    def _use(self, api_url: str, ui_url: str) -> None:
        self._intake_route = None  # not known yet for this service
        self.auth = auth_string(self.home)
        self.api_url, self.ui_url = api_url, ui_url
        export_env(self.home, api_url, self.auth)

    def _connect_in_process(self, timeout_s: float) -> None:
        from ..hosting.launcher import connect
        from ..hosting.service import AlreadyHosted, HomeService

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                info = connect(self.home, 2.0, start=False)
                self._use(info.api_url, info.ui_url)
                return
            except TianshuError as exc:
                if exc.code != ErrorCode.PREFECT_UNAVAILABLE:
                    raise
            host = HomeService(self.home, self.config, mode="in-process")
            try:
                info = host.start()
            except AlreadyHosted:
                if time.monotonic() > deadline:
                    raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, f"the host of {self.home} never became ready")
                time.sleep(0.2)
                continue
            self._host = host
            self._use(info.api_url, info.ui_url)
            return

    def _run(self) -> None:
        self._connect()
        # no per-home service here (remote API, or in-process hosting without its maintain loop):
        # this process delivers the home's webhooks itself, in a thread of their own
        drainer = WebhookDrainer(self.home) if self.mode != "service" else None
        # one event loop for the thread's life, so one Prefect client and its connections serve
        # every submission: a client per submission cost ≈0.1 s of CPU (TLS context, httpx
        # client), which held the GIL while the next call's answer was being written
        # (docs/design-notes.md, note 60)
        with asyncio.Runner() as loop, contextlib.ExitStack() as held:
            http = LazyClient(held)
            try:
                while not self._closing:
                    if drainer is not None:
                        drainer.kick()
                    self._kick.wait(1.0)
                    self._kick.clear()
                    if self._closing:
                        return
                    # connected and no error: during a reconnect (its thread clears the error
                    # first) there is no address to submit to, and every tick logged a failure
                    if submissions.has_pending(self.home) and self.ready:
                        try:
                            if not self._wake_service(http):
                                loop.run(self._submit_pending())
                        except httpx.TransportError as exc:
                            log.warning("the Prefect API stopped answering (%s); reconnecting", exc)
                            loop.run(self._close_submitter())
                            self.invalidate()
                        except Exception as exc:  # noqa: BLE001 - the service retries too
                            log.warning("submitting pending tasks failed: %s", exc)
                    elif self._error is not None and submissions.has_pending(self.home) and self._retry_due():
                        self._reconnect()
            finally:
                loop.run(self._close_submitter())

    def _wake_service(self, http: LazyClient) -> bool:
        """Service mode: ask the home's service to submit the pending entries now (``POST
        /tianshu/intake``) and return True; this process then never imports Prefect's client for
        a submission (0.55 s of CPU and ≈35 MiB per stdio server; docs/design-notes.md, note 84).
        False in the other modes, and for a service that has no such route (an earlier version:
        this process submits, as it did). Raises httpx.TransportError when the service does not
        answer."""
        if self.mode != "service" or self._intake_route is False or not self.auth:
            return False
        answer = http.get().post(self.ui_url.rstrip("/") + INTAKE_PATH, headers=auth_header(self.auth))
        self._intake_route = answer.status_code != 404
        if self._intake_route and answer.status_code != 204:
            log.warning("the service answered HTTP %s to a submission's wake-up; it submits within 0.5 s anyway",
                        answer.status_code)
        return self._intake_route

    async def _submit_pending(self) -> None:
        """Create the flow runs of the pending entries with the thread's client (opened on first
        use, and again once the API's address changed)."""
        ensure_prefect()  # this thread's first submission imports Prefect's client (service mode)
        from ..hosting.intake import submit_pending

        if self._submitter is None or self._submitter_url != self.api_url:
            from prefect.client.orchestration import PrefectClient

            await self._close_submitter()
            client = PrefectClient(self.api_url, auth_string=self.auth)
            await client.__aenter__()
            self._submitter, self._submitter_url = client, self.api_url
        await submit_pending(self._submitter, self.home)

    async def _close_submitter(self) -> None:
        """Close the thread's client (a reconnect, the thread's end). Never raises."""
        client, self._submitter = self._submitter, None
        if client is not None:
            try:
                await client.__aexit__(None, None, None)
            except Exception as exc:  # noqa: BLE001 - a broken connection is being dropped anyway
                log.debug("closing the submitter's Prefect client: %s", exc)

    def kick(self) -> None:
        """Ask the background thread to submit pending entries now."""
        self._kick.set()

    def invalidate(self) -> None:
        """The API stopped answering: the next :meth:`wait_ready` reconnects (and may start a new
        service)."""
        if self._error is None:
            self._reconnect()

    def _reconnect(self) -> None:
        """Connect again in a background thread, unless an attempt is already under way."""
        with self._reconnecting:
            if not self._ready.is_set():
                return
            self._ready.clear()
        threading.Thread(target=self._connect, name="tianshu-reconnect", daemon=True).start()

    def _wait_remote(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        auth = tuple(self.auth.split(":", 1)) if self.auth and ":" in self.auth else None
        with httpx.Client(timeout=2.0, auth=auth) as client:  # type: ignore[arg-type]
            while time.monotonic() < deadline:
                try:
                    health = client.get(f"{self.api_url}/health")
                    if health.status_code == 200 and health.json() is True:
                        probe = client.post(f"{self.api_url}/work_pools/filter", json={"limit": 1})
                        if probe.status_code in (401, 403):
                            raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE,
                                               f"the Prefect API at {self.api_url} refused this server's credentials "
                                               f"(HTTP {probe.status_code}); set PREFECT_API_AUTH_STRING in the host's env block")
                        if probe.status_code == 200:
                            return
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(0.25)
        raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, f"no ready Prefect API at {self.api_url} after {timeout_s:.0f} s "
                           "(TIANSHU_PREFECT_API_URL must name the API, e.g. http://host:4200/api)")

    async def wait_ready(self, timeout_s: float | None = None) -> int:
        """Wait until Prefect is usable; return the connection generation (it grows on reconnects).

        Raises:
            TianshuError: the connection error (``PREFECT_UNAVAILABLE``, ``PREFECT_DB_CORRUPT``,
                ``SERVICE_IDENTITY_MISMATCH``, …), or ``PREFECT_UNAVAILABLE`` after ``timeout_s``
                (default ``prefect.readyTimeoutMs``).
        """
        limit = timeout_s if timeout_s is not None else self.config.prefect.ready_timeout_ms / 1000
        deadline = time.monotonic() + limit
        while not self._ready.is_set():
            if time.monotonic() > deadline:
                raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE,
                                   f"the tianshu-mcp service for {self.home} is still starting; try again shortly")
            await anyio.sleep(0.05)
        if self._error:
            error = self._error
            if self._retry_due():
                self._reconnect()
            raise error
        return self._generation

    @property
    def ready(self) -> bool:
        """True when connected without error."""
        return self._ready.is_set() and self._error is None

    @property
    def starting(self) -> bool:
        """True while the connection is still being made (no result yet, neither ready nor an
        error): the service is starting, or (remote mode) this process is still importing Prefect."""
        return not self._ready.is_set()

    async def prefect(self) -> None:
        """Make sure Prefect's client is imported (:func:`ensure_prefect`), in a worker thread so
        the event loop keeps answering; at once when it is. Tool code calls it (through
        :meth:`~tianshu_mcp.mcp_server.taskops.TaskService.client`) before it imports Prefect."""
        if not _prefect_imported.is_set():
            await anyio.to_thread.run_sync(ensure_prefect)

    def stop(self) -> None:
        """Client: nothing to stop (the service lives on). In-process host: interrupt every
        active task of the home and stop the API and worker."""
        self._closing = True
        self._kick.set()
        if self._host is not None:
            self._host.stop(include_queued=True)
            self._host = None
        (clients_dir(self.home) / f"{os.getpid()}.json").unlink(missing_ok=True)


class LazyClient:
    """An ``httpx.Client`` made at its first use (its TLS context costs CPU that a process which
    never needs it should not pay) and closed with ``held``."""

    def __init__(self, held: contextlib.ExitStack) -> None:
        self._held = held
        self._client: httpx.Client | None = None

    def get(self) -> httpx.Client:
        """The client (made now on the first call)."""
        if self._client is None:
            self._client = self._held.enter_context(httpx.Client(timeout=INTAKE_POST_S))
        return self._client


_prefect_lock = threading.Lock()
_prefect_imported = threading.Event()


def ensure_prefect() -> None:
    """Import Prefect's client and our intake once per process (0.55 s of CPU, ≈35 MiB), in
    whichever thread asks first; the others wait for it here.

    Imported inside a tool on the event loop, they would block it past run_task's 0.7 s inline
    budget (measured 1.9–4.1 s answers for one-shot clients); and two threads importing Prefect's
    cyclic modules at once trip Python's import deadlock detection, so every import of Prefect in
    this process goes through here first (:meth:`Runtime.prefect`, the submitter thread). With
    the home's service (the default mode) nothing asks until a task is submitted or a flow run is
    read: a server that only lists tools, answers ``query_info`` or refuses bad arguments never
    imports Prefect (design note 79). Remote and in-process modes import it while connecting."""
    if _prefect_imported.is_set():
        return
    with _prefect_lock:
        if _prefect_imported.is_set():
            return
        import prefect.client.orchestration  # noqa: F401
        import prefect.client.schemas.filters  # noqa: F401
        import prefect.states  # noqa: F401

        from ..hosting import intake  # noqa: F401

        _prefect_imported.set()

