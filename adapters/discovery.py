"""Finding an agent's executable outside PATH: the ``executableDiscovery.dirs`` scan
(docs/agents-tasks.md §1.8)."""

from __future__ import annotations

import os
from pathlib import Path

DISCOVERY_MAX_DEPTH = 6
"""How deep the discovery scan walks below each ``executableDiscovery.dirs`` entry (docs/agents-tasks.md
§1.8)."""


def expand_discovery_dir(raw: str) -> str:
    """Expand the placeholders of one ``executableDiscovery.dirs`` entry (docs/agents-tasks.md §1.8).

    ``{HOME}`` / ``{USERPROFILE}`` → the user's home; ``{LOCALAPPDATA}``, ``{APPDATA}``,
    ``{PROGRAMFILES}``, ``{PROGRAMFILES(X86)}``, ``{SYSTEMDRIVE}`` → the environment variable of
    that name; ``{XDG_DATA_HOME}`` → ``$XDG_DATA_HOME`` or ``<home>/.local/share``; a leading
    ``~`` → the home. A placeholder that is unknown or unset stays verbatim (the directory then
    does not exist and is skipped). Returns the expanded path text; never raises.
    """
    home = os.environ.get("HOME") or str(Path.home())
    values = {
        "{HOME}": home,
        "{USERPROFILE}": os.environ.get("USERPROFILE") or home,
        "{XDG_DATA_HOME}": os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"),
    }
    for name in ("LOCALAPPDATA", "APPDATA", "PROGRAMFILES", "PROGRAMFILES(X86)", "SYSTEMDRIVE"):
        if os.environ.get(name):
            values["{" + name + "}"] = os.environ[name]
    out = raw
    for key, value in values.items():
        out = out.replace(key, value)
    if out.startswith("~"):
        out = os.path.expanduser(out)
    return out


def discover_executable(dirs: list[str], file_names: list[str]) -> str | None:
    """Scan ``dirs`` for an executable named exactly one of ``file_names`` (docs/agents-tasks.md §1.8).

    Each directory (placeholders expanded by :func:`expand_discovery_dir`; missing ones skipped)
    is walked to depth :data:`DISCOVERY_MAX_DEPTH`, skipping ``node_modules`` and dot-entries
    below it and not following directory symlinks. Among all regular files (symlinks to files
    count) with an exact name match and the execute bit, the **newest mtime wins** (ties: the
    first found). Returns the absolute path, or None. Never raises (unreadable entries are skipped).
    """
    names = {n for n in file_names if isinstance(n, str) and n.strip()}
    if not names:
        return None
    best: tuple[float, str] | None = None
    for raw in dirs:
        if not isinstance(raw, str) or not raw.strip():
            continue
        root = expand_discovery_dir(raw.strip())
        if not os.path.isdir(root):
            continue
        base_depth = root.rstrip(os.sep).count(os.sep)
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda _exc: None):
            if dirpath.rstrip(os.sep).count(os.sep) - base_depth >= DISCOVERY_MAX_DEPTH:
                dirnames[:] = []
            else:
                dirnames[:] = [d for d in dirnames if d != "node_modules" and not d.startswith(".")]
            for fname in filenames:
                if fname not in names:
                    continue
                path = os.path.join(dirpath, fname)
                try:
                    if not os.path.isfile(path) or not os.access(path, os.X_OK):
                        continue
                    mtime = os.stat(path).st_mtime
                except OSError:
                    continue
                if best is None or mtime > best[0]:
                    best = (mtime, os.path.abspath(path))
    return best[1] if best else None
