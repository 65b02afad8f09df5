"""Data home and server configuration (docs/agents-tasks.md §2.13, docs/architecture.md §3).

The data home is ``$TIANSHU_MCP_HOME`` or ``~/.tianshu-mcp``; everything tianshu-mcp writes lives
under it, Prefect's own home included (``<home>/prefect``). ``config.json`` is re-read lazily; an
invalid file keeps the last valid value (defaults if it never was valid) and is reported once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from .files import read_json
from .i18n import N_, _

log = logging.getLogger("tianshu_mcp")

MAX_TIMEOUT_MS = 86_400_000
"""The largest time limit a caller or a config may give one agent round or one check: 24 h, in ms
(``taskTimeoutMs``, a check's and a profile's ``timeoutMs``). More is a mistake, refused with the
field named rather than stored."""


def data_home(*, create: bool = True) -> Path:
    """Return the absolute data home (``$TIANSHU_MCP_HOME`` or ``~/.tianshu-mcp``), creating it
    unless ``create`` is false (read-only commands such as ``service status`` create nothing: they
    check ``exists()`` themselves and say that no home is there).

    Raises:
        TianshuError: ``PATH_IS_SYSTEM`` / ``PATH_IS_HOME`` when it points at a root or system
            directory, inside a system tree (``/etc``, ``/usr``, … :data:`~.paths.SYSTEM_TREES`),
            or at the user's home itself (everything tianshu-mcp writes, Prefect's
            database included, would land there): the same gate as projectPath.
    """
    from .errors import ErrorCode, TianshuError
    from .paths import SYSTEM_DIRS, norm_path, program_tree

    raw = os.environ.get("TIANSHU_MCP_HOME") or str(Path.home() / ".tianshu-mcp")
    key = (raw, os.environ.get("HOME", ""))
    known = _HOMES.get(key)
    if known is not None:  # resolved and checked before: a flow-run process asks on every record write
        if create and not os.path.isdir(known):
            known.mkdir(parents=True, exist_ok=True)
        return known
    home = Path(raw).expanduser().resolve()
    norm = norm_path(str(home))
    if norm in SYSTEM_DIRS:
        raise TianshuError(ErrorCode.PATH_IS_SYSTEM, _("TIANSHU_MCP_HOME must not be a system or root directory: {path}")
                           .format(path=norm))
    tree = program_tree(norm)
    if tree is not None:  # /etc/x, /usr/x: programs and configuration, never data (/var/lib/x is a daemon's place)
        raise TianshuError(ErrorCode.PATH_IS_SYSTEM, _("TIANSHU_MCP_HOME must not be inside the system tree {tree}: "
                                                       "{path}").format(tree=tree, path=norm))
    if norm == norm_path(os.path.realpath(Path.home())):
        raise TianshuError(ErrorCode.PATH_IS_HOME, _("TIANSHU_MCP_HOME must not be the home directory itself: {path}")
                           .format(path=norm))
    if create:
        home.mkdir(parents=True, exist_ok=True)
    _HOMES[key] = home
    return home


_HOMES: dict[tuple[str, str], Path] = {}
""":func:`data_home`'s answers by ``($TIANSHU_MCP_HOME, $HOME)``: resolving and checking the path
took ≈0.4 ms, ≈20 ms per flow run (design note 77)."""


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
    """``concurrency`` section: ``maxRunning`` 1..32 (default 2) = work pool concurrency limit;
    ``worktreeParallel`` 1..32 (default 3) = worktree tasks of one repository at once (a
    ``projects.json`` entry's ``worktreeParallel`` overrides it for that repository)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    max_running: int = Field(2, ge=1, le=32, alias="maxRunning")
    worktree_parallel: int = Field(3, ge=1, le=32, alias="worktreeParallel")


class PrefectConfig(BaseModel):
    """``prefect`` section: where the API lives and who hosts it (docs/architecture.md §3, docs/hosting.md).

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


class RemoteConfig(BaseModel):
    """``remote`` section (docs/isolation.md §2): tasks for a work pool (``workPool``) on workers
    that may run on other machines.

    * ``queueTimeoutMs`` → a task no worker of its pool has taken this long ends ``failed``
      (``NO_WORKER``); checked whenever the task is read (query_task, wait_task, list). Default
      30 minutes; until then the task stays ``queued`` and says that no worker serves the pool.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    queue_timeout_ms: int = Field(1800000, ge=10000, alias="queueTimeoutMs")


class _Why(ValueError):
    """A validator's reason as a msgid and its values: English in logs, the locale's words in
    :func:`check_config` errors (:func:`describe_config_error` with ``translate``)."""

    def __init__(self, template: str, **values: Any) -> None:
        super().__init__(template.format(**values))
        self.template, self.values = template, values


WebhookEvent = Literal["done", "failed", "needs_human", "needs_user", "cancelled"]
"""A subscribable webhook event (docs/agents-tasks.md §2.12)."""
DEFAULT_WEBHOOK_EVENTS: tuple[WebhookEvent, ...] = ("done", "failed", "needs_human")
"""``notifications.webhook.events`` when not given: needs_user and cancelled are opt-in."""


class WebhookConfig(BaseModel):
    """``notifications.webhook`` (docs/agents-tasks.md §2.12): POST a JSON body when a task ends.

    * ``enabled`` (false) — nothing is sent unless true; then ``url`` is required.
    * ``url`` — an ``http://`` or ``https://`` URL with a host (anything else is invalid).
    * ``timeoutMs`` 5000 (1..600000) — per request; ``maxRetries`` 2 (0..5) — attempts are
      1 + maxRetries; ``backoffMs`` 500 (0..600000) — the wait after attempt n is backoffMs·n.
    * ``secret`` — HMAC-SHA256 key of ``x-tianshu-signature``; never logged or written elsewhere.
    * ``sign`` — default: true when a secret is given; true without a secret is invalid.
    * ``events`` — default ``["done", "failed", "needs_human"]``; ``needs_user`` and
      ``cancelled`` are opt-in; unknown names and an empty list are invalid.

    Strict: values of the wrong JSON type (``"enabled": "yes"``) and unknown keys are invalid.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)  # a typo (secert) must not unsign
    enabled: bool = False
    url: str | None = Field(None, validate_default=True)
    timeout_ms: int = Field(5000, ge=1, le=600000, alias="timeoutMs")
    max_retries: int = Field(2, ge=0, le=5, alias="maxRetries")
    backoff_ms: int = Field(500, ge=0, le=600000, alias="backoffMs")
    secret: SecretStr | None = Field(None, min_length=1)
    sign: bool | None = Field(None, validate_default=True)
    events: list[WebhookEvent] = Field(default_factory=lambda: list(DEFAULT_WEBHOOK_EVENTS), min_length=1)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("enabled"):
                raise _Why(N_("is required when enabled is true"))
            return None
        parts = urlsplit(value)
        if value != value.strip() or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise _Why(N_("must be an http(s) URL, got {value}"), value=repr(value[:200]))
        return value

    @field_validator("sign")
    @classmethod
    def _check_sign(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        if value and "secret" in info.data and info.data["secret"] is None:
            raise _Why(N_("is true but no secret is set"))
        return value

    @property
    def signs(self) -> bool:
        """True when deliveries carry ``x-tianshu-signature`` (``sign``, default: a secret is set)."""
        return bool(self.sign if self.sign is not None else self.secret is not None)


class NotificationsConfig(BaseModel):
    """``notifications`` section: ``webhook`` (optional, see :class:`WebhookConfig`)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    webhook: WebhookConfig | None = None


class SkillsConfig(BaseModel):
    """``skills`` section: the skill self-install (docs/agents-tasks.md §2.14).

    * ``autoInstall`` — ``true`` (default, decision column "auto"), ``"prompt"`` (a trusted
      stale copy is kept and ``pendingUpdate`` recorded instead of overwritten) or ``false``
      (never install; the same as ``--no-skill-install``).
    * ``backupKeep`` 3 (≥ 0) — ``.bak-<ts>`` trees kept after an overwrite; 0 = never prune.
    * ``targetDir`` — where the skill goes (default ``~/.rivet/skills/tianshu-mcp``; ``~``
      expanded); the environment's ``TIANSHU_MCP_SKILL_TARGET`` wins over it.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    auto_install: bool | Literal["prompt"] = Field(True, alias="autoInstall")
    backup_keep: int = Field(3, ge=0, le=1000, alias="backupKeep")
    target_dir: str | None = Field(None, min_length=1, alias="targetDir")


class ServerConfig(BaseModel):
    """``<home>/config.json`` (docs/agents-tasks.md §2.13). Unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    default_task_timeout_ms: int = Field(1800000, gt=0, alias="defaultTaskTimeoutMs")
    verify_command_timeout_ms: int = Field(300000, gt=0, alias="verifyCommandTimeoutMs")
    verify_concurrency: int = Field(2, ge=1, le=4, alias="verifyConcurrency")
    verify_tool_wait_ms: int = Field(45000, ge=0, le=55000, alias="verifyToolWaitMs")
    """How long verify_task waits for its flow run before answering in_progress (under the host's 60 s ceiling)."""
    needs_user_timeout_ms: int = Field(30 * 24 * 3600 * 1000, ge=60000, alias="needsUserTimeoutMs")
    """How long a task waits for the user's answer (needs_user) before its flow run fails, ms."""
    flow_stall_ms: int = Field(900000, ge=10000, alias="flowStallMs")
    """A Running flow-run process that shows no progress this long is ended by the service's
    watchdog (:mod:`tianshu_mcp.hosting.watchdog`), ms."""
    prefect: PrefectConfig = Field(default_factory=PrefectConfig)
    remote: RemoteConfig = Field(default_factory=RemoteConfig)
    notifications: NotificationsConfig = Field(default_factory=NotificationsConfig)
    locale: str = "en"
    """Language of human-facing text (``en`` | ``zh-CN``; ``$TIANSHU_MCP_LOCALE`` overrides it; an
    unknown name falls back to ``en`` with a warning): :mod:`tianshu_mcp.core.i18n`."""
    skills: SkillsConfig = Field(default_factory=SkillsConfig)


def describe_config_error(path: Path, exc: ValidationError, translate: bool = False) -> str:
    """One line per problem of ``exc``: ``<path>: <field path> <why>`` (field path in the file's
    own spelling, e.g. ``notifications.webhook.url must be an http(s) URL, got 'ftp://x'``).

    The offending value is quoted for scalars, never for a ``secret`` field. ``translate``: our own
    reasons (not pydantic's) in the current locale (:mod:`~tianshu_mcp.core.i18n`); logs keep English.
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "value_error":
            why = (err.get("ctx") or {}).get("error")
            if translate and isinstance(why, _Why):
                parts.append(f"{loc} {_(why.template).format(**why.values)}")
            else:
                parts.append(f"{loc} {msg.removeprefix('Value error, ')}")
            continue
        value: Any = err.get("input")
        if isinstance(value, str):
            value = value[:200]
        shown = "" if "secret" in loc or not isinstance(value, (str, int, float, bool)) else (
            _(", got {value}") if translate else ", got {value}").format(value=repr(value))
        parts.append(f"{loc}: {msg[:1].lower() + msg[1:]}{shown}")
    return f"{path}: " + (_("; ") if translate else "; ").join(parts)


def check_config(home: Path | None = None) -> ServerConfig:
    """Read ``<home>/config.json`` strictly (no last-valid fallback): what a submission checks
    before it writes anything (docs/agents-tasks.md §2.13, docs/lifecycle.md §3). Absent → the defaults.

    Raises:
        TianshuError: ``CONFIG_UNREADABLE`` (a directory, no permission) or ``CONFIG_INVALID``
            (not UTF-8, not JSON, not an object, or a field violating the schema), the message
            naming the file, the field path and why.
    """
    from .errors import ErrorCode, TianshuError

    path = (home or data_home()) / "config.json"
    try:
        data = read_json(path)
    except FileNotFoundError:
        return ServerConfig()
    except UnicodeDecodeError as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: not valid UTF-8 ({reason})").format(
            path=path, reason=exc.reason)) from exc
    except json.JSONDecodeError as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: invalid JSON at line {line} column {column}: {error}").format(
            path=path, line=exc.lineno, column=exc.colno, error=exc.msg)) from exc
    except ValueError as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, f"{path}: {exc}") from exc
    except OSError as exc:
        raise TianshuError(ErrorCode.CONFIG_UNREADABLE, _("{path}: cannot read ({error})").format(
            path=path, error=exc.strerror or exc)) from exc
    if not isinstance(data, dict):
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("{path}: the top level must be a JSON object").format(path=path))
    try:
        return ServerConfig.model_validate(data)
    except ValidationError as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, describe_config_error(path, exc, translate=True)) from exc


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
            except ValidationError as exc:  # described without echoing a secret
                log.warning("config.json invalid, keeping the last valid config: %s", describe_config_error(path, exc))
                self._stamp = stamp
                return self._value
            except ValueError as exc:
                log.warning("config.json invalid, keeping the last valid config: %s", exc)
                self._stamp = stamp
                return self._value
            self._stamp, self._value = stamp, value
            return value


_cache = _ConfigCache()


def load_config(home: Path | None = None) -> ServerConfig:
    """Return the current ``config.json`` (hot-reloaded by content hash; defaults when absent)."""
    return _cache.load(home or data_home())
