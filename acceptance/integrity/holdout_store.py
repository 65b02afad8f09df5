"""Where holdout checks live, and the one loader the verification uses (docs/integrity.md §5).

Holdout checks are checks the agent never sees, so they are kept outside the task record, the
brief, the prompt and every tool reply:

* a task's own (``run_task`` / ``verify_task`` argument ``holdoutChecks``) in
  ``<home>/holdout/tasks/<taskId>.json`` (:func:`task_holdout_path`; a verify record's under its
  ``vfy_…`` id) — not in the task directory, whose path the agent's rework prompt gives;
* the holdout runs' output in ``<home>/holdout/logs/<id>-<round>.log`` (:func:`holdout_log_path`);
* a project's registered ones (``tianshu-mcp holdout add``) in ``<home>/holdout/<key>.json``,
  ``<key>`` = :func:`~tianshu_mcp.core.paths.project_key` of the normalised project path (the
  ``projects.json`` key; a monorepo package is a project of its own).

Both files are ``{"version": 1, "checks": [HoldoutCheck.model_dump(by_alias=True), …]}``, written
atomically with mode 0600 (the ``holdout`` directory 0700). :func:`load_holdout` gives the checks
of one round: the task's, then the project's. A damaged file is never skipped (that would pass a
round its owner meant to be judged harder): it raises ``CONFIG_INVALID`` naming the file.

Plain Python: no Prefect, no adapters, no ``tasks``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...core.errors import ErrorCode, TianshuError
from ...core.files import atomic_write_json, read_json
from ...core.paths import norm_path, project_key
from .models import MAX_HOLDOUT_CHECKS, HoldoutCheck

__all__ = [
    "FILE_MODE",
    "HOLDOUT_VERSION",
    "describe_error",
    "holdout_document",
    "load_holdout",
    "load_project_holdout",
    "load_task_holdout",
    "parse_holdout",
    "project_holdout_lock",
    "project_holdout_path",
    "save_project_holdout",
    "save_task_holdout",
]

HOLDOUT_VERSION = 1
"""The ``version`` of both holdout files."""
FILE_MODE = 0o600
"""Permission bits of a holdout file (owner read/write only)."""
DIR_MODE = 0o700
"""Permission bits of ``<home>/holdout`` when this module creates it."""


def describe_error(exc: ValidationError, prefix: str) -> str:
    """pydantic's first error of a :class:`HoldoutCheck` as ``<prefix>.<field>: <reason>``
    (``prefix`` e.g. ``holdoutChecks[2]``; field names as on the wire, e.g. ``timeoutMs``;
    pydantic's "Value error, " prefix and input dump left out)."""
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.get("loc", ()))
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        msg = "unknown key"
    return f"{prefix}{loc}: {msg}"


def holdout_document(checks: Sequence[HoldoutCheck]) -> dict[str, Any]:
    """The file form ``{"version": 1, "checks": [HoldoutCheck.model_dump(by_alias=True), …]}``."""
    return {"version": HOLDOUT_VERSION, "checks": [c.model_dump(by_alias=True) for c in checks]}


def parse_holdout(data: Any, path: Path) -> list[HoldoutCheck]:
    """The checks of a parsed holdout file.

    Args:
        data: the file's JSON value. path: the file (named in errors).

    Raises:
        TianshuError: CONFIG_INVALID naming ``path`` and what is wrong (not an object, another
            ``version``, ``checks`` not a list or longer than :data:`MAX_HOLDOUT_CHECKS`, an entry
            that is not a valid :class:`HoldoutCheck`).
    """
    def bad(why: str) -> TianshuError:
        return TianshuError(ErrorCode.CONFIG_INVALID, f"holdout file {path} is damaged: {why}; fix it or remove it "
                                                      f"(its checks are not run while it is damaged)")

    if not isinstance(data, dict):
        raise bad('not a JSON object {"version": 1, "checks": [...]}')
    if data.get("version") != HOLDOUT_VERSION:
        raise bad(f"version is {str(data.get('version'))[:40]!r}, expected {HOLDOUT_VERSION}")
    raw = data.get("checks")
    if not isinstance(raw, list):
        raise bad("checks is not a list")
    if len(raw) > MAX_HOLDOUT_CHECKS:
        raise bad(f"{len(raw)} checks, at most {MAX_HOLDOUT_CHECKS} allowed")
    checks: list[HoldoutCheck] = []
    for i, entry in enumerate(raw):
        try:
            checks.append(HoldoutCheck.model_validate(entry))
        except ValidationError as exc:
            raise bad(describe_error(exc, f"checks[{i}]")) from exc
    return checks


def _load_file(path: Path) -> list[HoldoutCheck]:
    """The checks of ``path``; none when it does not exist. Raises CONFIG_INVALID (see
    :func:`parse_holdout`; also an unreadable file or invalid JSON)."""
    try:
        data = read_json(path)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, f"holdout file {path} cannot be read: {exc}; fix it or remove it "
                                                     f"(its checks are not run while it is damaged)") from exc
    return parse_holdout(data, path)


def task_holdout_path(task_dir: Path) -> Path:
    """``<home>/holdout/tasks/<id>.json`` of the task or verify record whose directory is
    ``task_dir`` (``<home>/tasks/<id>``)."""
    d = Path(task_dir)
    return d.parent.parent / "holdout" / "tasks" / f"{d.name}.json"


