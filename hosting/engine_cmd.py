"""The worker's flow-run command: ``python -m tianshu_mcp.hosting.engine_cmd``.

Asks the home's fork server (:mod:`.forkserver`, named by ``TIANSHU_MCP_ENGINE_SOCKET``) for a
warm ``prefect.engine`` and stands in for it until it ends (waiting for a fork server that is
still starting, :func:`connect_or_wait`); without a reachable fork server it
``exec``\\ s ``python -m prefect.engine`` (what Prefect itself would run). Standard library only:
this process must start in tens of milliseconds.

Standing in means: signals the worker sends (SIGTERM on cancel, SIGINT, SIGHUP) go to the
engine's process group; when the engine ends, this process ends the same way (exit code, or the
same signal); when this process is killed, the engine notices the closed connection and kills its
own group (:func:`.forkserver._follow_launcher`).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

from ..core.forkclient import SOCKET_ENV, connect, decode_status, read_pid, recv_exact, send_request

SERVER_PID_ENV = "TIANSHU_MCP_ENGINE_SERVER_PID"
"""The pid of the fork server that is to listen at :data:`SOCKET_ENV` (set by ``forkserver.spawn``)."""
STARTING_WAIT_S = 30.0
"""How long a launcher waits for a fork server that is alive but not listening yet (it is still
importing: the same imports a plain engine would make, begun earlier), s."""
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class NoEngine(OSError):
    """The fork server started no engine for this request (a plain engine may be started)."""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not: its parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def connect_or_wait(path: str, server_pid: int | None, wait_s: float = STARTING_WAIT_S) -> socket.socket | None:
    """Connect to the fork server at ``path``; while it does not answer but its process
    ``server_pid`` is alive (starting: importing, not listening yet), try again every 50 ms for up
    to ``wait_s`` seconds. None when there is no fork server to wait for (no pid, it exited) or it
    did not listen in time: the caller starts a plain engine then."""
    deadline = time.monotonic() + wait_s
    while True:
        conn = connect(path)
        if conn is not None or server_pid is None or not _alive(server_pid) or time.monotonic() >= deadline:
            return conn
        time.sleep(0.05)


def stand_in(conn: socket.socket) -> int:
    """Send this process's environment, directory and streams; relay signals until the engine
    ends; return its exit code (or re-raise the signal that ended it: does not return then).

    Raises:
        NoEngine: the request could not be sent or no engine pid came back (nothing was started;
            the caller may fall back to a plain engine).
    """
    try:
        send_request(conn, os.environ, os.getcwd(), [0, 1, 2])
    except OSError as exc:
        raise NoEngine(str(exc)) from exc
    pending: list[int] = []
    engine: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if engine:
            try:
                os.killpg(engine[0], signum)
            except ProcessLookupError:
                pass
        else:
            pending.append(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    pid = read_pid(conn)
    if pid is None:
        raise NoEngine("the fork server closed the connection before starting an engine")
    conn.settimeout(None)
    engine.append(pid)
    for signum in pending:
        forward(signum, None)
    status_bytes = recv_exact(conn, 4)
    if status_bytes is None:
        sys.stderr.write("tianshu-mcp: the fork server stopped before reporting the flow run's exit status\n")
        return 1
    status = decode_status(status_bytes)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # the signal was blocked or ignored after all
    return os.waitstatus_to_exitcode(status)


def main() -> int:
    """Run the flow run through the fork server, or exec a plain ``prefect.engine``."""
    path = os.environ.get(SOCKET_ENV)
    pid = os.environ.get(SERVER_PID_ENV, "")
    conn = connect_or_wait(path, int(pid) if pid.isdigit() else None) if path else None
    if conn is not None:
        try:
            return stand_in(conn)
        except NoEngine as exc:
            sys.stderr.write(f"tianshu-mcp: fork server unusable ({exc}); starting the engine directly\n")
            for sig in FORWARDED:
                signal.signal(sig, signal.SIG_DFL)
            conn.close()
    os.execv(sys.executable, [sys.executable, "-m", "prefect.engine", *sys.argv[1:]])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
