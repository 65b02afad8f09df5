"""Find a home's service, or start it detached (the client side of the hosting model).

Every entry point (stdio server, ``schedule``, ``service start``, ``demo``) goes through
:func:`connect`: read ``service.json``, prove it with :func:`.identity.probe`, and when no live
service exists start one — detached (own session, stdin at EOF, output appended to
``<home>/logs/service.log``), so it outlives the process that started it. A start lock
(``<home>/prefect/start.lock``) keeps concurrent clients from starting two; the service's own
host lock would refuse the second anyway (exit code 3), and the client then follows the winner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from filelock import FileLock, Timeout

from ..core.errors import ErrorCode, TianshuError
from ..core.files import read_json_safe, tail_lines
from .identity import ServiceInfo, prefect_dir, probe, service_error_file, service_log
from .service import EXIT_ALREADY_HOSTED

_SERVICE_MODULES = ("tianshu_mcp.hosting.service", "tianshu_mcp.deployments.service")
"""How a service process is started (``python -m <module>``): now, and before the move to
``hosting/`` (design note 54), so that ``service stop`` after an upgrade still knows the old one."""


def _mismatch(why: str, home: Path) -> TianshuError:
    return TianshuError(ErrorCode.SERVICE_IDENTITY_MISMATCH,
                        f"{why}; refusing to use it for {home}. Stop that process, or remove "
                        f"{home / 'prefect' / 'service.json'} if it is not a tianshu-mcp service")


def find(home: Path) -> ServiceInfo | None:
    """The home's live, proven, ready service, or None (none runs, or it is still starting).

    Raises:
        TianshuError: ``SERVICE_IDENTITY_MISMATCH`` when the published address answers for
            another home.
    """
    info = ServiceInfo.read(home)
    if info is None:
        return None
    verdict, why = _checked(info, home)
    if verdict == "mismatch":
        raise _mismatch(why, home)
    if verdict == "ok" and info.state == "ready":
        return info
    return None


def spawn_service(home: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m tianshu_mcp.hosting.service`` for ``home``, detached."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["TIANSHU_MCP_HOME"] = str(home)
    for key in ("TIANSHU_MCP_HOST_PID", "TIANSHU_MCP_HOST_CTIME"):
        env.pop(key, None)
    log_path = service_log(home)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - our own module, argv
            [sys.executable, "-m", "tianshu_mcp.hosting.service"],
            cwd=str(home), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
    # reap it when it exits while we still run (no zombie that looks alive)
    threading.Thread(target=proc.wait, name="tianshu-service-reaper", daemon=True).start()
    return proc


def connect(home: Path, timeout_s: float, start: bool = True) -> ServiceInfo:
    """Return the home's ready service, starting it (detached) when none runs.

    Args:
        home: the data home. timeout_s: how long to wait for a starting service.
        start: False → never start one (raise instead).

    Raises:
        TianshuError: ``SERVICE_IDENTITY_MISMATCH``; ``PREFECT_DB_CORRUPT`` /
            ``SERVICE_START_FAILED`` (the service we started exited, with its reason);
            ``PREFECT_UNAVAILABLE`` (none runs and ``start`` is False, or not ready in time).
    """
    deadline = time.monotonic() + timeout_s
    proc: subprocess.Popen[bytes] | None = None
    while time.monotonic() < deadline:
        info = ServiceInfo.read(home)
        if info is not None:
            verdict, why = _checked(info, home)
            if verdict == "mismatch":
                raise _mismatch(why, home)
            if verdict == "ok" and info.state == "ready":
                return info
            if verdict in ("ok", "unreachable"):  # alive, still starting
                time.sleep(0.1)
                continue
        if proc is not None and proc.poll() is not None:
            if proc.returncode == EXIT_ALREADY_HOSTED:
                proc = None  # another client's service won the race: follow it
                time.sleep(0.1)
                continue
            raise _start_error(home, proc.returncode)
        if proc is None:
            if not start:
                raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE,
                                   f"no tianshu-mcp service runs for {home}; start it with `tianshu-mcp service start`")
            proc = _start_once(home)
            if proc is None:  # another client is starting it: wait for its service.json
                time.sleep(0.1)
                continue
        time.sleep(0.1)
    raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE,
                       f"the tianshu-mcp service for {home} was not ready after {timeout_s:.0f} s; see {service_log(home)}")


def _start_once(home: Path) -> subprocess.Popen[bytes] | None:
    """Start the service unless another client holds the start lock or a live one is published."""
    lock = FileLock(str(prefect_dir(home) / "start.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    try:
        info = ServiceInfo.read(home)
        if info is not None and info.process_alive():
            return None
        service_error_file(home).unlink(missing_ok=True)
        proc = spawn_service(home)
        # hold the start lock until the new service has published itself (or died)
        until = time.monotonic() + 30
        while time.monotonic() < until and proc.poll() is None:
            info = ServiceInfo.read(home)
            if info is not None and info.pid == proc.pid:
                break
            time.sleep(0.05)
        return proc
    finally:
        lock.release()


def _start_error(home: Path, code: int | None) -> TianshuError:
    data = read_json_safe(service_error_file(home))
    if isinstance(data, dict) and data.get("code") in {c.value for c in ErrorCode}:
        return TianshuError(ErrorCode(data["code"]), str(data.get("message")))
    tail = tail_lines(str(service_log(home)), 8) or "(no output)"
    return TianshuError(ErrorCode.SERVICE_START_FAILED,
                        f"the tianshu-mcp service exited with code {code} before it was ready; "
                        f"last lines of {service_log(home)}:\n{tail}")


def stop(home: Path, timeout_s: float = 60.0) -> dict[str, object]:
    """Stop the home's service (SIGTERM: running tasks are interrupted, queued ones stay queued).

    Returns:
        ``{"stopped": bool, "pid": int | None, "message": str}``.

    Raises:
        TianshuError: ``SERVICE_IDENTITY_MISMATCH`` (never signals a foreign process).
    """
    info = ServiceInfo.read(home)
    if info is None or not info.process_alive():
        return {"stopped": False, "pid": None, "message": f"no tianshu-mcp service runs for {home}"}
    verdict, why = _checked(info, home)
    if verdict == "mismatch":
        raise _mismatch(why, home)
    os.kill(info.pid, signal.SIGTERM)
    until = time.monotonic() + timeout_s
    while time.monotonic() < until and info.process_alive():
        time.sleep(0.1)
    if info.process_alive():
        return {"stopped": False, "pid": info.pid, "message": f"service {info.pid} did not stop within {timeout_s:.0f} s"}
    return {"stopped": True, "pid": info.pid, "message": f"stopped the tianshu-mcp service {info.pid}"}


def _checked(info: ServiceInfo, home: Path) -> tuple[str, str]:
    """:func:`.identity.probe`, where a live process that answers no identity counts as this
    home's (still starting) service only if it runs tianshu-mcp: a hand-made or copied
    ``service.json`` never makes us signal a foreign process."""
    import psutil

    verdict, why = probe(info, home)
    if verdict != "unreachable":
        return verdict, why
    try:
        cmd = " ".join(psutil.Process(info.pid).cmdline())
    except psutil.Error:
        cmd = ""
    if any(module in cmd for module in _SERVICE_MODULES) or "tianshu-mcp" in cmd:
        return verdict, why
    return "mismatch", f"process {info.pid} named by service.json answers no identity and is not a tianshu-mcp service"


def status(home: Path) -> dict[str, object]:
    """What runs for ``home``: ``{"running", "state", "pid", "mode", "apiUrl", "uiUrl", "home",
    "log", "credentialsFile", "uiLogin"}``."""
    info = ServiceInfo.read(home)
    out: dict[str, object] = {"running": False, "home": str(home), "log": str(service_log(home)),
                              "credentialsFile": str(home / "prefect" / "credentials")}
    if info is None or not info.process_alive():
        err = read_json_safe(service_error_file(home))
        if isinstance(err, dict):
            out["lastError"] = err
        return out
    verdict, why = _checked(info, home)
    out.update(running=verdict in ("ok", "unreachable"), state=info.state if verdict == "ok" else verdict,
               pid=info.pid, mode=info.mode, apiUrl=info.api_url, uiUrl=info.ui_url,
               uiLogin=f"the UI asks for a password: the whole line of {home / 'prefect' / 'credentials'}")
    if verdict == "mismatch":
        out["error"] = why
    return out
