"""Page sources of one visual round: the servers the pages are captured from (docs/visual.md §3.1).

A :class:`ServicePool` turns a page's ``source`` into a base URL:

* ``existing`` — the URL as configured; never started or stopped;
* ``static`` — a threaded :mod:`http.server` on ``127.0.0.1`` (ephemeral or the given port) that
  serves regular files under a project directory: decoded path, leading ``/`` stripped, empty or
  trailing ``/`` → ``index.html``; anything escaping the root, crossing a symlink or not a regular
  file is a 404 (no listings); MIME by extension; ``Cache-Control: no-store``;
* ``command`` — the project's own server, argv without a shell in a project directory, own
  session, stdin at EOF, output to a log file or ``/dev/null`` (:func:`tianshu_mcp.core.procs.spawn`);
  ready when ``readyUrl`` answers 2xx (redirects not followed), polled every 100 ms.

Identical source definitions (canonical JSON) share one service. :meth:`ServicePool.aclose`
stops every server and kills every command's process tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import http.client
import http.server
import json
import mimetypes
import os
import shutil
import socket
import ssl
import stat
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...core.procs import ProcRecord, kill_tree, spawn, stop_requested
from .errors import VisualError

POLL_S = 0.1
"""Interval between two readiness probes of a command service (s; the spec's "≤100 ms")."""

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")

_MIME = mimetypes.MimeTypes(filenames=())  # Python's built-in table only: the same on every host
for _ext, _type in {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".json": "application/json",
                    ".svg": "image/svg+xml", ".wasm": "application/wasm", ".webp": "image/webp", ".avif": "image/avif",
                    ".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf",
                    ".map": "application/json", ".ico": "image/x-icon"}.items():
    _MIME.add_type(_type, _ext)


def project_path(project_root: str | Path, rel: str) -> Path | None:
    """The resolved path of the project-relative ``rel`` when it stays inside the project.

    ``rel`` must be non-empty, not absolute (``/``, ``\\`` or ``X:``), without a ``..`` segment
    (split on ``/`` and ``\\``) and without NUL (docs/visual.md §1 ``projectRelativePath``); the
    result, symlinks followed, must be the project root or lie under it. Returns None otherwise.
    """
    if not isinstance(rel, str) or not rel or "\0" in rel or rel[0] in "/\\" or (len(rel) > 1 and rel[1] == ":"):
        return None
    if any(part == ".." for part in rel.replace("\\", "/").split("/")):
        return None
    root = os.path.realpath(project_root)
    target = os.path.realpath(os.path.join(root, rel))
    return Path(target) if target == root or target.startswith(root.rstrip("/") + "/") else None


def canonical_key(source: Mapping[str, Any]) -> str:
    """Canonical JSON of a source definition (sorted keys, compact): equal keys share a service."""
    return json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --- static ------------------------------------------------------------------------------------

def static_file(root: Path, url_path: str) -> Path | None:
    """The regular file under ``root`` (a resolved directory) that ``url_path`` names, or None.

    ``url_path`` is the request path without query: percent-decoded, leading ``/`` stripped,
    empty or ending in ``/`` → ``index.html``. None for NUL, ``..``, a hidden name (``.env``,
    ``.git/…``), a backslash, any symlink on
    the way (``lstat`` of each component) or anything but a regular file (docs/visual.md §3.1).
    """
    path = urllib.parse.unquote(url_path, errors="strict") if "%" in url_path else url_path
    path = path.lstrip("/")
    if not path or path.endswith("/"):
        path += "index.html"
    parts = path.split("/")
    if "\0" in path or "\\" in path or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return None  # hidden names too: a root at the project must not serve .env or .git
    current = root
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (OSError, ValueError):
            return None
        if stat.S_ISLNK(mode):
            return None
    return current if stat.S_ISREG(mode) else None


class _StaticHandler(http.server.BaseHTTPRequestHandler):
    """GET/HEAD of regular files under ``server.root``; everything else 404 (or 501 by method)."""

    server_version = "tianshu-visual"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection does not hold its thread forever (s)

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _serve(self, body: bool) -> None:
        root: Path = self.server.root  # type: ignore[attr-defined]
        try:
            target = static_file(root, urllib.parse.urlsplit(self.path).path)
        except (UnicodeDecodeError, ValueError):
            target = None
        try:
            handle = open(target, "rb") if target is not None else None  # noqa: SIM115 - closed below
        except OSError:
            handle = None
        if handle is None:
            payload = b"Not found\n"
            self.send_response(404)
            self._headers("text/plain; charset=utf-8", len(payload))
            if body:
                self.wfile.write(payload)
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            self.send_response(200)
            assert target is not None
            mime = _MIME.guess_type(target.name, strict=False)[0] or "application/octet-stream"
            if mime.startswith("text/") or mime in ("application/json", "image/svg+xml"):
                mime += "; charset=utf-8"
            self._headers(mime, size)
            if body:
                shutil.copyfileobj(handle, self.wfile)

    def _headers(self, mime: str, size: int) -> None:
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(size))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


