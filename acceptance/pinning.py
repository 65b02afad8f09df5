"""The project's acceptance rules as they were when the task started (input issue).

An agent that rewrites ``<project>/.tianshu-mcp/acceptance.json`` (``"checks": []``,
``"requireChanges": false``) must not be judged by its own rules. When the baseline is captured,
the project layer's bytes are kept in ``<taskDir>/baseline-acceptance.json``; every round that
judges the task's work resolves the project layer from that copy (:class:`.config.PinnedLayer`),
and a change the task made to the file is reported as a warning (the tampering signal
``acceptanceTampering`` already lists it) and applies to later tasks.

File: ``{"path": str, "exists": bool, "base64": str}`` (``base64`` only when ``exists``). A file
that could not be read at the baseline is not pinned: rounds read it as usual and report the error.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_json, read_json_safe
from .config import AcceptanceConfigError, PinnedLayer, project_layer_path, read_layer_bytes

PIN_FILE = "baseline-acceptance.json"


def pin_project_layer(project: str | os.PathLike[str], task_dir: str | os.PathLike[str]) -> bool:
    """Keep the project layer's current bytes in ``task_dir`` (see the module doc).

    Returns:
        True when pinned (present or absent), False when the file could not be read.

    Raises:
        OSError: the pin file cannot be written.
    """
    ppath = project_layer_path(project)
    try:
        raw = read_layer_bytes(ppath, "project")
    except AcceptanceConfigError:
        return False
    data: dict[str, Any] = {"path": str(ppath), "exists": raw is not None}
    if raw is not None:
        data["base64"] = base64.b64encode(raw).decode("ascii")
    atomic_write_json(Path(task_dir) / PIN_FILE, data)
    return True


def load_pinned(task_dir: str | os.PathLike[str]) -> PinnedLayer | None:
    """The pinned project layer of ``task_dir``; None when none was pinned (or the pin is damaged)."""
    data = read_json_safe(Path(task_dir) / PIN_FILE)
    if not isinstance(data, dict) or not isinstance(data.get("exists"), bool):
        return None
    if not data["exists"]:
        return PinnedLayer(raw=None)
    try:
        return PinnedLayer(raw=base64.b64decode(str(data.get("base64", "")), validate=True))
    except ValueError:
        return None
