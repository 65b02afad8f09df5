"""Shared helpers of the Prefect tasks: the task store and the one writer of task details."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.settings import data_home
from ..core.taskstore import TaskStore

AGENT_PROC_FILE = "agent-proc.json"
FLOW_PROC_FILE = "flow-proc.json"
CANCEL_FILE = "cancel.json"


def store() -> TaskStore:
    """The task store of this process's data home (``$TIANSHU_MCP_HOME``)."""
    return TaskStore(data_home())


def record(task_id: str, **fields: Any) -> dict[str, Any]:
    """Write task details (the single writer used by the flow); None deletes a key."""
    return store().update(task_id, **fields)


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
