"""``<home>/projects.json``: the projects seen by run_task/verify_task (docs/agents-tasks.md §2.5, §2.13).

``{"<sha256(norm)[:16]>": {"path", "displayPath"?, "firstSeenAt", "lastSeenAt", "verify"?,
"defaultAgentId"?}}``. ``verify`` (admin-curated acceptance checks) is the second source of the
base check set (docs/acceptance.md §2.2); ``defaultAgentId`` overrides run_task's default agent.
Writes are atomic under a file lock; a corrupt file is reported, never silently overwritten.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock

from .errors import ErrorCode, TianshuError
from .files import atomic_write_json, file_signature, read_json
from .paths import project_key
from .taskstore import utc_now


_PARSED: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
"""projects.json path -> (signature, parsed content) of the files this process read or wrote."""

SEEN_PRECISION_S = 60.0
"""How stale ``lastSeenAt`` may get before :meth:`ProjectRegistry.register` rewrites it, s."""


def _fresh(entry: dict[str, Any], norm: str, display: str | None) -> bool:
    """True when ``entry`` already records ``norm`` (and ``display``) and was seen less than
    :data:`SEEN_PRECISION_S` ago."""
    if entry.get("path") != norm or (display and display != norm and entry.get("displayPath") != display):
        return False
    try:
        seen = datetime.fromisoformat(str(entry.get("lastSeenAt")))
    except ValueError:
        return False
    if seen.tzinfo is None:
        return False
    return 0 <= (datetime.now(timezone.utc) - seen).total_seconds() < SEEN_PRECISION_S


class ProjectRegistry:
    """The projects file of a data home."""

    def __init__(self, home: Path) -> None:
        self.path = home / "projects.json"
        self.lock = FileLock(str(home / ".projects.lock"), timeout=30)

    def _load(self) -> dict[str, Any]:
        """The parsed file, shared: callers copy what they change. A file unchanged since this
        process last parsed or wrote it (same inode, mtime in ns and size: it is only ever
        replaced by a rename) is not parsed again; with 850 projects a parse and a rewrite cost
        3.9 ms of run_task's answer (docs/design-notes.md, note 83)."""
        signature = file_signature(self.path)
        hit = _PARSED.get(str(self.path))
        if signature is not None and hit is not None and hit[0] == signature:
            return hit[1]
        try:
            data = read_json(self.path)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise TianshuError(ErrorCode.CONFIG_INVALID, f"{self.path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise TianshuError(ErrorCode.CONFIG_INVALID, f"{self.path} must hold a JSON object keyed by project hash")
        if signature is not None and signature == file_signature(self.path):
            _PARSED[str(self.path)] = (signature, data)
        return data

    def get(self, norm: str) -> dict[str, Any] | None:
        """The entry of a normalised project path, or None. Raises CONFIG_INVALID on a corrupt file."""
        entry = self._load().get(project_key(norm))
        return copy.deepcopy(entry) if isinstance(entry, dict) else None

    def register(self, norm: str, display: str | None = None) -> dict[str, Any]:
        """Record that ``norm`` was used now (creating the entry on first sight); returns the entry.

        ``lastSeenAt`` is kept to the minute, as a file system's ``relatime`` keeps access times:
        an entry that already says the same and was seen less than :data:`SEEN_PRECISION_S` ago is
        returned without rewriting the file (every run_task rewrote all of it, under its lock: a
        fifth of the call's own CPU with 40 projects, docs/design-notes.md note 77).

        Raises:
            TianshuError: CONFIG_INVALID when projects.json is corrupt (it is left untouched).
        """
        current = self._load().get(project_key(norm))
        if isinstance(current, dict) and _fresh(current, norm, display):
            return copy.deepcopy(current)
        with self.lock:
            data = dict(self._load())  # the shared parse stays as it is
            key = project_key(norm)
            now = utc_now()
            entry = copy.deepcopy(data[key]) if isinstance(data.get(key), dict) else {"path": norm, "firstSeenAt": now}
            entry["path"] = norm
            if display and display != norm:
                entry["displayPath"] = display
            entry["lastSeenAt"] = now
            data[key] = entry
            atomic_write_json(self.path, data, sync=False)
            signature = file_signature(self.path)  # under the lock: no other writer between the rename and this
            if signature is not None:
                _PARSED[str(self.path)] = (signature, data)
            return copy.deepcopy(entry)