class _StaticServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:  # a reset connection is no event
        return


class StaticService:
    """A running static server; :attr:`url` is ``http://127.0.0.1:<port>``."""

    def __init__(self, root: Path, port: int) -> None:
        try:
            self.server = _StaticServer(("127.0.0.1", port), _StaticHandler)
        except OSError as exc:
            raise VisualError("PORT_CONFLICT", f"Cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        self.server.root = root  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                       name=f"visual-static-{self.server.server_address[1]}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving and close the listening socket (blocks ≤ one poll interval)."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# --- command -----------------------------------------------------------------------------------

class CommandService:
    """A started command server: its ``Popen`` and :class:`ProcRecord` (for the tree kill)."""

    def __init__(self, popen: subprocess.Popen[bytes], record: ProcRecord, url: str) -> None:
        self.popen = popen
        self.record = record
        self.url = url

    def close(self) -> None:
        """Kill the process tree (TERM, then KILL) and reap the root. Never raises."""
        kill_tree(self.record)
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def ready_target(ready_url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path?query)`` of a command's ``readyUrl``.

    Raises:
        VisualError: ``SERVICE_PORT_REQUIRED`` without an explicit port; ``CONFIG_INVALID`` for a
            URL that is not http(s) on localhost / 127.0.0.1 / [::1].
    """
    try:
        parts = urllib.parse.urlsplit(ready_url)
        port = parts.port
    except (ValueError, TypeError, AttributeError):
        raise VisualError("CONFIG_INVALID", "readyUrl is not a valid URL") from None
    if parts.scheme not in ("http", "https") or parts.hostname not in LOCAL_HOSTS or parts.username or parts.password:
        raise VisualError("CONFIG_INVALID", "readyUrl must be an http(s) URL on localhost, 127.0.0.1 or [::1]")
    if port is None:
        raise VisualError("SERVICE_PORT_REQUIRED", f"readyUrl {ready_url} must name its port explicitly")
    path = parts.path or "/"
    return parts.scheme, parts.hostname or "", port, path + (f"?{parts.query}" if parts.query else "")


def probe_bind(host: str, port: int) -> None:
    """Bind (and release) every address of ``host:port``: the command must find its port free.

    Raises:
        VisualError: ``PORT_CONFLICT`` when something already holds the port (it is never reused
            or killed). An address family the host lacks (no IPv6) is skipped.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise VisualError("PORT_CONFLICT", f"Cannot resolve {host}: {exc}") from None
    for family, kind, proto, _name, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not a conflict
            sock.bind(address)
        except OSError as exc:
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                continue
            raise VisualError("PORT_CONFLICT", f"Port {port} on {host} is already in use; "
                              "the service would not own it") from None
        finally:
            sock.close()


def probe_ready(scheme: str, host: str, port: int, path: str, timeout_s: float) -> bool:
    """One GET of the ready URL (no redirects, no proxies): True for a 2xx answer."""
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    kwargs: dict[str, Any] = {"timeout": max(0.05, timeout_s)}
    if scheme == "https":
        kwargs["context"] = ssl._create_unverified_context()
    conn = cls(host, port, **kwargs)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        return 200 <= conn.getresponse().status < 300
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()


# --- the pool ----------------------------------------------------------------------------------

class ServicePool:
    """The page services of one round (docs/visual.md §3.1).

    Args:
        project_root: the project directory; static roots and command cwds are gated under it.
        service_timeout_ms: how long a command service may take to answer its readyUrl (ms).
        should_stop: cancellation probe polled while waiting (True → ``CANCELLED``).
        log_path: file receiving the commands' output (appended); default ``/dev/null``.
    """

    def __init__(self, project_root: str | Path, *, service_timeout_ms: int = 60000,
                 should_stop: Callable[[], bool] | None = None, log_path: str | Path | None = None) -> None:
        self.project_root = Path(os.path.realpath(project_root))
        self.service_timeout_ms = service_timeout_ms
        self.should_stop = should_stop
        self.log_path = Path(log_path) if log_path is not None else Path(os.devnull)
        self._urls: dict[str, str] = {}
        self._errors: dict[str, VisualError] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._services: list[StaticService | CommandService] = []
        self._closed = False

    async def url_for(self, source: Mapping[str, Any], deadline: float) -> str:
        """The base URL of ``source`` (a Page.source: ``{"type":"existing","url"}`` |
        ``{"type":"static","root","port"?}`` | ``{"type":"command","command","args","cwd","env","readyUrl"}``),
        starting its service on first use. ``deadline`` is the item's ``time.monotonic()``
        deadline (s); a command waits at most ``min(service_timeout_ms, deadline)``.

        Raises:
            VisualError: ``STATIC_ROOT``, ``PORT_CONFLICT``, ``SERVICE_PORT_REQUIRED``,
                ``SERVICE_ENV_MISSING``, ``SERVICE_EXITED``, ``ITEM_TIMEOUT``, ``CANCELLED``,
                ``CONFIG_INVALID`` (a malformed source). A failed start is remembered (the same
                error for every page of that source) unless it was a timeout or a cancellation.
        """
        if self._closed or stop_requested(self.should_stop):
            raise VisualError("CANCELLED", "Cancelled before the page service was started")
        key = canonical_key(source)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._urls:
                return self._urls[key]
            if key in self._errors:
                raise self._errors[key]
            try:
                url = await self._start(source, deadline)
            except VisualError as exc:
                if exc.code not in ("ITEM_TIMEOUT", "CANCELLED"):
                    self._errors[key] = exc
                raise
            self._urls[key] = url
            return url

    async def _start(self, source: Mapping[str, Any], deadline: float) -> str:
        kind = source.get("type") if isinstance(source, Mapping) else None
        if kind == "existing":
            url = source.get("url")
            if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise VisualError("CONFIG_INVALID", "An existing source needs an http(s) url")
            return url
        if kind == "static":
            return self._start_static(source)
        if kind == "command":
            return await self._start_command(source, deadline)
        raise VisualError("CONFIG_INVALID", f"Unknown page source type {kind!r}")

    def _start_static(self, source: Mapping[str, Any]) -> str:
        rel = source.get("root")
        root = project_path(self.project_root, rel) if isinstance(rel, str) else None
        if root is None or not root.is_dir():
            raise VisualError("STATIC_ROOT", f"Static root {rel!r} is not a directory inside the project")
        port = source.get("port") or 0
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise VisualError("CONFIG_INVALID", "A static source's port must be an integer 0..65535")
        service = StaticService(root, port)
        self._services.append(service)
        return service.url

    async def _start_command(self, source: Mapping[str, Any], deadline: float) -> str:
        scheme, host, port, path = ready_target(str(source.get("readyUrl", "")))
        command, args, env_refs = source.get("command"), source.get("args", []), source.get("env", {})
        if (not isinstance(command, str) or not command or not isinstance(args, list)
                or not all(isinstance(a, str) for a in args) or not isinstance(env_refs, Mapping)):
            raise VisualError("CONFIG_INVALID", "A command source needs a command, string args and an env map")
        cwd_rel = source.get("cwd", ".")
        cwd = project_path(self.project_root, cwd_rel) if isinstance(cwd_rel, str) else None
        if cwd is None or not cwd.is_dir():
            raise VisualError("CONFIG_INVALID", f"Service cwd {cwd_rel!r} is not a directory inside the project")
        env = dict(os.environ)
        for child, host_var in env_refs.items():
            if not isinstance(host_var, str) or host_var not in os.environ:
                raise VisualError("SERVICE_ENV_MISSING",
                                  f"Host environment variable {host_var!r} (for {child}) is not set")
            env[str(child)] = os.environ[host_var]
        probe_bind(host, port)
        try:
            popen, record = spawn([command, *args], cwd=cwd, log_path=self.log_path, env=env)
        except OSError as exc:
            raise VisualError("SERVICE_EXITED", f"Service command {command!r} could not be started: "
                              f"{exc.strerror or exc}") from None
        service = CommandService(popen, record, f"{scheme}://{'[::1]' if host == '::1' else host}:{port}")
        self._services.append(service)
        try:
            await self._wait_ready(service, (scheme, host, port, path), deadline)
        except BaseException:
            self._services.remove(service)
            await asyncio.to_thread(service.close)
            raise
        return service.url

    async def _wait_ready(self, service: CommandService, target: tuple[str, str, int, str], deadline: float) -> None:
        limit = min(time.monotonic() + self.service_timeout_ms / 1000, deadline)
        while True:
            started = time.monotonic()
            code = service.popen.poll()
            if code is not None:
                raise VisualError("SERVICE_EXITED", f"Service command exited with code {code} before "
                                  "its readyUrl answered")
            if stop_requested(self.should_stop) or self._closed:
                raise VisualError("CANCELLED", "Cancelled while waiting for the service")
            if started >= limit:
                raise VisualError("ITEM_TIMEOUT", f"Service did not answer its readyUrl within "
                                  f"{int(self.service_timeout_ms)}ms" if limit < deadline else
                                  "Item deadline passed while waiting for the service")
            if await asyncio.to_thread(probe_ready, *target, min(1.0, limit - started)):
                return
            await asyncio.sleep(max(0.0, min(POLL_S - (time.monotonic() - started), limit - time.monotonic())))

    async def aclose(self) -> None:
        """Stop every static server and kill every command's process tree. Idempotent; never raises."""
        self._closed = True
        services, self._services = self._services, []
        for service in services:
            with contextlib.suppress(Exception):  # teardown goes on
                await asyncio.to_thread(service.close)
