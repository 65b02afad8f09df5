"""Which desktop-app instance a task drives: ownership proof, port choice, launch
(docs/agents-tasks.md §1.11.2, §1.10 "GUI app instances").

An instance is *ours* when all of these hold:

* a root process (no ``--type=``) has ``--user-data-dir`` equal to our dedicated directory on
  its command line (normalised absolute paths) and ``--remote-debugging-port=N``;
* ``http://127.0.0.1:N/json/list`` (1.5 s) lists a ``page`` target of the product
  (:func:`product_page`).

Such an instance is adopted. A program on a port we would use that is not provably ours — a
user's browser, another app — is never adopted and never killed: with ``cdpPortAuto`` the next
port of the range is tried, without it (or when the range is used up) the round fails
``setup_failed`` naming the port(s). A process with our user-data-dir that cannot be proven
(no debugging port, or no product page) also fails ``setup_failed``; the original asks the user
to close it (``needs_user(close_existing_instance)``), a question kind this build does not have.

Simplified against the original (Linux here): activation is always a plain spawn (no MSIX COM
activation, no Windows ``taskkill``); the product's processes are recognised by our
user-data-dir only, not by their executable name.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ...core.i18n import N_, _
from ...core.procs import ProcRecord, kill_tree, spawn
from .config import GuiSettings

PORT_RE = re.compile(r"^--remote-debugging-port(?:=(\d+))?$")
UDD_RE = re.compile(r"^--user-data-dir(?:=(.*))?$")


class InstanceError(Exception):
    """The app could not be provided: ``reason`` is a setup end reason (docs/agents-tasks.md §1.3:
    ``setup_failed``, ``port_foreign``, ``spawn`` (the executable cannot be started), ``launch_failed``, ``instance_unproven``), the message
    says what and where.

    ``message`` is a constant English msgid (``N_``) whose ``{named}`` placeholders ``values`` fill:
    ``str(exc)`` is English (the round's log), ``exc.shown`` the locale's words (the task's message);
    ``shown_values`` replaces values in ``shown`` only (a value that is itself translated)."""

    def __init__(self, reason: str, message: str, shown_values: dict[str, Any] | None = None, **values: Any) -> None:
        super().__init__(message.format(**values))
        self.reason = reason
        self.shown = _(message).format(**{**values, **(shown_values or {})})


@dataclass
class AppInstance:
    """A running app we drive.

    Attributes:
        port: its debugging port on 127.0.0.1.
        user_data_dir: its dedicated profile directory.
        record: the identity of its root process (for ``kill_tree``, ``keep_alive``).
        popen: our ``Popen`` when we launched it, None when adopted.
        adopted: it was running already and proven ours.
    """

    port: int
    user_data_dir: Path
    record: ProcRecord
    popen: subprocess.Popen[bytes] | None
    adopted: bool

    def alive(self) -> bool:
        """The root process still runs (a zombie counts as dead)."""
        try:
            proc = psutil.Process(self.record.pid)
            return abs(proc.create_time() - self.record.createTime) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def parse_cmdline(argv: list[str]) -> tuple[int | None, str | None]:
    """``(port, user_data_dir)`` from a command line (``--flag=value`` or ``--flag value``);
    None for what is absent. The directory is returned as given (not normalised)."""
    port: int | None = None
    udd: str | None = None
    for i, arg in enumerate(argv):
        m = PORT_RE.match(arg)
        if m:
            value = m.group(1) if m.group(1) is not None else (argv[i + 1] if i + 1 < len(argv) else "")
            port = int(value) if str(value).isdigit() else port
        m = UDD_RE.match(arg)
        if m:
            value = m.group(1) if m.group(1) is not None else (argv[i + 1] if i + 1 < len(argv) else "")
            udd = value.strip('"') or udd
    return port, udd


def same_dir(a: str, b: Path) -> bool:
    """True when ``a`` names directory ``b`` (normalised absolute paths; case-sensitive: POSIX)."""
    try:
        return os.path.normpath(os.path.abspath(os.path.expanduser(a))) == os.path.normpath(str(b))
    except (TypeError, ValueError):
        return False


def list_targets(port: int, timeout_s: float = 1.5) -> list[dict[str, Any]] | None:
    """``/json/list`` of ``127.0.0.1:port``; None when nothing answers as a DevTools endpoint."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout_s) as resp:
            data = json.loads(resp.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, list) else None


def product_page(targets: list[dict[str, Any]] | None, settings: GuiSettings) -> dict[str, Any] | None:
    """The first ``page`` target of the product: its url matches ``pageUrlPattern`` and its title
    ``pageTitlePattern`` (each when set); never ``devtools://``/``chrome://`` pages."""
    for t in targets or []:
        if not isinstance(t, dict) or t.get("type") != "page":
            continue
        url, title = str(t.get("url") or ""), str(t.get("title") or "")
        if url.startswith(("devtools://", "chrome://", "chrome-extension://")):
            continue
        if settings.page_url_pattern and not re.search(settings.page_url_pattern, url):
            continue
        if settings.page_title_pattern and not re.search(settings.page_title_pattern, title):
            continue
        return t
    return None


def port_in_use(port: int) -> bool:
    """Something accepts TCP connections on ``127.0.0.1:port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def port_owner(port: int) -> str:
    """``"pid P (name)"`` of the process listening on ``port``, or ``"an unknown process"``."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                try:
                    return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.Error, OSError):
        pass
    return "an unknown process"


def own_processes(udd: Path) -> list[tuple[psutil.Process, int | None]]:
    """Root processes (no ``--type=``) whose command line names ``udd`` as ``--user-data-dir``,
    with the debugging port on that command line (or None)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            argv = proc.info.get("cmdline") or []
        except psutil.Error:
            continue
        if not argv or any(a.startswith("--type=") for a in argv):
            continue
        port, dir_ = parse_cmdline(argv)
        if dir_ and same_dir(dir_, udd):
            found.append((proc, port))
    return found


def record_of(proc: psutil.Process) -> ProcRecord:
    """A :class:`ProcRecord` for a process we did not start (no tag)."""
    return ProcRecord(proc.pid, os.getpgid(proc.pid), proc.create_time(), "")


def launch_argv(command: str, settings: GuiSettings, port: int, udd: Path) -> list[str]:
    """``[command, *exeArgs (<port> substituted), --user-data-dir=<udd>]``."""
    return [command, *(a.replace("<port>", str(port)) for a in settings.exe_args), f"--user-data-dir={udd}"]


def ensure_instance(command: str, settings: GuiSettings, udd: Path, env: Mapping[str, str],
                    log: Callable[[str, str], None], stopped: Callable[[], bool]) -> AppInstance:
    """Adopt our running instance or launch one (docs/agents-tasks.md §1.11.2).

    Args:
        command: the app's executable (the resolved profile command).
        settings: the profile's ``gui`` settings (ports, exeArgs, launchTimeoutMs, page patterns).
        udd: our dedicated user-data-dir (created when launching).
        env: the app's environment.
        log: ``(level, message)`` sink for the round's log.
        stopped: cancellation probe, polled while waiting for the launch.

    Returns:
        The instance; a launched one answers ``/json/list`` with a product page.

    Raises:
        InstanceError: ``instance_unproven`` (a process with our user-data-dir that cannot be
            proven), ``port_foreign`` (every allowed port is held by a program that is not
            ours; the message names the port(s) and the owner), ``launch_failed`` (the app
            could not start, exited early, or showed no product page within
            ``launchTimeoutMs``), ``aborted`` (cancelled while waiting).
    """
    mine = own_processes(udd)
    for proc, port in mine:
        if port and product_page(list_targets(port), settings):
            log("info", f"adopting our running instance: pid {proc.pid}, port {port}, user-data-dir {udd}")
            return AppInstance(port, udd, record_of(proc), None, adopted=True)
    if mine:
        pids = [(N_("{pid} port {port}") if port else N_("{pid} no debugging port"), p.pid, port) for p, port in mine]
        raise InstanceError("instance_unproven",
                            N_("an app instance with our user-data-dir {udd} is running (pid {pids}) but does not "
                               "show the product's page on its debugging port; close it and retry"), udd=udd,
                            pids=", ".join(m.format(pid=pid, port=port) for m, pid, port in pids),
                            shown_values={"pids": ", ".join(_(m).format(pid=pid, port=port) for m, pid, port in pids)})
    ports = range(settings.cdp_port, settings.cdp_port + settings.cdp_port_range) if settings.cdp_port_auto \
        else [settings.cdp_port]
    foreign: list[str] = []
    chosen = None
    for port in ports:
        if not port_in_use(port):
            chosen = port
            break
        foreign.append(f"{port} ({port_owner(port)})")
    if chosen is None:
        raise InstanceError("port_foreign",
                            N_("debugging port {ports} is in use by a program that is not ours (not started with our "
                               "user-data-dir {udd}); it was neither adopted nor killed. Close it or set gui.cdpPort / "
                               "gui.cdpPortAuto in the profile"), ports=", ".join(foreign), udd=udd)
    if foreign:
        log("info", f"skipped ports held by programs that are not ours: {', '.join(foreign)}")
    udd.mkdir(parents=True, exist_ok=True)
    argv = launch_argv(command, settings, chosen, udd)
    log("info", f"launching {shlex.join(argv)}")
    try:
        popen, record = spawn(argv, cwd=str(udd.parent), log_path=udd.parent / "app.log", env=dict(env))
    except OSError as exc:
        raise InstanceError("spawn", N_("cannot start {command}: {error}"), command=command, error=exc) from exc
    instance = AppInstance(chosen, udd, record, popen, adopted=False)
    try:
        _wait_up(instance, popen, settings, stopped)
    except InstanceError:
        kill_tree(record)  # half-started: nothing of it may linger
        raise
    log("info", f"app up: pid {record.pid}, port {chosen}")
    return instance


def _wait_up(instance: AppInstance, popen: subprocess.Popen[bytes], settings: GuiSettings,
             stopped: Callable[[], bool]) -> None:
    """Poll every 250 ms until the launched app lists a product page (see :func:`ensure_instance`)."""
    app_log = instance.user_data_dir.parent / "app.log"
    deadline = time.monotonic() + settings.launch_timeout_ms / 1000
    while True:
        code = popen.poll()
        if code is not None:
            raise InstanceError("launch_failed", N_("the app exited with code {code} right after its launch "
                                                    "(output in {log})"), code=code, log=app_log)
        if product_page(list_targets(instance.port, 1.0), settings):
            return
        if stopped():
            raise InstanceError("aborted", "cancelled while the app was starting")
        if time.monotonic() >= deadline:
            raise InstanceError("launch_failed", N_("the app showed no product page on port {port} within {ms} ms "
                                                    "(output in {log})"), port=instance.port,
                                ms=settings.launch_timeout_ms, log=app_log)
        time.sleep(0.25)
