"""A warm engine: a pre-imported interpreter that forks this home's flow-run processes.

Every flow run is a process running ``python -m prefect.engine``. Starting one costs an
interpreter start and ``import prefect`` (≈1.4 s on a quiet 2-core machine, more under load),
most of run_task → agent start. The service therefore keeps one *fork server* beside its worker,
the way ``multiprocessing``'s forkserver start method and gunicorn's ``--preload`` do it: a child
process that imports Prefect's engine and our flows once, then forks a copy for each flow run.

The worker still starts a process per flow run, but a small one
(:mod:`tianshu_mcp.hosting.engine_cmd`, standard library only): it hands its environment,
working directory and standard streams to the fork server over a unix socket and stands in for
the forked engine: the worker's signals go to the engine's process group, and the engine's exit
status (or the signal that ended it) becomes the launcher's own. Without a fork server (in-process
hosting, a scale-out worker, a refused connection) the launcher ``exec``\\ s ``python -m
prefect.engine`` itself, exactly what Prefect would have started.

Protocol: :mod:`tianshu_mcp.core.forkclient` (one stream connection per process: environment,
directory and fds 0–2 in, the child's pid and later its wait status out). A request may instead
name an entry point for the child to run (``main``, one of
:data:`tianshu_mcp.core.forkclient.FORKABLE`): a flow run's early baseline run
(:mod:`tianshu_mcp.acceptance.baseline_warm`) starts that way without a cold interpreter.

Safety of ``fork``: the server never starts a thread, an event loop or a Prefect service before
forking (checked: it refuses to serve when another thread exists), so each child starts as a
clean single-threaded copy. The socket lives in the home's ``prefect/`` directory, mode 0600.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.forkclient import CLIENT_FD_ENV, SOCKET_ENV, valid_main, when_closed
from .tls_reuse import share_client_tls_context

# what a flow-run process imports anyway; the fork server imports it once
PRELOAD = ("prefect.engine", "prefect.flow_engine", "prefect.flows",
           "tianshu_mcp.flows.run_task", "tianshu_mcp.flows.verify")
# what Prefect and its libraries import lazily in every flow run, measured in a forked engine
# (≈70 modules: the task engine at the first task run, graphviz through the flow's visualisation
# helpers, the run observers, anyio's asyncio backend, the URL codec); some are private to their
# package, so one a new version lacks is skipped
WARM = ("prefect.task_engine", "prefect.utilities.visualization", "prefect.concurrency.sync",
        "prefect.concurrency.services", "prefect._internal.observers", "anyio._backends._asyncio",
        "packaging.specifiers", "encodings.idna", "encodings.utf_8_sig", "rich._emoji_codes")
# the API schemas a flow run validates whose validators pydantic builds on first use (measured:
# 16 rebuilt in each forked engine, ≈30 ms; FlowRun and TaskRun besides)
WARM_MODELS = tuple(f"prefect.{m}" for m in (
    "client.schemas.objects.FlowRun", "client.schemas.objects.TaskRun", "client.schemas.objects.WorkQueue",
    "client.schemas.objects.WorkPool", "client.schemas.objects.Artifact", "client.schemas.objects.ConcurrencyLeaseHolder",
    "client.schemas.objects.ServerDefaultResultStorage", "client.schemas.responses.DeploymentResponse",
    "client.schemas.actions.ArtifactCreate", "client.schemas.actions.LogCreate", "client.schemas.actions.FlowRunUpdate",
    "events.schemas.events.Event", "events.filters.EventFilter", "events.filters.EventIDFilter",
    "events.filters.EventOccurredFilter", "events.filters.EventNameFilter", "artifacts.MarkdownArtifact",
    "artifacts.TableArtifact"))
MAX_REQUEST = 4 * 1024 * 1024  # bytes
REQUEST_LIMIT_S = 5.0
"""How long a whole request may take to arrive, s."""
PARENT_CHECK_S = 1.0
_BOUND_INODE: int | None = None  # the inode of the socket this server bound
_SETTINGS_ENV: dict[str, str] = {}  # the server's settings_env() when it imported Prefect


@dataclass
class Request:
    """A launcher's request, as the forked child keeps it (its environment, directory and
    streams are applied to the process itself): the connection whose closing means the
    launcher is gone, and the function to run instead of the engine (``module:function``)."""

    conn: socket.socket
    main: str | None = None


MAX_SOCKET_PATH = 107
"""Bytes of a unix socket's path that fit its address (Linux ``sun_path``: 108 with the NUL)."""


def socket_path(home: Path) -> Path:
    """Where the home's fork server listens: ``<home>/prefect/engine.sock``."""
    return home / "prefect" / "engine.sock"


