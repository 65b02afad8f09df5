"""The client side of the fork server's protocol (docs/hosting.md §4; the server is
``tianshu_mcp.hosting.forkserver``), standard library only.

A home's fork server is a pre-imported interpreter that forks a warm process per request: a
flow-run engine for the worker's launcher and for the service, and, for a flow run, a child that
runs one of our functions (the early baseline run, :mod:`..acceptance.baseline_warm`) without the
half second a fresh interpreter takes to import the acceptance engine.

Protocol (one stream connection per process): client → server ``!I`` length + JSON
``{"env": {...}, "cwd": str, "main": "<one of FORKABLE>"?}`` with three fds
attached (``SCM_RIGHTS``: the child's stdin, stdout, stderr); server → client ``!q`` child pid,
later ``!i`` wait status (``os.waitpid``) once the child is reaped. Without ``main`` the child
runs ``prefect.engine``. The child holds the server's end of the connection: its closing (the
client is gone) is how a child learns that whoever asked for it has ended
(:func:`client_gone`).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Callable

SOCKET_ENV = "TIANSHU_MCP_ENGINE_SOCKET"
"""The home's fork-server socket, in the environment of the service and of its flow runs."""
CLIENT_FD_ENV = "TIANSHU_MCP_FORK_CLIENT_FD"
"""In a forked child that runs a ``main``: the fd of its connection to the client."""
FORKABLE = frozenset({"tianshu_mcp.acceptance.baseline_warm:main"})
"""The functions a request may name as its ``main``: entry points written to run as a fork's
whole life (their input on stdin, their end through :func:`client_gone`). Anything else —
another function of the package, which could write files or run commands with its defaults —
is refused, although the socket is the user's own (mode 0600)."""


def connect(path: str, timeout_s: float = 10.0) -> socket.socket | None:
    """Connect to the fork server at ``path``; None when there is none to reach."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout_s)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return None
    return conn


def send_request(conn: socket.socket, env: Mapping[str, str], cwd: str, fds: Sequence[int],
                 main: str | None = None) -> None:
    """Send one request: the child's environment, working directory, its fds 0–2 (``fds``, three,
    duplicated into the child) and, to run one of our functions instead of ``prefect.engine``,
    ``main`` (one of :data:`FORKABLE`).

    Raises:
        OSError: the request could not be sent.
        ValueError: ``fds`` is not three fds or ``main`` is not in :data:`FORKABLE`.
    """
    if len(fds) != 3:
        raise ValueError("a request carries exactly three fds")
    payload: dict[str, object] = {"env": dict(env), "cwd": cwd}
    if main is not None:
        if not valid_main(main):
            raise ValueError(f"not a function a fork may run: {main!r}")
        payload["main"] = main
    body = json.dumps(payload).encode()
    socket.send_fds(conn, [struct.pack("!I", len(body)) + body], list(fds))


def valid_main(main: object) -> bool:
    """Whether ``main`` is one of :data:`FORKABLE`."""
    return isinstance(main, str) and main in FORKABLE


def recv_exact(conn: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from the (blocking) ``conn``; None when it closed or failed first."""
    data = b""
    while len(data) < size:
        try:
            chunk = conn.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def read_pid(conn: socket.socket) -> int | None:
    """The forked child's pid (the server's first answer); None when it closed first."""
    header = recv_exact(conn, 8)
    return None if header is None else decode_pid(header)


def decode_pid(data: bytes) -> int:
    """The child's pid in the server's first answer (8 bytes)."""
    return int(struct.unpack("!q", data)[0])


def decode_status(data: bytes) -> int:
    """The ``os.waitpid`` status in the server's last answer (4 bytes)."""
    return int(struct.unpack("!i", data)[0])


def client_gone() -> Callable[[], bool]:
    """In a child: a test for "whoever started me has ended". A child forked by the fork server
    (:data:`CLIENT_FD_ENV` set) watches its connection, which closes when the client process
    ends; any other child compares its parent pid with the one it had at this call. Takes
    :data:`CLIENT_FD_ENV` out of the environment (the processes this one starts must not read
    it: the fd is not theirs)."""
    fd = os.environ.pop(CLIENT_FD_ENV, "")
    if not fd.isdigit():
        parent = os.getppid()
        return lambda: os.getppid() != parent
    gone = threading.Event()
    when_closed(socket.socket(fileno=int(fd)), gone.set)
    return gone.is_set


def when_closed(conn: socket.socket, callback: Callable[[], None]) -> None:
    """Call ``callback`` in a daemon thread once the other end of ``conn`` has closed it (or
    the connection failed); nothing is expected to arrive on ``conn`` before that."""
    def watch() -> None:
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        callback()

    threading.Thread(target=watch, name="tianshu-fork-connection-watch", daemon=True).start()
