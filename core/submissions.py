"""Durable submissions: a task is accepted before its flow run exists (hosting issue, "instant acceptance").

``run_task`` and ``verify_task`` write the record's ``task.json`` and then a submission entry
``<home>/submissions/<id>.json``::

    {"id", "deployment": "run-task/run-task" | "verify/verify", "flowRunName", "parameters",
     "tags", "projectKey", "createdAt"}

and answer at once. Whoever has the home's Prefect API ready — the per-home service right after
start and every half second, and the client that wrote the entry — turns the entry into a flow
run (:mod:`tianshu_mcp.deployments.intake`), records ``flowRunId`` in ``task.json`` and removes
the entry. Creation uses the Prefect idempotency key ``<deployment>:<id>``, so two submitters
racing for one entry get the same flow run. An entry is written atomically and only after
``task.json``; a process death at any point loses nothing: the next start submits what is left.

This module is plain file work (no Prefect import), so accepting a task never waits for Prefect.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from filelock import FileLock

from .files import atomic_write_json, read_json_safe
from .ids import is_record_id


def submissions_dir(home: Path) -> Path:
    """``<home>/submissions``."""
    return home / "submissions"


def entry_path(home: Path, record_id: str) -> Path:
    """``<home>/submissions/<id>.json``. Raises ValueError for a malformed id."""
    if not is_record_id(record_id):
        raise ValueError(f"not a task id: {record_id!r}")
    return submissions_dir(home) / f"{record_id}.json"


def enqueue(home: Path, record_id: str, deployment: str, parameters: dict[str, Any], tags: list[str],
            project_key: str, created_at: str, queue_limit: int = 1, work_pool: str | None = None) -> dict[str, Any]:
    """Write the submission entry of ``record_id`` (atomic) and return it.

    Args:
        project_key: names the work queue (``project-<key>``): the serial key of the work tree
            (``<key>-wt`` for the worktree tasks of a repository).
        queue_limit: that queue's concurrency limit (1: one task at a time).
        work_pool: the pool whose queue and deployment take the flow run (a remote task's
            ``workPool``); None: the home's own pool.
    """
    entry = {"id": record_id, "deployment": deployment, "flowRunName": record_id, "parameters": parameters,
             "tags": tags, "projectKey": project_key, "createdAt": created_at, "queueLimit": queue_limit}
    if work_pool:
        entry["workPool"] = work_pool
    atomic_write_json(entry_path(home, record_id), entry)
    return entry


def read(home: Path, record_id: str) -> dict[str, Any] | None:
    """The entry, or None when absent or unreadable."""
    data = read_json_safe(entry_path(home, record_id))
    return data if isinstance(data, dict) else None


def pending(home: Path) -> list[str]:
    """Ids with a submission entry, oldest first (by id, which starts with the creation time)."""
    try:
        names = [p.name[:-5] for p in submissions_dir(home).iterdir() if p.name.endswith(".json")]
    except FileNotFoundError:
        return []
    return sorted(n for n in names if is_record_id(n))


def is_pending(home: Path, record_id: str) -> bool:
    """True while ``record_id`` waits for its flow run."""
    try:
        return entry_path(home, record_id).exists()
    except ValueError:
        return False


def remove(home: Path, record_id: str) -> None:
    """Drop the entry (its flow run exists, or it was refused for good) and its lock file (a
    submitter that opens a new one finds no entry and does nothing)."""
    entry_path(home, record_id).unlink(missing_ok=True)
    _lock_path(home, record_id).unlink(missing_ok=True)


def entry_lock(home: Path, record_id: str, timeout_s: float = 0) -> FileLock:
    """The lock that one submitter (or a cancel) holds while it handles ``record_id``'s entry."""
    submissions_dir(home).mkdir(parents=True, exist_ok=True)
    return FileLock(str(_lock_path(home, record_id)), timeout=timeout_s)


def _lock_path(home: Path, record_id: str) -> Path:
    return submissions_dir(home) / f".{record_id}.lock"