def socket_fits(path: Path) -> bool:
    """Whether a unix socket can be bound at ``path`` (≤ :data:`MAX_SOCKET_PATH` bytes): a home
    deeper than that runs without a fork server, its flow runs start as fresh interpreters."""
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def spawn(path: Path, engine_env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a fork server at ``path`` for this process (it exits when this process does) in a
    session of its own (a terminal's Ctrl-C is its parent's business), and point this process's
    flow-run launchers at it (``TIANSHU_MCP_ENGINE_SOCKET``, and its pid in
    ``TIANSHU_MCP_ENGINE_SERVER_PID``). A launcher waits while it starts (≤ 30 s) and starts a
    plain engine when it is gone.

    Args:
        engine_env: variables the worker adds to every flow run's environment
            (:func:`tianshu_mcp.hosting.worker.engine_env`); the server imports Prefect with them,
            so a forked engine whose ``PREFECT_*`` settings are the server's own needs no fresh
            settings (:func:`_become_engine`).
    """
    from .engine_cmd import SERVER_PID_ENV

    proc = subprocess.Popen([sys.executable, "-m", "tianshu_mcp.hosting.forkserver", str(path), str(os.getpid())],
                            stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                            env={**os.environ, **(engine_env or {})})
    os.environ[SOCKET_ENV] = str(path)
    os.environ[SERVER_PID_ENV] = str(proc.pid)
    return proc


class NoRequest(ValueError):
    """A client connected and closed without a request: the service's launcher connects before
    it claims a flow run (so a claimed run never waits for the connection) and closes again when
    another launcher claimed it first. Not an error: nothing is logged."""


def read_request(conn: socket.socket, limit_s: float = REQUEST_LIMIT_S) -> tuple[dict[str, object], list[int]]:
    """Read one ``!I``-length-prefixed JSON request and the fds attached to its first bytes,
    all of it within ``limit_s`` seconds: the server reads one request at a time, so a client
    that sends slowly must not hold up every other flow run of the home.

    Raises:
        NoRequest: the client closed the connection without sending anything.
        ValueError: the request is malformed, too large or cut short.
        OSError: (``TimeoutError``) it did not arrive whole within ``limit_s``.
    """
    deadline = time.monotonic() + limit_s
    conn.settimeout(limit_s)
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
    try:
        if not data:
            raise NoRequest("closed without a request")
        if len(data) < 4:
            raise ValueError("request shorter than its length prefix")
        (size,) = struct.unpack("!I", data[:4])
        if size > MAX_REQUEST:
            raise ValueError(f"request of {size} bytes exceeds {MAX_REQUEST}")
        body = bytearray(data[4:])
        while len(body) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"request not whole after {limit_s:.0f} s")
            conn.settimeout(left)
            chunk = conn.recv(min(65536, size - len(body)))
            if not chunk:
                raise ValueError("request cut short")
            body += chunk
        payload = json.loads(bytes(body))
        if not isinstance(payload, dict) or not isinstance(payload.get("env"), dict) \
                or not isinstance(payload.get("cwd"), str) or len(fds) != 3:
            raise ValueError("request needs env, cwd and three fds")
        if "main" in payload and not valid_main(payload["main"]):
            raise ValueError(f"main must be a function a fork may run, not {payload['main']!r}")
        return payload, fds
    except Exception:
        for fd in fds:
            os.close(fd)
        raise


def serve(path: Path, parent_pid: int) -> Request | None:
    """Preload, listen on ``path`` and fork an engine per request; return only in a forked child.

    Returns:
        In a forked child: its :class:`Request` (streams, environment and directory already
        applied). In the server: None once ``parent_pid`` is gone or preloading left a thread.
    """
    for module in PRELOAD:
        importlib.import_module(module)
    warm()
    from prefect.settings import get_current_settings

    global _SETTINGS_ENV  # as a worker writes them into a flow run's environment
    _SETTINGS_ENV = settings_env({**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True)})
    freeze_heap()
    if threading.active_count() != 1:
        sys.stderr.write(f"tianshu-mcp fork server: preloading started threads {threading.enumerate()}; not serving\n")
        return None
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(64)
    global _BOUND_INODE
    _BOUND_INODE = os.stat(path).st_ino
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: dict[int, socket.socket] = {}
    while os.getppid() == parent_pid:
        ready, _, _ = select.select([listener, wake_r], [], [], PARENT_CHECK_S)
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(children)
        if listener in ready:
            request = _accept(listener, children)
            if request is not None:  # in the forked child
                signal.set_wakeup_fd(-1)
                for fd in (wake_r, wake_w):
                    os.close(fd)
                return request
    listener.close()
    return None


def warm() -> None:
    """Import :data:`WARM` and build the validators of :data:`WARM_MODELS`, which pydantic
    defers to their first use (models with forward references); a module or model this Prefect
    version lacks is skipped. The Prefect clients' TLS context is built once, here
    (:func:`.tls_reuse.share_client_tls_context`), and so are the task record's validators and
    the default prompt patterns, which every round used to build."""
    for module in WARM:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    for dotted in WARM_MODELS:
        module, _, name = dotted.rpartition(".")
        model = getattr(sys.modules.get(module), name, None)
        if model is not None and hasattr(model, "model_rebuild"):
            model.model_rebuild()
    share_client_tls_context()  # an engine's two clients: 2 × 30 ms of certificate parsing otherwise
    from ..adapters.prompts import warm as warm_prompts
    from ..core.record import warm_validators

    warm_validators()  # ours, built at first use as pydantic's are: once here for every engine
    warm_prompts()


def freeze_heap() -> None:
    """Collect, then move every object the server holds into the collector's permanent
    generation (``gc.freeze``): a forked engine's collections then skip the inherited heap
    instead of walking it, which wrote to every object's header, copied its page and took
    0.2–0.4 s of the first collection in each flow run (docs/design-notes.md, note 57)."""
    gc.collect()
    gc.freeze()


def _reap(children: dict[int, socket.socket]) -> None:
    """Report every exited child's wait status to its launcher."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(struct.pack("!i", status))
            except OSError:
                pass
            conn.close()


def _accept(listener: socket.socket, children: dict[int, socket.socket]) -> Request | None:
    """Accept one launcher and fork its engine; the child gets its Request, the server None."""
    conn, _ = listener.accept()
    try:
        payload, fds = read_request(conn)
        conn.settimeout(None)
    except NoRequest:
        conn.close()
        return None
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"tianshu-mcp fork server: bad request ({exc})\n")
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other in children.values():
            other.close()
        return _become_engine(conn, payload, fds)
    for fd in fds:
        os.close(fd)
    children[pid] = conn
    try:
        conn.sendall(struct.pack("!q", pid))
    except OSError:
        pass
    return None


