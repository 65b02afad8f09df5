"""Data home and server configuration (40-agents-tasks §2.13, 00-design §3).

The data home is ``$TIANSHU_MCP_HOME`` or ``~/.tianshu-mcp``; everything tianshu-mcp writes lives
under it, Prefect's own home included (``<home>/prefect``). ``config.json`` is re-read lazily; an
invalid file keeps the last valid value (defaults if it never was valid) and is reported once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .files import read_json

log = logging.getLogger("tianshu_mcp")


def data_home() -> Path:
    """Return the absolute data home (``$TIANSHU_MCP_HOME`` or ``~/.tianshu-mcp``), creating it.

    Raises:
        TianshuError: ``PATH_IS_SYSTEM`` / ``PATH_IS_HOME`` when it points at a root or system
            directory or at the user's home itself (everything tianshu-mcp writes, Prefect's
            database included, would land there): the same gate as projectPath.
    """
    from .errors import ErrorCode, TianshuError
    from .paths import SYSTEM_DIRS, norm_path

    raw = os.environ.get("TIANSHU_MCP_HOME") or str(Path.home() / ".tianshu-mcp")
    home = Path(raw).expanduser().resolve()
    norm = norm_path(str(home))
    if norm in SYSTEM_DIRS:
        raise TianshuError(ErrorCode.PATH_IS_SYSTEM, f"TIANSHU_MCP_HOME must not be a system or root directory: {norm}")
    if norm == norm_path(os.path.realpath(Path.home())):
        raise TianshuError(ErrorCode.PATH_IS_HOME, f"TIANSHU_MCP_HOME must not be the home directory itself: {norm}")
    home.mkdir(parents=True, exist_ok=True)
    return home


def home_tag(home: Path | None = None) -> str:
    """Prefect tag marking the flow runs of one data home: ``tianshu-home:<sha256(home)[:8]>``."""
    return "tianshu-home:" + hashlib.sha256(str(home or data_home()).encode()).hexdigest()[:8]


def tasks_dir(home: Path | None = None) -> Path:
    """``<home>/tasks``: one directory per task or verify record."""
    return (home or data_home()) / "tasks"


def task_dir(task_id: str, home: Path | None = None) -> Path:
    """``<home>/tasks/<task_id>``."""
    return tasks_dir(home) / task_id


class ConcurrencyConfig(BaseModel):
    """``concurrency`` section: ``maxRunning`` 1..32 (default 2) = work pool concurrency limit."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    max_running: int = Field(2, ge=1, le=32, alias="maxRunning")


class PrefectConfig(BaseModel):
    """``prefect`` section: where the API lives and who hosts it (00-design §3, hosting issue).

    * ``apiUrl`` set → scale-out mode, tianshu hosts neither API nor worker.
    * ``hosting``: ``"service"`` (default) — a per-home background service hosts the API, UI and
      worker; stdio servers are thin clients and their exit never touches a task.
      ``"in-process"`` — the first stdio server of the home hosts them itself and its exit
      interrupts every active task (the original behaviour).
    * ``port`` → the preferred API port; the service binds the next free one if it is taken.
    * ``idleExitMs`` → the service exits after this long with no active or queued run, no
      client and no schedule (0: never). Default 10 minutes.
    * ``readyTimeoutMs`` → how long a client waits for the service to become ready.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    api_url: str | None = Field(None, alias="apiUrl")
    hosting: Literal["service", "in-process"] = "service"
    port: int = Field(4200, ge=1, le=65535)
    idle_exit_ms: int = Field(600000, ge=0, alias="idleExitMs")
    ready_timeout_ms: int = Field(120000, gt=0, alias="readyTimeoutMs")


class ServerConfig(BaseModel):
    """``<home>/config.json`` (40-agents-tasks §2.13). Unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    default_task_timeout_ms: int = Field(1800000, gt=0, alias="defaultTaskTimeoutMs")
    verify_command_timeout_ms: int = Field(300000, gt=0, alias="verifyCommandTimeoutMs")
    verify_concurrency: int = Field(2, ge=1, le=4, alias="verifyConcurrency")
    verify_tool_wait_ms: int = Field(45000, ge=0, le=55000, alias="verifyToolWaitMs")
    needs_user_timeout_ms: int = Field(30 * 24 * 3600 * 1000, ge=60000, alias="needsUserTimeoutMs")
    """How long a task waits for the user's answer (needs_user) before its flow run fails, ms."""
    """How long verify_task waits for its flow run before answering in_progress (under the host's 60 s ceiling)."""
    prefect: PrefectConfig = Field(default_factory=PrefectConfig)


class _ConfigCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamp: tuple[str, str] | None = None
        self._value = ServerConfig()

    def load(self, home: Path) -> ServerConfig:
        path = home / "config.json"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return ServerConfig()
        except OSError as exc:
            log.warning("config.json unreadable (%s); keeping the last valid config", exc)
            return self._value
        stamp = (str(path), hashlib.sha256(data).hexdigest())
        with self._lock:
            if stamp == self._stamp:
                return self._value
            try:
                value = ServerConfig.model_validate(read_json(path))
            except (ValueError, ValidationError) as exc:
                log.warning("config.json invalid, keeping the last valid config: %s", exc)
                self._stamp = stamp
                return self._value
            self._stamp, self._value = stamp, value
            return value


_cache = _ConfigCache()


def load_config(home: Path | None = None) -> ServerConfig:
    """Return the current ``config.json`` (hot-reloaded by content hash; defaults when absent)."""
    return _cache.load(home or data_home())
