"""Shared helpers of the Prefect tasks: the task store and the one writer of task details."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core.files import read_json_safe
from ..core.record import TaskRecord
from ..core.settings import data_home
from ..core.taskstore import TaskStore

AGENT_PROC_FILE = "agent-proc.json"
AGENT_PROFILE_FILE = "agent-profile.json"
"""``<taskDir>/agent-profile.json``: the profile the task's first round ran with; later rounds
of the task use it, so an edit of ``agent-profiles.json`` (even a half-saved one) never changes
or breaks a task in flight. A manual rework removes it (the current profile applies again)."""
FLOW_PROC_FILE = "flow-proc.json"
CANCEL_FILE = "cancel.json"
ALIVE_FILE = "flow-alive"
ALIVE_EVERY_S = 1.0
"""The stop probes stamp ``flow-alive`` at most this often, s (read by the service's watchdog)."""


def step(name: str, **options: Any) -> Any:
    """``@prefect.task`` for our steps (dispatch, verify, baseline, …): no retries, and no cache
    policy. Prefect's default policy hashes each call's inputs and the function's source and
    opens a transaction keyed by them, ms per task run, for nothing: a step starts an agent or
    runs checks, and running it again is the point (a rework reruns the same flow run), so a
    cached result would be a wrong verdict (docs/design-notes.md, note 68). ``options`` go to
    ``task`` (e.g. ``task_run_name``)."""
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(name=name, retries=0, cache_policy=NO_CACHE, **options)


def store() -> TaskStore:
    """The task store of this process's data home (``$TIANSHU_MCP_HOME``)."""
    return TaskStore(data_home())


def record(task_id: str, **fields: Any) -> None:
    """Write task details (the single writer used by the flow): ``fields`` are
    :class:`~tianshu_mcp.core.record.TaskRecord` field names and values; None deletes a key.

    Raises:
        ValueError: a field the record does not declare, or a value of the wrong type.
        FileNotFoundError: the task does not exist.
    """
    store().update(task_id, **fields)


def load_task(task_id: str) -> TaskRecord:
    """The typed record of ``task_id`` (:meth:`TaskStore.load`).

    Raises:
        FileNotFoundError: the task has no readable ``task.json``.
    """
    meta = store().load(task_id)
    if meta is None:
        raise FileNotFoundError(f"task {task_id} has no readable task.json")
    return meta


def work_path(meta: TaskRecord) -> str:
    """Where a task works: its worktree (``workPath``, isolation ``worktree``) or its project.

    Raises:
        KeyError: the record has neither (not a task's record).
    """
    path = meta.workPath or meta.projectPath
    if path is None:
        raise KeyError("projectPath")
    return path


class CancelMarker(BaseModel):
    """``<taskDir>/cancel.json``: ``{source, reason, at}`` (``source``: ``user``, ``ui``,
    ``shutdown``; ``at``: ISO-8601 UTC). Its presence is the request; a damaged marker still is one
    (its fields then None)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    source: str | None = None
    reason: str | None = None
    at: str | None = None


def request_cancel(task_dir: Path, source: str, reason: str | None) -> None:
    """Write the cancel marker ``cancel.json`` ``{source, reason, at}`` (``source``: ``user``,
    ``ui``, ``shutdown``) that the flow checks between steps; an existing marker is kept."""
    from ..core.files import atomic_write_json
    from ..core.taskstore import utc_now

    if not (task_dir / CANCEL_FILE).exists():
        marker = CancelMarker(source=source, reason=reason, at=utc_now())
        atomic_write_json(task_dir / CANCEL_FILE, marker.model_dump())


def read_cancel(task_dir: Path) -> CancelMarker | None:
    """The task's :class:`CancelMarker`, None when no cancel was requested (or the file is not a
    JSON object)."""
    data = read_json_safe(task_dir / CANCEL_FILE)
    if not isinstance(data, dict):
        return None
    try:
        return CancelMarker.model_validate(data)
    except ValidationError:
        return CancelMarker()  # written by hand or damaged: still a request


def cancel_requested(task_dir: Path) -> bool:
    """True once manage_task(cancel) has written ``cancel.json`` into the task dir."""
    return (task_dir / CANCEL_FILE).exists()


def stop_probe(task_dir: Path) -> Callable[[], bool]:
    """The ``should_stop`` probe of the flow's supervision loops (agent, checks): True once a
    cancel was requested; each call also proves the flow-run process is alive by touching
    ``flow-alive`` at most every :data:`ALIVE_EVERY_S` s (the service's watchdog ends a process
    that stops doing so, :mod:`tianshu_mcp.hosting.watchdog`)."""
    last = [0.0]

    def probe() -> bool:
        now = time.monotonic()
        if now - last[0] >= ALIVE_EVERY_S:
            last[0] = now
            try:
                (task_dir / ALIVE_FILE).touch()
            except OSError:
                pass
        return cancel_requested(task_dir)

    return probe