def _become_engine(conn: socket.socket, payload: dict[str, object], fds: list[int]) -> Request:
    """In the forked child: new session, the launcher's streams, environment and directory."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    env = {str(k): str(v) for k, v in dict(payload["env"]).items()}  # type: ignore[arg-type]
    main = payload.get("main")
    if isinstance(main, str):
        env[CLIENT_FD_ENV] = str(conn.fileno())
    os.environ.clear()
    os.environ.update(env)
    os.chdir(str(payload["cwd"]))
    if isinstance(main, str):
        return Request(conn, main)  # one of our functions: Prefect's settings play no part
    if settings_env(env) != _SETTINGS_ENV:
        # Prefect read its settings from the server's environment when it was imported; the
        # flow run's own PREFECT_* variables must win, as in a fresh `python -m prefect.engine`
        # (≈0.1 s, so only when they differ)
        from prefect.context import refresh_global_settings_context

        refresh_global_settings_context()
    return Request(conn)


def settings_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` Prefect's settings read: ``PREFECT_*`` except the run's own
    ``PREFECT__*`` (flow run id, entrypoint), which the engine reads from the environment itself."""
    return {k: v for k, v in env.items() if k.startswith("PREFECT_") and not k.startswith("PREFECT__")}


def _follow_launcher(conn: socket.socket) -> None:
    """In the engine: when the launcher is gone (the worker, or the whole machine's worker
    side, was killed), kill every descendant — the agent and the checks run in sessions of their
    own, and the engine is their subreaper — then end the engine's group as a kill of the engine
    itself would have."""
    def kill_all() -> None:
        from ..core.reaper import kill_descendants

        kill_descendants()
        os.killpg(0, signal.SIGKILL)

    when_closed(conn, kill_all)


def run_engine(request: Request) -> None:
    """Run ``prefect.engine`` as ``__main__`` in this (forked) process; returns or raises
    ``SystemExit`` like ``python -m prefect.engine`` would."""
    import runpy

    from .engine_handover import install

    _follow_launcher(request.conn)
    install()  # the flow run the service has just claimed, if it handed it over (design note 81)
    sys.argv = [sys.argv[0]]
    sys.modules.pop("prefect.engine", None)  # preloaded; runpy warns when running a loaded module
    runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)


def run_main(request: Request) -> int:
    """Run the request's ``module:function`` in this (forked) process and return its exit code
    (the function's int result; 0 for None). It learns that its client has ended through
    :func:`tianshu_mcp.core.forkclient.client_gone`."""
    assert request.main is not None
    module, _, function = request.main.partition(":")
    result = getattr(importlib.import_module(module), function)()
    return result if isinstance(result, int) else 0


def main() -> int:
    """``python -m tianshu_mcp.hosting.forkserver <socket path> <parent pid>``."""
    return serve_and_run(Path(sys.argv[1]), int(sys.argv[2]))


def serve_and_run(path: Path, parent: int) -> int:
    """Serve at ``path`` while process ``parent`` lives (:func:`serve`); in a forked child, run
    its engine or function. Returns the exit code of whichever process returns."""
    request = serve(path, parent)
    if request is None:
        try:  # only our own socket: a restarted service may already have bound a new one there
            if _BOUND_INODE is not None and os.stat(path).st_ino == _BOUND_INODE:
                path.unlink()
        except OSError:
            pass
        return 0
    if request.main is not None:
        return run_main(request)
    run_engine(request)
    return 0


if __name__ == "__main__":
    sys.exit(main())
