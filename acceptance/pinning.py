"""The acceptance rules as they were when the task started (docs/robustness.md §10).

An agent must not be judged by rules it rewrote: ``.tianshu-mcp/acceptance.json`` turned into
``{"checks": [], "requireChanges": false}``, the global ``acceptance.default.json`` or the
project's projects.json ``verify`` entry edited, or the files the derived checks come from
(``pytest.ini``, ``package.json`` scripts …) deleted. When the baseline is captured, those sources
are kept in ``<taskDir>/baseline-acceptance.json``; every round that judges the task's work
resolves its checks from that copy (:class:`.config.PinnedRules`) and warns about what changed.
A change applies to later tasks.

File: ``{"version": 2, "global": LAYER, "project": LAYER, "projectVerify": [...] | null,
"derived": [CheckDef JSON], "toolDirs": [".venv/bin", …]}`` with ``LAYER = {"path", "exists", "base64"?}``. A layer that could
not be read at the baseline leaves the task unpinned: its rounds read the files as they are and
report the error.

An agent running as the same user can still write the data home itself; agents that must not
should run sandboxed to their project (e.g. ``codex --sandbox workspace-write``).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_json, read_json_safe
from .config import (
    AcceptanceConfigError,
    PinnedRules,
    derive_default_checks,
    global_layer_path,
    project_layer_path,
    read_layer_bytes,
)
from .runner import project_tool_dirs

PIN_FILE = "baseline-acceptance.json"
PIN_VERSION = 2


def _layer(path: Path, label: str) -> dict[str, Any]:
    raw = read_layer_bytes(path, label)
    out: dict[str, Any] = {"path": str(path), "exists": raw is not None}
    if raw is not None:
        out["base64"] = base64.b64encode(raw).decode("ascii")
    return out


def pin_rules(project: str | os.PathLike[str], task_dir: str | os.PathLike[str], home: str | os.PathLike[str],
              project_verify: Sequence[Any] | None = None) -> bool:
    """Keep the rules in force now in ``task_dir`` (see the module doc).

    Args:
        project: project root.
        task_dir: the task directory.
        home: the data home (global layer).
        project_verify: the project's projects.json ``verify`` entries, if any.

    Returns:
        True when pinned, False when a layer could not be read (nothing is written then).

    Raises:
        OSError: the pin file cannot be written.
    """
    try:
        glob = _layer(global_layer_path(home), "global")
        proj = _layer(project_layer_path(project), "project")
    except AcceptanceConfigError:
        return False
    derived, _notes = derive_default_checks(project)
    atomic_write_json(Path(task_dir) / PIN_FILE, {
        "version": PIN_VERSION, "global": glob, "project": proj,
        "projectVerify": list(project_verify) if project_verify else None,
        "derived": [d.to_json() for d in derived],
        "toolDirs": project_tool_dirs(project),
    })
    return True


def _raw(layer: Any) -> bytes | None:
    if not isinstance(layer, dict) or not isinstance(layer.get("exists"), bool):
        raise ValueError("bad layer")
    if not layer["exists"]:
        return None
    return base64.b64decode(str(layer.get("base64", "")), validate=True)


def load_pinned(task_dir: str | os.PathLike[str]) -> PinnedRules | None:
    """The pinned rules of ``task_dir``; None when none were pinned (or the pin is damaged)."""
    data = read_json_safe(Path(task_dir) / PIN_FILE)
    if not isinstance(data, dict) or data.get("version") != PIN_VERSION:
        return None
    try:
        verify = data.get("projectVerify")
        derived = data.get("derived")
        if verify is not None and not isinstance(verify, list) or not isinstance(derived, list):
            return None
        tool_dirs = data.get("toolDirs")
        return PinnedRules(global_raw=_raw(data.get("global")), project_raw=_raw(data.get("project")),
                           project_verify=verify, derived=[d for d in derived if isinstance(d, dict)],
                           tool_dirs=[str(d) for d in tool_dirs] if isinstance(tool_dirs, list) else None)
    except ValueError:
        return None