def holdout_log_path(task_dir: Path, round_no: int) -> Path:
    """``<home>/holdout/logs/<id>-<round>.log``: where a round's holdout runs write their output
    (the directory is made with mode 0700)."""
    d = Path(task_dir)
    logs = d.parent.parent / "holdout" / "logs"
    _ensure_dir(logs.parent)
    _ensure_dir(logs)
    return logs / f"{d.name}-{round_no}.log"


def load_task_holdout(task_dir: Path) -> list[HoldoutCheck]:
    """The holdout checks of one task or verify record (:func:`task_holdout_path`; none when
    absent). Raises TianshuError(CONFIG_INVALID) naming a damaged file."""
    return _load_file(task_holdout_path(task_dir))


def _norm(project_path: str) -> str:
    """A project path as records and ``projects.json`` hold it: symlinks resolved, normalised
    (:func:`~tianshu_mcp.core.paths.norm_path`); a non-path (a remote task's URL) unchanged."""
    if not os.path.isabs(project_path):
        return project_path
    try:
        return norm_path(os.path.realpath(project_path))
    except OSError:
        return norm_path(project_path)


def project_holdout_path(home: Path, project_path: str) -> Path:
    """``<home>/holdout/<key>.json``: where the project's registered holdout checks live, ``<key>``
    = ``project_key`` of the normalised ``project_path`` (16 hex digits, the ``projects.json``
    key)."""
    return Path(home) / "holdout" / f"{project_key(_norm(project_path))}.json"


def load_project_holdout(home: Path, project_path: str) -> list[HoldoutCheck]:
    """The holdout checks registered for ``project_path`` in data home ``home`` (none when there
    is no file). Raises TianshuError(CONFIG_INVALID) naming a damaged file."""
    return _load_file(project_holdout_path(home, project_path))


def load_holdout(task_dir: Path, home: Path, project_path: str) -> list[HoldoutCheck]:
    """Every holdout check of one round: the task's (``<task_dir>/holdout.json``), then those
    registered for its project in ``home`` (``project_path``: the task's ``projectPath``, not its
    worktree); a check given identically in both is listed once.

    Returns:
        The checks in that order (at most 2 × :data:`MAX_HOLDOUT_CHECKS`); empty when neither
        file exists.

    Raises:
        TianshuError: CONFIG_INVALID naming a damaged file (never skipped).
    """
    out: list[HoldoutCheck] = []
    for check in [*load_task_holdout(task_dir), *load_project_holdout(home, project_path)]:
        if check not in out:
            out.append(check)
    return out


def _write(path: Path, checks: Sequence[HoldoutCheck]) -> None:
    """Write (or, for no checks, remove) a holdout file: atomic, mode 0600. Raises OSError."""
    if not checks:
        path.unlink(missing_ok=True)
        return
    atomic_write_json(path, holdout_document(checks), mode=FILE_MODE)


def _check_count(checks: Sequence[HoldoutCheck]) -> None:
    if len(checks) > MAX_HOLDOUT_CHECKS:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                           f"{len(checks)} holdout checks, at most {MAX_HOLDOUT_CHECKS} allowed")


def save_task_holdout(task_dir: Path, checks: Sequence[HoldoutCheck]) -> None:
    """Store a task's (or verify record's) holdout checks in :func:`task_holdout_path` (atomic,
    mode 0600); no checks → no file (an existing one is removed).

    Raises:
        TianshuError: INVALID_ARGUMENT for more than :data:`MAX_HOLDOUT_CHECKS` checks.
        OSError: the file cannot be written.
    """
    _check_count(checks)
    path = task_holdout_path(task_dir)
    _ensure_dir(path.parent.parent)
    _ensure_dir(path.parent)
    _write(path, checks)


@contextlib.contextmanager
def project_holdout_lock(home: Path, project_path: str) -> Iterator[None]:
    """Hold the lock of a project's holdout file (a read-modify-write, e.g. ``holdout add``,
    under it never loses a concurrent one). Waits up to 30 s.

    Raises:
        TianshuError: CONFIG_INVALID when the lock cannot be taken (held 30 s, not a file).
    """
    from filelock import FileLock, Timeout

    path = project_holdout_path(home, project_path)
    _ensure_dir(path.parent)
    lock = FileLock(str(path.with_name(f".{path.name}.lock")), timeout=30)
    try:
        lock.acquire()
    except (Timeout, OSError) as exc:
        raise TianshuError(ErrorCode.CONFIG_INVALID, f"the lock of holdout file {path} cannot be taken: {exc}") from exc
    try:
        yield
    finally:
        lock.release()


def _ensure_dir(directory: Path) -> None:
    """Create ``<home>/holdout`` with mode 0700 when missing (an existing one is left as it is)."""
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)


def save_project_holdout(home: Path, project_path: str, checks: Sequence[HoldoutCheck]) -> Path:
    """Replace the holdout checks registered for ``project_path`` (atomic, mode 0600; no checks →
    the file is removed). Returns the file's path. Callers that read, change and write hold
    :func:`project_holdout_lock`.

    Raises:
        TianshuError: INVALID_ARGUMENT for more than :data:`MAX_HOLDOUT_CHECKS` checks or two
            checks of one name (``holdout remove`` names them).
        OSError: the file cannot be written.
    """
    _check_count(checks)
    names = [c.name for c in checks]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"two holdout checks are named {dup!r}; names are unique per project")
    path = project_holdout_path(home, project_path)
    _ensure_dir(path.parent)
    _write(path, checks)
    return path
