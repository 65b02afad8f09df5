"""Who a home's Prefect service is: its identity, its credentials and its published address.

Files under ``<home>/prefect/`` (docs/hosting.md §3, "one home, one Prefect"):

* ``home-id`` — a random id made once per data home (mode 0600);
* ``credentials`` — the API's basic-auth string ``tianshu:<random>`` (mode 0600), required by
  the API for every call (Prefect's ``PREFECT_SERVER_API_AUTH_STRING``) and sent by every client
  (``PREFECT_API_AUTH_STRING``); it is also the password of the UI's login page;
* ``service.json`` — published by the running service *after* it has bound its socket:
  ``{"pid", "createTime", "port", "apiUrl", "uiUrl", "homeId", "state", "startedAt", "mode"}``,
  ``state`` ``"starting"`` then ``"ready"``.

A client trusts ``service.json`` only after :func:`probe`: the pid is alive with the recorded
create time (a reused pid is not the service), and ``GET <ui>/tianshu/identity`` with this home's
credentials answers this home's id. A dead pid means a stale file (ignored); a live service that
answers another identity, or refuses our credentials, is a mismatch (``SERVICE_IDENTITY_MISMATCH``).
"""

from __future__ import annotations

import base64
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil

from ..core.files import atomic_write_json, read_json_safe
from ..core.procs import pid_alive

IDENTITY_PATH = "/tianshu/identity"
INTAKE_PATH = "/tianshu/intake"
"""``POST`` with the home's credentials: the service submits the pending entries now
(:func:`tianshu_mcp.hosting.embedded.identity_app`; docs/design-notes.md, note 84)."""
AUTH_USER = "tianshu"


def prefect_dir(home: Path) -> Path:
    """``<home>/prefect`` (created)."""
    path = home / "prefect"
    path.mkdir(parents=True, exist_ok=True)
    return path


def service_file(home: Path) -> Path:
    """``<home>/prefect/service.json``."""
    return home / "prefect" / "service.json"


def service_log(home: Path) -> Path:
    """``<home>/logs/service.log``: everything the background service writes."""
    return home / "logs" / "service.log"


def service_error_file(home: Path) -> Path:
    """``<home>/prefect/service-error.json``: why the last start failed (``{code, message}``)."""
    return home / "prefect" / "service-error.json"


def _secret_file(path: Path, make: Any) -> str:
    """Read a 0600 secret file, creating it exclusively (O_EXCL) with ``make()`` when missing; the
    loser of a creation race reads the winner's value."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(50):
        try:
            value = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            value = ""
        if value:
            return value
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            time.sleep(0.02)  # being written by another process right now: read again
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(make() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    raise OSError(f"{path} stays empty; remove it and try again")


def home_id(home: Path) -> str:
    """This data home's random identity (``<home>/prefect/home-id``, made once)."""
    return _secret_file(prefect_dir(home) / "home-id", lambda: secrets.token_hex(16))


def auth_string(home: Path) -> str:
    """The API credentials ``tianshu:<random>`` of this home (``<home>/prefect/credentials``, 0600)."""
    return _secret_file(prefect_dir(home) / "credentials", lambda: f"{AUTH_USER}:{secrets.token_urlsafe(24)}")


def auth_header(auth: str) -> dict[str, str]:
    """``{"Authorization": "Basic …"}`` for ``auth`` (``user:password``)."""
    return {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}


@dataclass(frozen=True)
class ServiceInfo:
    """A published service address (``service.json``)."""

    pid: int
    create_time: float
    port: int
    api_url: str
    ui_url: str
    home_id: str
    state: str
    mode: str = "service"

    @classmethod
    def read(cls, home: Path) -> "ServiceInfo | None":
        """The published address, or None when absent or malformed (a malformed file is stale)."""
        data = read_json_safe(service_file(home))
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["pid"]), float(data["createTime"]), int(data["port"]), str(data["apiUrl"]),
                       str(data["uiUrl"]), str(data["homeId"]), str(data.get("state") or "starting"),
                       str(data.get("mode") or "service"))
        except (KeyError, TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        """The ``service.json`` document."""
        return {"pid": self.pid, "createTime": self.create_time, "port": self.port, "apiUrl": self.api_url,
                "uiUrl": self.ui_url, "homeId": self.home_id, "state": self.state, "mode": self.mode}

    def publish(self, home: Path) -> None:
        """Write ``service.json`` atomically."""
        atomic_write_json(service_file(home), self.to_json())

    def process_alive(self) -> bool:
        """True when the recorded pid runs and has the recorded create time (not a reused pid)."""
        return pid_alive(self.pid, self.create_time)


Verdict = Literal["ok", "dead", "mismatch", "unreachable"]


def probe(info: ServiceInfo, home: Path, timeout_s: float = 3.0) -> tuple[Verdict, str]:
    """Prove that ``info`` is this home's service.

    Returns:
        ``("ok", "")``; ``("dead", why)`` — the process is gone (a stale file);
        ``("unreachable", why)`` — the process lives but its API does not answer (yet);
        ``("mismatch", why)`` — the API answers with another home's identity or refuses this
        home's credentials.
    """
    import httpx

    if not info.process_alive():
        return "dead", f"process {info.pid} of {service_file(home)} is not running"
    try:
        resp = httpx.get(info.ui_url.rstrip("/") + IDENTITY_PATH, headers=auth_header(auth_string(home)),
                         timeout=timeout_s)
    except httpx.HTTPError as exc:
        return "unreachable", f"{info.ui_url} does not answer: {type(exc).__name__}"
    if resp.status_code == 401:
        return "mismatch", f"the API at {info.api_url} refuses this home's credentials"
    if resp.status_code != 200:
        return "mismatch", f"{info.ui_url}{IDENTITY_PATH} answered HTTP {resp.status_code}: not a tianshu-mcp service"
    try:
        body = resp.json()
    except ValueError:
        return "mismatch", f"{info.ui_url}{IDENTITY_PATH} answered no JSON: not a tianshu-mcp service"
    if not isinstance(body, dict) or body.get("homeId") != home_id(home):
        return "mismatch", f"the API at {info.api_url} belongs to another data home ({body.get('home') if isinstance(body, dict) else '?'})"
    return "ok", ""


# --- clients ---------------------------------------------------------------------------------
def clients_dir(home: Path) -> Path:
    """``<home>/clients``: one ``<pid>.json`` per connected stdio server (for the idle exit)."""
    return home / "clients"


def register_client(home: Path) -> Path:
    """Record this process as a connected client of the home's service; return the file."""
    proc = psutil.Process()
    path = clients_dir(home) / f"{proc.pid}.json"
    atomic_write_json(path, {"pid": proc.pid, "createTime": proc.create_time()})
    return path


def live_clients(home: Path) -> int:
    """How many registered clients still run (files of dead ones are removed)."""
    alive = 0
    try:
        files = list(clients_dir(home).glob("*.json"))
    except OSError:
        return 0
    for path in files:
        data = read_json_safe(path)
        try:
            if pid_alive(int(data["pid"]), float(data["createTime"])):  # type: ignore[index]
                alive += 1
                continue
        except (KeyError, TypeError, ValueError):
            pass
        path.unlink(missing_ok=True)
    return alive
