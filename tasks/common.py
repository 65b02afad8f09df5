"""Shared helpers of the Prefect tasks: the task store and the one writer of task details."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

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


def store() -> TaskStore:
    """The task store of this process's data home (``$TIANSHU_MCP_HOME``)."""
    return TaskStore(data_home())


def record(task_id: str, **fields: Any) -> dict[str, Any]:
    """Write task details (the single writer used by the flow); None deletes a key."""
    return store().update(task_id, **fields)


def work_path(meta: dict[str, Any]) -> str:
    """Where a task works: its worktree (``workPath``, isolation ``worktree``) or its project."""
    return str(meta.get("workPath") or meta["projectPath"])


def request_cancel(task_dir: Path, source: str, reason: str | None) -> None:
    """Write the cancel marker ``cancel.json`` ``{source, reason, at}`` (``source``: ``user``,
    ``ui``, ``shutdown``) that the flow checks between steps; an existing marker is kept."""
    from ..core.files import atomic_write_json
    from ..core.taskstore import utc_now

    if not (task_dir / CANCEL_FILE).exists():
        atomic_write_json(task_dir / CANCEL_FILE, {"source": source, "reason": reason, "at": utc_now()})


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
