"""The embedded Prefect services: API + UI in a uvicorn thread and an in-process process worker.

Used in ``host`` mode (see :mod:`.topology`): the stdio server and ``tianshu-mcp server`` (daemon
mode) both call :meth:`PrefectHost.start`. Import this module only after
:func:`.topology.decide` has exported Prefect's settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from typing import Any

import httpx

log = logging.getLogger("tianshu_mcp")


class PrefectHost:
    """Hosts the Prefect API/UI and a process worker for work pool ``tianshu``.

    Args:
        api_url: ``http://127.0.0.1:<port>/api`` (from the topology).
        port: the port to bind on 127.0.0.1.
    """

    def __init__(self, api_url: str, port: int) -> None:
        self.api_url = api_url
        self.port = port
        self._server: Any = None
        self._api_thread: threading.Thread | None = None
        self._worker_thread: threading.Thread | None = None
        self._worker_loop: asyncio.AbstractEventLoop | None = None
        self._worker_task: asyncio.Task[Any] | None = None

    # --- API ---------------------------------------------------------------------------------
    def start_api(self, ready_timeout_s: float = 120.0) -> None:
        """Start uvicorn on 127.0.0.1 and block until ``/api/health`` answers 200.

        Raises:
            TimeoutError: the API did not become healthy within ``ready_timeout_s`` seconds.
            RuntimeError: the server thread died during start-up.
        """
        import uvicorn
        from prefect.server.api.server import create_app

        app = create_app(final=True)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error",
                                lifespan="on", access_log=False, log_config=None)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._api_thread = threading.Thread(target=self._server.run, name="prefect-api", daemon=True)
        self._api_thread.start()
        deadline = time.monotonic() + ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if not self._api_thread.is_alive():
                    raise RuntimeError("the Prefect API thread stopped during start-up")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return
                time.sleep(0.2)
        raise TimeoutError(f"Prefect API at {self.api_url} not healthy after {ready_timeout_s:.0f} s")

    def stop_api(self) -> None:
        """Ask uvicorn to exit and wait for its thread (≤10 s)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._api_thread is not None:
            self._api_thread.join(timeout=10)

    # --- worker ------------------------------------------------------------------------------
    def start_worker(self) -> None:
        """Run a ``ProcessWorker`` on pool ``tianshu`` in its own thread and event loop."""
        started = threading.Event()

        def _run() -> None:
            loop = asyncio.new_event_loop()
            self._worker_loop = loop
            asyncio.set_event_loop(loop)
            self._worker_task = loop.create_task(self._worker_main())
            started.set()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._worker_task)
            loop.close()

        self._worker_thread = threading.Thread(target=_run, name="prefect-worker", daemon=True)
        self._worker_thread.start()
        started.wait(5)

    async def _worker_main(self) -> None:
        from prefect.workers.process import ProcessWorker

        from .topology import WORK_POOL

        while True:
            try:
                worker = ProcessWorker(work_pool_name=WORK_POOL, name=f"tianshu-{self.port}")
                await worker.start(printer=lambda *a, **k: print(*a, file=sys.stderr, **k))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the worker alive across API hiccups
                log.warning("process worker stopped (%s); restarting in 2 s", exc)
                await asyncio.sleep(2)

    def stop_worker(self, timeout_s: float = 10.0) -> None:
        """Cancel the worker loop and wait for its thread."""
        loop, task = self._worker_loop, self._worker_task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        if self._worker_thread is not None:
            self._worker_thread.join(timeout=timeout_s)
