"""Process runtime: decides the Prefect topology, hosts Prefect when this process owns the home,
and tells tools when Prefect is ready (00-design §3).

``initialize`` is answered before Prefect is ready: :meth:`Runtime.start_background` starts the
API, worker and deployments in a thread; tools ``await`` :meth:`Runtime.wait_ready`.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from ..core.errors import ErrorCode, TianshuError
from ..core.settings import ServerConfig, home_tag
from ..deployments.topology import Topology, decide

log = logging.getLogger("tianshu_mcp")


class Runtime:
    """The Prefect side of one tianshu-mcp process.

    Args:
        home: data home. config: server config. allow_host: may this process host Prefect.
        run_worker: host the process worker too (True for the stdio server and the daemon).
    """

    def __init__(self, home: Path, config: ServerConfig, allow_host: bool = True, run_worker: bool = True) -> None:
        self.home = home
        self.config = config
        self.topology: Topology = decide(home, config, allow_host=allow_host)
        self.run_worker = run_worker
        self.home_tag = home_tag(home)
        self._ready = threading.Event()
        self._error: str | None = None
        self._host: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:<port>/api`` (or the remote URL)."""
        return self.topology.api_url

    @property
    def ui_url(self) -> str:
        """The Prefect UI base URL."""
        return self.topology.ui_url

    @property
    def hosting(self) -> bool:
        """True when this process hosts the API and worker."""
        return self.topology.mode == "host"

    def flow_run_url(self, flow_run_id: str) -> str:
        """UI link of a flow run."""
        return f"{self.ui_url}/runs/flow-run/{flow_run_id}"

    def start_background(self) -> None:
        """Start Prefect (host) or wait for the hosting process (attach/remote) in a thread."""
        self._thread = threading.Thread(target=self._start, name="tianshu-prefect-start", daemon=True)
        self._thread.start()

    def start_blocking(self) -> None:
        """Same as :meth:`start_background` but in the calling thread. Raises TianshuError on failure."""
        self._start()
        if self._error:
            raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, self._error)

    def _start(self) -> None:
        t0 = time.monotonic()
        try:
            if self.hosting:
                from ..deployments.embedded import PrefectHost

                self._host = PrefectHost(self.api_url, int(self.topology.port or 4200))
                self._host.start_api(self.config.prefect.ready_timeout_ms / 1000)
                anyio.run(self._setup)
                if self.run_worker:
                    self._host.start_worker()
            else:
                self._wait_remote(self.config.prefect.ready_timeout_ms / 1000)
                if self.topology.mode == "attach" and self.run_worker:
                    threading.Thread(target=self._watch_host, name="tianshu-host-watch", daemon=True).start()
            log.info("Prefect ready (%s) in %.1f s; UI %s", self.topology.mode, time.monotonic() - t0, self.ui_url)
        except Exception as exc:  # noqa: BLE001 - reported to every tool call as PREFECT_UNAVAILABLE
            self._error = f"Prefect did not start: {exc}"
            log.error(self._error)
        finally:
            self._ready.set()

    def _watch_host(self) -> None:
        """Attach mode: when the hosting process dies its lock frees; take over hosting on the same
        port so this session (and the UI link) keep working."""
        from filelock import Timeout

        from ..deployments.topology import claim_host

        lock = self.topology.lock
        while lock is not None and not self._stopping:
            try:
                lock.acquire(timeout=1)
            except Timeout:
                continue
            log.warning("the process hosting Prefect for %s exited; this process takes over", self.home)
            try:
                self.topology = claim_host(self.home, lock, int(self.topology.port or self.config.prefect.port))
                from ..deployments.embedded import PrefectHost

                self._host = PrefectHost(self.api_url, int(self.topology.port or 4200))
                self._host.start_api(self.config.prefect.ready_timeout_ms / 1000)
                anyio.run(self._setup)
                self._host.start_worker()
                log.info("now hosting Prefect at %s", self.ui_url)
            except Exception as exc:  # noqa: BLE001
                self._error = f"could not take over hosting Prefect: {exc}"
                log.error(self._error)
            return

    async def _setup(self) -> None:
        from prefect.client.orchestration import get_client

        from ..deployments.setup import ensure_all
        from .sweep import startup_sweep

        async with get_client() as client:
            await ensure_all(client, self.config.concurrency.max_running)
            await startup_sweep(client, self)

    def _wait_remote(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        resp = client.get(f"{self.api_url}/deployments/name/run-task/run-task")
                        if resp.status_code == 200:
                            return
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        raise TimeoutError(f"no ready Prefect API at {self.api_url} after {timeout_s:.0f} s")

    async def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until Prefect is usable.

        Raises:
            TianshuError: ``PREFECT_UNAVAILABLE`` when start-up failed or took longer than
                ``timeout_s`` (default: ``prefect.readyTimeoutMs``).
        """
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.config.prefect.ready_timeout_ms / 1000)
        while not self._ready.is_set():
            if time.monotonic() > deadline:
                raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, f"Prefect is not ready yet at {self.api_url}; try again shortly")
            await anyio.sleep(0.05)
        if self._error:
            raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, self._error)

    def stop(self) -> None:
        """Stop the worker and the API (host mode) and release the host lock."""
        self._stopping = True
        if self._host is not None:
            self._host.stop_worker()
            self._host.stop_api()
        self.topology.release()
