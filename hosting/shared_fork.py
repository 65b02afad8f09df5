"""The home's fork server forked from the service itself, sharing the service's memory.

A fork server started as its own interpreter (:func:`.forkserver.spawn`) imports Prefect's engine
and our flows a second time: ≈85 MiB of its own next to the service, which imports most of the
same modules. Forked from the service instead, at the one moment the service has imported them
and runs no thread yet (before its API starts), the fork server holds those pages copy-on-write
with the service, and so does every engine it forks (docs/design-notes.md, note 73). Preforking
servers such as gunicorn ``--preload`` and uWSGI share their imports the same way.

What the child leaves behind of the service (:func:`_shed_service`): every inherited descriptor
(the host lock, the API's socket), the service's signal handlers and log handlers, its session and
terminal, its command line and process name (:func:`retitle`). It then runs exactly what ``python -m tianshu_mcp.hosting.forkserver``
runs, and every process of its line ends through :func:`_exit`: the interpreter's exit steps
(non-daemon threads, ``atexit``, stdio) without unwinding into the service's stack.

When the service already runs a thread (in-process hosting inside a stdio server, or a restart of
a dead fork server later), :func:`fork_from_service` declines and the caller spawns one.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from ..core.forkclient import SOCKET_ENV
from ..core.log import forget_logging
from .engine_cmd import SERVER_PID_ENV
from .forkserver import PRELOAD, serve_and_run, warm


class ForkedServer:
    """The service's handle on a fork server it forked: what it uses of ``subprocess.Popen``
    (``pid``, ``returncode``, :meth:`poll`, :meth:`wait`, :meth:`terminate`, :meth:`kill`).

    Args:
        pid: the forked child's pid (a child of this process, so only this process reaps it).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once it has exited (negative: the signal that ended it), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone, its status unknown
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for it to exit; return its exit code.

        Raises:
            subprocess.TimeoutExpired: it still runs.
        """
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"fork server {self.pid}", timeout)
            time.sleep(0.02)
        return code

    def _signal(self, sig: signal.Signals) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        """SIGTERM, unless it has exited (its pid may be another process's by then)."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, unless it has exited."""
        self._signal(signal.SIGKILL)


def fork_from_service(path: Path, engine_env: Mapping[str, str]) -> ForkedServer | None:
    """Import :data:`.forkserver.PRELOAD` and warm it (:func:`.forkserver.warm`) here, move the heap into the collector's permanent
    generation and fork the home's fork server at ``path`` from this process, which must run no
    other thread; point this process's flow-run launchers at it, as :func:`.forkserver.spawn` does.

    Args:
        path: the socket (:func:`.forkserver.socket_path`).
        engine_env: the variables the worker adds to every flow run's environment; the child
            takes them and refreshes Prefect's settings with them, as a spawned server imports
            Prefect with them.

    Returns:
        The child's handle; None when another thread runs here (forking then is not safe): the
        caller spawns a server instead.
    """
    if threading.active_count() != 1:
        return None
    for module in PRELOAD:
        importlib.import_module(module)
    warm()  # what the server would build after forking: shared too (the child's own call finds it done)
    gc.collect()
    gc.freeze()  # neither process's collections then write to the headers of what they share
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        _run_child(path, parent, engine_env)
    os.environ[SOCKET_ENV] = str(path)
    os.environ[SERVER_PID_ENV] = str(pid)
    return ForkedServer(pid)


def _run_child(path: Path, parent: int, engine_env: Mapping[str, str]) -> NoReturn:
    """In the forked child: shed the service, serve, and end every process of this line here."""
    code: object = 1
    try:
        _shed_service(path, parent, engine_env)
        code = serve_and_run(path, parent)
    except SystemExit as exc:  # an engine's `python -m prefect.engine` ends this way
        code = exc.code
    except BaseException:  # noqa: BLE001 - reported as an uncaught exception would be
        traceback.print_exc()
    _exit(code)


def _shed_service(path: Path, parent: int, engine_env: Mapping[str, str]) -> None:
    """Make the forked child what a spawned fork server is: its own session with stdin from
    /dev/null, no inherited descriptor, default signal handling, no log handler of the service,
    the fork server's process title, the engines' environment and Prefect settings read from it."""
    os.setsid()
    forget_logging()  # first: a log file's handler closes its own descriptor
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the host lock and the API socket among them
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    retitle(["tianshu_mcp.hosting.forkserver", str(parent), str(path)], comm=b"python")
    os.environ.update(engine_env)
    from prefect.context import refresh_global_settings_context

    refresh_global_settings_context()


def retitle(args: list[str], comm: bytes | None = None) -> bool:
    """Show ``args`` as this process's command line (``/proc/<pid>/cmdline``, what ``ps`` and
    :mod:`psutil` read) by writing them over the original one in this process's memory, cut to
    its length (the arguments' bytes, NUL-separated; bytes past them are NULs), so the first
    arguments are the ones that always show. The environment block after it is left as it is.
    ``comm``: also the process name (``/proc/<pid>/comm``, ≤ 15 bytes, what ``top``, ``pgrep``
    and ``killall`` match): under ``tianshu-mcp server`` the service's is ``tianshu-mcp``, and a
    ``killall tianshu-mcp`` must not reach the fork server and its engines. Returns False when
    this system does not allow it (no ``/proc``, or writing one's own memory is refused): the
    title then stays the service's."""
    if comm is not None:
        _set_comm(comm)
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (proc(5) fields 48, 49)
        room = end - start
        if room <= 1:
            return False
        title = b"\0".join(a.encode() for a in args)[:room - 1]
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(title.ljust(room, b"\0"))
        return True
    except (OSError, ValueError, IndexError):
        return False


def _set_comm(name: bytes) -> None:
    """``prctl(PR_SET_NAME, name)`` through the C library; nothing where there is none."""
    try:
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name[:15]), 0, 0, 0)  # 15: PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _exit(code: object) -> NoReturn:
    """End this process the way the interpreter ends a program whose main returned ``code``
    (``sys.exit`` semantics: None is 0, an int is itself, anything else is printed and is 1):
    wait for non-daemon threads, run ``atexit`` callbacks, flush stdio, then ``os._exit``; the
    service's frames below are never unwound."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    try:
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        os._exit(status & 0xFF)
