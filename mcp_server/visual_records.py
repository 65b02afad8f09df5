"""Task records and project layers as ``tianshu-mcp visual …`` reads them (docs/tools.md §5; docs/visual.md
§7, §9).

The CLI cannot read Prefect states: a task is *blocked* on a visual block when its ``task.json``
says so (:func:`is_blocked`). Every helper raises :class:`VisualError` or ``TianshuError`` with a
stable code; none prints.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..acceptance.config import project_layer_path, read_layer_bytes
from ..acceptance.visual.config import VisualConfig, VisualConfigError, parse_visual
from ..acceptance.visual.errors import VisualError
from ..core.errors import ErrorCode, TianshuError
from ..core.ids import is_record_id
from ..core.paths import check_project_path
from ..core.settings import data_home
from ..core.taskstore import TaskStore

TASK_ID_RE = re.compile(r"^(tsk|vfy)_[A-Za-z0-9_-]+$")
"""A task (tsk_…) or verification (vfy_…) id as the CLI accepts it."""


def project_root(raw: str | None) -> str:
    """The project's real path through the projectPath gate (``PATH_*`` codes)."""
    return check_project_path(os.path.abspath(raw or os.getcwd()), data_home()).norm


def read_layer(root: str) -> tuple[Path, dict[str, Any] | None]:
    """``(path, decoded project layer | None)``; CONFIG_UNREADABLE, CONFIG_INVALID (not a JSON object)."""
    path = project_layer_path(root)
    raw = read_layer_bytes(path, "project")
    if raw is None:
        return path, None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise VisualError("CONFIG_INVALID", f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise VisualError("CONFIG_INVALID", f"{path} is not a JSON object")
    return path, data


def visual_config(root: str) -> VisualConfig:
    """The project layer's visual block, validated; CONFIG_INVALID when absent or invalid."""
    path, data = read_layer(root)
    if data is None or data.get("visual") is None:
        raise VisualError("CONFIG_INVALID", f"{path} has no visual block (tianshu-mcp visual init adds one)")
    try:
        return parse_visual(data["visual"])
    except VisualConfigError as exc:
        raise VisualError("CONFIG_INVALID", f"{path}: {exc}") from None


def read_task(task_id: str) -> tuple[TaskStore, Path, dict[str, Any]]:
    """``(store, task dir, task.json)``; TASK_ID_INVALID, TASK_NOT_FOUND, ARTIFACT_PATH (the task
    directory is a symlink)."""
    if not TASK_ID_RE.match(task_id) or not is_record_id(task_id):
        raise VisualError("TASK_ID_INVALID", f"{task_id[:100]!r} is not a task id (tsk_… or vfy_…)")
    store = TaskStore(data_home())
    record = store.read(task_id)
    if record is None:
        raise TianshuError(ErrorCode.TASK_NOT_FOUND, f"no task {task_id} (or its task.json is unreadable)")
    tdir = store.dir(task_id)
    if tdir.is_symlink():  # what the CLI writes there (reviews, cleaned reports) would land elsewhere
        raise VisualError("ARTIFACT_PATH", f"the task directory {tdir} is an alias (symlink) of another directory; refused")
    return store, tdir, record


def task_project(task_id: str, record: dict[str, Any]) -> str:
    """The real path of the task's existing project; TASK_NO_PROJECT when it has none."""
    project = record.get("projectPath")
    if not isinstance(project, str) or not project or not os.path.isdir(project):
        raise VisualError("TASK_NO_PROJECT", f"task {task_id} has no existing project ({project!r})")
    return os.path.realpath(project)


def is_blocked(record: dict[str, Any] | None) -> bool:
    """True when ``task.json`` says the task waits in ``needs_attention`` on a visual block
    (``errorType == "verify_failed"``, ``pendingVisualVerification`` true, ``finishedAt`` set)."""
    return bool(record and record.get("errorType") == "verify_failed" and record.get("pendingVisualVerification") is True
                and record.get("finishedAt"))


def mark_unblocked(store: TaskStore, task_id: str, what: str) -> None:
    """Record that ``what`` (an approval) unblocked the task: a rework re-verifies it first."""
    store.update(task_id, pendingVisualVerification=True, lastMessage=f"{what}; rework the task to re-verify it")
    store.event(task_id, "note", "needs_attention", f"{what} (tianshu-mcp visual); rework re-verifies first")


def own_dir(task_dir: Path, name: str) -> Path:
    """``task_dir/name``; ARTIFACT_PATH when it or the task dir is an alias (symlink)."""
    target = task_dir / name
    if (task_dir.is_symlink() or target.is_symlink()
            or os.path.realpath(target) != os.path.join(os.path.realpath(task_dir), name)):
        raise VisualError("ARTIFACT_PATH", f"{target} is an alias (symlink) of another directory; refused")
    return target
