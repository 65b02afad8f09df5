"""The embedded Prefect services: API + UI in a uvicorn thread and an in-process process worker.

Used by whoever hosts a home's Prefect (the per-home service, or a stdio server in ``in-process``
mode; see :mod:`.service`). The listening socket is bound by :func:`bind_socket` *before* the
address is published, and handed to uvicorn as is, so no other process can take the port between
a probe and a bind (docs/hosting.md §3: "one home, one Prefect"). The app is wrapped so that
``GET /tianshu/identity`` (same credentials as the API) answers the home's identity. Import this
module only after :func:`.topology.export_env` has exported Prefect's settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import httpx

from .forkserver import MAX_SOCKET_PATH, socket_fits
from .identity import IDENTITY_PATH, INTAKE_PATH, auth_header
from .retry_after import quick_first_retry

if TYPE_CHECKING:
    from .shared_fork import ForkedServer

log = logging.getLogger("tianshu_mcp")


def bind_socket(preferred: int, tries: int = 200) -> socket.socket:
    """Bind a listening TCP socket on 127.0.0.1: ``preferred`` when free, else the next free port.

    The socket is bound here and kept; ``SO_REUSEADDR`` lets a restarted service take its old port
    out of TIME_WAIT while a port another process listens on stays refused. It is created with
    ``IPPROTO_TCP`` explicitly: asyncio sets ``TCP_NODELAY`` on accepted connections only when the
    protocol number says TCP, and without it every keep-alive request waits ≈40 ms (Nagle against
    delayed ACK: measured 48 ms per API call against 3 ms).

    Raises:
        OSError: no port in ``preferred .. preferred+tries`` nor an ephemeral one could be bound.
    """
    for port in [*range(preferred, min(preferred + tries, 65536)), 0]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
        except OSError:
            sock.close()
            continue
        sock.set_inheritable(False)
        return sock
    raise OSError(f"no free port on 127.0.0.1 from {preferred}")


_UNAUTHORIZED = b'{"exception_message": "Unauthorized"}'

# proposals that never make another flow run ready: a claim (Pending), a start (Running), a
# cancellation on its way (Cancelling); every other state may (a rework's Scheduled, a final
# state freeing its project's work-queue slot, a suspension)
_NOT_READYING = frozenset({"PENDING", "RUNNING", "CANCELLING"})


def _creates_flow_run(scope: dict[str, Any]) -> bool:
    """A request after which a flow run may be ready for the worker: a deployment's
    ``create_flow_run``, a flow run's ``set_state`` (a rework's Scheduled; a final state, which
    frees its work-queue slot for the next run of the project) or ``resume`` (a needs_user
    answer). Whether a ``set_state`` does is known from its body (:func:`_may_ready`)."""
    if scope.get("method") != "POST":
        return False
    path = str(scope.get("path") or "")
    if path.startswith("/api/deployments/"):
        return path.endswith("/create_flow_run")
    return path.startswith("/api/flow_runs/") and path.endswith(("/set_state", "/resume"))


def _may_ready(path: str, body: bytes) -> bool:
    """Whether a successful ``path`` request with ``body`` may have made a flow run ready: True
    for a creation and a resume, and for a ``set_state`` unless it proposed a state of
    :data:`_NOT_READYING`. A body that is not the JSON Prefect's client sends counts as may
    (the poke is only ever a poll too many)."""
    if not path.endswith("/set_state"):
        return True
    try:
        proposed = json.loads(body)["state"]["type"]
    except (ValueError, KeyError, TypeError):
        return True
    return str(proposed).upper() not in _NOT_READYING


def identity_app(app: Any, identity: dict[str, Any], auth: str,
                 on_flow_run_created: Callable[[], None] | None = None,
                 on_intake: Callable[[], None] | None = None) -> Any:
    """Wrap the ASGI ``app``: ``GET /tianshu/identity`` with ``auth`` (basic) answers ``identity``
    as JSON, 401 without it; ``POST /tianshu/intake`` with ``auth`` calls ``on_intake`` (in the
    API's thread: a client wrote a submission entry, docs/design-notes.md note 84) and answers
    204, 401 without it, 404 when there is no ``on_intake``; every other request goes to ``app``.

    ``on_flow_run_created`` is called (in the API's thread) after the API answered 2xx to a
    request that may have made a flow run ready (:func:`_creates_flow_run`, :func:`_may_ready`):
    the worker polls at once instead of at its next interval. A run's own claim and start
    (``Pending``, ``Running``) poke nothing: a poll after them found nothing new, and each poll
    is 25–60 ms of this process's time while the run's engine waits for its answers.
    """
    body = json.dumps(identity).encode()
    expected_bytes = auth_header(auth)["Authorization"].encode("latin-1")

    async def answer(send: Any, status: int, payload: bytes) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    def authorized(scope: dict[str, Any]) -> bool:  # bytes: a non-ASCII header is a refusal, not a 500
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        return hmac.compare_digest(given, expected_bytes)

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("path") == IDENTITY_PATH:
            ok = authorized(scope)
            await answer(send, 200 if ok else 401, body if ok else _UNAUTHORIZED)
            return
        if scope.get("type") == "http" and scope.get("path") == INTAKE_PATH and on_intake is not None:
            if scope.get("method") != "POST":
                await answer(send, 405, b'{"exception_message": "Method Not Allowed"}')
            elif not authorized(scope):
                await answer(send, 401, _UNAUTHORIZED)
            else:
                on_intake()
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})
            return
        if on_flow_run_created is not None and scope.get("type") == "http" and _creates_flow_run(scope):
            created = False
            chunks: list[bytes] = []

            async def tap() -> dict[str, Any]:
                message = await receive()
                if message.get("type") == "http.request":
                    chunks.append(message.get("body", b""))
                return message

            async def watch(message: dict[str, Any]) -> None:
                nonlocal created
                if message.get("type") == "http.response.start":
                    created = 200 <= int(message.get("status") or 0) < 300
                await send(message)

            await app(scope, tap, watch)
            if created and _may_ready(str(scope.get("path")), b"".join(chunks)):
                on_flow_run_created()
            return
        await app(scope, receive, send)

    return wrapped


class PrefectHost:
    """Hosts the Prefect API/UI on an already bound socket and a process worker for pool ``tianshu``.

    Args:
        sock: the listening socket from :func:`bind_socket`.
        identity: what ``GET /tianshu/identity`` answers (``{"homeId", "home", "pid"}``).
        auth: the home's credentials, required by the API and the identity route.
        on_intake: called when a client posts ``/tianshu/intake`` (the service's loop that
            submits entries); None: no such route.
    """

    def __init__(self, sock: socket.socket, identity: dict[str, Any], auth: str,
                 on_intake: Callable[[], None] | None = None) -> None:
        self.sock = sock
        self.on_intake = on_intake  # POST /tianshu/intake (identity_app); None: that route answers 404
        self.port = int(sock.getsockname()[1])
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.identity = identity
        self.auth = auth
        self._server: Any = None
        self._api_thread: threading.Thread | None = None
        self._worker_thread: threading.Thread | None = None
        self._worker_loop: asyncio.AbstractEventLoop | None = None
        self._worker_task: asyncio.Task[Any] | None = None
        self._worker: Any = None
        self._polling = False
        self._poll_again = False
        self._forkserver: subprocess.Popen[bytes] | ForkedServer | None = None
        self._forkserver_socket: Path | None = None
        self._launcher: Any = None

    # --- API ---------------------------------------------------------------------------------
    def start_api(self, ready_timeout_s: float = 120.0) -> None:
        """Serve the app on the bound socket and block until ``/api/health`` answers 200.

        Raises:
            TimeoutError: the API did not become healthy within ``ready_timeout_s`` seconds.
            RuntimeError: the server thread died during start-up (e.g. the database is unusable).
        """
        import uvicorn
        from prefect.server.api.server import create_app
        from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL

        from .sqlite_db import install

        install(str(PREFECT_API_DATABASE_CONNECTION_URL.value() or ""))  # before the API touches the database
        app = identity_app(quick_first_retry(create_app(final=True)), self.identity, self.auth, self.poke_worker,
                           self.on_intake)
        config = uvicorn.Config(app, log_level="error", lifespan="on", access_log=False, log_config=None)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._api_thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]},
                                            name="prefect-api", daemon=True)
        self._api_thread.start()
        deadline = time.monotonic() + ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if not self._api_thread.is_alive():
                    raise RuntimeError("the Prefect API stopped during start-up (its error is in the log)")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.api_url}/health").status_code == 200 and self._server.started:
                        return
                time.sleep(0.1)
        raise TimeoutError(f"Prefect API at {self.api_url} not healthy after {ready_timeout_s:.0f} s")

    def stop_api(self) -> None:
        """Ask uvicorn to exit and wait for its thread (≤10 s); close the socket."""
        if self._server is not None:
            self._server.should_exit = True
        if self._api_thread is not None:
            self._api_thread.join(timeout=10)
        with contextlib.suppress(OSError):
            self.sock.close()

    # --- worker ------------------------------------------------------------------------------
    def start_worker(self, engine_socket: Path | None = None) -> None:
        """Run the process worker (:func:`.worker.process_worker`) in its own thread and event loop.

        Args:
            engine_socket: where to run a fork server (:mod:`.forkserver`) for warm flow-run
                processes; None: every flow run starts a fresh interpreter.
        """
        if engine_socket is not None and not socket_fits(engine_socket):
            log.warning("no fork server for this home: its socket path %s is %d bytes, more than a unix socket "
                        "address holds (%d); every flow run starts a fresh interpreter (slower, nothing lost)",
                        engine_socket, len(os.fsencode(engine_socket)), MAX_SOCKET_PATH)
            engine_socket = None
        if engine_socket is not None:
            from .direct_launch import DirectLauncher

            if self._forkserver is None or self._forkserver_socket != engine_socket:
                self._start_forkserver(engine_socket)
            self._launcher = DirectLauncher(engine_socket, own_api=True)
        started = threading.Event()

        def _run() -> None:
            loop = asyncio.new_event_loop()
            self._worker_loop = loop
            asyncio.set_event_loop(loop)
            self._worker_task = loop.create_task(self._worker_main())
            started.set()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._worker_task)
            # tasks the worker's clients left behind (event websockets' keepalive): end them
            # here rather than have them reported as destroyed while pending at exit
            leftover = asyncio.all_tasks(loop)
            for task in leftover:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            loop.close()

        self._worker_thread = threading.Thread(target=_run, name="prefect-worker", daemon=True)
        self._worker_thread.start()
        started.wait(5)

    async def _worker_main(self) -> None:
        from .worker import process_worker

        while True:
            try:
                worker = process_worker(f"tianshu-{self.port}", own_api=True)
                self._worker = worker
                await worker.start(printer=lambda *a, **k: print(*a, file=sys.stderr, **k))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the worker alive across API hiccups
                log.warning("process worker stopped (%s); restarting in 2 s", exc)
                await asyncio.sleep(2)

    def poke_worker(self) -> None:
        """Have the worker look for scheduled flow runs now (thread-safe; no-op before it runs).

        Prefect's worker polls every ``PREFECT_WORKER_QUERY_SECONDS`` (2 s, a safety net for
        runs made ready inside the server); a poke after each request that may make a run ready
        (created, rescheduled, resumed, or a run ended and freed its project's slot) starts it
        at once. Pokes
        coalesce: while a poke's poll runs, further pokes ask for one more poll after it, so a
        burst of created runs costs two polls, not one per run. A poll that races the worker's own
        is harmless: the worker skips runs it is already submitting.
        """
        loop, worker = self._worker_loop, self._worker
        if loop is None or worker is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._poll_soon, loop, worker)

    def _poll_soon(self, loop: asyncio.AbstractEventLoop, worker: Any) -> None:
        """In the worker's loop: start a poll, or mark one to follow the poll in flight."""
        if self._polling:
            self._poll_again = True
            return
        self._polling = True

        async def poll() -> None:
            try:
                while True:
                    self._poll_again = False
                    try:
                        if not await self._launch_due(worker):
                            await worker.get_and_submit_flow_runs()
                    except Exception as exc:  # noqa: BLE001 - the next regular poll retries
                        log.debug("worker poll after a created flow run failed: %s", exc)
                    if not self._poll_again:
                        return
            finally:
                self._polling = False

        loop.create_task(poll())

    async def _launch_due(self, worker: Any) -> bool:
        """Start due runs directly (:mod:`.direct_launch`); False when the worker is to poll
        (no launcher, the worker not connected yet, a run left for it, the request failed)."""
        if self._launcher is None:
            return False
        try:
            worker.work_pool, worker.client  # noqa: B018 - raise until the worker has connected
        except RuntimeError:
            return False
        try:
            return bool(await self._launcher.launch_due(worker.client, worker.work_pool.name, worker.name,
                                                        getattr(worker, "backend_id", None)))
        except Exception as exc:  # noqa: BLE001 - the worker's own poll takes over
            log.debug("direct launch failed: %s", exc)
            return False

    def fork_engine_server(self, path: Path) -> bool:
        """Fork the fork server at ``path`` from this process now, so that it shares the
        service's imports (:mod:`.shared_fork`); only while this process runs no thread, so
        before :meth:`start_api`. :meth:`start_worker` then uses it. Returns False (nothing
        done: :meth:`start_worker` spawns one) when a thread already runs."""
        from .shared_fork import fork_from_service
        from .worker import engine_env

        if not socket_fits(path):
            return False
        forked = fork_from_service(path, engine_env(None, own_api=True))
        if forked is None:
            return False
        self._forkserver, self._forkserver_socket = forked, path
        return True

    def _start_forkserver(self, path: Path) -> None:
        """Start the fork server (its own session: a terminal's Ctrl-C is the service's business)
        and point flow-run launchers at it. Launchers wait for it while it starts."""
        from .forkserver import spawn
        from .worker import engine_env

        self._forkserver_socket = path
        self._forkserver = spawn(path, engine_env(None, own_api=True))

    def check_forkserver(self) -> bool:
        """Restart the fork server if it died (reaped, logged); True when one was restarted.
        Launchers that find it gone start plain engines: slower, never lost."""
        proc, path = self._forkserver, self._forkserver_socket
        if proc is None or path is None or proc.poll() is None:
            return False
        log.warning("the fork server (pid %d) exited with %s; restarting it", proc.pid, proc.returncode)
        self._start_forkserver(path)
        return True

    def _stop_forkserver(self) -> None:
        """Stop the fork server (engines it forked keep running: they are flow runs)."""
        from ..core.forkclient import SOCKET_ENV
        from .engine_cmd import SERVER_PID_ENV

        os.environ.pop(SOCKET_ENV, None)
        os.environ.pop(SERVER_PID_ENV, None)
        proc, self._forkserver = self._forkserver, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._forkserver_socket is not None:
            self._forkserver_socket.unlink(missing_ok=True)

    def stop_worker(self, timeout_s: float = 10.0) -> None:
        """Cancel the worker loop and wait for its thread; stop the fork server."""
        loop, task = self._worker_loop, self._worker_task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        if self._worker_thread is not None:
            self._worker_thread.join(timeout=timeout_s)
        self._stop_forkserver()
