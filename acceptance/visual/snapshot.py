"""The visual snapshot of a task: frozen at its start, checked during every round (docs/visual.md §9).

The snapshot is ``{config, configDigest, baselines, createdAt, approved?}`` in
``<taskDir>/visual-snapshot.json``: the **project layer's** ``visual`` block (defaults applied) and the
sha256 of every approved baseline PNG and manifest it names. An agent that edits the block (even
disabling it) or a baseline after the task froze is caught as ``VISUAL_INTEGRITY`` — whether or not
visual acceptance is enabled — until a person approves the change (a baseline approval with the
task's id, or a rules review) and the snapshot is refreshed.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...core.files import atomic_write_json, read_json
from ..config import project_layer_path, read_layer_bytes
from .config import VisualConfigError, baseline_relative, config_digest, page_viewports, parse_visual
from .paths import project_file
from .errors import VisualError

SNAPSHOT_FILE = "visual-snapshot.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sha256_file(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, no permission: a value that differs from any digest
        return f"unreadable:{type(exc).__name__}"


def _project_visual(project_root: str | os.PathLike[str]) -> tuple[Any, str]:
    """``(config JSON or None, configDigest)`` of the project layer's ``visual`` block. A layer that
    cannot be read or parsed, or a block that does not validate, is digested as it is (the round
    reports the configuration error itself; the snapshot only has to notice a change)."""
    try:
        raw = read_layer_bytes(project_layer_path(project_root), "project")
    except Exception as exc:  # noqa: BLE001 - CONFIG_UNREADABLE: reported by the config stage
        return None, hashlib.sha256(f"unreadable:{exc}".encode()).hexdigest()
    if raw is None:
        return None, config_digest(None)
    try:
        data = json.loads(raw)
    except ValueError:
        return None, hashlib.sha256(b"invalid-json:" + raw).hexdigest()
    block = data.get("visual") if isinstance(data, dict) else None
    if block is None:
        return None, config_digest(None)
    try:
        cfg = parse_visual(block)
    except VisualConfigError:
        text = json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return block, hashlib.sha256(b"invalid:" + text.encode("utf-8")).hexdigest()
    return cfg.model_dump(by_alias=True, mode="json"), config_digest(cfg)


def capture_snapshot(project_root: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot of ``project_root`` now (docs/visual.md §9).

    Returns:
        ``{"config": visual JSON | None, "configDigest": sha256 hex, "baselines": {relPath: sha256 | None,
        relPath + ".manifest.json": sha256 | None}, "createdAt": ISO-8601}``; baselines are listed only
        when the block is valid and enabled, for each page × its viewports; pages with ``pixel: false``
        record None for both without reading the disk. A baseline path that escapes the project is
        recorded as ``"outside-project"``.
    """
    config, digest = _project_visual(project_root)
    baselines: dict[str, str | None] = {}
    cfg = None
    if isinstance(config, dict):
        try:
            cfg = parse_visual(config)
        except VisualConfigError:
            cfg = None
    if cfg is not None and cfg.enabled:
        for page in cfg.pages:
            for vp in page_viewports(cfg, page):
                rel = baseline_relative(cfg, page, vp)
                for name in (rel, rel + ".manifest.json"):
                    if not page.pixel:
                        baselines[name] = None
                        continue
                    try:
                        baselines[name] = _sha256_file(project_file(project_root, name))
                    except VisualError:
                        baselines[name] = "outside-project"
    return {"config": config, "configDigest": digest, "baselines": baselines, "createdAt": _now()}


def load_snapshot(task_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The task's frozen snapshot, None when it has none yet.

    Raises:
        VisualError: ``SNAPSHOT_INVALID`` (blocked) when the file is unreadable, not JSON or not a
            snapshot object.
    """
    path = Path(task_dir) / SNAPSHOT_FILE
    if not path.exists():
        return None
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise VisualError("SNAPSHOT_INVALID", f"{path} cannot be read as JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("configDigest"), str) or not isinstance(data.get("baselines"), dict):
        raise VisualError("SNAPSHOT_INVALID", f"{path} is not a visual snapshot (configDigest/baselines missing)")
    return data


def freeze(task_dir: str | os.PathLike[str], project_root: str | os.PathLike[str]) -> dict[str, Any]:
    """Load the task's snapshot, or capture and write it when it has none (the first freeze: task
    start or first verify). Raises VisualError ``SNAPSHOT_INVALID``."""
    snap = load_snapshot(task_dir)
    if snap is None:
        snap = capture_snapshot(project_root)
        atomic_write_json(Path(task_dir) / SNAPSHOT_FILE, snap)
    return snap


def check(task_dir: str | os.PathLike[str], project_root: str | os.PathLike[str]) -> None:
    """Freeze if needed, then compare the snapshot with the project now (docs/visual.md §9).

    Raises:
        VisualError: ``VISUAL_INTEGRITY`` (blocked) naming what changed — the visual block of
            ``.tianshu-mcp/acceptance.json`` or the baseline files — and how a person accepts the
            change; ``SNAPSHOT_INVALID``.
    """
    frozen = freeze(task_dir, project_root)
    now = capture_snapshot(project_root)
    changed: list[str] = []
    if now["configDigest"] != frozen["configDigest"]:
        changed.append("the visual block of .tianshu-mcp/acceptance.json")
    old, new = frozen.get("baselines") or {}, now["baselines"]
    moved = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if moved and not changed:
        changed.append("baseline file(s) " + ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else ""))
    if changed:
        raise VisualError("VISUAL_INTEGRITY",
                          f"{' and '.join(changed)} changed since the task started; the agent may not change the "
                          "visual acceptance rules or baselines. A person approves such a change "
                          "(approve_visual_baseline with this taskId, or `tianshu-mcp visual rules approve`).")


def refresh(task_dir: str | os.PathLike[str], project_root: str | os.PathLike[str], approved: dict[str, Any]) -> dict[str, Any]:
    """Replace the task's snapshot with the project now plus ``approved`` (``{note, at, previousDigest, …}``):
    a person accepted the change (docs/visual.md §7 approve with taskId, §9 rules approve). Returns it."""
    snap = {**capture_snapshot(project_root), "approved": approved}
    atomic_write_json(Path(task_dir) / SNAPSHOT_FILE, snap)
    return snap
